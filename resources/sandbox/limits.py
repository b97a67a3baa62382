"""What the sandbox's watchdog measures and how it ends a run: the memory of a process tree
(anonymous and shared memory, memfds, the sandbox's private tmpfs), a workspace's disk use, and
the sweep of every process of an ephemeral uid. The generic process helpers (tree, kill) are
resources/processes.py."""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from resources import processes

log = logging.getLogger(__name__)

_ROLLUP = (b"Pss_Anon:", b"Pss_Shmem:")
_STATUS = (b"RssAnon:", b"RssShmem:")


def _process_memory(pid: int, precise: bool = False) -> int:
    """One process's anonymous memory, shared anonymous memory included (MAP_SHARED mappings,
    mapped memfds, SysV segments and tmpfs files it maps). Cheap (status, ~0.05 ms): resident
    anonymous + resident shmem, which counts a page shared by n processes n times (an upper
    bound). `precise` (smaps_rollup, which walks the page tables: ~25 ms for a process that
    imported torch, measured): the proportional set size, a page shared by n processes counting
    1/n in each, so once in the tree."""
    for name, fields in ((("smaps_rollup", _ROLLUP),) if precise else ()) + (("status", _STATUS),):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                lines = [ln for ln in f.read().splitlines() if ln.startswith(fields)]
        except OSError:
            continue
        if len(lines) == 2:
            return sum(int(ln.split()[1]) for ln in lines) << 10
    return 0


def _memfd_bytes(pids: Sequence[int]) -> int:
    """Memory held in memfds the tree has open (each counted once): written with write(), never
    mapped, a memfd is in no process's RSS and under no RLIMIT_AS. A memfd that is also mapped
    counts here and in _process_memory (conservative: measured memfd use in ML code is rare)."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            link = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(link).startswith("/memfd:"):
                    continue
                st = os.stat(link)
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def tree_memory_bytes(root: int, sandboxed: bool, precise: bool = False) -> int:
    """Anonymous and shared-anonymous memory of the process tree (see _process_memory), memfds
    it holds, plus (sandboxed) what sits in its private tmpfs /tmp and /dev/shm (RAM that
    belongs to no process)."""
    pids = [p.pid for p in processes.tree(root)]
    total = sum(_process_memory(pid, precise) for pid in pids) + _memfd_bytes(pids)
    if sandboxed:
        total += _sandbox_tmpfs_bytes(pids[1:])
    return total


def _sandbox_tmpfs_bytes(pids: Sequence[int]) -> int:
    try:
        own_ns = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return 0
    for pid in reversed(pids):  # leaves first: surely inside the sandbox's mount namespace
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == own_ns:
                continue
            used = 0
            for m in ("tmp", "dev/shm"):
                st = os.statvfs(f"/proc/{pid}/root/{m}")
                if st.f_blocks:
                    used += (st.f_blocks - st.f_bfree) * st.f_frsize
            return used
        except OSError:
            continue
    return 0


def workspace_usage(root: Path, max_entries: int) -> tuple[int, int]:
    """(bytes allocated on disk, entries) under root, links not followed, hard links counted
    once; stops counting after max_entries entries (so a million tiny files cost one bounded walk)."""
    total, n, seen, stack = 0, 0, set(), [str(root)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                n += 1
                if n > max_entries:
                    return total, n
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    return total, n


def sweep_uid(uid: int, timeout: float = 5.0) -> None:
    """Kill every process of the (ephemeral) uid until none is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = processes.pids_of_uid(uid)
        if not pids:
            return
        for p in pids:
            processes.kill(p)
        time.sleep(0.02)
    log.warning("runner: processes of sandbox uid %s survived %.0fs of SIGKILL", uid, timeout)
