"""`make bench`: the loop's speed on this machine. The raw record bench/records/make_bench.json
and the section "make-bench" of bench/results/run.md are rendered from it.

1. the shipped topic's baseline run, sandboxed, timed (3 runs, seed 0: the metric must repeat);
2. a whole loop (`researchloop run`, default 2 rounds) on the local model in a fresh
   DAGSTER_HOME (the LLM cache starts empty), with per-stage wall time and tokens.

The record is written after the baseline (`complete: false`) and again after the loop, also when
the loop fails: its exit code and the end of its output are results too.

    python -m bench run [--topic pointcloud_classification] [--rounds 2] [--runs 3]   # make bench
    FROM_RECORD=1 python -m bench run      # re-render the section from the record only
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from bench.common import RECORDS, machine, provenance, read_record, today, write_record, write_section
from resources.paths import resolve_topic_dir
from resources.runner import Runner
from resources.sandbox import prepare_workspace
from schemas.topic import load_topic

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "bench/run_bench.py"
RECORD = "make_bench"
SECTION = "make-bench"
PAGE = "run"   # bench/results/run.md
TAIL_LINES = 60   # lines of a failed loop's output kept in the record


def bench_baseline(topic: str, runs: int = 3) -> list[dict]:
    spec = load_topic(resolve_topic_dir(topic))
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            ws = prepare_workspace(spec.path, Path(d) / f"ws{i}")
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            r = Runner().run(spec.run_command("out"), ws, timeout_s=spec.budget.run_timeout_s)
            f = ws / "out" / "final_info.json"
            info = json.loads(f.read_text()) if r.exit_code == 0 and f.exists() else {}
            rows.append({"run": i + 1, "wall_s": round(time.monotonic() - t0, 1), "exit_code": r.exit_code,
                         "metric": spec.metric.name, "value": info.get(spec.metric.name), "load": round(load, 1)})
            print(f"baseline run {i + 1}: {rows[-1]}", flush=True)
    return rows


def bench_loop(topic: str, rounds: int) -> dict:
    """`researchloop run` in a subprocess on a fresh DAGSTER_HOME: its timings file (per-stage wall time
    and tokens), wall time and exit code; when it wrote no timings, the end of its output."""
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "dagster.yaml").write_text((ROOT / "dagster_home" / "dagster.yaml").read_text())
        out = Path(home) / "timings.json"
        env = {**os.environ, "DAGSTER_HOME": home}
        t0 = time.monotonic()
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        with subprocess.Popen([sys.executable, "-m", "pipelines.cli", "run", "--topic", topic, "--rounds",
                               str(rounds), "--timings", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) as proc:
            for line in proc.stdout:   # shown as it comes, its end kept
                print(line, end="", flush=True)
                tail.append(line)
        data = json.loads(out.read_text()) if out.exists() else {
            "model": "", "stages": [], "rounds": [],
            "error": f"researchloop run exited {proc.returncode} without writing its timings",
            "output_tail": "".join(tail)}
        data["wall_s"] = round(time.monotonic() - t0, 1)
        data["exit_code"] = proc.returncode
        return data


def stage_table(data: dict) -> str:
    lines = ["| partition | asset | wall s | LLM calls | prompt tokens | completion tokens |",
             "|---|---|---|---|---|---|"]
    for s in data["stages"]:
        lines.append(f"| {s['partition'].replace('|', chr(92) + '|')} | {s['asset']} | {s['seconds']:.1f} | "
                     f"{s.get('llm_calls', '')} | {s.get('prompt_tokens', '')} | {s.get('completion_tokens', '')} |")
    return "\n".join(lines)


def render(rec: dict) -> str:
    base, loop, topic = rec["baseline"], rec.get("loop"), rec["topic"]
    values = {b["value"] for b in base}
    lines = [
        "## `make bench`: the shipped topic's baseline and a whole loop",
        "",
        provenance(SCRIPT, f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: timings of the shipped topic"),
        "",
        f"- baseline run of `{topic}` (sandboxed): median {statistics.median(b['wall_s'] for b in base):.1f} s "
        f"over {len(base)} runs (load average at the start: {', '.join(str(b['load']) for b in base)}); "
        f"{base[0]['metric']} {', '.join(str(v) for v in values)}"
        + (" (the same every run)" if len(values) == 1 else " (DIFFERS between runs)"),
    ]
    if loop is None:
        return "\n".join([*lines, f"- `researchloop run --topic {topic} --rounds {rec['rounds']}`: not run (the "
                                   "record was written after the baseline and the loop did not finish)"])
    lines.append(f"- `researchloop run --topic {topic} --rounds {rec['rounds']}`"
                 + (f" with `{loop['model']}`" if loop.get("model") else "") + ", empty LLM cache: "
                 f"{loop['wall_s']:.0f} s wall, exit code {loop['exit_code']}"
                 + (f", stopped: {loop['stop_reason']}" if loop.get("stop_reason") else ""))
    if loop.get("error"):
        return "\n".join([*lines, f"- {loop['error']}; the end of its output is in the record"])
    return "\n".join([*lines, "", stage_table(loop)])


def main(argv: list[str] | None = None, records: Path = RECORDS, page: str | Path = PAGE) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topic", default=os.environ.get("TOPIC", "pointcloud_classification"))
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "2")))
    ap.add_argument("--runs", type=int, default=3, help="baseline runs")
    ap.add_argument("--no-write", action="store_true", help="print the section, write neither record nor page")
    args = ap.parse_args(argv)
    if os.environ.get("FROM_RECORD") == "1":
        rec = read_record(RECORD, records)
    else:
        rec = {"script": SCRIPT, "date": today(), "machine": machine(), "topic": args.topic, "rounds": args.rounds,
               "complete": False, "baseline": bench_baseline(args.topic, args.runs), "loop": None}
        if not args.no_write:
            print("record:", write_record(RECORD, rec, records), flush=True)
        rec["loop"] = bench_loop(args.topic, args.rounds)
        rec["complete"] = rec["loop"]["exit_code"] == 0
    body = render(rec)
    print(body)
    if not args.no_write:
        print("record:", write_record(RECORD, rec, records))
        write_section(SECTION, body, page)
    return 0 if rec.get("complete") else 1


if __name__ == "__main__":
    sys.exit(main())
