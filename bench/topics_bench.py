"""The shipped topics' baselines on this machine, written into bench/results/topics.md (section "topics").

For each topic: the baseline run sandboxed through the Runner (as a round runs it) with seed 0
twice (wall time, and whether the metric repeats exactly), then seeds 1..N-1 (the seed spread).
The load average is recorded with each run: on a shared machine it explains slow runs.

    .venv/bin/python -m bench.topics_bench [--topics a,b] [--seeds 3]   # record: bench/records/topics.json
    FROM_RECORD=1 .venv/bin/python -m bench.topics_bench                 # re-render the section only
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from bench.common import machine, provenance, read_record, today, write_record, write_section
from resources.runner import Runner
from resources.sandbox import prepare_workspace
from schemas.topic import load_topic

ROOT = Path(__file__).resolve().parents[1]

TOPICS = ("image_classification", "sentiment_classification", "pointcloud_classification")
RECORD = "topics"


def run_baseline(topic: str, seed: int, workdir: Path) -> dict:
    spec = load_topic(ROOT / "experiments" / topic)
    ws = prepare_workspace(spec.path, workdir)
    cmd = spec.run_command("out", seed=seed)
    if "{seed}" not in spec.run:
        cmd += ["--seed", str(seed)]
    load = os.getloadavg()[0]
    r = Runner().run(cmd, ws, timeout_s=spec.budget.run_timeout_s, memory_mb=spec.budget.memory_mb)
    f = ws / "out" / "final_info.json"
    info = json.loads(f.read_text()) if r.ok and f.exists() else {}
    row = {"topic": topic, "seed": seed, "wall_s": r.duration_s, "ok": r.ok, "load": round(load, 1),
           "metric": spec.metric.name, "value": info.get(spec.metric.name),
           "train_time_s": info.get("train_time_s"), "peak_mb": r.peak_memory_mb}
    print(json.dumps(row), flush=True)
    return row


def bench_topic(topic: str, seeds: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        plan = [0, 0] + list(range(1, seeds))
        return [run_baseline(topic, s, Path(d) / f"ws{i}") for i, s in enumerate(plan)]


def summarise(rows: list[dict]) -> str:
    lines = [("| topic | metric | seed 0 (run 1 / run 2) | seeds 0..n-1: mean ± sd | wall s (run 1 / run 2) | "
              "train s | peak MB | load avg at start |"), "|---|---|---|---|---|---|---|---|"]
    for topic in dict.fromkeys(r["topic"] for r in rows):
        rs = [r for r in rows if r["topic"] == topic]
        a, b = rs[0], rs[1]
        per_seed = [a["value"]] + [r["value"] for r in rs[2:]]
        ok = all(v is not None for v in per_seed)
        spread = (f"{statistics.mean(per_seed):.4f} ± {statistics.stdev(per_seed):.4f} (n={len(per_seed)})"
                  if ok and len(per_seed) > 1 else "-")
        same = "identical" if a["value"] == b["value"] else "DIFFER"

        def fmt(v):
            return "failed" if v is None else f"{v:.4f}"

        train = ", ".join(f"{r['train_time_s']:.1f}" for r in rs if r["train_time_s"] is not None)
        loads = ", ".join(str(r["load"]) for r in rs)
        lines.append(f"| {topic} | {a['metric']} | {fmt(a['value'])} / {fmt(b['value'])} ({same}) | {spread} | "
                     f"{a['wall_s']:.1f} / {b['wall_s']:.1f} | {train} | {max(r['peak_mb'] for r in rs):.0f} | "
                     f"{loads} |")
    return "\n".join(lines)


def render(rec: dict) -> str:
    seeds = rec["seeds"]
    return "\n".join([
        "## Topic baselines",
        "",
        provenance("bench/topics_bench.py", f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: the unmodified reference experiments, measured"),
        "",
        (f"Each baseline run sandboxed through the Runner (bubblewrap), as a round runs it (2 threads); seed 0 "
         f"twice, then seeds 1..{seeds - 1}. The machine was shared with other jobs: the 1-minute load average at "
         "the start of each run is listed (2 = both cores busy), and the wall times depend on it."),
        "",
        summarise(rec["rows"]),
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", default=",".join(TOPICS))
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    if os.environ.get("FROM_RECORD") == "1":
        rec = read_record(RECORD)
    else:
        rows = [r for t in args.topics.split(",") for r in bench_topic(t, args.seeds)]
        rec = {"script": "bench/topics_bench.py", "date": today(), "machine": machine(), "seeds": args.seeds,
               "niceness": os.nice(0), "rows": rows}
        print("record:", write_record(RECORD, rec))
    print(write_section("topics", render(rec), "topics"))


if __name__ == "__main__":
    main()
