"""Deleting a workspace tree at any depth (`remove_tree`, `empty_dir`): it descends holding one
folder open and climbs back through ``..``, checking each parent is the folder it left, so it needs
no path longer than one name and no more open files than two; folders a run made unreadable or
read-only are opened and emptied all the same."""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from resources.workspace_walk.walking import DIR_FLAGS, WorkspaceLimitError


@dataclass
class _Level:
    name: str
    ident: tuple[int, int]
    subdirs: list[str] | None = None  # None: not listed yet
    rescans: int = 0


def remove_tree(path: Path | str) -> None:
    """Delete path and everything below it, at any depth; nothing is left. A missing path is
    fine; a file or a link is unlinked (a link's target is never touched)."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        empty_dir(parent, path.name)
        os.rmdir(path.name, dir_fd=parent)
    except FileNotFoundError:
        pass  # gone already: what was asked
    finally:
        os.close(parent)


def _open_dir(parent: int, name: str) -> int:
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    except PermissionError:  # a folder the run made unreadable: it is ours to open again
        os.chmod(name, 0o700, dir_fd=parent)
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    if os.fstat(fd).st_mode & 0o700 != 0o700:  # and one it made read-only: ours to empty
        try:
            os.fchmod(fd, 0o700)
        except OSError:
            pass  # not ours to change: the unlinks below say why if they fail
    return fd


def _is_empty(fd: int) -> bool:
    with os.scandir(fd) as it:
        return next(it, None) is None


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _clear_level(fd: int, level: _Level) -> None:
    """Unlink every non-folder of the open folder and note its subfolders."""
    level.subdirs = []
    with os.scandir(fd) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                level.subdirs.append(e.name)
            else:
                try:
                    os.unlink(e.name, dir_fd=fd)
                except FileNotFoundError:
                    pass


def empty_dir(parent: int, name: str) -> None:
    """Delete everything inside the folder `name` of the open folder `parent` (the folder stays)."""
    cur = _open_dir(parent, name)
    levels = [_Level(name, _ident(cur))]
    try:
        while levels:
            level = levels[-1]
            if level.subdirs is None:
                _clear_level(cur, level)
            if level.subdirs:
                child = level.subdirs.pop()
                try:
                    nfd = _open_dir(cur, child)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                os.close(cur)
                cur = nfd
                levels.append(_Level(child, _ident(cur)))
                continue
            if not _is_empty(cur):  # something appeared meanwhile: list it again
                level.rescans += 1
                if level.rescans > 3:
                    raise OSError(errno.ENOTEMPTY, f"{name}: still not empty after {level.rescans} passes")
                level.subdirs = None
                continue
            if len(levels) == 1:
                return
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur)
            if _ident(up) != levels[-2].ident:
                os.close(up)
                raise WorkspaceLimitError(f"{name}: a folder was moved while it was deleted")
            os.close(cur)
            cur = up
            try:
                os.rmdir(level.name, dir_fd=cur)
            except FileNotFoundError:
                pass
            levels.pop()
    finally:
        os.close(cur)
