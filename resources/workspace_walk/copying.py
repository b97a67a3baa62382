"""Copying a workspace tree (`copy_tree`): over a bounded walk (walking.py), holes kept (SEEK_DATA /
SEEK_HOLE), links copied as links, FIFOs recreated, sockets and devices left out, no set-uid /
set-gid bits kept, every entry optionally given an owner; with `sync`, the destination made to
match the source (same files kept, the rest replaced, what the source lacks deleted)."""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from resources.workspace_walk.removing import empty_dir
from resources.workspace_walk.walking import (
    CHUNK_BYTES,
    READ_FLAGS,
    Bounds,
    Entry,
    Totals,
    WorkspaceLimitError,
    open_entry,
    open_root,
    short_rel,
    walk,
)

_DEFAULT_BOUNDS = Bounds()  # frozen: one default for every call


def copy_tree(src: Path | str | int, dest: Path | str | int, bounds: Bounds = _DEFAULT_BOUNDS, *,
              skip: Collection[str] = (), ignore: Sequence[str] = (),
              owner: tuple[int, int] | None = None, sync: bool = False, unlock: bool = False) -> Totals:
    """Copy everything under src into the existing folder dest (paths, or open folders the caller
    keeps). Folders already in dest are reused; without `sync` nothing else may be there yet.
    With `sync` dest is made to match src: a file already there with the same content is kept
    (its mode and time set), anything else in the way is replaced, and what src lacks is deleted
    (`skip` paths are left alone on both sides). Modes are kept without set-uid/set-gid/sticky
    bits; `owner` (uid, gid) is given to every entry made; `unlock`: see walk (both sides).
    Raises WorkspaceLimitError past `bounds` (what was copied so far stays)."""
    t = Totals()
    dfd, owned = open_root(dest)
    dirs: list[tuple[str, int]] = []
    seen: set[str] = set()
    try:
        for e in walk(src, bounds, skip, ignore, totals=t, unlock=unlock):
            if sync:
                seen.add(e.rel)
            _place(e, dfd, owner, _lstat_at(dfd, e.rel) if sync else None, unlock)
            if stat.S_ISDIR(e.st.st_mode):
                dirs.append((e.rel, stat.S_IMODE(e.st.st_mode) & 0o777))
        if sync:
            _delete_extras(dfd, seen, skip, bounds, unlock)
        for rel, mode in reversed(dirs):  # last, so a read-only folder could still be filled
            os.chmod(rel, mode, dir_fd=dfd)
    finally:
        if owned:
            os.close(dfd)
    return t


def _lstat_at(dfd: int, rel: str) -> os.stat_result | None:
    try:
        return os.stat(rel, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _place(e: Entry, dfd: int, owner: tuple[int, int] | None, have: os.stat_result | None,
           unlock: bool = False) -> None:
    """Make dest's e.rel what e is; `have`: what dest holds there already (None: nothing)."""
    kind = stat.S_IFMT(e.st.st_mode)
    if have is not None and not (stat.S_ISDIR(kind) and stat.S_ISDIR(have.st_mode)):
        if _kept(e, dfd, owner, have, unlock):
            return
        _remove_at(dfd, e.rel)
    if stat.S_ISDIR(kind):
        _make_dir(dfd, e.rel, owner)
    elif stat.S_ISLNK(kind):
        os.symlink(os.readlink(e.name, dir_fd=e.dir_fd), e.rel, dir_fd=dfd)
        _chown(dfd, e.rel, owner)
    elif stat.S_ISREG(kind):
        _copy_file(e, dfd, owner, unlock)
    elif stat.S_ISFIFO(kind):
        os.mkfifo(e.rel, stat.S_IMODE(e.st.st_mode) & 0o777, dir_fd=dfd)
        _chown(dfd, e.rel, owner)
    # sockets and device nodes are left out: nothing on the host should open one


def _kept(e: Entry, dfd: int, owner: tuple[int, int] | None, have: os.stat_result, unlock: bool) -> bool:
    """Whether dest's entry can stay as it is (the same file, link or FIFO), its mode, time and
    owner set to e's. Content is compared byte for byte, never trusted from sizes or times."""
    kind = stat.S_IFMT(e.st.st_mode)
    if kind != stat.S_IFMT(have.st_mode):
        return False
    if stat.S_ISLNK(kind):
        if os.readlink(e.name, dir_fd=e.dir_fd) != os.readlink(e.rel, dir_fd=dfd):
            return False
    elif stat.S_ISREG(kind):
        if have.st_size != e.st.st_size or not _same_content(e, dfd, unlock):
            return False
    elif not stat.S_ISFIFO(kind):
        return False
    if not stat.S_ISLNK(kind):
        mode = stat.S_IMODE(e.st.st_mode) & 0o777
        if stat.S_IMODE(have.st_mode) != mode:
            os.chmod(e.rel, mode, dir_fd=dfd)
        if have.st_mtime_ns != e.st.st_mtime_ns:
            os.utime(e.rel, ns=(e.st.st_atime_ns, e.st.st_mtime_ns), dir_fd=dfd)
    if owner is not None and (have.st_uid, have.st_gid) != owner:
        _chown(dfd, e.rel, owner)
    return True


def _same_content(e: Entry, dfd: int, unlock: bool) -> bool:
    a = open_entry(e.name, READ_FLAGS, e.dir_fd, 0o400 if unlock else 0)
    try:
        b = os.open(e.rel, READ_FLAGS, dir_fd=dfd)
    except OSError:
        os.close(a)
        return False
    with os.fdopen(a, "rb") as fa, os.fdopen(b, "rb") as fb:
        if not (stat.S_ISREG(os.fstat(a).st_mode) and stat.S_ISREG(os.fstat(b).st_mode)):
            return False
        left = e.st.st_size
        while left > 0:
            x, y = fa.read(min(CHUNK_BYTES, left)), fb.read(min(CHUNK_BYTES, left))
            if x != y or not x:
                return False
            left -= len(x)
        return fa.read(1) == fb.read(1) == b""


def _remove_at(dfd: int, rel: str) -> None:
    """Delete dest's rel, at any depth below it."""
    st = _lstat_at(dfd, rel)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        empty_dir(dfd, rel)
        os.rmdir(rel, dir_fd=dfd)
    else:
        os.unlink(rel, dir_fd=dfd)


def _delete_extras(dfd: int, seen: Collection[str], skip: Collection[str], bounds: Bounds,
                   unlock: bool) -> None:
    """Delete what dest holds that src did not (`seen`), outside `skip`."""
    pruned = set(skip)
    extras: list[str] = []
    for e in walk(dfd, bounds, pruned, unlock=unlock):
        if e.rel not in seen:
            extras.append(e.rel)
            pruned.add(e.rel)  # nothing below it needs a look: it goes as a whole
    for rel in extras:
        _remove_at(dfd, rel)


def _chown(dfd: int, rel: str, owner: tuple[int, int] | None) -> None:
    if owner is not None:
        os.chown(rel, *owner, dir_fd=dfd, follow_symlinks=False)


def _make_dir(dfd: int, rel: str, owner: tuple[int, int] | None) -> None:
    try:
        os.mkdir(rel, 0o700, dir_fd=dfd)
    except FileExistsError:
        mode = os.stat(rel, dir_fd=dfd, follow_symlinks=False).st_mode
        if not stat.S_ISDIR(mode):
            raise
        if mode & 0o700 != 0o700:  # filled first, its own mode is set once the copy is done
            os.chmod(rel, stat.S_IMODE(mode) | 0o700, dir_fd=dfd)
    _chown(dfd, rel, owner)


def _data_ranges(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each stretch of a file that holds data (all of it where the filesystem
    cannot tell holes)."""
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole is left
                return
            yield off, size
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        off = end


def _copy_file(e: Entry, dfd: int, owner: tuple[int, int] | None, unlock: bool = False) -> None:
    """One regular file, holes kept, never more than the st_size the walk counted."""
    sfd = open_entry(e.name, READ_FLAGS, e.dir_fd, 0o400 if unlock else 0)
    try:
        got = os.fstat(sfd)
        if (got.st_dev, got.st_ino) != (e.st.st_dev, e.st.st_ino) or not stat.S_ISREG(got.st_mode):
            raise WorkspaceLimitError(f"{short_rel(e.rel)} changed while it was copied")
        out = os.open(e.rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            for start, end in _data_ranges(sfd, e.st.st_size):
                os.lseek(out, start, os.SEEK_SET)
                pos = start
                while pos < end:
                    n = os.sendfile(out, sfd, pos, min(CHUNK_BYTES, end - pos))
                    if n == 0:
                        break
                    pos += n
            os.ftruncate(out, e.st.st_size)
            if owner is not None:
                os.fchown(out, *owner)
            os.fchmod(out, stat.S_IMODE(e.st.st_mode) & 0o777)
            os.utime(out, ns=(e.st.st_atime_ns, e.st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(sfd)
