"""What a finished round's records must satisfy, whatever the model answered: the stages link
up (every kept idea has a plan, a patch, a run result and a verdict; nothing appears from
nowhere) and each verdict agrees with its metric, the baseline and the topic's tolerance.

Used by the real-model round (tests/project/test_real_round.py) and, on a scripted round, by
tests/project/test_blocking_checks.py, which also shows that these checks catch broken records."""
from __future__ import annotations

import math

from schemas.frames import from_frame
from schemas.records import (
    ExperimentPlan,
    Feedback,
    FilteredIdea,
    Paper,
    PaperScore,
    Patch,
    RunResult,
)

EPS = 1e-6


def stored_baseline(store, topic: str) -> float:
    return from_frame(store.read("baseline_results", topic), RunResult)[0].metric_value


def round_records(store, topic: str, round_key: str) -> dict[str, list]:
    def read(asset, model):
        return from_frame(store.read(asset, topic, round_key), model)

    return {"papers": read("papers", Paper), "scores": read("paper_rankings", PaperScore),
            "ideas": read("filtered_ideas", FilteredIdea), "plans": read("experiment_plans", ExperimentPlan),
            "patches": read("patched_code", Patch), "runs": read("run_results", RunResult),
            "feedback": read("feedback_summary", Feedback)}


def link_problems(rec: dict[str, list], topic: str, round_key: str, baseline: float, goal: str,
                  tolerance: float, metric: str = "accuracy", max_attempts: int | None = None) -> list[str]:
    """Every way the round's records fail to link up or to agree with the verdict rule (empty:
    all good). `baseline`: the baseline's metric as baseline_results stored it; `max_attempts`:
    the topic's repair budget + 1."""
    out: list[str] = []
    ideas, plans, patches, runs, fb = (rec[k] for k in ("ideas", "plans", "patches", "runs", "feedback"))
    kept = {i.idea_id for i in ideas if i.kept}
    retrieved = {p.paper_id for p in rec.get("papers", [])}
    for sc in rec.get("scores", []):
        if sc.paper_id not in retrieved:
            out.append(f"paper {sc.paper_id}: ranked but never retrieved")
        if sc.error is None and sc.kept != (sc.score >= 8):
            out.append(f"paper {sc.paper_id}: kept={sc.kept} with score {sc.score}")
        if sc.error is not None and sc.kept:
            out.append(f"paper {sc.paper_id}: kept although it was not judged ({sc.error})")
    kept_papers = {sc.paper_id for sc in rec.get("scores", []) if sc.kept}
    for i in ideas:
        # the ranking's ideas cite kept papers; the scipip source's ideas cite the round's retrieved papers
        if i.source == "ranking" and "scores" in rec and (stray := set(i.inspired_by_papers) - kept_papers):
            out.append(f"{i.idea_id}: cites papers the ranking did not keep: {sorted(stray)}")
        if i.source == "scipip" and "papers" in rec and (stray := set(i.inspired_by_papers) - retrieved):
            out.append(f"{i.idea_id}: cites papers the round did not retrieve: {sorted(stray)}")
        if stray := set(i.inspired_by_papers) - set(i.source_papers or i.inspired_by_papers):
            out.append(f"{i.idea_id}: cites papers its source did not show: {sorted(stray)}")
    for i in ideas:
        if not i.idea_id.startswith(f"{topic}/{round_key}/"):
            out.append(f"{i.idea_id}: not an id of this round")
        if i.kept and not i.independent:
            out.append(f"{i.idea_id}: kept although not independent")
        if not i.kept and not i.drop_reason:
            out.append(f"{i.idea_id}: dropped without a reason")
    for stage, rows in (("plan", plans), ("patch", patches), ("run result", runs), ("verdict", fb)):
        ids = [r.idea_id for r in rows]
        if len(ids) != len(set(ids)):
            out.append(f"a {stage} appears twice for one idea")
        if missing := kept - set(ids):
            out.append(f"kept ideas without a {stage}: {sorted(missing)}")
        if extra := set(ids) - kept:
            out.append(f"{stage}s of ideas that were not kept: {sorted(extra)}")
    patch_of = {p.idea_id: p for p in patches}
    run_of = {r.idea_id: r for r in runs}
    for p in patches:
        if p.status == "ok" and not (p.code.strip() and p.diff.strip() and p.compiles):
            out.append(f"{p.idea_id}: an ok patch without code, diff or compiling file")
        if p.status != "ok" and not p.reason:
            out.append(f"{p.idea_id}: patch {p.status} without a reason")
    for r in runs:
        p = patch_of.get(r.idea_id)
        if p is not None and p.status != "ok" and r.attempts:
            out.append(f"{r.idea_id}: ran although its patch is {p.status}")
        if r.status == "success":
            if r.metric_value is None or not math.isfinite(r.metric_value) or not r.attempts:
                out.append(f"{r.idea_id}: success without a metric or an attempt")
            elif r.attempts[-1].error is not None:
                out.append(f"{r.idea_id}: success although its last attempt failed")
            if not r.final_code.strip():
                out.append(f"{r.idea_id}: success without the code that ran")
        elif not r.reason:
            out.append(f"{r.idea_id}: {r.status} without a reason")
        if len(r.attempts) != r.n_attempts:
            out.append(f"{r.idea_id}: n_attempts {r.n_attempts} but {len(r.attempts)} attempts recorded")
        if max_attempts is not None and r.n_attempts > max_attempts:
            out.append(f"{r.idea_id}: {r.n_attempts} attempts, over the budget of {max_attempts}")
        if r.status == "success" and r.attempts and len(r.seed_values) <= 1 and r.metric_value is not None \
                and abs(r.attempts[-1].metrics.get(metric, math.nan) - r.metric_value) > EPS:
            out.append(f"{r.idea_id}: metric {r.metric_value} is not what its last attempt measured")
        # the run stage may choose any viable draft of the patch (assets/run_results/screening.py)
        drafted = {p.code} | {d.code for d in p.drafts if d.status == "ok"} if p is not None else set()
        if r.status == "success" and r.n_attempts == 1 and p is not None and r.final_code not in drafted:
            out.append(f"{r.idea_id}: ran once without repair, yet its code is not the patched file")
    sign = 1.0 if goal == "maximize" else -1.0
    for f in fb:
        r = run_of.get(f.idea_id)
        if abs(f.baseline_value - baseline) > EPS:
            out.append(f"{f.idea_id}: baseline {f.baseline_value} is not the stored baseline {baseline}")
        if r is None:
            continue
        if r.status != "success":
            if f.verdict != "failed" or f.metric_value is not None:
                out.append(f"{f.idea_id}: run {r.status} but verdict {f.verdict} with metric {f.metric_value}")
            continue
        if r.metric_value is None:  # reported above: a success without a metric
            continue
        if f.metric_value is None or abs(f.metric_value - r.metric_value) > EPS:
            out.append(f"{f.idea_id}: verdict metric {f.metric_value} is not the run's {r.metric_value}")
            continue
        # the verdict is against the round's reference code: the baseline, or the best code so far (stacking)
        ref = f.reference_value if f.reference != "baseline" and f.reference_value is not None else f.baseline_value
        if f.delta is None or abs(f.delta - (f.metric_value - ref)) > EPS:
            out.append(f"{f.idea_id}: delta {f.delta} is not metric - reference ({f.reference})")
        gain = sign * (f.metric_value - ref)
        single_seed = len(r.seed_values) <= 1 and r.metric_spread == 0
        if f.verdict == "improvement" and not gain > tolerance:
            out.append(f"{f.idea_id}: improvement although the gain {gain:+.4g} is within tolerance {tolerance}")
        if f.verdict == "decline" and not -gain > tolerance:
            out.append(f"{f.idea_id}: decline although the loss {-gain:+.4g} is within tolerance {tolerance}")
        if f.verdict == "maintenance" and single_seed and abs(gain) > tolerance + EPS:
            out.append(f"{f.idea_id}: maintenance although {gain:+.4g} is beyond tolerance {tolerance}")
        if f.verdict == "failed":
            out.append(f"{f.idea_id}: verdict failed although the run succeeded with a metric")
        if f.effective != (f.verdict == "improvement"):
            out.append(f"{f.idea_id}: effective={f.effective} with verdict {f.verdict}")
    return out
