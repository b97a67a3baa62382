"""Does the loop find improvements? The real loop on every shipped topic
for a few rounds, then what its records say, round by round.

For each topic (default: every folder of experiments/ with a topic.yaml) `researchloop run
--topic T --rounds N` (the CLI's driver: the set-up job, then one research_round job per round,
the sensors' jobs and stop rules) runs in a subprocess on a fresh DAGSTER_HOME under the working
folder, with the LLM the environment names (default: the local model, RESEARCHLOOP_LOCAL_MODEL)
and RESEARCHLOOP_TIMING_LOG set, so every LLM call and every sandboxed run logs its time
(resources/timing_log.py). Then the records are read back through the RecordStore and the
Dagster instance, and per topic and round the bench writes:

- ideas proposed (the ideas asset's and the refills', assets/filtered_ideas) and kept, against
  the round's budget (`budget.ideas_per_round`): did the round test its full budget;
- ideas implemented (patch status ok; a patch that changes nothing, dead code included, is a
  no-op) and the share of no-op patches; ideas that ran (a metric);
- verified improvements: verdicts `improvement` by the rule of assets/shared/verdicts.py
  (against the round's reference code) and how many are improvements against the original baseline;
- the round's best idea against the baseline with the 95% interval of the difference, and the
  best-so-far code after the round (assets/best_code) with its interval over seeds;
- LLM tokens per idea (the round's tokens over its kept ideas), wall time per idea, and the
  round's wall time split into time inside LLM calls, inside experiments and the rest
  (orchestration overhead: wall time not covered by either).

The raw record (default bench/records/effectiveness.json) holds every round's ideas, plans,
patch drafts (diffs), runs (attempts), verdicts and best code (without the code) with their ids,
the table rows, date, machine, model and whether each topic is held-out. It is written after
each topic (`complete: false` until all are done). The Markdown section "effectiveness" of
bench/results/effectiveness.md is rendered from the record (only when the record is the default one).

    .venv/bin/python -m bench.effectiveness_bench [--topics a,b] [--rounds 3] [--out FILE] [--work DIR]
    python -m bench effectiveness [ARGS]                      # the same (make bench-effectiveness)
    FROM_RECORD=1 .venv/bin/python -m bench.effectiveness_bench   # re-render the section only
    .venv/bin/python -m bench.effectiveness_bench --merge a.json,b.json   # topics run side by side, one record
    .venv/bin/python -m bench.effectiveness_bench --out R.json --resummarise   # R's run read again with this code
    .venv/bin/python -m bench.effectiveness_bench --dev-tasks   # the development tasks of bench/tasks/
                                                                  # (record: bench/records/effectiveness_dev_tasks.json)

One module for one benchmark (driving the loop, reading its records back, rendering); the round
bench (bench/round_bench.py) imports its driver instead of repeating it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from assets import ROUND_ASSETS
from assets.filtered_ideas.filtering import REPEATS
from assets.shared.metadata import _latest_metadata, round_usage
from assets.shared.partitions import multi_key
from assets.shared.topics import topic_of
from assets.shared.verdicts import COMPUTE_FLAG
from bench.common import RECORDS, ROOT, machine, page_path, provenance, repo_path, today, write_section
from resources.paths import experiments_root, resolve_topic_dir
from resources.store import RecordStore
from resources.timing_log import EXPERIMENT, LLM, covered_seconds, read_spans
from schemas.frames import from_frame
from schemas.records import BestCode, ExperimentPlan, Feedback, FilteredIdea, Patch, RunResult
from schemas.topic import load_topic

SCRIPT = "bench/effectiveness_bench.py"
RECORD = "effectiveness"
DEV_RECORD = "effectiveness_dev_tasks"  # the development tasks' record: never the shipped topics' page section
SECTION = "effectiveness"
TITLE = "Effectiveness: does the loop find improvements"
NO_OP_GOAL = 0.20        # the goal: no-op patches <= 20%
OVERHEAD_GOAL = 0.05     # the goal: orchestration overhead <= 5% of a round
DIFF_CHARS = 4000        # a diff kept in the record is cut to this

# Whether a topic is held-out for this benchmark: nothing the loop does was tuned on it. Decided
# from the project's history (git log), conservatively; a topic not listed is held-out.
IN_SAMPLE = {
    "pointcloud_classification": "the development topic: prompts, defaults and the loop and no-op benches were "
                                 "tuned on it",
    "image_classification": "the dead-code check was built on its patch shapes and its screen run was tuned",
    "diabetes_regression": "the issue's own trial of the loop on a tabular regression task shaped the changes "
                           "measured here",
    # the development tasks (bench/tasks/): built so that prompts and defaults can be worked out on them
    "wine_alcohol_regression": "a development task (bench/tasks/)",
    "ipd_strategy": "a development task (bench/tasks/)",
    "digits_torch": "a development task (bench/tasks/)",
    "mackey_glass_forecast": "a development task (bench/tasks/)",
}
DEV_TASKS = ROOT / "bench" / "tasks"  # development task topics of kinds the shipped topics lack


# -- running ---------------------------------------------------------------------------------------

def shipped_topics(root: Path | None = None) -> list[str]:
    """The topic folders (with a topic.yaml) of the experiments root, sorted."""
    root = root or experiments_root()
    return sorted(p.parent.name for p in root.glob("*/topic.yaml"))


def dev_task_topics(root: Path = DEV_TASKS) -> list[str]:
    """The development tasks: every folder of bench/tasks/ with a topic.yaml, as paths (the CLI
    takes a topic folder as well as a name under experiments/), sorted."""
    return sorted(str(p.parent) for p in root.glob("*/topic.yaml"))


def chosen_topics(names: str, dev_tasks: bool, root: Path = DEV_TASKS) -> list[str]:
    """The topics a run measures: the comma-separated `names`, or every shipped topic (every
    development task with `dev_tasks`). With `dev_tasks` a bare name of a development task stands
    for its folder, so `--dev-tasks --topics ipd_strategy` means bench/tasks/ipd_strategy."""
    chosen = [t for t in names.split(",") if t]
    if not chosen:
        return dev_task_topics(root) if dev_tasks else shipped_topics()
    if dev_tasks:
        chosen = [str(root / t) if "/" not in t and (root / t / "topic.yaml").is_file() else t for t in chosen]
    return chosen


def fresh_home(work: Path) -> Path:
    """A new DAGSTER_HOME under `work` with the repository's instance config."""
    home = work / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def run_topic(topic: str, rounds: int, work: Path, env: dict[str, str], parallel: int, timeout_s: float) -> dict:
    """`researchloop run` for one topic in a subprocess; its exit status, output tail and timings."""
    name = topic_name(topic)  # a topic folder's files are named after its topic.yaml's name
    timings = work / f"{name}.timings.json"
    cmd = [sys.executable, "-m", "pipelines.cli", "run", "--topic", topic, "--rounds", str(rounds),
           "--timings", str(timings)] + (["--parallel", str(parallel)] if parallel else [])
    t0 = time.monotonic()
    log = work / f"{name}.cli.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:  # the CLI and the step processes it started
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = None
    return {"topic": topic, "exit_code": rc, "timed_out": rc is None, "wall_s": round(time.monotonic() - t0, 1),
            "cli_log": str(log), "output_tail": log.read_text()[-3000:],
            "timings": json.loads(timings.read_text()) if timings.exists() else None}


# -- reading the records ---------------------------------------------------------------------------

def _cut(text: str | None, n: int = DIFF_CHARS) -> str:
    text = text or ""
    return text if len(text) <= n else text[:n] + f"\n... ({len(text) - n} more characters)"


def _r(v, nd: int = 6):
    return None if v is None else round(float(v), nd)


def _better(a: float, b: float, goal: str) -> bool:
    return a > b if goal == "maximize" else a < b


def read_round(store, topic: str, rk: str) -> dict:
    """A round's stored records (lists of pydantic records; empty where a stage stored nothing)."""
    def rows(asset, model):
        df = store.read(asset, topic, rk)
        return [] if df is None else from_frame(df, model)

    return {"ideas": rows("filtered_ideas", FilteredIdea), "plans": rows("experiment_plans", ExperimentPlan),
            "patches": rows("patched_code", Patch), "runs": rows("run_results", RunResult),
            "feedback": rows("feedback_summary", Feedback), "best": rows("best_code", BestCode)}


def round_timing(spans: list[dict], lo: float, hi: float) -> dict:
    """The round's wall time [lo, hi] split by the timing log: seconds covered by LLM calls, by
    sandboxed runs, by either (overlaps count once), and the rest (the orchestration overhead)."""
    inside = [s for s in spans if s["start"] < hi and s["start"] + s["seconds"] > lo]
    llm = [s for s in inside if s["kind"] == LLM]
    exp = [s for s in inside if s["kind"] == EXPERIMENT]
    wall = hi - lo
    busy = covered_seconds(llm + exp, lo, hi)
    return {"wall_s": round(wall, 1), "llm_s": round(covered_seconds(llm, lo, hi), 1),
            "experiment_s": round(covered_seconds(exp, lo, hi), 1), "llm_calls_logged": len(llm),
            "llm_calls_cached": sum(bool(s.get("cached")) for s in llm), "experiment_runs_logged": len(exp),
            "overhead_s": round(wall - busy, 1), "overhead_share": round((wall - busy) / wall, 4) if wall > 0 else None,
            "_spans": inside}


def idea_seconds(spans: list[dict], topic: str, rk: str, idea_id: str, name: str) -> dict:
    """An idea's own time: its LLM calls (those made for it) and its sandboxed runs (its workspace)."""
    mark = f"/workspaces/{topic}/{rk}/{name}/"
    return {"llm_s": round(sum(s["seconds"] for s in spans if s["kind"] == LLM and s.get("item") == idea_id), 1),
            "experiment_s": round(sum(s["seconds"] for s in spans if s["kind"] == EXPERIMENT
                                      and (str(s.get("workdir", "")) + "/").find(mark) >= 0), 1)}


def summarise_round(recs: dict, *, topic: str, rk: str, goal: str, budget: int, usage: dict | None = None,
                    timing: dict | None = None, proposals: int | None = None) -> tuple[dict, dict]:
    """(the table row, the raw summary with ids) of one round from its records (read_round), its
    LLM usage (assets/shared/metadata.round_usage), its timing (round_timing) and the number of
    idea proposals (the filtered_ideas metadata; default: counted from the records)."""
    ideas, patches, runs, fb = recs["ideas"], recs["patches"], recs["runs"], recs["feedback"]
    kept = [i for i in ideas if i.kept]
    source_of = {i.idea_id: i.source for i in ideas}
    n_props = proposals if proposals is not None else 1 + max((i.proposal for i in ideas), default=0)
    no_op = [p for p in patches if p.status == "no_op"]
    drafts = [d for p in patches for d in p.drafts]
    with_metric = [f for f in fb if f.metric_value is not None]
    best_idea = None
    for f in with_metric:
        if best_idea is None or _better(f.metric_value, best_idea.metric_value, goal):
            best_idea = f
    best = recs["best"][0] if recs["best"] else None
    tokens = int(usage["prompt_tokens"] + usage["completion_tokens"]) if usage else sum(
        f.tokens + f.shared_tokens for f in fb)
    timing = {k: v for k, v in (timing or {}).items() if not k.startswith("_")}
    n_kept = len(kept)
    # the ideas the LLM proposed (every source but tuning): how many of the kept ones reached a metric,
    # how many apply a method card, and how many verified improvements they made
    llm_kept = [i for i in kept if i.source != "tuning"]
    ran_ids = {r.idea_id for r in runs if r.status == "success"}
    llm_wins = [f for f in fb if f.verdict == "improvement" and source_of.get(f.idea_id, "tuning") != "tuning"]
    row = {
        "topic": topic, "round": rk, "budget": budget,
        "proposed": len(ideas), "proposed_refill": sum(i.proposal > 0 for i in ideas), "proposals": n_props,
        "kept": n_kept, "kept_refill": sum(i.kept and i.proposal > 0 for i in ideas),
        # kept ideas that name a paper of the round's literature as their inspiration
        "kept_citing_papers": sum(bool(i.inspired_by_papers) for i in kept),
        "dropped_as_repeats": sum((i.drop_reason or "").startswith(f"{REPEATS} ") for i in ideas),
        "patches": len(patches), "implemented": sum(p.status == "ok" for p in patches), "no_op": len(no_op),
        "no_op_dead_code": sum("never runs" in (p.reason or "") for p in no_op),
        "no_op_share": round(len(no_op) / len(patches), 4) if patches else None,
        "drafts": len(drafts), "drafts_no_op": sum(d.status == "no_op" for d in drafts),
        "ran": sum(r.status == "success" for r in runs), "run_failed": sum(r.status == "failed" for r in runs),
        "verdicts": {v: sum(f.verdict == v for f in fb) for v in ("improvement", "maintenance", "decline", "failed")},
        "verified_improvements": sum(f.verdict == "improvement" for f in fb),
        "improvements_vs_baseline": sum(f.baseline_verdict == "improvement" for f in fb),
        # which idea source the verified improvements came from (literature, scipip, brainstorm, tuning)
        "improvements_by_source": dict(Counter(source_of.get(f.idea_id, "?") for f in fb
                                               if f.verdict == "improvement")),
        "kept_by_source": dict(Counter(i.source for i in kept)),
        "kept_llm": len(llm_kept), "kept_llm_ran": sum(i.idea_id in ran_ids for i in llm_kept),
        "kept_llm_card": sum(bool(i.method_card) for i in llm_kept),
        "improvements_llm": len(llm_wins),
        # of those, the ones whose run did not take COMPUTE_FLAG times the reference's (more compute in disguise)
        "improvements_llm_same_compute": sum(f.compute_ratio is None or f.compute_ratio < COMPUTE_FLAG
                                             for f in llm_wins),
        "reference": fb[0].reference if fb else None,
        "full_budget": n_kept >= budget and len(fb) >= budget,
        "baseline": _r(fb[0].baseline_value) if fb else None,
        "best_idea": None if best_idea is None else best_idea.idea_id,
        "best_idea_value": None if best_idea is None else _r(best_idea.metric_value),
        "best_idea_delta": None if best_idea is None else _r(best_idea.baseline_delta),
        "best_idea_ci": None if best_idea is None or best_idea.baseline_ci_low is None else
        [_r(best_idea.baseline_ci_low), _r(best_idea.baseline_ci_high)],
        "best_idea_verdict_vs_baseline": None if best_idea is None else best_idea.baseline_verdict,
        "best_so_far": None if best is None else best.source,
        "best_so_far_value": None if best is None else _r(best.metric_value),
        "best_so_far_ci": None if best is None or best.ci_low is None else [_r(best.ci_low), _r(best.ci_high)],
        "best_so_far_improved": None if best is None else best.improved,
        "tokens": tokens, "tokens_per_idea": round(tokens / n_kept) if n_kept else None,
        "llm_calls": int(usage["llm_calls"]) if usage else sum(f.llm_calls for f in fb),
        **timing,
        "wall_s_per_idea": round(timing["wall_s"] / n_kept, 1) if timing.get("wall_s") and n_kept else None,
    }
    raw = {
        "topic": topic, "round": rk,
        "ideas": [{"idea_id": i.idea_id, "title": i.title, "experiment": i.experiment, "source": i.source,
                   "method_card": i.method_card, "code_place": i.code_place,
                   "proposal": i.proposal, "kept": i.kept, "drop_reason": i.drop_reason,
                   "max_similarity": _r(i.max_similarity, 4), "novel": i.novel,
                   "arena_rating": i.arena_rating, "arena_rank": i.arena_rank} for i in ideas],
        "plans": [{"idea_id": p.idea_id, "changes": p.changes, "location": p.location, "functions": p.functions,
                   "error": p.error} for p in recs["plans"]],
        "patches": [{"idea_id": p.idea_id, "status": p.status, "reason": p.reason, "edit_format": p.edit_format,
                     "diff": _cut(p.diff),
                     "drafts": [{"index": d.index, "status": d.status, "reason": d.reason, "how": d.how,
                                 "edit_format": d.edit_format, "imports_ok": d.imports_ok,
                                 "duplicate_of": d.duplicate_of, "diff": _cut(d.diff)} for d in p.drafts]}
                    for p in patches],
        "runs": [{"idea_id": r.idea_id, "status": r.status, "reason": r.reason, "draft": r.draft, "rule": r.rule,
                  "metric_value": _r(r.metric_value), "seed_values": [_r(v) for v in r.seed_values],
                  "n_attempts": r.n_attempts,
                  "drafts": [d.model_dump() for d in r.drafts],
                  "attempts": [{"attempt": a.attempt, "duration_s": a.duration_s, "exit_code": a.exit_code,
                                "error": a.error, "fix_status": a.fix_status, "fix_source": a.fix_source,
                                "outcome": a.outcome, "parent": a.parent} for a in r.attempts]} for r in runs],
        "verdicts": [{"idea_id": f.idea_id, "verdict": f.verdict, "reason": f.reason, "reference": f.reference,
                      "metric_value": _r(f.metric_value), "delta": _r(f.delta), "ci": [_r(f.ci_low), _r(f.ci_high)],
                      "p_value": _r(f.p_value), "n_seeds": f.n_seeds, "test": f.test,
                      "baseline_value": _r(f.baseline_value), "baseline_verdict": f.baseline_verdict,
                      "baseline_delta": _r(f.baseline_delta), "baseline_ci": [_r(f.baseline_ci_low),
                                                                               _r(f.baseline_ci_high)],
                      "best_source": f.best_source, "best_verdict": f.best_verdict,
                      "run_s": f.run_s, "reference_run_s": f.reference_run_s, "compute_ratio": f.compute_ratio,
                      "tokens": f.tokens, "shared_tokens": f.shared_tokens} for f in fb],
        "best_code": None if best is None else best.model_dump(exclude={"code"}),
    }
    return row, raw


def topic_goals(rows: list[dict], rounds: int) -> dict:
    """The issue's goals over a topic's rounds."""
    patches = sum(r["patches"] for r in rows)
    no_op = sum(r["no_op"] for r in rows)
    shares = [r["overhead_share"] for r in rows if r.get("overhead_share") is not None]
    llm_kept = sum(r.get("kept_llm", 0) for r in rows)
    return {"rounds_done": len(rows), "rounds_asked": rounds,
            "verified_improvements": sum(r["verified_improvements"] for r in rows),
            "improvements_llm": sum(r.get("improvements_llm", 0) for r in rows),
            "improvements_llm_same_compute": sum(r.get("improvements_llm_same_compute", 0) for r in rows),
            "kept_llm": llm_kept,
            "llm_ran_share": round(sum(r.get("kept_llm_ran", 0) for r in rows) / llm_kept, 4) if llm_kept else None,
            "llm_card_share": round(sum(r.get("kept_llm_card", 0) for r in rows) / llm_kept, 4) if llm_kept else None,
            "improvement_reached": any(r["verified_improvements"] for r in rows),
            "no_op_share": round(no_op / patches, 4) if patches else None,
            "no_op_goal_met": patches > 0 and no_op / patches <= NO_OP_GOAL,
            "full_budget_every_round": len(rows) == rounds and all(r["full_budget"] for r in rows),
            "max_overhead_share": max(shares) if shares else None,
            "overhead_goal_met": bool(shares) and max(shares) <= OVERHEAD_GOAL}


def summarise_topic(topic: str, rounds: int, store, instance=None, run: dict | None = None,
                    spans: list[dict] | None = None) -> dict:
    """Every stored round of a topic summarised (rows + raw), with the goals and the CLI run."""
    brief = store.read("topic_brief", topic)
    spec = topic_of(brief).spec if brief is not None else None
    goal = spec.metric.goal if spec else "maximize"
    budget = spec.budget.ideas_per_round if spec else 0
    stages = [a.key.to_user_string() for a in ROUND_ASSETS]
    run_ids = {r["round"]: r["run_id"] for r in ((run or {}).get("timings") or {}).get("rounds", [])}
    rows, raws = [], []
    for rk in store.rounds("feedback_summary", topic):
        pk = str(multi_key(topic, rk))
        usage = timing = proposals = None
        if instance is not None:
            usage = round_usage(instance, pk, stages)
            proposals = filter_proposals(instance, pk)
            window = run_window(instance, run_ids[rk]) if rk in run_ids else None
            if window is not None and spans is not None:
                timing = round_timing(spans, *window)
        recs = read_round(store, topic, rk)
        row, raw = summarise_round(recs, topic=topic, rk=rk, goal=goal, budget=budget, usage=usage, timing=timing,
                                   proposals=proposals)
        if timing is not None:
            names = {i.idea_id: i.name for i in recs["ideas"]}
            raw["idea_seconds"] = {f.idea_id: idea_seconds(timing["_spans"], topic, rk, f.idea_id, names[f.idea_id])
                                   for f in recs["feedback"] if f.idea_id in names}
        rows.append(row)
        raws.append(raw)
    return {"topic": topic, "held_out": topic not in IN_SAMPLE, "in_sample_because": IN_SAMPLE.get(topic, ""),
            "metric": spec.metric.name if spec else None, "goal": goal, "budget": budget,
            "reference_mode": spec.reference if spec else None,
            "run": {k: v for k, v in (run or {}).items() if k != "timings"},
            "stop_reason": ((run or {}).get("timings") or {}).get("stop_reason"),
            "rows": rows, "rounds": raws, "goals": topic_goals(rows, rounds)}


def run_window(instance, run_id: str) -> tuple[float, float] | None:
    """A finished run's time span in epoch seconds: from its creation (or start, if earlier) to its
    end; None for a run not found or not finished."""
    rec = instance.get_run_record_by_id(run_id)
    if rec is None or not rec.end_time:
        return None
    created = rec.create_timestamp
    created = created if created.tzinfo else created.replace(tzinfo=dt.UTC)  # stored as UTC
    return min(created.timestamp(), rec.start_time or rec.end_time), rec.end_time


def filter_proposals(instance, partition_key: str) -> int | None:
    """How many idea proposals filtered_ideas made (its metadata `proposals`: 1 + refills)."""
    for meta in _latest_metadata(instance, partition_key, ["filtered_ideas"]):
        v = meta.get("proposals")
        return int(v.value) if v is not None else None
    return None


# -- rendering -------------------------------------------------------------------------------------

def _f(v, fmt: str = "{:.4f}") -> str:
    return "" if v is None else fmt.format(v)


def _ci(ci) -> str:
    return "" if not ci or ci[0] is None else f" [{ci[0]:+.4f}, {ci[1]:+.4f}]"


def render(rec: dict) -> str:
    """The section "effectiveness" of bench/results/effectiveness.md from the record."""
    sample = "; ".join(f"{t['topic']}: {'held-out' if t['held_out'] else 'in-sample (' + t['in_sample_because'] + ')'}"
                       for t in rec["topics"])
    table = ["| topic | round | proposed (refill) | kept / budget | implemented | no-op | ran | verified improvements "
             "(vs baseline) | best idea vs baseline [95% CI] | best so far [95% CI] | tokens per idea | "
             "wall s per idea | round wall s | in LLM s | in experiments s | overhead s (share) |",
             "|---" * 16 + "|"]
    for t in rec["topics"]:
        for r in t["rows"]:
            best = ("" if r["best_idea"] is None else
                    f"{_f(r['best_idea_value'])} vs {_f(r['baseline'])}: {_f(r['best_idea_delta'], '{:+.4f}')}"
                    f"{_ci(r['best_idea_ci'])}")
            so_far = ("" if r["best_so_far"] is None else
                      f"{_f(r['best_so_far_value'])}{_ci_abs(r['best_so_far_ci'])} ({r['best_so_far'].split('/')[-1]})")
            over = "" if r.get("overhead_s") is None else f"{r['overhead_s']:.0f} ({r['overhead_share']:.0%})"
            table.append(
                f"| {t['topic']} | {r['round']} | {r['proposed']} ({r['proposed_refill']}) | {r['kept']} / "
                f"{r['budget']}{'' if r['full_budget'] else ' (short)'} | {r['implemented']} | {r['no_op']} | "
                f"{r['ran']} | {r['verified_improvements']} ({r['improvements_vs_baseline']}) | {best} | {so_far} | "
                f"{_f(r['tokens_per_idea'], '{:d}')} | {_f(r.get('wall_s_per_idea'), '{:.0f}')} | "
                f"{_f(r.get('wall_s'), '{:.0f}')} | {_f(r.get('llm_s'), '{:.0f}')} | "
                f"{_f(r.get('experiment_s'), '{:.0f}')} | {over} |")
    goals = ["| topic | rounds | verified improvements (by idea source) | >= 1 within the rounds | "
             "kept LLM ideas: run to a metric (goal >= 60%) | kept LLM ideas applying a method card | "
             "no-op share (goal <= 20%) | every round tested its budget | max overhead share (goal <= 5%) | "
             "CLI exit |", "|---" * 10 + "|"]
    for t in rec["topics"]:
        g = t["goals"]
        by_source = Counter()
        for r in t["rows"]:
            by_source.update(r.get("improvements_by_source") or {})
        sources = f" ({', '.join(f'{k}: {v}' for k, v in sorted(by_source.items()))})" if by_source else ""
        if g.get("improvements_llm"):  # LLM wins whose run took no more than COMPUTE_FLAG x the reference's
            sources += f"; LLM at comparable compute: {g.get('improvements_llm_same_compute', '?')}"
        goals.append(f"| {t['topic']} | {g['rounds_done']}/{g['rounds_asked']} | "
                     f"{g['verified_improvements']}{sources} | "
                     f"{'yes' if g['improvement_reached'] else 'no'} | {_llm_share(g, 'llm_ran_share')} | "
                     f"{_llm_share(g, 'llm_card_share')} | {_f(g['no_op_share'], '{:.0%}')} | "
                     f"{'yes' if g['full_budget_every_round'] else 'no'} | {_f(g['max_overhead_share'], '{:.0%}')} | "
                     f"{t['run'].get('exit_code')} |")
    return "\n".join([
        f"## {rec.get('title') or TITLE}",
        "",
        provenance(SCRIPT, rec.get("record") or f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   sample),
        "",
        (f"`researchloop run --rounds {rec['rounds']}` on each topic, on a fresh DAGSTER_HOME, model `{rec['model']}`"
         f"{'' if rec.get('complete') else '; INCOMPLETE: not every topic finished'}. Verified improvements: "
         "verdict `improvement` by the seed test of assets/shared/verdicts.py against the round's "
         "reference code (in brackets: against the original baseline). Implemented: patch status ok (a patch "
         "that changes nothing, dead code included, is a no-op). Tokens per idea: the round's LLM tokens over "
         "its kept ideas. Overhead: round wall time covered neither by an LLM call nor by a sandboxed run "
         "(resources/timing_log.py)."),
        "",
        *table,
        "",
        *goals,
        *(["", *[f"- {n}" for n in rec["notes"]]] if rec.get("notes") else []),
    ])


def _llm_share(g: dict, key: str) -> str:
    """A share of the kept LLM ideas with its count ("3/5 (60%)"); blank for a record without it."""
    if g.get(key) is None:
        return ""
    return f"{round(g[key] * g['kept_llm'])}/{g['kept_llm']} ({g[key]:.0%})"


def resummarise(rec: dict) -> dict:
    """A record's topics read again from its work folder's stores and logs with this code's summary (a
    run made by an earlier commit, whose record lacks fields added since); its runs are kept as they
    were. The work folder must still exist."""
    import dagster as dg

    work = Path(rec["work"])
    home = work / "dagster_home"
    os.environ["DAGSTER_HOME"] = str(home)
    instance = dg.DagsterInstance.get()
    spans = read_spans(work / "timing.jsonl")
    topics = []
    for t in rec["topics"]:
        timings = work / f"{t['topic']}.timings.json"
        run = {**t["run"], "timings": json.loads(timings.read_text()) if timings.exists() else None}
        topics.append(summarise_topic(t["topic"], rec["rounds"], RecordStore(root=str(home / "records")), instance,
                                      run, spans))
    return {**rec, "topics": topics}


def _ci_abs(ci) -> str:
    return "" if not ci or ci[0] is None else f" [{ci[0]:.4f}, {ci[1]:.4f}]"


# -- main ------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", default="", help="comma-separated topic names or folders (default: every shipped "
                    "topic, or with --dev-tasks every development task)")
    ap.add_argument("--dev-tasks", action="store_true", help="run the development tasks of bench/tasks/ (tabular "
                    "regression, a game strategy scored by an evaluator, a small PyTorch task, forecasting) instead "
                    "of the shipped topics")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="", help=f"the raw record (default: bench/records/{RECORD}.json, with "
                    f"--dev-tasks bench/records/{DEV_RECORD}.json)")
    ap.add_argument("--work", default="", help="working folder (default: a new temporary one, kept for inspection)")
    ap.add_argument("--parallel", type=int, default=0, help="passed to researchloop run (default: its own)")
    ap.add_argument("--hours", type=float, default=6.0, help="give up on a topic after this long")
    ap.add_argument("--merge", default="", help="comma-separated records of earlier runs (one topic each, run side "
                    "by side): write their topics as one record to --out and render it; runs nothing")
    ap.add_argument("--resummarise", action="store_true", help="read the record's topics again from its work "
                    "folder with this code (a run by an earlier commit) and write it back; runs nothing")
    ap.add_argument("--page", default="", help="the page to write the section into (default: "
                    "bench/results/effectiveness.md when --out is the default record or --section is given, else none)")
    ap.add_argument("--section", default="", help=f"the section's name (default: {SECTION}); a record written "
                    "elsewhere (--out) gets a section only when this names one")
    ap.add_argument("--title", default="", help=f"the section's heading, kept in the record (default: {TITLE})")
    args = ap.parse_args(argv)
    out = Path(args.out or RECORDS / f"{DEV_RECORD if args.dev_tasks else RECORD}.json")
    default_out = out.resolve() == (RECORDS / f"{RECORD}.json").resolve()
    page = Path(args.page) if args.page else (page_path(SECTION) if default_out or args.section else None)
    if args.merge:  # topics run as separate benchmarks (one process each), in one record
        rec = merge_records([json.loads(Path(f).read_text()) for f in args.merge.split(",")])
        out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    elif args.resummarise:
        rec = resummarise(json.loads(out.read_text()))
        out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    elif os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(out.read_text())
    else:
        rec = measure(args, out)
    if args.title:
        rec["title"] = args.title
    if args.section:  # the committed place of a record written elsewhere, named in its section
        rec["record"] = repo_path(out)
    if args.title or args.section:
        out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    body = render(rec)
    print(body)
    if page is not None:
        write_section(args.section or SECTION, body, page)
    return 0 if rec.get("complete") else 1


def merge_records(recs: list[dict]) -> dict:
    """One record from several runs of this benchmark with the same rounds and model (topics run
    side by side as separate processes): their topics in order, the wall time of the longest,
    complete when each was, every run's working folder and date kept."""
    if len({(r["rounds"], r["model"]) for r in recs}) != 1:
        raise ValueError("records with different rounds or models cannot be merged")
    return {**recs[0], "date": max(r["date"] for r in recs), "work": ", ".join(r["work"] for r in recs),
            "complete": all(r.get("complete") for r in recs), "wall_s": max(r.get("wall_s", 0) for r in recs),
            "topics": [t for r in recs for t in r["topics"]], "merged_from": len(recs),
            "notes": [n for r in recs for n in r.get("notes", [])]}


def topic_name(topic: str) -> str:
    """The partition name of a topic given as a name under experiments/ or as a folder (its topic.yaml's name)."""
    return load_topic(resolve_topic_dir(topic)).name


def measure(args, out: Path) -> dict:
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_effectiveness_"))
    work.mkdir(parents=True, exist_ok=True)
    home = fresh_home(work)
    topics = chosen_topics(args.topics, args.dev_tasks)
    log_file = work / "timing.jsonl"
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1", "RESEARCHLOOP_TIMING_LOG": str(log_file)}
    os.environ["DAGSTER_HOME"] = str(home)  # the instance and the record store read below
    print(f"working in {work}; topics: {', '.join(topics)}", flush=True)
    import dagster as dg

    rec = {"script": SCRIPT, "date": today(), "machine": f"2-core shared VM: {machine()}", "rounds": args.rounds,
           "model": "", "work": str(work), "complete": False, "topics": []}
    t_all = time.monotonic()
    for topic in topics:
        print(f"[{(time.monotonic() - t_all) / 60:5.1f} min] {topic}: researchloop run --rounds {args.rounds}",
              flush=True)
        run = run_topic(topic, args.rounds, work, env, args.parallel, args.hours * 3600)
        rec["model"] = rec["model"] or ((run["timings"] or {}).get("model") or "")
        instance = dg.DagsterInstance.get()
        summary = summarise_topic(topic_name(topic), args.rounds, RecordStore(root=str(home / "records")), instance,
                                  run, read_spans(log_file))
        rec["topics"].append(summary)
        rec["wall_s"] = round(time.monotonic() - t_all, 1)
        rec["complete"] = len(rec["topics"]) == len(topics) and all(
            t["goals"]["rounds_done"] == args.rounds for t in rec["topics"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1, default=str) + "\n")  # after each topic
        print(f"  exit {run['exit_code']} in {run['wall_s']:.0f} s; rounds: "
              + ", ".join(f"{r['round']} {r['verified_improvements']} improvement(s), {r['kept']} kept"
                          for r in summary["rows"]) + f" -> {out}", flush=True)
    return rec


if __name__ == "__main__":
    sys.exit(main())
