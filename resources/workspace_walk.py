"""Bounded, iterative walks over a workspace tree: the one place where the host walks, copies,
hashes and deletes what an attempt (untrusted code) left behind (one responsibility, kept in one
module so that every host access to a workspace goes through the same bounds).

A run can leave any shape: thousands of nested folders, a million entries, a sparse file of a
terabyte holding nothing, hard links, FIFOs. So nothing here recurses (an explicit stack, one
open folder per level, ``os.scandir``), every walk is bounded (``Bounds``: depth, entries, bytes,
length of a relative path) and a walk past a bound raises ``WorkspaceLimitError`` with a reason a
person can read, which callers record as the attempt's failure instead of crashing the step.

* ``walk``: every entry under a root, parents first, names sorted, links never followed; each
  entry is reached through its open parent folder (``dir_fd``), never through a long path.
* bytes are counted as a copy would write them: ``copy_size`` = max(st_size, allocated blocks),
  so a sparse file counts by its length (a plain copy or a hash reads all of it) and an
  fallocated one by what it holds; each hard link counts on its own (a copy makes each a file).
* ``copy_tree`` keeps holes (SEEK_DATA / SEEK_HOLE), copies links as links, recreates FIFOs,
  leaves sockets and devices out, never keeps set-uid/set-gid bits, and can give every entry
  an owner (the sandbox's uid going in, the workspace owner's coming back).
* ``remove_tree`` deletes any depth: it descends holding one folder open and climbs back
  through ``..``, checking each parent is the folder it left, so it needs no path longer than
  one name and no more open files than two.
* ``hash_files``: the sha256 of every file by relative path (links by target), bounded.
"""
from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 64  # nested folders below the root: far beyond any experiment, far below recursion limits
MAX_PATH_CHARS = 3000  # a relative path, in bytes: with the root's own path it stays under PATH_MAX
MAX_ENTRIES = 100_000
_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MB = 1 << 20


class WorkspaceLimitError(Exception):
    """A workspace is past a bound of the walk (depth, entries, bytes, path length) or changed
    while it was read; the message says which and where."""


@dataclass(frozen=True)
class Bounds:
    """Limits of one walk; None: no limit on bytes."""
    max_bytes: int | None = None
    max_entries: int = MAX_ENTRIES
    max_depth: int = MAX_DEPTH
    max_path: int = MAX_PATH_CHARS


@dataclass(frozen=True)
class Entry:
    rel: str  # the path below the root, "/"-separated
    name: str
    dir_fd: int  # the open parent folder; valid only until the walk moves on
    st: os.stat_result  # lstat
    depth: int  # 1 for an entry of the root


@dataclass
class Totals:
    entries: int = 0
    bytes: int = 0  # sum of copy_size
    depth: int = 0


@dataclass
class _Frame:
    fd: int
    rel: str
    depth: int
    names: list[str] = field(default_factory=list)  # still to visit, last first
    owned: bool = True  # closed when the walk leaves it
    restore: int | None = None  # its mode, put back when the walk leaves it (it was unlocked)


def _leave(f: _Frame) -> None:
    try:
        if f.restore is not None:
            os.fchmod(f.fd, f.restore)
    finally:
        if f.owned:
            os.close(f.fd)


def copy_size(st: os.stat_result) -> int:
    """Bytes a copy or a hash of this entry touches: a regular file's length or what it holds on
    disk, whichever is larger (a sparse file by its length, an fallocated one by its blocks)."""
    if not stat.S_ISREG(st.st_mode):
        return 0
    return max(st.st_size, st.st_blocks * 512)


def _describe(rel: str, st: os.stat_result) -> str:
    held = st.st_blocks * 512
    if st.st_size > held:
        return f"{rel} (a sparse file of {st.st_size / _MB:.0f} MB holding {held / _MB:.0f} MB)"
    return f"{rel} ({max(st.st_size, held) / _MB:.0f} MB)"


def _short(rel: str) -> str:
    return rel if len(rel) <= 120 else f"{rel[:60]}...{rel[-40:]}"


def _open_root(root: Path | str | int) -> tuple[int, bool]:
    if isinstance(root, int):
        return root, False
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), True


def _list(fd: int, room: int, limit: int) -> list[str]:
    """The names in an open folder, sorted, last first; refuses past `room` names."""
    names: list[str] = []
    with os.scandir(fd) as it:
        for e in it:
            names.append(e.name)
            if len(names) > room:
                raise WorkspaceLimitError(f"more than {limit} files and folders")
    names.sort(reverse=True)
    return names


def walk(root: Path | str | int, bounds: Bounds = Bounds(), skip: Collection[str] = (),
         ignore: Sequence[str] = (), totals: Totals | None = None, unlock: bool = False) -> Iterator[Entry]:
    """Every entry under root (a path, or an open folder the caller keeps), parents before
    children, names sorted, links not followed. `skip`: relative paths left out with all below
    them (a consumer may add the folder just yielded to it: the walk then does not enter it);
    `ignore`: name patterns (fnmatch) left out anywhere; `unlock`: a folder its owner made
    unreadable is made readable again (for trees the runner manages). Raises WorkspaceLimitError
    past `bounds`; `totals` (if given) is filled in as the walk goes."""
    t = totals if totals is not None else Totals()
    fd, owned = _open_root(root)
    stack = [_Frame(fd, "", 0, owned=owned)]
    try:
        stack[0].names = _list(fd, bounds.max_entries - t.entries, bounds.max_entries)
        while stack:
            f = stack[-1]
            if not f.names:
                stack.pop()
                _leave(f)
                continue
            name = f.names.pop()
            rel = f"{f.rel}/{name}" if f.rel else name
            if rel in skip or any(fnmatch.fnmatch(name, p) for p in ignore):
                continue
            try:
                st = os.stat(name, dir_fd=f.fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            depth = f.depth + 1
            _count(t, bounds, rel, st, depth)
            yield Entry(rel, name, f.fd, st, depth)
            if stat.S_ISDIR(st.st_mode) and rel not in skip:  # (a consumer may add rel to skip: not entered)
                stack.append(_descend(f.fd, name, rel, st, depth, bounds, t, unlock))
    finally:
        for f in stack:
            _leave(f)


def _count(t: Totals, bounds: Bounds, rel: str, st: os.stat_result, depth: int) -> None:
    t.entries += 1
    t.bytes += copy_size(st)
    t.depth = max(t.depth, depth)
    if depth > bounds.max_depth:
        raise WorkspaceLimitError(f"{_short(rel)}: more than {bounds.max_depth} nested folders")
    if len(os.fsencode(rel)) > bounds.max_path:
        raise WorkspaceLimitError(f"{_short(rel)}: a path longer than {bounds.max_path} characters")
    if t.entries > bounds.max_entries:
        raise WorkspaceLimitError(f"more than {bounds.max_entries} files and folders")
    if bounds.max_bytes is not None and t.bytes > bounds.max_bytes:
        raise WorkspaceLimitError(f"the files would take more than the disk quota of {bounds.max_bytes / _MB:.0f} MB "
                                  f"once copied: {t.bytes / _MB:.0f} MB up to {_describe(_short(rel), st)}")


def _descend(parent: int, name: str, rel: str, st: os.stat_result, depth: int, bounds: Bounds,
             t: Totals, unlock: bool) -> _Frame:
    fd, restore = _open_unlocked(name, _DIR_FLAGS, parent, 0o500 if unlock else 0)
    frame = _Frame(fd, rel, depth, restore=restore)
    try:
        got = os.fstat(fd)
        if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino):
            raise WorkspaceLimitError(f"{_short(rel)} changed while it was read")
        frame.names = _list(fd, bounds.max_entries - t.entries, bounds.max_entries)
        return frame
    except BaseException:
        _leave(frame)
        raise


def _open_unlocked(name: str, flags: int, dir_fd: int, unlock_bits: int = 0) -> tuple[int, int | None]:
    """os.open of one name in an open folder, and the mode to put back (None: none changed).
    With unlock_bits, an entry its owner made unreadable gets those owner bits to be opened."""
    try:
        return os.open(name, flags, dir_fd=dir_fd), None
    except PermissionError:
        if not unlock_bits:
            raise
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            raise
        os.chmod(name, stat.S_IMODE(mode) | unlock_bits, dir_fd=dir_fd)
        try:
            return os.open(name, flags, dir_fd=dir_fd), stat.S_IMODE(mode)
        except BaseException:
            os.chmod(name, stat.S_IMODE(mode), dir_fd=dir_fd)
            raise


def _open(name: str, flags: int, dir_fd: int, unlock_bits: int = 0) -> int:
    """A file opened as _open_unlocked does, its mode put back at once (an open file stays
    readable), so the walk changes nothing."""
    fd, mode = _open_unlocked(name, flags, dir_fd, unlock_bits)
    if mode is not None:
        os.fchmod(fd, mode)
    return fd


def scan(root: Path | str | int, bounds: Bounds = Bounds(), skip: Collection[str] = (),
         unlock: bool = False) -> Totals:
    """Walk root only to check it is within bounds; returns what it counted."""
    t = Totals()
    for _ in walk(root, bounds, skip, totals=t, unlock=unlock):
        pass
    return t


# --------------------------------------------------------------------------- copying

def copy_tree(src: Path | str | int, dest: Path | str | int, bounds: Bounds = Bounds(), *,
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
    dfd, owned = _open_root(dest)
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
    a = _open(e.name, _READ_FLAGS, e.dir_fd, 0o400 if unlock else 0)
    try:
        b = os.open(e.rel, _READ_FLAGS, dir_fd=dfd)
    except OSError:
        os.close(a)
        return False
    with os.fdopen(a, "rb") as fa, os.fdopen(b, "rb") as fb:
        if not (stat.S_ISREG(os.fstat(a).st_mode) and stat.S_ISREG(os.fstat(b).st_mode)):
            return False
        left = e.st.st_size
        while left > 0:
            x, y = fa.read(min(_CHUNK, left)), fb.read(min(_CHUNK, left))
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
    sfd = _open(e.name, _READ_FLAGS, e.dir_fd, 0o400 if unlock else 0)
    try:
        got = os.fstat(sfd)
        if (got.st_dev, got.st_ino) != (e.st.st_dev, e.st.st_ino) or not stat.S_ISREG(got.st_mode):
            raise WorkspaceLimitError(f"{_short(e.rel)} changed while it was copied")
        out = os.open(e.rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            for start, end in _data_ranges(sfd, e.st.st_size):
                os.lseek(out, start, os.SEEK_SET)
                pos = start
                while pos < end:
                    n = os.sendfile(out, sfd, pos, min(_CHUNK, end - pos))
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


# --------------------------------------------------------------------------- hashing

def hash_files(root: Path | str | int, bounds: Bounds = Bounds(), skip: Collection[str] = ()) -> dict[str, str]:
    """sha256 of every file under root by relative path, a link by its target ('link:...'), a
    FIFO or device by its mode ('special:...', never opened); folders themselves are not listed.
    `skip`: relative paths left out with everything below them."""
    out: dict[str, str] = {}
    for e in walk(root, bounds, skip):
        mode = e.st.st_mode
        if stat.S_ISDIR(mode):
            continue
        if stat.S_ISLNK(mode):
            out[e.rel] = "link:" + os.readlink(e.name, dir_fd=e.dir_fd)
        elif not stat.S_ISREG(mode):
            out[e.rel] = f"special:{stat.filemode(mode)}"
        else:
            out[e.rel] = _sha256(e)
    return out


def _sha256(e: Entry) -> str:
    try:
        fd = os.open(e.name, _READ_FLAGS, dir_fd=e.dir_fd)
    except OSError as err:
        return f"unreadable: {err.strerror}"
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "special:changed"
        left = e.st.st_size  # never more than the walk counted
        while left > 0 and (chunk := f.read(min(_CHUNK, left))):
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- deleting

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
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:  # a folder the run made unreadable: it is ours to open again
        os.chmod(name, 0o700, dir_fd=parent)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
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
