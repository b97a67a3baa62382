"""Device slots for the per-idea fan-out: limits, GPU/CPU environments, and slots shared
between processes through file locks."""
import multiprocessing as mp
import time

import pytest

from resources import devices
from resources.sandbox import gpu_device_nodes


def test_parallel_limit_from_env_gpus_or_cores(monkeypatch):
    monkeypatch.setenv("RESEARCHLOOP_MAX_PARALLEL", "3")
    assert devices.parallel_limit() == 3
    monkeypatch.setenv("RESEARCHLOOP_MAX_PARALLEL", "0")
    assert devices.parallel_limit() == 1  # never below one
    monkeypatch.setenv("RESEARCHLOOP_MAX_PARALLEL", "many")
    with pytest.raises(ValueError, match="RESEARCHLOOP_MAX_PARALLEL"):
        devices.parallel_limit()
    monkeypatch.delenv("RESEARCHLOOP_MAX_PARALLEL")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert devices.parallel_limit() == 3  # one per GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(devices.os, "cpu_count", lambda: 6)
    assert devices.parallel_limit() == 6  # no GPU: one per core


def test_slot_env_gpu_and_cpu():
    assert devices.slot_env(1, 2, ["4", "7"], 16) == {"CUDA_VISIBLE_DEVICES": "7"}
    cpu = devices.slot_env(0, 2, [], 2)
    assert cpu["OMP_NUM_THREADS"] == "1" and cpu["CUDA_VISIBLE_DEVICES"] == ""
    assert devices.slot_env(0, 1, [], 8)["OMP_NUM_THREADS"] == "8"
    assert devices.slot_env(0, 16, [], 2)["OMP_NUM_THREADS"] == "1"


def test_gpu_nodes_only_when_a_gpu_is_given():
    assert gpu_device_nodes("") == [] and gpu_device_nodes("-1") == []
    # on a machine without NVIDIA devices nothing is bound even when asked
    assert all(n.startswith("/dev/nvidia") for n in gpu_device_nodes("0"))


def _hold(lock_dir, limit, hold_s, q):
    with devices.device_slot(lock_dir, limit=limit, poll_s=0.05) as env:
        q.put(("start", time.monotonic(), env.get("OMP_NUM_THREADS")))
        time.sleep(hold_s)
        q.put(("end", time.monotonic(), None))


def test_slots_bound_concurrency_across_processes(tmp_path):
    """Four processes, two slots: never more than two inside at once."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hold, args=(tmp_path, 2, 0.6, q)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    events = sorted((q.get(timeout=5) for _ in range(8)), key=lambda e: e[1])
    inside, peak = 0, 0
    for kind, _, _ in events:
        inside += 1 if kind == "start" else -1
        peak = max(peak, inside)
    assert peak == 2
    starts = [e[1] for e in events if e[0] == "start"]
    assert max(starts) - min(starts) >= 0.5  # the last two waited for a free slot
