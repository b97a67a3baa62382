"""The closed loop as a user runs it: `dagster dev` (`make ui`) and nothing else.

A fresh DAGSTER_HOME and a copy of the shipped topic whose round budget is set to --rounds
(default 3). The UI's daemon does all the work: `topic_sensor` registers the topic and starts
its set-up (brief + baseline), `round_sensor` starts round 1 after the baseline and round r+1
when round r's `feedback_summary` lands, until the round budget stops it. The LLM is the local
model (RESEARCHLOOP_LOCAL_MODEL, default the shipped 1.5B) with an empty response cache.

Writes per round: ideas, verdicts, improvement rate, best metric vs baseline, wall time, LLM
tokens, cost per idea (zero for the local model, and what the same tokens would cost at
gpt-4o / gpt-4o-mini prices) into bench/results/loop.md (section "loop"), and which sensor started
every run.

    .venv/bin/python -m bench.loop_bench [--rounds 3] [--topic pointcloud_classification] [--hours 2]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from assets import ROUND_ASSETS
from assets.feedback_summary.feedback import progress_rows
from assets.shared.metadata import round_usage
from assets.shared.partitions import multi_key
from bench.common import machine, provenance, today, write_record, write_section
from resources.llm import price_usd
from resources.store import Store

ROOT = Path(__file__).resolve().parents[1]

SENSOR_TAG = "dagster/sensor_name"
PRICED_AS = ("gpt-4o", "gpt-4o-mini")


def prepare(work: Path, topic: str, rounds: int) -> dict[str, str]:
    """The topic copied with its round budget set, a fresh DAGSTER_HOME; the env for `make ui`."""
    home, exps = work / "home", work / "experiments"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    shutil.copytree(ROOT / "experiments" / topic, exps / topic)
    spec = exps / topic / "topic.yaml"
    text, n = re.subn(r"\brounds:\s*\d+", f"rounds: {rounds}", spec.read_text(), count=1)
    if n != 1:
        raise SystemExit(f"{spec}: no `rounds:` in its budget to set")
    spec.write_text(text)
    return {"DAGSTER_HOME": str(home), "RESEARCHLOOP_EXPERIMENTS": str(exps), "HF_HUB_OFFLINE": "1"}


def runs_summary(instance) -> list[dict]:
    import dagster as dg

    out = []
    for r in reversed(instance.get_runs()):   # oldest first
        st = instance.get_run_stats(r.run_id)
        out.append({"job": r.job_name, "partition": r.tags.get("dagster/partition", ""),
                    "sensor": r.tags.get(SENSOR_TAG, "(none)"), "status": r.status.value,
                    "start": st.start_time, "end": st.end_time,
                    "seconds": (st.end_time - st.start_time) if st.start_time and st.end_time else None,
                    "done": r.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE,
                                         dg.DagsterRunStatus.CANCELED)})
    return out


def wait_for_rounds(topic: str, rounds: int, deadline: float, quiet_s: float, log) -> str:
    """Poll the instance and the record store until the topic has `rounds` rounds of feedback and
    nothing runs, a run fails, the sensors stay quiet for `quiet_s` after the last run, or time is up."""
    from dagster import DagsterInstance

    instance, store = DagsterInstance.get(), Store()
    last_line, last_end = "", time.monotonic()
    while time.monotonic() < deadline:
        runs = runs_summary(instance)
        done = progress_rows(store, topic)
        line = (f"{len(done)}/{rounds} rounds with feedback; runs: "
                + ", ".join(f"{r['job']}[{r['partition']}] {r['status']}" for r in runs[-3:]))
        if line != last_line:
            log(line)
            last_line = line
        if any(r["status"] == "FAILURE" for r in runs):
            return "a run failed"
        busy = any(not r["done"] for r in runs)
        if busy or not runs:
            last_end = time.monotonic()
        elif len(done) >= rounds:
            return "done"
        elif time.monotonic() - last_end > quiet_s:
            return f"no new run for {quiet_s:.0f}s after the last one finished"
        time.sleep(15)
    return "time limit reached"


def round_rows(instance, topic: str, runs: list[dict]) -> list[dict]:
    stages = [a.key.to_user_string() for a in ROUND_ASSETS]
    rows = []
    for r in progress_rows(Store(), topic):
        pk = str(multi_key(topic, r["round"]))
        u = round_usage(instance, pk, stages)
        run = next((x for x in runs if x["job"] == "research_round" and x["partition"] == pk
                    and x["status"] == "SUCCESS"), {})
        n = r["ideas"] or 1
        rows.append({**r, "run_s": run.get("seconds"),
                     "rate": r["improvement"] / n if r["ideas"] else 0.0,
                     "tokens": int(u["prompt_tokens"] + u["completion_tokens"]),
                     "prompt_tokens": int(u["prompt_tokens"]), "completion_tokens": int(u["completion_tokens"]),
                     "llm_calls": int(u["llm_calls"]), "cost_usd": u["cost_usd"],
                     **{f"as_{m}": price_usd(m, u["prompt_tokens"], u["completion_tokens"]) / n for m in PRICED_AS}})
    return rows


def report(topic: str, rounds: int, model: str, rows: list[dict], runs: list[dict], outcome: str,
           wall_s: float) -> str:
    fmt = lambda v, f="{:.4f}": "" if v is None else f.format(v)  # noqa: E731
    table = ["| round | ideas | improvement | maintenance | decline | failed | improvement rate | best | baseline "
             "| round wall s | LLM calls | tokens (prompt + completion) | tokens per idea | cost per idea (local) | "
             + " | ".join(f"per idea at {m} prices" for m in PRICED_AS) + " |",
             "|---" * (15 + len(PRICED_AS)) + "|"]
    for r in rows:
        table.append(f"| {r['round']} | {r['ideas']} | {r['improvement']} | {r['maintenance']} | {r['decline']} | "
                     f"{r['failed']} | {r['improvement']}/{r['ideas']} = {r['rate']:.2f} | {fmt(r['best'])} | "
                     f"{fmt(r['baseline'])} | {fmt(r['run_s'], '{:.0f}')} | {r['llm_calls']} | {r['tokens']} "
                     f"({r['prompt_tokens']} + {r['completion_tokens']}) | {r['tokens'] // max(r['ideas'], 1)} | "
                     f"${r['cost_usd'] / max(r['ideas'], 1):.4f} | "
                     + " | ".join(f"${r[f'as_{m}']:.4f}" for m in PRICED_AS) + " |")
    run_table = ["| run | partition | started by | status | wall s |", "|---|---|---|---|---|"]
    for x in runs:
        run_table.append(f"| {x['job']} | {x['partition'].replace('|', chr(92) + '|')} | {x['sensor']} | "
                         f"{x['status']} | {fmt(x['seconds'], '{:.0f}')} |")
    by_sensor = all(x["sensor"] != "(none)" for x in runs)
    return "\n".join([
        "## The loop through the sensors in `dagster dev`",
        "",
        provenance("bench/loop_bench.py", "bench/records/loop.json", f"{today()} on {machine()}",
                   "not a sample: one run of the loop on the shipped topic"),
        "",
        f"`make ui` (dagster dev: webserver + daemon) on a fresh DAGSTER_HOME with a copy "
        f"of `{topic}` whose round budget is {rounds}; nothing else was started by hand. Model `{model}` "
        f"(local, empty response cache), embeddings all-MiniLM-L6-v2. Outcome: {outcome}; "
        f"{wall_s / 60:.0f} min from starting the UI to the last round's feedback. "
        f"Every run {'was' if by_sensor else 'was NOT'} started by a sensor.",
        "",
        *table,
        "",
        "DOLPHIN reports improvement rates 2/7 -> 3/6 -> 4/8 over three loops at about $0.18-0.22 per idea "
        "(GPT-4o-class ideas, a 236B code model). The local model costs nothing per idea; the priced columns "
        "are the same token counts at API list prices (resources/llm.py PRICES).",
        "",
        "Runs, in the order they were launched:",
        "",
        *run_table,
    ])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topic", default="pointcloud_classification")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hours", type=float, default=2.0, help="give up after this long")
    ap.add_argument("--port", default="3311")
    ap.add_argument("--work", help="working folder (default: a new temporary one, kept for inspection)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_loop_"))
    env = prepare(work, args.topic, args.rounds)
    os.environ.update(env)
    model = os.environ.setdefault("RESEARCHLOOP_LOCAL_MODEL", "qwen2.5-coder-1.5b")
    log_path = work / "ui.log"
    print(f"working in {work}; dagster dev log: {log_path}", flush=True)
    t0 = time.monotonic()
    ui = subprocess.Popen([sys.executable, "-m", "pipelines.ui"], cwd=ROOT, stdout=log_path.open("w"),
                          stderr=subprocess.STDOUT, env={**os.environ, "RESEARCHLOOP_UI_PORT": args.port},
                          start_new_session=True)
    try:
        outcome = wait_for_rounds(args.topic, args.rounds, t0 + args.hours * 3600, quiet_s=600,
                                  log=lambda s: print(f"[{(time.monotonic() - t0) / 60:5.1f} min] {s}", flush=True))
    finally:
        wall = time.monotonic() - t0
        os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
    from dagster import DagsterInstance

    instance = DagsterInstance.get()
    runs = runs_summary(instance)
    rows = round_rows(instance, args.topic, runs)
    body = report(args.topic, args.rounds, model, rows, runs, outcome, wall)
    print(body)
    if not args.no_write:
        write_record("loop", {"script": "bench/loop_bench.py", "date": today(), "machine": machine(),
                              "topic": args.topic, "rounds": args.rounds, "model": model, "outcome": outcome,
                              "wall_s": round(wall, 1), "round_rows": rows, "runs": runs})
        write_section("loop", body, "loop")
    return 0 if outcome == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
