"""The workspace of one attempt: a fresh copy of the template (``prepare_workspace``), old
attempts pruned, and, around a sandboxed run, the copy into the sandbox's own workspace
filesystem before the command starts and back to the host folder after it. Every walk, copy
and delete is bounded (resources/workspace_walk/)."""
from __future__ import annotations

import logging
import os
import select
import stat
from collections.abc import Sequence
from pathlib import Path

from resources import processes
from resources.sandbox.bwrap import normalise_dirs, under
from resources.workspace_walk import Bounds, WorkspaceLimitError, copy_tree, remove_tree, scan

log = logging.getLogger(__name__)

DEFAULT_DISK_MB = 4096
DEFAULT_DISK_FILES = 100_000
KEEP_ATTEMPTS = 3  # attempt folders kept per idea (older ones are pruned, see prune_attempts)
_READY_S = 60.0  # bubblewrap's set-up, before the host fills the workspace


def workspace_bounds(disk_mb: int | None = DEFAULT_DISK_MB, disk_files: int = DEFAULT_DISK_FILES) -> Bounds:
    """What a walk, copy or hash of a workspace may take: its disk quota in bytes as a copy would
    write them (a sparse file by its length), its file count, and the walk's depth and path limits."""
    return Bounds(max_bytes=None if disk_mb is None else int(disk_mb) << 20, max_entries=int(disk_files))


def prepare_workspace(template_dir: Path, dest: Path,
                      ignore: Sequence[str] = ("__pycache__", "*.pyc", "runs", "final_info.json"),
                      bounds: Bounds | None = None) -> Path:
    """A fresh copy of the template for one attempt (dest is replaced if it exists, at any depth).
    Raises WorkspaceLimitError when the template is past `bounds` (default: the default quota)."""
    template_dir, dest = Path(template_dir).resolve(), Path(dest).absolute()
    if not template_dir.is_dir():
        raise FileNotFoundError(f"template dir not found: {template_dir}")
    if dest.resolve() == template_dir or template_dir in dest.resolve().parents:
        raise ValueError(f"workspace {dest} must not be inside the template {template_dir}")
    remove_tree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.mkdir()
    copy_tree(template_dir, dest, bounds or workspace_bounds(), ignore=ignore)
    dest.chmod(stat.S_IMODE(template_dir.stat().st_mode))
    return dest


def prune_attempts(workdir: Path, keep: int = KEEP_ATTEMPTS) -> list[Path]:
    """Remove all but the newest `keep` attempt-N folders of workdir (and their logs): a long
    repair loop, or many resumed rounds, otherwise keep every copy and every output forever."""
    workdir = Path(workdir)
    numbered = []
    for p in workdir.glob("attempt-*"):
        tail = p.name[len("attempt-"):]
        if tail.isdigit() and p.is_dir() and not p.is_symlink():
            numbered.append((int(tail), p))
    numbered.sort()
    removed = []
    for n, p in numbered[:max(0, len(numbered) - keep)]:
        try:
            remove_tree(p)
        except (OSError, WorkspaceLimitError) as e:  # a later prune tries again
            log.warning("runner: could not remove %s: %s", p, e)
        for log_file in (workdir / "logs").glob(f"attempt-{n}-*"):
            log_file.unlink(missing_ok=True)
        removed.append(p)
    return removed


# --------------------------------------------------------------------------- the workspace filesystem

def _sandbox_pid(root: int) -> int | None:
    """A process inside the sandbox's mount namespace (leaves of the tree first)."""
    try:
        own = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return None
    for p in reversed(processes.tree(root)[1:]):
        try:
            if os.readlink(f"/proc/{p.pid}/ns/mnt") != own:
                return p.pid
        except OSError:
            continue
    return None


def _open_sandbox_workspace(root: int, workdir: Path) -> int:
    """An open folder on the sandbox's own workspace filesystem, reached through a process of the
    sandbox while it waits. Held open, it keeps that filesystem and what the run leaves in it
    readable after the sandbox is gone, until it is closed (then the kernel frees it)."""
    pid = _sandbox_pid(root)
    if pid is None:
        raise RuntimeError("runner: no process of the sandbox was found to reach its workspace")
    fd = os.open(f"/proc/{pid}/root{workdir}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if os.fstat(fd).st_dev == os.stat(workdir).st_dev:
        os.close(fd)
        raise RuntimeError(f"runner: the sandbox's {workdir} is the host folder, not a filesystem of its own")
    return fd


def _wait_ready(ready_fd: int, timeout: float) -> bool | None:
    """True when the shim says the sandbox is set up, False when it ended first (bwrap failed:
    its message is on stderr), None when neither happened within timeout."""
    r, _, _ = select.select([ready_fd], [], [], max(0.0, timeout))
    if not r:
        return None
    return os.read(ready_fd, 1) == b"r"


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}" + (f": {e.filename}" if e.filename else "")
    return str(e)


def fill_workspace(root: int, ready_fd: int, go_fd: int, workdir: Path, bounds: Bounds,
                    inner: Sequence[str], owner: tuple[int, int] | None, timeout: float,
                    ) -> tuple[int | None, str | None, str | None]:
    """Wait until the sandbox is set up, copy the host workspace into the sandbox's filesystem
    and let the command start. Returns (the open workspace filesystem or None, killed_reason,
    note); without a filesystem nothing is copied back."""
    try:
        ready = _wait_ready(ready_fd, min(_READY_S, timeout))
        if ready is None:
            return None, "timeout", "the sandbox was not set up in time"
        if not ready:
            return None, None, None
        fd = _open_sandbox_workspace(root, workdir)
        try:
            copy_tree(workdir, fd, bounds, skip=inner, owner=owner, unlock=True)
            if owner is not None:
                os.fchown(fd, *owner)
        except (WorkspaceLimitError, OSError) as e:
            os.close(fd)
            return None, "disk", ("the workspace could not be copied into its filesystem, the command did not "
                                  f"start: {_reason(e)}")
        os.write(go_fd, b"g")
        return fd, None, None
    finally:
        os.close(ready_fd)
        os.close(go_fd)


def fs_usage(fd: int) -> tuple[int, int]:
    """(bytes used, entries) of the workspace filesystem open as fd (its root not counted)."""
    st = os.fstatvfs(fd)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, max(0, st.f_files - st.f_ffree - 1)


def inner_hidden(workdir: Path, hidden: Sequence[Path]) -> list[str]:
    """Hidden dirs inside the workspace, relative: never copied in (the sandbox sees them empty)
    nor back (the host's stay as they are)."""
    return [h.relative_to(workdir).as_posix() for h in normalise_dirs(hidden) if h != workdir and under(h, workdir)]


def copy_back(fd: int, workdir: Path, bounds: Bounds, keep: Sequence[str],
               owner: tuple[int, int] | None) -> str | None:
    """Make the host workspace hold what the run left in its filesystem; None when done, else
    why not. The whole tree is checked against the bounds first, so a refusal leaves the host
    folder as it was before the run; then only what differs is written (a file the run left
    as it was stays, its content compared byte for byte)."""
    try:
        scan(fd, bounds, skip=keep, unlock=True)
    except (WorkspaceLimitError, OSError) as e:
        return ("the run's files were not copied back to the host (the workspace keeps what it held "
                f"before the run): {_reason(e)}")
    try:
        copy_tree(fd, workdir, bounds, skip=keep, owner=owner, sync=True, unlock=True)
    except (WorkspaceLimitError, OSError) as e:
        return f"the run's files were copied back to the host only in part: {_reason(e)}"
    return None


def check_in_place(workdir: Path, bounds: Bounds) -> str | None:
    """Unsandboxed: whether what the run left in the host folder is within bounds (so no later
    walk, copy or hash of it is refused or runs away); None when it is."""
    try:
        scan(workdir, bounds)
    except (WorkspaceLimitError, OSError) as e:
        return f"the workspace is past its limits after the run: {_reason(e)}"
    return None
