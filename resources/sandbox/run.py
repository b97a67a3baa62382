"""``run_in_sandbox``: one untrusted command in the sandbox under a ``SandboxLimits`` policy (see the
package docstring, resources/sandbox/__init__.py, for what is enforced and why), and
``run_sandboxed``, the same with the limits as keywords.

One responsibility, the run's life cycle, in the order it happens: the command line (bwrap argv
and the shim), the log files, the workspace copied in, the watchdog loop (exit, timeout, memory,
disk), the kill and the sweep, the copy back, the result. The pieces it calls live beside it
(env, bwrap, shim, limits, workspace, result)."""
from __future__ import annotations

import itertools
import logging
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from resources import processes
from resources.safe_io import read_tail
from resources.sandbox.bwrap import INSTALL_HINT, bwrap_argv, first_untraversable_ancestor, sandbox_available
from resources.sandbox.env import CRASH_HOOK, build_env, default_hidden_paths, interpreter_roots
from resources.sandbox.limits import sweep_uid, tree_memory_bytes, workspace_usage
from resources.sandbox.result import ProcessResult, append_note, file_size, open_log, out_of_space
from resources.sandbox.workspace import (
    DEFAULT_DISK_FILES,
    DEFAULT_DISK_MB,
    check_in_place,
    copy_back,
    fill_workspace,
    fs_usage,
    inner_hidden,
    workspace_bounds,
)

log = logging.getLogger(__name__)

POLL_S = 0.1
DISK_POLL_S = 0.5
_EPHEMERAL_UID_BASE = 1_500_000_000
_EPHEMERAL_UID_SPAN = 500_000_000
_counter = itertools.count()
# the shim's source, run as `python -I -S -c SOURCE` inside the sandbox (resources/sandbox/shim.py)
SHIM_SOURCE = (Path(__file__).parent / "shim.py").read_text()


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may take. timeout_s: wall clock (SIGKILL of the tree); memory_mb: anonymous +
    shared memory of the whole tree (watchdog), also the size of its private /tmp and /dev/shm;
    max_procs: RLIMIT_NPROC (processes and threads; sandboxed only); max_file_mb: RLIMIT_FSIZE
    (also caps the logs); limit_address_space: RLIMIT_AS = 2 x memory_mb per process (off for
    CUDA); disk_mb / disk_files: the workspace's quota (disk_mb None: no byte quota)."""

    timeout_s: float
    memory_mb: int = 4096
    max_procs: int = 256
    max_file_mb: int = 512
    limit_address_space: bool = True
    disk_mb: int | None = DEFAULT_DISK_MB
    disk_files: int = DEFAULT_DISK_FILES


def _wait_exit(proc: subprocess.Popen, pidfd: int | None, timeout: float) -> bool:
    """Wait up to timeout for proc to exit WITHOUT reaping it (so its pid/pgid stay ours)."""
    if pidfd is not None:
        r, _, _ = select.select([pidfd], [], [], max(0.0, timeout))
        return bool(r)
    end = time.monotonic() + timeout
    while True:
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(min(0.02, max(0.0, end - time.monotonic())))


def disk_over(ws_fd: int | None, workdir: Path, disk_mb: int | None, disk_files: int) -> bool:
    """The polled quota (a second line behind the sized filesystem; the only one unsandboxed)."""
    size, entries = fs_usage(ws_fd) if ws_fd is not None else workspace_usage(workdir, disk_files)
    return (disk_mb is not None and size > int(disk_mb) << 20) or entries > disk_files


def run_sandboxed(command: list[str], workdir: Path, *, timeout_s: float, memory_mb: int = 4096,
                  max_procs: int = 256, max_file_mb: int = 512, limit_address_space: bool = True,
                  disk_mb: int | None = DEFAULT_DISK_MB, disk_files: int = DEFAULT_DISK_FILES,
                  **placement: Any) -> ProcessResult:
    """``run_in_sandbox`` with the limits as keywords (see SandboxLimits); `placement`: run's other keywords."""
    limits = SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb, max_procs=max_procs, max_file_mb=max_file_mb,
                           limit_address_space=limit_address_space, disk_mb=disk_mb, disk_files=disk_files)
    return run_in_sandbox(command, workdir, limits, **placement)


def run_in_sandbox(command: list[str], workdir: Path, limits: SandboxLimits, *, env: dict[str, str] | None = None,
                   sandbox: bool = True, python: str | None = None, logs_dir: Path | None = None,
                   hide: Sequence[Path | str] | None = None, ro_paths: Sequence[Path | str] = ()) -> ProcessResult:
    """Run an untrusted command in workdir under `limits`; see the package docstring for what is enforced.

    ``hide`` replaces the default hidden dirs (``default_hidden_paths()``); ``logs_dir``
    defaults to ``WORKDIR/../logs``; ``ro_paths``: more host dirs the sandbox sees read-only
    (data); ``limits.disk_mb``/``disk_files``: the workspace's quota (None: no byte quota): the size of
    the sandbox's workspace filesystem, what may be copied back, and the polled second line.
    Never raises for what the command does (a workspace past its limits is a result with
    killed_reason "disk" and the reason as the last line of stderr); raises RuntimeError if
    ``sandbox`` is requested and bubblewrap does not work here.
    """
    if not command:
        raise ValueError("empty command")
    workdir = Path(workdir).resolve()
    if not workdir.is_dir():
        raise FileNotFoundError(f"workdir not found: {workdir}")
    if workdir == Path("/"):
        raise ValueError("refusing to run with / as the workspace")
    if sandbox:
        ok, why = sandbox_available()
        if not ok:
            raise RuntimeError(f"Sandboxed run requested but unavailable: {why}"
                               + ("" if INSTALL_HINT in why else f" {INSTALL_HINT}"))
    python = str(Path(python or sys.executable).absolute())
    command = [str(c) for c in command]
    if command[0] in ("python", "python3"):
        command = [python, *command[1:]]

    logs_dir = Path(logs_dir) if logs_dir else workdir.parent / "logs"
    logs_dir.mkdir(parents=True, exist_ok=True)
    stem = (f"{workdir.name}-{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
            f"-{os.getpid()}-{next(_counter)}")
    stdout_path, stderr_path = logs_dir / f"{stem}.stdout.log", logs_dir / f"{stem}.stderr.log"

    mem_bytes = int(limits.memory_mb) << 20
    as_bytes = 2 * mem_bytes if limits.limit_address_space else -1
    fsize_bytes = int(limits.max_file_mb) << 20
    full_env = build_env(workdir, python, env)
    bounds = workspace_bounds(limits.disk_mb, limits.disk_files)
    root_mode = sandbox and os.geteuid() == 0
    uid = gid = -1
    ws_st = workdir.stat()
    # as root the files copied back belong to the workspace's owner, as the folder does
    back_owner = ((ws_st.st_uid, ws_st.st_gid) if root_mode and (ws_st.st_uid, ws_st.st_gid)
                  != (os.geteuid(), os.getegid()) else None)
    if root_mode:
        uid = gid = _EPHEMERAL_UID_BASE + secrets.randbelow(_EPHEMERAL_UID_SPAN)
    ready_r, ready_w, go_r, go_w = (*os.pipe(), *os.pipe()) if sandbox else (-1, -1, -1, -1)

    shim = [sys.executable, "-I", "-S", "-c", SHIM_SOURCE, str(uid), str(gid),
            str(int(limits.max_procs) if sandbox else -1), str(as_bytes), str(fsize_bytes), str(ready_w), str(go_r),
            "--"]
    inner: list[str] = []
    if sandbox:
        hidden = [Path(h) for h in (default_hidden_paths() if hide is None else hide)]
        inner = inner_hidden(workdir, hidden)
        expose = interpreter_roots(python) + interpreter_roots(sys.executable)
        if root_mode:
            # a host dir the ephemeral uid cannot traverse (e.g. /root 0700 holding pyenv)
            # becomes an empty tmpfs, so what lies below it can be bound back reachable
            for p in [workdir, *expose]:
                anc = first_untraversable_ancestor(p)
                if anc is not None:
                    hidden.append(anc)
        argv = bwrap_argv(workdir, env=full_env, hide=hidden, expose=expose, ro_paths=[*ro_paths, CRASH_HOOK],
                          tmp_bytes=mem_bytes, root_mode=root_mode, bwrap=shutil.which("bwrap") or "bwrap",
                          ws_bytes=bounds.max_bytes, ws_mode=stat.S_IMODE(ws_st.st_mode)) + shim + command
    else:
        # RLIMIT_NPROC counts all the caller's processes outside a namespace: not set here
        argv = shim + command
    log.debug("runner argv: %s", argv)

    out_fd, err_fd = open_log(stdout_path), open_log(stderr_path)
    start = time.monotonic()
    killed_reason: str | None = None
    note: str | None = None
    peak = 0
    ws_fd: int | None = None
    swept = False
    try:
        try:
            proc = subprocess.Popen(argv, cwd=workdir, env=full_env, stdin=subprocess.DEVNULL,
                                    stdout=out_fd, stderr=err_fd, start_new_session=True,
                                    close_fds=True, pass_fds=(ready_w, go_r) if sandbox else ())
        except BaseException:
            for fd in (ready_r, go_w):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (out_fd, err_fd, ready_w, go_r):
                if fd >= 0:
                    os.close(fd)
        try:
            pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            if sandbox:
                sandbox_owner = (uid, gid) if root_mode else None
                ws_fd, killed_reason, note = fill_workspace(proc.pid, ready_r, go_w, workdir, bounds, inner,
                                                             sandbox_owner, float(limits.timeout_s))
            start = time.monotonic()
            deadline = start + float(limits.timeout_s)
            next_disk = start + (POLL_S if ws_fd is not None else DISK_POLL_S)
            seen: list[int] = []
            while killed_reason is None:
                if _wait_exit(proc, pidfd, min(POLL_S, max(0.0, deadline - time.monotonic()))):
                    break
                now = time.monotonic()
                if now >= deadline:
                    killed_reason = "timeout"
                else:
                    used = tree_memory_bytes(proc.pid, sandbox)
                    if used > mem_bytes:  # over by the cheap upper bound: count shared pages once
                        used = tree_memory_bytes(proc.pid, sandbox, precise=True)
                    peak = max(peak, used)
                    if used > mem_bytes:
                        killed_reason = "memory"
                    elif (ws_fd is not None or limits.disk_mb is not None) and now >= next_disk:
                        next_disk = now + (POLL_S if ws_fd is not None else DISK_POLL_S)
                        if disk_over(ws_fd, workdir, limits.disk_mb, limits.disk_files):
                            killed_reason = "disk"
            if killed_reason:
                seen = processes.kill_tree(proc.pid)
            # leftovers in the process group (unsandboxed daemons that did not setsid)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        except BaseException:  # interrupted (KeyboardInterrupt, run cancelled): no orphans
            processes.kill_tree(proc.pid)
            proc.wait()
            raise
        finally:
            if pidfd is not None:
                os.close(pidfd)
        rc = proc.wait()
        duration = time.monotonic() - start
        processes.wait_gone(seen)
        if root_mode:
            sweep_uid(uid)
            swept = True
        # every process of the sandbox is gone (its PID namespace died with it): what its
        # filesystem holds is final
        if killed_reason is None and rc != 0 and out_of_space(stderr_path):
            killed_reason = "disk"  # the sized filesystem (or /tmp) refused a write: ENOSPC
        if ws_fd is not None:
            note = copy_back(ws_fd, workdir, bounds, inner, back_owner) or note
        elif not sandbox:
            note = check_in_place(workdir, bounds) or note
    finally:
        if ws_fd is not None:
            os.close(ws_fd)  # the sandbox's workspace filesystem is freed here
        if root_mode and not swept:
            sweep_uid(uid)
    if note:
        append_note(stderr_path, note)
        killed_reason = killed_reason or "disk"

    exit_code: int | None = rc
    if killed_reason:
        exit_code = None
    elif rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or (rc != 0 and any(
            file_size(p) >= fsize_bytes for p in (stdout_path, stderr_path))):
        # SIGXFSZ, or (Python ignores SIGXFSZ) EFBIG on a log that reached max_file_mb
        killed_reason = "file_size"
    return ProcessResult(
        command=command, workdir=str(workdir), exit_code=exit_code,
        timed_out=killed_reason == "timeout", killed_reason=killed_reason,
        duration_s=round(duration, 3), stdout_path=str(stdout_path),
        stderr_path=str(stderr_path), stdout_tail=read_tail(stdout_path),
        stderr_tail=read_tail(stderr_path), sandboxed=sandbox,
        peak_memory_mb=round(peak / (1 << 20), 1),
    )
