"""Host-side file access around untrusted workspaces.

`safe_read` is the one way the host reads a file an experiment could have made or replaced
(final_info.json, traceback sources, workspace modules, log tails, logged artifacts). A
sandboxed script owns its workspace, so any name in it may be a symlink (to /proc/self/environ,
which would copy the host's environment into MLflow), a FIFO (an open() that never returns) or
a link to /dev/zero (a read that never ends). So every component below `root` is opened with
O_NOFOLLOW (a symlink anywhere on the way is refused), the last one also with O_NONBLOCK (a
FIFO opens at once), the opened file must be a regular file on the root's file system, and no
more than `max_bytes` are read.

`atomic_write_text` writes memos and other files that a later run trusts: a temp file in the
same folder, fsync, then os.replace, so a kill or a full disk leaves the old file or none,
never a truncated one (`atomic_write` does the same for any writer, e.g. the record store's
Parquet files). `read_memo` is its tolerant reader: a memo that does not parse is reported as
missing (and removed), so the work is done again instead of failing for good.

Test hook: with $RESEARCHLOOP_TEST_KILL_BEFORE_RENAME set to a part of a file's path, the
process that writes that file kills itself with SIGKILL after the temp file is written and
synced, before the rename (tests/project/test_stress_kill.py uses it to kill -9 a loop mid-write).
Nothing reads it outside that test."""
from __future__ import annotations

import errno
import json
import os
import signal
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

DEFAULT_MAX_BYTES = 1 << 20


class UnsafeFile(OSError):
    """A workspace file the host refuses to read; str() says why (symlink, FIFO, too big...)."""


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link"}


def _relative(path: Path, root: Path) -> tuple[str, ...]:
    if not path.is_absolute():
        path = root / path
    rel = os.path.relpath(os.path.normpath(path), os.path.normpath(root))
    parts = tuple(p for p in Path(rel).parts if p not in ("", "."))
    if not parts or parts[0] == ".." or ".." in parts or Path(rel).is_absolute():
        raise UnsafeFile(errno.EXDEV, f"{path} is not inside {root}")
    return parts


def safe_open(path: str | Path, root: str | Path | None = None) -> BinaryIO:
    """The regular file `path` inside `root` (default: the file's own folder), opened for binary
    reading. Raises FileNotFoundError when it is missing and UnsafeFile (an OSError) when it is
    a symlink (or lies under one), is not a regular file (FIFO, device, socket, folder), or lies
    outside `root` or on another file system."""
    path = Path(path)
    root = Path(root) if root is not None else path.absolute().parent
    parts = _relative(path, root)
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the root itself is the host's
    try:
        root_dev = os.fstat(fd).st_dev
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC) if last else flags_dir
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR) or (e.errno == errno.ENXIO and last):
                    kind = "a symbolic link or not a folder" if e.errno != errno.ENXIO else "a socket or device"
                    raise UnsafeFile(e.errno, f"{'/'.join(parts[:i + 1])} is {kind}: not read") from None
                raise
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        where = "/".join(parts)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise UnsafeFile(errno.EINVAL, f"{where} is {kind}, not a regular file: not read")
        if st.st_dev != root_dev:
            raise UnsafeFile(errno.EXDEV, f"{where} is on another file system than {root}: not read")
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
        fd = -1
        return f
    finally:
        if fd >= 0:
            os.close(fd)


def safe_read(path: str | Path, root: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES, *,
              tail: bool = False) -> bytes:
    """The bytes of the regular file `path` inside `root` (see safe_open for what is refused);
    a file of more than max_bytes is refused too (UnsafeFile), or with `tail` its last
    max_bytes are returned. Never reads more than max_bytes."""
    with safe_open(path, root) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            if not tail:
                raise UnsafeFile(errno.EFBIG, f"{Path(path).name} holds {size} bytes, more than the "
                                 f"{max_bytes} read: not read")
            f.seek(size - max_bytes)
        return f.read(max_bytes)


def safe_read_text(path: str | Path, root: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES, *,
                   tail: bool = False) -> str:
    """safe_read, decoded as UTF-8 (undecodable bytes replaced)."""
    return safe_read(path, root, max_bytes, tail=tail).decode("utf-8", errors="replace")


def read_text_or(path: str | Path, root: str | Path | None = None, default: str = "",
                 max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """safe_read_text, or `default` when the file is missing or refused."""
    try:
        return safe_read_text(path, root, max_bytes)
    except OSError:
        return default


def read_tail(path: str | Path, max_chars: int = 4000, root: str | Path | None = None) -> str:
    """The last max_chars characters of a file (reading only its last 4 x max_chars bytes);
    "" when it is missing or refused."""
    try:
        data = safe_read(path, root, 4 * max_chars, tail=True)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-max_chars:]


KILL_BEFORE_RENAME = "RESEARCHLOOP_TEST_KILL_BEFORE_RENAME"


def _test_kill_point(path: Path) -> None:
    """The test hook (module docstring): SIGKILL this process when the variable names `path`."""
    part = os.environ.get(KILL_BEFORE_RENAME)
    if part and part in str(path):
        os.kill(os.getpid(), signal.SIGKILL)


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Call `write(f)` on a temp file beside `path` (a name no other writer uses, hidden, not
    ending in the target's suffix), fsync it, then rename it over `path`: readers see the old
    content or the new, never a part, and two writers never share a temp file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # as a plain open() would make it (mkstemp makes 0600)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _test_kill_point(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old content or the new, never a part."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def read_memo(path: str | Path, parse: Callable[[str], Any] = json.loads,
              log: Callable[[str], None] | None = None) -> Any | None:
    """A memo written by atomic_write_text, parsed; None when it is missing or does not parse
    (a corrupt memo is removed, so the work it stood for is done again)."""
    path = Path(path)
    try:
        text = safe_read_text(path, max_bytes=64 << 20)
    except FileNotFoundError:
        return None
    except OSError as e:
        if log:
            log(f"ignoring memo {path.name}: {e}")
        return None
    try:
        return parse(text)
    except (ValueError, TypeError, KeyError) as e:  # pydantic's ValidationError is a ValueError
        if log:
            log(f"ignoring corrupt memo {path.name} ({type(e).__name__}); it is computed again")
        try:
            path.unlink()
        except OSError:
            pass
        return None
