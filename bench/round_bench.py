"""Where a round's time goes, stage by stage, and what a second loop side by side costs.

Two measurements of the real loop (`researchloop run --topic T --rounds 1`: the set-up job, then one
research_round job), each from a cold LLM prompt cache: the local server runs on a private cache
folder made for the measurement (links to the shared model file), so it starts empty and a loop's
shared server is never touched.

1. One loop alone, on a fresh DAGSTER_HOME.
2. Two loops side by side on the same topic, each on its own fresh DAGSTER_HOME, sharing one
   (fresh) server, which decodes RESEARCHLOOP_LLM_SLOTS requests at once.

The driver is bench/effectiveness_bench.py's (`fresh_home`, `run_topic`, `round_timing`,
`run_window`); every LLM call and sandboxed run logs a span (resources/timing_log.py) carrying its
Dagster stage and, for LLM calls, the server's own figures. Per stage (asset) the bench writes: LLM
calls (cached ones apart), prompt and answer tokens, prompt tokens reused from the server's cache,
prompt-processing and decode seconds (the server's timings), re-asked calls (an invalid answer asked
again), experiment runs and seconds, and the stage's wall seconds (the Dagster step's start to end);
per round the orchestration overhead (round wall time covered by neither an LLM call nor an
experiment); and the two loops' wall time over the one loop's. A span that names no stage (made in
a process that does not know it) is put in the step whose time it overlaps most.

    .venv/bin/python -m bench.round_bench [--topic diabetes_regression] [--out FILE] [--work DIR]
    python -m bench round [ARGS]                                 # the same (make bench-round)
    FROM_RECORD=1 .venv/bin/python -m bench.round_bench          # re-render the section only
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import RECORDS, machine, page_path, provenance, repo_path, today, write_section
from bench.effectiveness_bench import IN_SAMPLE, fresh_home, round_timing, run_topic, run_window
from resources.local_llm import linked_cache, stop_server
from resources.settings import settings
from resources.timing_log import EXPERIMENT, LLM, read_spans

SCRIPT = "bench/round_bench.py"
RECORD = "round"
SECTION = "round"
TITLE = "Round: where the time goes per stage, one loop and two side by side"
DEFAULT_TOPIC = "diabetes_regression"
OUTSIDE = "(outside any stage)"
SUMS = ("llm_calls", "llm_cached_calls", "prompt_tokens", "answer_tokens", "cached_tokens", "prompt_s",
        "decode_s", "llm_s", "retried_calls", "experiment_runs", "experiment_s")


# -- the per-stage table (pure: spans and step windows in, rows out) ----------------------------------

def _overlap(span: dict, step: dict) -> float:
    return min(span["start"] + span["seconds"], step["end"]) - max(span["start"], step["start"])


def stage_of(span: dict, steps: list[dict]) -> str:
    """The stage a span belongs to: the one it names, else the step it overlaps most (a span of
    no seconds: the step it falls in), else OUTSIDE."""
    if span.get("asset"):
        return str(span["asset"])
    best, most = OUTSIDE, None
    for st in steps:
        o = _overlap(span, st)
        inside = st["start"] <= span["start"] <= st["end"]
        if (o > 0 or inside) and (most is None or o > most):
            best, most = st["asset"], o
    return best


def stage_table(spans: list[dict], steps: list[dict]) -> list[dict]:
    """One row per stage: the steps' wall seconds and the spans' sums (SUMS), in the order the stages
    started; stages with spans but no step (OUTSIDE included) come last.

    `spans`: timing-log rows (resources/timing_log.py); `steps`: {"asset", "start", "end"} per
    Dagster step (a stage run in several steps sums them)."""
    rows: dict[str, dict] = {}

    def row(asset: str) -> dict:
        return rows.setdefault(asset, {"asset": asset, "steps": 0, "wall_s": 0.0, **dict.fromkeys(SUMS, 0)})

    for st in sorted(steps, key=lambda s: s["start"]):
        r = row(st["asset"])
        r["steps"] += 1
        r["wall_s"] += max(0.0, st["end"] - st["start"])
    for sp in spans:
        r = row(stage_of(sp, steps))
        if sp["kind"] == LLM:
            r["llm_calls"] += 1
            r["llm_cached_calls"] += bool(sp.get("cached"))
            r["llm_s"] += sp["seconds"]
            r["retried_calls"] += bool(sp.get("retried"))
            for k in ("prompt_tokens", "answer_tokens", "cached_tokens", "prompt_s", "decode_s"):
                r[k] += sp.get(k) or 0
        elif sp["kind"] == EXPERIMENT:
            r["experiment_runs"] += 1
            r["experiment_s"] += sp["seconds"]
    out = list(rows.values())
    for r in out:
        for k in ("wall_s", "prompt_s", "decode_s", "llm_s", "experiment_s"):
            r[k] = round(r[k], 2)
    return out


def totals(rows: list[dict]) -> dict:
    """The stage rows summed (wall seconds: the steps', which may overlap)."""
    return {"asset": "all", **{k: round(sum(r[k] for r in rows), 2) for k in ("steps", "wall_s", *SUMS)}}


# -- measuring ---------------------------------------------------------------------------------------

def steps_and_runs(home: Path) -> tuple[list[dict], list[dict]]:
    """Every step of every run in a DAGSTER_HOME ({"asset", "run_id", "start", "end"}) and every run
    ({"run_id", "job", "status", "start", "end"})."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home))
    steps, runs = [], []
    for run in instance.get_runs():
        window = run_window(instance, run.run_id)
        runs.append({"run_id": run.run_id, "job": run.job_name, "status": str(run.status.value),
                     "start": window[0] if window else None, "end": window[1] if window else None})
        for st in instance.get_run_step_stats(run.run_id):
            if st.start_time and st.end_time:
                steps.append({"asset": st.step_key, "run_id": run.run_id, "start": st.start_time,
                              "end": st.end_time})
    return steps, runs


def loop_summary(run: dict, home: Path, log_file: Path) -> dict:
    """One loop's CLI run, its stage table, and each research round's time split (round_timing)."""
    spans = read_spans(log_file)
    steps, runs = steps_and_runs(home)
    rounds = []
    for r in ((run.get("timings") or {}).get("rounds") or []):
        window = next(((x["start"], x["end"]) for x in runs if x["run_id"] == r["run_id"] and x["end"]), None)
        if window is not None:
            t = round_timing(spans, *window)
            rounds.append({"round": r["round"], "run_id": r["run_id"],
                           **{k: v for k, v in t.items() if not k.startswith("_")}})
    return {"run": {k: v for k, v in run.items() if k != "timings"}, "model": (run.get("timings") or {}).get("model"),
            "runs": runs, "stages": stage_table(spans, steps), "rounds": rounds, "spans": len(spans)}


def one_loop(topic: str, work: Path, llm_cache: Path, timeout_s: float) -> tuple[dict, float]:
    """`researchloop run --rounds 1` on a fresh home in `work`, the LLM server on `llm_cache`."""
    work.mkdir(parents=True, exist_ok=True)
    home, log_file = fresh_home(work), work / "timing.jsonl"
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1", "RESEARCHLOOP_TIMING_LOG": str(log_file),
           "RESEARCHLOOP_CACHE": str(llm_cache)}
    t0 = time.monotonic()
    run = run_topic(topic, 1, work, env, 0, timeout_s)
    return loop_summary(run, home, log_file), time.monotonic() - t0


def measure(topic: str, work: Path, timeout_s: float) -> dict:
    model = settings().local_model
    rec: dict = {"script": SCRIPT, "date": today(), "machine": machine(), "topic": topic,
                 "held_out": topic not in IN_SAMPLE, "slots": settings().llm_slots, "model": model,
                 "work": str(work), "complete": False}
    cold = linked_cache(model, work / "llm_one", progress=True)
    print(f"[round] one loop: {topic} (working in {work})", flush=True)
    rec["one"], one_wall = one_loop(topic, work / "one", cold, timeout_s)
    stop_server(cold)
    rec["one_wall_s"] = round(one_wall, 1)
    shared = linked_cache(model, work / "llm_two", progress=False)  # cold again, shared by both loops
    print("[round] two loops side by side", flush=True)
    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(one_loop, topic, work / f"two_{i}", shared, timeout_s) for i in (1, 2)]
        both = [f.result() for f in futures]
    rec["two_wall_s"] = round(time.monotonic() - t0, 1)
    stop_server(shared)
    rec["two"] = [s for s, _ in both]
    rec["two_over_one"] = round(rec["two_wall_s"] / rec["one_wall_s"], 3) if rec["one_wall_s"] else None
    rec["model"] = rec["one"].get("model") or model
    rec["complete"] = all(x["run"].get("exit_code") == 0 for x in (rec["one"], *rec["two"]))
    return rec


# -- rendering ---------------------------------------------------------------------------------------

def _table(rows: list[dict]) -> list[str]:
    lines = ["| stage | wall s | LLM calls (cached) | re-asked | prompt tokens (from cache) | answer tokens | "
             "prompt s | decode s | in LLM s | experiments (s) |", "|---" * 10 + "|"]
    for r in [*rows, totals(rows)]:
        name = f"**{r['asset']}**" if r["asset"] == "all" else r["asset"]
        lines.append(f"| {name} | {r['wall_s']:.0f} | {r['llm_calls']} ({r['llm_cached_calls']}) | "
                     f"{r['retried_calls']} | {r['prompt_tokens']} ({r['cached_tokens']}) | {r['answer_tokens']} | "
                     f"{r['prompt_s']:.0f} | {r['decode_s']:.0f} | {r['llm_s']:.0f} | "
                     f"{r['experiment_runs']} ({r['experiment_s']:.0f}) |")
    return lines


def _rounds(loop: dict, label: str) -> str:
    return "; ".join(f"{label} {r['round']}: wall {r['wall_s']:.0f} s, in LLM {r['llm_s']:.0f} s, in experiments "
                     f"{r['experiment_s']:.0f} s, orchestration overhead {r['overhead_s']:.0f} s "
                     f"({r['overhead_share']:.0%})" for r in loop["rounds"]) or f"{label}: no finished round"


def render(rec: dict) -> str:
    sample = (f"{rec['topic']}: held-out" if rec.get("held_out") else
              f"{rec['topic']}: in-sample ({IN_SAMPLE.get(rec['topic'], '')})")
    out = [
        f"## {TITLE}",
        "",
        provenance(SCRIPT, rec.get("record") or f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   sample),
        "",
        (f"`researchloop run --topic {rec['topic']} --rounds 1` (set-up and one round), model `{rec['model']}`, "
         f"the local server with {rec['slots']} slots, from a cold prompt cache"
         f"{'' if rec.get('complete') else '; INCOMPLETE: a loop did not finish'}. Prompt and decode seconds are "
         "the server's own timings; tokens from cache: prompt tokens the server reused. Stage wall time: the "
         "Dagster step's start to end."),
        "",
        f"One loop alone: {rec['one_wall_s']:.0f} s. {_rounds(rec['one'], 'round')}.",
        "",
        *([f"Measured at commit {rec['commit']}."] if rec.get("commit") else []),
        *([f"Before (record `{b['record']}`, commit {b['commit']}): one loop {b['one_wall_s']:.0f} s, two side by "
           f"side {b['two_wall_s']:.0f} s ({b['two_over_one']:.2f}x)."] if (b := rec.get("before")) else []),
        *([rec["note"]] if rec.get("note") else []),
        *([""] if rec.get("commit") or rec.get("before") or rec.get("note") else []),
        *_table(rec["one"]["stages"]),
        "",
        (f"Two loops side by side: {rec['two_wall_s']:.0f} s, {rec['two_over_one']:.2f}x the one loop's wall time "
         "(2.00x: no gain from running them together). "
         + " ".join(f"{_rounds(loop, f'loop {i}')}." for i, loop in enumerate(rec["two"], 1))),
    ]
    for i, loop in enumerate(rec["two"], 1):
        out += ["", f"Loop {i} of the two:", "", *_table(loop["stages"])]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topic", default=DEFAULT_TOPIC)
    ap.add_argument("--out", default=str(RECORDS / f"{RECORD}.json"), help="the raw record")
    ap.add_argument("--work", default="", help="working folder (default: a new temporary one, kept for inspection)")
    ap.add_argument("--hours", type=float, default=3.0, help="give up on a loop after this long")
    args = ap.parse_args(argv)
    out = Path(args.out)
    default_out = out.resolve() == (RECORDS / f"{RECORD}.json").resolve()
    if os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(out.read_text())
    else:
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_round_"))
        rec = measure(args.topic, work, args.hours * 3600)
        if not default_out:
            rec["record"] = repo_path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    body = render(rec)
    print(body)
    if default_out:
        write_section(SECTION, body, page_path(RECORD))
    return 0 if rec.get("complete") else 1


if __name__ == "__main__":
    sys.exit(main())
