"""Reading a workspace tree within bounds: `walk` (every entry, parents first, names sorted,
links never followed, each entry reached through its open parent folder), `scan` (a walk that
only checks the bounds) and `hash_files` (the sha256 of every file by relative path). Nothing
recurses (an explicit stack, one open folder per level); a walk past a bound of `Bounds` raises
`WorkspaceLimitError` with a reason a person can read. Bytes are counted as a copy would write
them (`copy_size`)."""
from __future__ import annotations

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
CHUNK_BYTES = 1 << 20  # bytes read or copied at a time
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
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


def short_rel(rel: str) -> str:
    return rel if len(rel) <= 120 else f"{rel[:60]}...{rel[-40:]}"


def open_root(root: Path | str | int) -> tuple[int, bool]:
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
    fd, owned = open_root(root)
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
        raise WorkspaceLimitError(f"{short_rel(rel)}: more than {bounds.max_depth} nested folders")
    if len(os.fsencode(rel)) > bounds.max_path:
        raise WorkspaceLimitError(f"{short_rel(rel)}: a path longer than {bounds.max_path} characters")
    if t.entries > bounds.max_entries:
        raise WorkspaceLimitError(f"more than {bounds.max_entries} files and folders")
    if bounds.max_bytes is not None and t.bytes > bounds.max_bytes:
        raise WorkspaceLimitError(f"the files would take more than the disk quota of {bounds.max_bytes / _MB:.0f} MB "
                                  f"once copied: {t.bytes / _MB:.0f} MB up to {_describe(short_rel(rel), st)}")


def _descend(parent: int, name: str, rel: str, st: os.stat_result, depth: int, bounds: Bounds,
             t: Totals, unlock: bool) -> _Frame:
    fd, restore = _open_unlocked(name, DIR_FLAGS, parent, 0o500 if unlock else 0)
    frame = _Frame(fd, rel, depth, restore=restore)
    try:
        got = os.fstat(fd)
        if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino):
            raise WorkspaceLimitError(f"{short_rel(rel)} changed while it was read")
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


def open_entry(name: str, flags: int, dir_fd: int, unlock_bits: int = 0) -> int:
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
        fd = os.open(e.name, READ_FLAGS, dir_fd=e.dir_fd)
    except OSError as err:
        return f"unreadable: {err.strerror}"
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "special:changed"
        left = e.st.st_size  # never more than the walk counted
        while left > 0 and (chunk := f.read(min(CHUNK_BYTES, left))):
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()
