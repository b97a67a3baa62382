"""feedback_summary (DOLPHIN 3.3): improvement / maintenance / decline against the baseline.
Effective ideas go into the next round's idea prompt; ineffective ones into the idea bank."""

from collections.abc import Callable

from assets.feedback_summary import prompts as feedback_prompts
from assets.shared.metadata import Usage, md_table, share_usage
from assets.shared.verdicts import ALPHA, ALPHA_SECOND_LOOK, COMPUTE_FLAG, compute_ratio, judge_seeds, run_seconds
from resources.llm import LLM, RejectedAnswer
from resources.store import RecordStore, Store
from schemas.frames import from_frame
from schemas.llm_outputs import RoundAnalysis
from schemas.records import Feedback, FilteredIdea, RoundReference, RunResult

VERDICTS = ["improvement", "maintenance", "decline", "failed"]


def summarise(ideas: list[FilteredIdea], results: list[RunResult], baseline: float, goal: str,
              tolerance: float, baseline_values: list[float] | None = None,
              reference: RoundReference | None = None) -> list[Feedback]:
    """One verdict per kept idea by the seed test of verdicts.judge_seeds: the idea's seed
    values (just its one run when it was not repeated) against those of the round's reference
    code (`reference`, see assets/round_reference; without one, the baseline's), and the same
    test against the original baseline (`baseline_values`; without them the single `baseline`)
    and against the current best, reported beside it. A result that had a second look
    (`RunResult.reference_values`) is tested against the reference code's values over the same
    seeds, on every side whose code the reference is, at the second look's level (assets/shared/verdicts.py)."""
    base_vals = [v for v in (baseline_values or []) if v is not None] or [baseline]
    ref_vals = base_vals if reference is None or reference.source == "baseline" else reference.values
    best_vals = base_vals if reference is None or reference.best.source == "baseline" else reference.best.seed_values
    ref_name = "baseline" if reference is None else reference.source
    best_name = "baseline" if reference is None else reference.best.source
    by_id = {r.idea_id: r for r in results}
    out = []
    for i in ideas:
        if not i.kept:
            continue
        r = by_id.get(i.idea_id)
        stats: dict = {"n_baseline_seeds": len(ref_vals)}
        mine = ref_vals  # the reference values the verdict tests against
        if r is None:
            verdict, reason, value = "failed", "no run result (planning or patching did not finish)", None
        elif r.status != "success":
            verdict, reason, value = "failed", f"{r.status}: {r.reason}", None
        elif r.metric_value is None:
            verdict, reason, value = "failed", "no valid metric", None
        else:
            value = r.metric_value
            seeds = r.seed_values or [value]
            looked = bool(r.reference_values)  # a second look: the reference ran the same seeds
            alpha = ALPHA_SECOND_LOOK if looked else ALPHA
            mine = r.reference_values if looked else ref_vals
            verdict, reason, c = judge_seeds(seeds, mine, goal, tolerance, alpha=alpha)
            if looked:
                reason += " (second look)"
            run_s = run_seconds(r.attempts)
            ref_s = None if reference is None else reference.run_s
            ratio = compute_ratio(run_s, ref_s)
            stats.update(run_s=run_s, reference_run_s=ref_s, compute_ratio=ratio)
            if verdict == "improvement" and ratio is not None and ratio >= COMPUTE_FLAG:
                reason += compute_note(ratio)
            stats.update(n_seeds=c.n_idea, n_baseline_seeds=c.n_base, ci_low=_r(c.ci_low), ci_high=_r(c.ci_high),
                         p_value=_r(c.p_better), test=c.test)
            for side, vals, source in (("baseline", base_vals, "baseline"), ("best", best_vals, best_name)):
                v, _, cs = judge_seeds(seeds, mine if looked and source == ref_name else vals, goal, tolerance,
                                       alpha=alpha)
                stats.update({f"{side}_verdict": v, f"{side}_delta": _r(cs.mean_diff), f"{side}_ci_low": _r(cs.ci_low),
                              f"{side}_ci_high": _r(cs.ci_high), f"{side}_p_value": _r(cs.p_better)})
        if value is None:
            stats.update(baseline_verdict="failed", best_verdict="failed")
        ref_mean = sum(mine) / len(mine)
        out.append(Feedback(idea_id=i.idea_id, name=i.name, title=i.title, summary=i.summary, verdict=verdict,
                            reason=reason if ref_name == "baseline" else f"vs {ref_name}: {reason}",
                            metric_value=value, baseline_value=baseline,
                            delta=None if value is None else round(value - ref_mean, 6),
                            effective=verdict == "improvement", reference=ref_name, reference_value=ref_mean,
                            best_source=best_name, best_value=_r(sum(best_vals) / len(best_vals)), **stats))
    return out


def compute_note(ratio: float) -> str:
    """What an improvement's reason says when its run took much longer than the reference's."""
    return (f"; its run took {ratio:.1f}x the reference's time: more compute (longer training, a second pass) "
            "may explain the gain")


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


VERDICT_COLUMNS = ["idea_id", "verdict", "vs", "metric_value", "baseline_value", "mean_diff", "interval_95", "seeds",
                   "p_value", "vs_baseline", "vs_best", "run_time", "llm_calls", "tokens", "cost_usd", "shared_tokens",
                   "shared_cost_usd", "reason"]


def comparison_cell(f: Feedback, side: str) -> str:
    """The verdict against the original baseline (side 'baseline') or the current best ('best'),
    with its mean difference and 95% interval, as one table cell."""
    verdict, delta = getattr(f, f"{side}_verdict"), getattr(f, f"{side}_delta")
    if not verdict:
        return ""
    if delta is None:
        return verdict
    lo, hi = getattr(f, f"{side}_ci_low"), getattr(f, f"{side}_ci_high")
    what = f" vs {f.best_source}" if side == "best" and f.best_source not in ("", "baseline") else ""
    return f"{verdict}{what} {delta:+.4f}" + ("" if lo is None else f" [{lo:+.4f}, {hi:+.4f}]")


def verdict_cells(f: Feedback) -> dict[str, str]:
    """The test behind one verdict as table cells: the mean difference, its 95% interval and the
    seeds on each side (idea vs baseline), for the UI's verdict table and the CLI's."""
    return {"mean_diff": "" if f.delta is None else f"{f.delta:+.4f}",
            "interval_95": "" if f.ci_low is None else f"[{f.ci_low:+.4f}, {f.ci_high:+.4f}]",
            "seeds": f"{f.n_seeds} vs {f.n_baseline_seeds}" if f.n_seeds else "",
            "p_value": "" if f.p_value is None else f"{f.p_value:.3g}",
            "vs": f.reference, "vs_baseline": comparison_cell(f, "baseline"), "vs_best": comparison_cell(f, "best"),
            "run_time": run_time_cell(f)}


def run_time_cell(f: Feedback) -> str:
    """The idea's run time, with its ratio to the reference's where both are known ("42s (2.1x)")."""
    if f.run_s is None:
        return ""
    return f"{f.run_s:.0f}s" + ("" if f.compute_ratio is None else f" ({f.compute_ratio:.1f}x)")


def verdict_table(rows: list[Feedback]) -> str:
    """The feedback_summary metadata table: verdict, metric, the test's numbers, LLM use."""
    return md_table([{**r.model_dump(), "tokens": r.tokens, **verdict_cells(r)} for r in rows], VERDICT_COLUMNS)


def with_usage(rows: list[Feedback], total: Usage, by_idea: dict[str, Usage]) -> list[Feedback]:
    """Each verdict with its idea's own LLM use (`by_idea`) and an even share of the rest of the
    round's `total` (see assets/shared/metadata.py share_usage): own + shared over all rows = total."""
    shares = share_usage(total, by_idea, [r.idea_id for r in rows])
    out = []
    for r in rows:
        own, shared = shares[r.idea_id]
        out.append(r.model_copy(update={
            "llm_calls": int(own["llm_calls"]), "prompt_tokens": int(own["prompt_tokens"]),
            "completion_tokens": int(own["completion_tokens"]), "cost_usd": round(own["cost_usd"], 9),
            "shared_tokens": round(shared["prompt_tokens"] + shared["completion_tokens"], 3),
            "shared_cost_usd": round(shared["cost_usd"], 9)}))
    return out


def progress_rows(store: RecordStore | Store, topic: str) -> list[dict]:
    """Round-over-round numbers of a topic from its stored feedback."""
    rows = []
    for rk in store.rounds("feedback_summary", topic):
        fb = from_frame(store.read("feedback_summary", topic, rk), Feedback)
        vals = [f.metric_value for f in fb if f.metric_value is not None]
        rows.append({"round": rk, "ideas": len(fb), "improvement": sum(f.verdict == "improvement" for f in fb),
                     "maintenance": sum(f.verdict == "maintenance" for f in fb),
                     "decline": sum(f.verdict == "decline" for f in fb),
                     "failed": sum(f.verdict == "failed" for f in fb),
                     "best": max(vals) if vals else None,
                     "baseline": fb[0].baseline_value if fb else None})
    return rows


def lineage_table(ideas: list[FilteredIdea], results: list[RunResult], rows: list[Feedback]) -> str:
    """Per idea of the round: where it came from, how it was filtered, how it ran, its verdict
    (`researchloop lineage IDEA_ID` prints the whole chain)."""
    runs = {r.idea_id: r for r in results}
    verdicts = {f.idea_id: f.verdict for f in rows}
    table = []
    for i in ideas:
        r = runs.get(i.idea_id)
        table.append({"idea_id": i.idea_id, "origin": i.source, "papers": ", ".join(i.inspired_by_papers),
                      "builds_on": ", ".join(i.builds_on_ideas), "nearest_bank_idea": i.nearest_bank_idea,
                      "similarity": i.max_similarity, "filter": "kept" if i.kept else i.drop_reason,
                      "attempts": r.n_attempts if r else None, "mlflow_run": r.mlflow_run_id if r else None,
                      "verdict": verdicts.get(i.idea_id, "")})
    return md_table(table, ["idea_id", "origin", "papers", "builds_on", "nearest_bank_idea", "similarity", "filter",
                            "attempts", "verdict", "mlflow_run"])


def grounded_analysis(rows: list[Feedback]) -> Callable[[str], RoundAnalysis]:
    """The parser of the round analysis: a RoundAnalysis whose `worked` names no idea of the round
    that was not judged an improvement. The next round's ideas prompt quotes the analysis, and a
    small model that reads "Worked: <an idea that crashed>" proposes that idea again; such an answer
    is rejected (kind `ungrounded`), so the model is asked again, told which verdicts it got wrong."""
    def parse(text: str) -> RoundAnalysis:
        a = RoundAnalysis.model_validate_json(text)
        worked = a.worked.lower()
        wrong = [f"{f.title!r} ({f.verdict})" for f in rows
                 if f.verdict != "improvement" and f.title.strip() and f.title.lower() in worked]
        if wrong:
            raise RejectedAnswer("ungrounded", f"`worked` names ideas that did not improve the metric: "
                                 f"{', '.join(wrong)}; only ideas judged improvement worked")
        return a
    return parse


def analyse_round(spec, baseline: float, rows: list[Feedback], llm: LLM) -> tuple[str, str | None]:
    """(analysis text, error): the LLM's few sentences on what worked and why (grounded in the
    verdicts, `grounded_analysis`); empty on failure."""
    if not rows:
        return "", None
    res = llm.complete(feedback_prompts.analyse(
        spec.title, spec.metric.name, spec.metric.goal, baseline,
        [(f.title, f.summary, f.verdict, f.reason) for f in rows]), stage="feedback_summary",
        schema=RoundAnalysis, parse=grounded_analysis(rows), max_tokens=300)
    if not res.ok:
        return "", res.error
    a: RoundAnalysis = res.value
    return f"Worked: {a.worked} Did not: {a.failed} Next: {a.next_direction}", None
