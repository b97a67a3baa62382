"""The sandbox: whether it contains hostile code, and what it costs.

1. The hostile suite (tests/resources/sandbox/test_hostile.py), run by pytest against this checkout's sandbox: each
   test plants an attack (a script run in the real sandbox, or a hostile file the host reads back)
   and asserts it was contained; a test that passes is an attack contained.
2. Start-up of one sandboxed `python -c pass` (median of N, the runner before the hardening vs
   now, and unsandboxed for scale), and the watchdog's per-poll cost (memory of a process tree
   that imported torch; a workspace's disk use). "Before" is resources/runner.py as of commit
   BEFORE (whole root bound read-only, RSS-minus-shared memory, no seccomp, no disk quota), loaded
   from git into a temporary module; "after" is the working tree's resources/sandbox/. Runs alternate (before, after,
   unsandboxed) so load on the shared machine falls on all three alike.

    python -m bench sandbox [--runs 10]         # both parts (needs bubblewrap)
    python -m bench sandbox --hostile-only      # the hostile suite alone, into the same record
    python -m bench sandbox --render            # re-render the section from the record

Writes bench/sandbox_results.json and the section "sandbox" of bench/results/sandbox.md."""
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
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.common import ROOT, machine, provenance, today, write_section
from resources import sandbox

BEFORE = "a077376"  # main before the hardening
RECORD = ROOT / "bench" / "sandbox_results.json"
HOSTILE = "tests/resources/sandbox/test_hostile.py"


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
                         ("after", lambda: after.tree_memory_bytes(p.pid, False))):
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


def junit_outcomes(xml_text: str) -> list[dict]:
    """Each test case of a pytest JUnit XML report: its name, outcome (passed / failed / skipped) and,
    unless it passed, pytest's message."""
    rows = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skip = case.find("skipped")
        outcome = "failed" if bad is not None else "skipped" if skip is not None else "passed"
        why = (bad if bad is not None else skip).get("message", "") if outcome != "passed" else ""
        rows.append({"name": case.get("name"), "outcome": outcome, "message": why.strip()[:300]})
    return rows


def hostile(suite: str = HOSTILE) -> dict:
    """The hostile suite, run by pytest in a subprocess against this checkout's sandbox."""
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "junit.xml"
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite,
                               f"--junitxml={report}"], cwd=ROOT, capture_output=True, text=True, check=False)
        wall = round(time.monotonic() - t0, 1)
        if not report.exists():
            raise SystemExit(f"pytest wrote no report (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
        tests = junit_outcomes(report.read_text())
    count = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "failed", "skipped")}
    return {"suite": suite, "date": today(), "machine": machine(), "wall_s": wall, "exit_code": proc.returncode,
            "ran": count["passed"] + count["failed"], **count, "tests": tests}


def render_hostile(h: dict | None) -> list[str]:
    if not h:
        return ["Hostile suite: not run in this record (`python -m bench sandbox --hostile-only` adds it)."]
    lines = [f"Hostile suite (`{h['suite']}`, pytest against this checkout's sandbox, {h['date']} on {h['machine']}, "
             f"{h['wall_s']:.0f} s): each test plants an attack or a hostile file and asserts it was contained. "
             f"**{h['passed']}/{h['ran']} contained**, {h['failed']} not"
             + (f", {h['skipped']} skipped" if h["skipped"] else "") + ".", "",
             "| test | outcome |", "|---|---|"]
    for t in h["tests"]:
        lines.append(f"| {t['name']} | {t['outcome']}"
                     + (f": {t['message'].splitlines()[0] if t['message'] else ''}" if t["outcome"] != "passed"
                        else "") + " |")
    return lines


def render(data: dict) -> str:
    s, p, d, h = data["startup"], data["poll"], data["disk_walk"], data.get("hostile")
    measured = f"{data['date']} on {data['machine']}" + (
        f" (cost); {h['date']} on {h['machine']} (hostile suite)" if h else "")
    lines = [
        "## Sandbox: hostile code contained, start-up and watchdog cost", "",
        provenance("bench/sandbox_bench.py", "bench/sandbox_results.json", measured,
                   "not a sample (a fixed suite of attacks; timings of a fixed command)"),
        "",
        *render_hostile(h),
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hostile-only", action="store_true", help="run the hostile suite alone, keep the record's cost")
    ap.add_argument("--render", action="store_true", help="re-render the section from the record, measure nothing")
    args = ap.parse_args(argv)
    if args.render:
        print(write_section("sandbox", render(json.loads(RECORD.read_text())), "sandbox"))
        return 0
    ok, why = sandbox.sandbox_available()
    if not ok:
        print(f"the sandbox cannot run here: {why}", file=sys.stderr)
        return 2
    if args.hostile_only:
        data = {**json.loads(RECORD.read_text()), "hostile": hostile()}
    else:
        with tempfile.TemporaryDirectory(prefix="sandbox-bench-", dir="/var/tmp") as t:
            tmp = Path(t)
            before = load_before(tmp)
            ws = tmp / "ws"
            ws.mkdir()
            data = {"date": today(), "machine": machine(), "before_commit": BEFORE, "load_avg": os.getloadavg(),
                    "startup": startup(before, sandbox, args.runs, ws), "poll": poll_cost(before, sandbox, 50),
                    "disk_walk": disk_cost(sandbox, tmp), "hostile": hostile()}
    RECORD.write_text(json.dumps(data, indent=1) + "\n")
    print(write_section("sandbox", render(data), "sandbox"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
