"""`make bench`: the loop's speed on this machine, written into bench/RESULTS.md, section
"make-bench", from the record bench/records/make_bench.json.

1. the shipped topic's baseline run, sandboxed, timed (3 runs, seed 0: the metric must repeat);
2. a whole loop (`researchloop run`, default 2 rounds) on the local model in a fresh
   DAGSTER_HOME (the LLM cache starts empty), with per-stage wall time and tokens.

    TOPIC=pointcloud_classification ROUNDS=2 .venv/bin/python -m bench.run_bench
    FROM_RECORD=1 .venv/bin/python -m bench.run_bench      # re-render the section only

The other benchmarks have their own targets (`make bench-<name>`, bench/<name>_bench.py), each
writing its own record and section.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, provenance, read_record, today, write_record, write_section

ROOT = Path(__file__).resolve().parents[1]


RECORD = "make_bench"
SECTION = "make-bench"


def bench_baseline(topic: str, runs: int = 3) -> list[dict]:
    from resources.paths import resolve_topic_dir
    from resources.runner import Runner, prepare_workspace
    from schemas.topic import load_topic

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
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "dagster.yaml").write_text((ROOT / "dagster_home" / "dagster.yaml").read_text())
        out = Path(home) / "timings.json"
        env = {**os.environ, "DAGSTER_HOME": home}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--topic", topic, "--rounds",
                               str(rounds), "--timings", str(out)], cwd=ROOT, env=env, check=False)
        if not out.exists():
            raise SystemExit(f"researchloop run exited {proc.returncode} without writing its timings")
        data = json.loads(out.read_text())
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
    base, loop, topic = rec["baseline"], rec["loop"], rec["topic"]
    values = {b["value"] for b in base}
    return "\n".join([
        "## `make bench`: the shipped topic's baseline and a whole loop",
        "",
        provenance("bench/run_bench.py", f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: timings of the shipped topic"),
        "",
        f"- baseline run of `{topic}` (sandboxed): median {statistics.median(b['wall_s'] for b in base):.1f} s "
        f"over {len(base)} runs (load average at the start: {', '.join(str(b['load']) for b in base)}); "
        f"{base[0]['metric']} {', '.join(str(v) for v in values)}"
        + (" (the same every run)" if len(values) == 1 else " (DIFFERS between runs)"),
        f"- `researchloop run --topic {topic} --rounds {rec['rounds']}` with `{loop['model']}`, empty LLM cache: "
        f"{loop['wall_s']:.0f} s wall, exit code {loop['exit_code']}"
        + (f", stopped: {loop['stop_reason']}" if loop.get("stop_reason") else ""),
        "",
        stage_table(loop),
    ])


def main() -> None:
    if os.environ.get("FROM_RECORD") == "1":
        rec = read_record(RECORD)
    else:
        topic = os.environ.get("TOPIC", "pointcloud_classification")
        rounds = int(os.environ.get("ROUNDS", "2"))
        rec = {"script": "bench/run_bench.py", "date": today(), "machine": machine(), "topic": topic,
               "rounds": rounds, "baseline": bench_baseline(topic), "loop": bench_loop(topic, rounds)}
        print("record:", write_record(RECORD, rec))
    print(write_section(SECTION, render(rec)))


if __name__ == "__main__":
    main()
