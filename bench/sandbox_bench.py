"""What the sandbox hardening of issue 12 costs: start-up of one sandboxed `python -c pass`
(median of N, the runner before the hardening vs now, and unsandboxed for scale), and the
watchdog's per-poll cost (memory of a process tree that imported torch; a workspace's disk use).

"Before" is resources/runner.py as of commit BEFORE (whole root bound read-only, RSS-minus-shared
memory, no seccomp, no disk quota), loaded from git into a temporary module; "after" is the
working tree's. Runs alternate (before, after, unsandboxed) so load on the shared machine falls
on all three alike.

    .venv/bin/python -m bench.sandbox_bench [--runs 10]

Writes bench/sandbox_results.json and the section "sandbox" of bench/RESULTS.md."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, machine, provenance, today, write_section

BEFORE = "a077376"  # main before the hardening
RECORD = ROOT / "bench" / "sandbox_results.json"


def load_before(tmp: Path):
    src = subprocess.run(["git", "show", f"{BEFORE}:resources/runner.py"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    path = tmp / "runner_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("runner_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ms(xs: list[float]) -> dict:
    return {"median_ms": round(1000 * statistics.median(xs), 1), "min_ms": round(1000 * min(xs), 1),
            "max_ms": round(1000 * max(xs), 1), "n": len(xs)}


def startup(before, after, runs: int, ws: Path) -> dict:
    cmd = [sys.executable, "-c", "pass"]
    times: dict[str, list[float]] = {"before": [], "after": [], "unsandboxed": []}
    for _ in range(runs):
        for name, fn in (("before", lambda: before.run_sandboxed(cmd, ws, timeout_s=60)),
                         ("after", lambda: after.run_sandboxed(cmd, ws, timeout_s=60)),
                         ("unsandboxed", lambda: after.run_sandboxed(cmd, ws, timeout_s=60, sandbox=False))):
            t = time.perf_counter()
            r = fn()
            times[name].append(time.perf_counter() - t)
            assert r.exit_code == 0, (name, r.stderr_tail)
    return {k: ms(v) for k, v in times.items()}


def poll_cost(before, after, calls: int) -> dict:
    """One watchdog poll over a tree of 2 processes that imported torch (a big address space)."""
    prog = ("import os, time, torch\nif os.fork() == 0:\n    time.sleep(120)\n"
            "else:\n    print('ready', flush=True)\n    time.sleep(120)")
    p = subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        out = {}
        for name, fn in (("before", lambda: before._tree_memory_bytes(p.pid, False)),
                         ("after", lambda: after._tree_memory_bytes(p.pid, False))):
            xs = []
            for _ in range(calls):
                t = time.perf_counter()
                fn()
                xs.append(time.perf_counter() - t)
            out[name] = {**ms(xs), "counted_mb": round(fn() / 2**20, 1)}
        return out
    finally:
        p.kill()
        p.wait()


def disk_cost(after, tmp: Path) -> dict:
    out = {}
    for n in (20, 2000):
        d = tmp / f"ws{n}"
        d.mkdir()
        for i in range(n):
            (d / f"f{i}").write_bytes(b"x" * 4096)
        xs = []
        for _ in range(20):
            t = time.perf_counter()
            after.workspace_usage(d, 100_000)
            xs.append(time.perf_counter() - t)
        out[f"{n}_files"] = ms(xs)
    return out


def render(data: dict) -> str:
    s, p, d = data["startup"], data["poll"], data["disk_walk"]
    lines = [
        "## Sandbox start-up and watchdog cost (issue 12 hardening)", "",
        provenance("bench/sandbox_bench.py", "bench/sandbox_results.json",
                   f"{data['date']} on {data['machine']}", "not a sample (timings of a fixed command)"),
        "",
        f"Start-up of one sandboxed `python -c pass`, {s['after']['n']} runs each, alternating; "
        f"\"before\" is resources/runner.py at {data['before_commit']} (whole root bound read-only, no seccomp), "
        "\"after\" the narrow bind set, empty /run, read-only root, seccomp filter, shared-memory accounting "
        f"and disk quota. The 2 cores were shared with other work (load average {data['load_avg'][0]:.1f} at the "
        "start), so single runs vary a lot; compare the medians:", "",
        "| runner | median | min | max |", "|---|---|---|---|",
        *[f"| {k} | {v['median_ms']} ms | {v['min_ms']} ms | {v['max_ms']} ms |" for k, v in s.items()],
        "",
        f"One memory-watchdog poll (every 0.1 s) over a 2-process tree that imported torch, {p['after']['n']} polls:",
        "",
        "| runner | median | max | memory it counts |", "|---|---|---|---|",
        *[f"| {k} | {v['median_ms']} ms | {v['max_ms']} ms | {v['counted_mb']} MB |" for k, v in p.items()],
        "",
        "One disk-quota walk of a workspace (every 0.5 s): "
        + ", ".join(f"{k.replace('_', ' ')}: {v['median_ms']} ms" for k, v in d.items()) + " (median).",
        "",
        "What a poll counts: \"before\" resident minus shared pages per process (statm), blind to shared "
        "anonymous memory and memfds; \"after\" resident anonymous plus resident shmem per process "
        "(/proc/PID/status) plus the memfds the tree holds, and only when that is over the limit the "
        "page-table walk (smaps_rollup, Pss) that counts a page shared by several processes once "
        "before a kill.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args(argv)
    from resources import runner as after

    with tempfile.TemporaryDirectory(prefix="sandbox-bench-", dir="/var/tmp") as t:
        tmp = Path(t)
        before = load_before(tmp)
        ws = tmp / "ws"
        ws.mkdir()
        data = {"date": today(), "machine": machine(), "before_commit": BEFORE, "load_avg": os.getloadavg(),
                "startup": startup(before, after, args.runs, ws), "poll": poll_cost(before, after, 50),
                "disk_walk": disk_cost(after, tmp)}
    RECORD.write_text(json.dumps(data, indent=1) + "\n")
    print(write_section("sandbox", render(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
