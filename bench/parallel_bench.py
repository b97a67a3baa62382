"""Per-idea fan-out: the `run_results` stage of a round with 4 ideas, 1 worker vs 2 workers.

The 4 ideas are small, valid hyper-parameter edits of the shipped topic's experiment, written
straight into the record store as the round's `filtered_ideas` and `patched_code` (so no LLM
time is in the numbers, only the experiments and Dagster's step overhead). Each setting runs
in a fresh DAGSTER_HOME (no finished experiment is reused):
  1 worker:  in-process steps, one after the other (`researchloop run --parallel 1`);
  2 workers: Dagster's multiprocess executor, one step per idea, at most 2 at once, each
             experiment given cores // 2 threads (`--parallel 2`).
Writes the wall times and their ratio into bench/RESULTS.md (section "parallel"), from the record
bench/records/parallel.json.

  .venv/bin/python -m bench.parallel_bench [--topic pointcloud_classification] [--ideas 4]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, provenance, today, write_record, write_section

ROOT = Path(__file__).resolve().parents[1]

# (name, what it changes, old text, new text): each a real, runnable variant of the reference
EDITS = [
    ("higher_lr", "learning rate 1e-3 -> 2e-3", "lr = 10, 32, 1e-3", "lr = 10, 32, 2e-3"),
    ("bigger_batch", "batch size 32 -> 64", "lr = 10, 32, 1e-3", "lr = 10, 64, 1e-3"),
    ("fewer_epochs", "epochs 10 -> 8", "lr = 10, 32, 1e-3", "lr = 8, 32, 1e-3"),
    ("lower_lr", "learning rate 1e-3 -> 5e-4", "lr = 10, 32, 1e-3", "lr = 10, 32, 5e-4"),
    ("small_batch", "batch size 32 -> 24", "lr = 10, 32, 1e-3", "lr = 10, 24, 1e-3"),
    ("more_epochs", "epochs 10 -> 12", "lr = 10, 32, 1e-3", "lr = 12, 32, 1e-3"),
]


def seed_round(topic: str, round_key: str, n: int) -> None:
    """Write n kept ideas and their patches for (topic, round) into the current DAGSTER_HOME."""
    from assets.patched_code.edit_formats import unified_diff
    from assets.shared.topics import topic_spec
    from resources.store import Store
    from schemas.frames import to_frame
    from schemas.records import FilteredIdea, Patch

    spec = topic_spec(topic)
    code = spec.code_path.read_text()
    ideas, patches = [], []
    for name, what, old, new in EDITS[:n]:
        if old not in code:
            raise SystemExit(f"{spec.code_path} no longer contains {old!r}: update bench/parallel_bench.py")
        idea_id = f"{topic}/{round_key}/{name}"
        ideas.append(FilteredIdea(idea_id=idea_id, topic=topic, round=round_key, name=name, title=what,
                                  experiment=what, summary=what, max_similarity=0.0, independent=True,
                                  novel=True, kept=True))
        patched = code.replace(old, new)
        patches.append(Patch(idea_id=idea_id, edit_format="whole", status="ok", compiles=True, imports_ok=True,
                             code=patched, diff=unified_diff(code, patched, spec.code)))
    store = Store()
    store.write(to_frame(ideas, FilteredIdea), "filtered_ideas", topic, round_key)
    store.write(to_frame(patches, Patch), "patched_code", topic, round_key)


def run_stage(topic: str, parallel: int, n: int) -> dict:
    """In a fresh DAGSTER_HOME (a child process, so the instance is its own): seed, then time run_results."""
    home = Path(tempfile.mkdtemp(prefix=f"rl-parallel{parallel}-"))
    code = f"""
import json, time, dagster as dg
from bench.parallel_bench import seed_round
from assets.shared.partitions import multi_key
from assets.run_results.defs import run_results
from pipelines.cli import materialize_stage
from pipelines.definitions import build_resources
seed_round({topic!r}, "r1", {n})
inst = dg.DagsterInstance.get()
inst.add_dynamic_partitions("topics", [{topic!r}]); inst.add_dynamic_partitions("rounds", ["r1"])
t0 = time.monotonic()
ok, failed, run_id, _ = materialize_stage(run_results, multi_key({topic!r}, "r1"), inst,
                                          build_resources(resolved=True), {parallel})
wall = time.monotonic() - t0
from resources.store import Store
df = Store().read("run_results", {topic!r}, "r1")
print("RESULT", json.dumps({{"ok": ok, "wall_s": round(wall, 1), "status": df["status"].to_list(),
                             "metric": df["metric_value"].to_list()}}))
"""
    env = {**os.environ, "DAGSTER_HOME": str(home), "RESEARCHLOOP_MAX_PARALLEL": str(parallel), "HF_HUB_OFFLINE": "1"}
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"parallel={parallel} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    import json

    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", default="pointcloud_classification")
    ap.add_argument("--ideas", type=int, default=4)
    a = ap.parse_args()
    rows = {}
    for parallel in (1, 2):
        t0 = time.monotonic()
        rows[parallel] = run_stage(a.topic, parallel, a.ideas)
        print(f"parallel={parallel}: {rows[parallel]} ({time.monotonic() - t0:.0f}s with set-up)", flush=True)
    ratio = rows[1]["wall_s"] / rows[2]["wall_s"]
    body = "\n".join([
        "## Per-idea fan-out: 1 vs 2 workers",
        "",
        provenance("bench/parallel_bench.py", "bench/records/parallel.json", f"{today()} on {machine()}",
                   "not a sample: wall times of fixed hyper-parameter edits"),
        "",
        f"`run_results` of one round of `{a.topic}` with {a.ideas} valid hyper-parameter edits (no LLM time), "
        "fresh DAGSTER_HOME each (`.venv/bin/python -m bench.parallel_bench`).",
        "",
        "| workers | how | wall s | statuses | metrics |",
        "|---|---|---|---|---|",
        f"| 1 | in-process steps, 2 threads per experiment | {rows[1]['wall_s']} | {rows[1]['status']} | "
        f"{rows[1]['metric']} |",
        f"| 2 | multiprocess executor, 1 thread per experiment | {rows[2]['wall_s']} | {rows[2]['status']} | "
        f"{rows[2]['metric']} |",
        "",
        f"Wall-time ratio 1 worker / 2 workers: **{ratio:.2f}x**.",
    ])
    write_record("parallel", {"script": "bench/parallel_bench.py", "date": today(), "machine": machine(),
                              "topic": a.topic, "ideas": a.ideas, "workers": rows})
    print(write_section("parallel", body))


if __name__ == "__main__":
    main()
