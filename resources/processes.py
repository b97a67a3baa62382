"""Process helpers shared by the sandbox (resources/sandbox/), the local model server
(resources/local_llm/) and the loop guards (pipelines/guards.py): whether a pid is alive, when a
process started (a pid plus its start time names one process, not a later one that reused the
pid), a process tree, and SIGKILL of a tree. Processes are inspected with ``psutil``; nothing here
raises for a process that is gone or not ours to see.
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

import psutil


def start_time(pid: int | None = None) -> float | None:
    """When process `pid` (None: this one) started, as psutil's create_time; None when it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def live_process(pid: object, create_time: float | None = None) -> psutil.Process | None:
    """The live (not zombie) process `pid`, and, when `create_time` is given, only if it is the
    same process that was recorded (not a later one that reused the pid). A process this user may
    not inspect counts as none."""
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if create_time is not None and abs(proc.create_time() - create_time) > 0.5:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, or a pid that cannot be inspected, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tree(root: int) -> list[psutil.Process]:
    """root and all its descendants (psutil walks /proc once); empty when root is gone."""
    try:
        p = psutil.Process(root)
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return []


def descendants(root: int) -> list[int]:
    """The pids of root's descendants (root itself not included)."""
    return [p.pid for p in tree(root)[1:]]


def pids_of_uid(uid: int) -> list[int]:
    """Every process whose real or effective uid is `uid`."""
    out = []
    for p in psutil.process_iter(["uids"]):
        uids = p.info.get("uids")
        if uids is not None and uid in (uids.real, uids.effective):
            out.append(p.pid)
    return out


def kill(pid: int) -> None:
    """SIGKILL pid; a process that is gone or not ours is left alone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(root: int) -> list[int]:
    """SIGKILL the process group of root and every descendant; returns the pids it saw."""
    pids = descendants(root)
    try:
        os.killpg(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill(root)
    for p in pids:
        kill(p)
    return pids


def wait_gone(pids: Iterable[int], timeout: float = 5.0) -> None:
    """Wait up to timeout until none of pids runs."""
    pending = set(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = {p for p in pending if alive(p)}
        if pending:
            time.sleep(0.02)
