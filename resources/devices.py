"""How many experiments run at once, and on which device.

Per-idea steps fan out (one Dagster step per idea). They run concurrently up to
`parallel_limit()`: $RESEARCHLOOP_MAX_PARALLEL if set, else one per GPU when CUDA devices are
present, else one per CPU core. Each running experiment holds a slot: on a GPU machine the
slot is a GPU (its index goes to CUDA_VISIBLE_DEVICES); on CPU the cores are shared out
(OMP_NUM_THREADS = cores // limit), so two experiments on two cores do not fight over four
threads. Slots are file locks (`filelock`), so steps in separate processes (Dagster's
multiprocess executor) share them; the kernel drops a dead process's lock."""
from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from resources.settings import settings


def gpu_ids() -> list[str]:
    """Visible CUDA devices: $CUDA_VISIBLE_DEVICES if set, else the /dev/nvidiaN nodes."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return sorted((m.group(1) for n in names if (m := re.fullmatch(r"nvidia(\d+)", n))), key=int)


def parallel_limit() -> int:
    """Experiments that may run at once (>= 1)."""
    limit = settings().max_parallel
    return limit if limit is not None else len(gpu_ids()) or (os.cpu_count() or 1)


def slot_env(slot: int, limit: int, gpus: list[str], cores: int) -> dict[str, str]:
    """Environment for the experiment holding `slot` of `limit` (pure)."""
    if gpus:
        return {"CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)]}
    threads = str(max(1, cores // max(1, limit)))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "CUDA_VISIBLE_DEVICES": ""}


@contextlib.contextmanager
def device_slot(lock_dir: Path, limit: int | None = None, poll_s: float = 0.2) -> Iterator[dict[str, str]]:
    """Hold one of `limit` slots (blocking until one is free); yields the environment to run with."""
    limit = limit or parallel_limit()
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        for slot in range(limit):
            lock = FileLock(lock_dir / f"slot-{slot}.lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            try:
                yield slot_env(slot, limit, gpu_ids(), os.cpu_count() or 1)
            finally:
                lock.release()
            return
        time.sleep(poll_s)
