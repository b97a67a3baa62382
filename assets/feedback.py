"""feedback_summary (DOLPHIN 3.3): improvement / maintenance / decline against the baseline.
Effective ideas go into the next round's idea prompt; ineffective ones into the idea bank."""

import base64

import dagster as dg
import polars as pl

from assets.checks import E, expectation_check
from assets.partitions import multi_key, round_asset, round_key_of
from assets.plots import progress_png
from assets.prompts import feedback as feedback_prompts
from assets.report import Usage, md_table, round_llm_use, round_usage, share_usage, usage_metadata
from assets.topic import topic_spec
from assets.verdicts import judge
from resources.llm import LLM
from resources.paths import under_home
from resources.store import Store, round_number
from resources.tracker import Tracker
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import RoundAnalysis
from schemas.records import Feedback, FilteredIdea, RunResult

VERDICTS = ["improvement", "maintenance", "decline", "failed"]


def ROUND_STAGES():  # noqa: N802 - the round's assets, looked up late (assets/__init__ imports this module)
    from assets import ROUND_ASSETS

    return ROUND_ASSETS


def summarise(ideas: list[FilteredIdea], results: list[RunResult], baseline: float, goal: str,
              tolerance: float, baseline_spread: float = 0.0) -> list[Feedback]:
    """One verdict per kept idea; with repeated seeds the margin is the larger of the tolerance and
    the seed spread of the idea or the baseline."""
    by_id = {r.idea_id: r for r in results}
    out = []
    for i in ideas:
        if not i.kept:
            continue
        r = by_id.get(i.idea_id)
        if r is None:
            verdict, reason, value = "failed", "no run result (planning or patching did not finish)", None
        elif r.status != "success":
            verdict, reason, value = "failed", f"{r.status}: {r.reason}", None
        else:
            value = r.metric_value
            verdict, reason = judge(value, baseline, goal, tolerance, max(r.metric_spread, baseline_spread))
        out.append(Feedback(idea_id=i.idea_id, name=i.name, title=i.title, summary=i.summary, verdict=verdict,
                            reason=reason, metric_value=value, baseline_value=baseline,
                            delta=None if value is None else round(value - baseline, 6),
                            effective=verdict == "improvement"))
    return out


def with_usage(rows: list[Feedback], total: Usage, by_idea: dict[str, Usage]) -> list[Feedback]:
    """Each verdict with its idea's own LLM use (`by_idea`) and an even share of the rest of the
    round's `total` (see assets/report.py share_usage): own + shared over all rows = total."""
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


def progress_rows(store: Store, topic: str) -> list[dict]:
    """Round-over-round numbers of a topic from its stored feedback."""
    rows = []
    for rk in store.rounds("feedback_summary", topic):
        fb = from_frame(store.read("feedback_summary", topic, rk), Feedback)
        vals = [f.metric_value for f in fb if f.metric_value is not None]
        rows.append({"round": rk, "ideas": len(fb), "improvement": sum(f.verdict == "improvement" for f in fb),
                     "maintenance": sum(f.verdict == "maintenance" for f in fb),
                     "decline": sum(f.verdict == "decline" for f in fb), "failed": sum(f.verdict == "failed" for f in fb),
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


def analyse_round(spec, baseline: float, rows: list[Feedback], llm: LLM) -> tuple[str, str | None]:
    """(analysis text, error): the LLM's few sentences on what worked and why; empty on failure."""
    if not rows:
        return "", None
    res = llm.complete(feedback_prompts.analyse(
        spec.title, spec.metric.name, spec.metric.goal, baseline,
        [(f.title, f.summary, f.verdict, f.reason) for f in rows]), stage="feedback_summary",
        schema=RoundAnalysis, max_tokens=300)
    if not res.ok:
        return "", res.error
    a: RoundAnalysis = res.value
    return f"Worked: {a.worked} Did not: {a.failed} Next: {a.next_direction}", None


@round_asset(
    "verdicts_valid", "each verdict is one of the four; judged ideas carry a metric",
    "Per idea: improvement / maintenance / decline / failed vs baseline; the effective ideas for the next round.",
    topic_inputs=("baseline_results",), kinds=("python", "mlflow"),
)
def feedback_summary(context: dg.AssetExecutionContext, run_results: pl.DataFrame, filtered_ideas: pl.DataFrame,
                     baseline_results: pl.DataFrame, tracker: Tracker, llm: LLM):
    topic, round_key = round_key_of(context)
    spec = topic_spec(topic)
    base = from_frame(baseline_results, RunResult)[0]
    if base.metric_value is None:
        raise ValueError(f"the baseline of {topic} has no {spec.metric.name}: {base.reason}")
    ideas, results = from_frame(filtered_ideas, FilteredIdea), from_frame(run_results, RunResult)
    rows = summarise(ideas, results, base.metric_value, spec.metric.goal, spec.metric.tolerance, base.metric_spread)
    n0 = len(llm.calls())
    analysis, analysis_error = analyse_round(spec, base.metric_value, rows, llm)
    stages = [a.key.to_user_string() for a in ROUND_STAGES()]
    total, by_idea = round_llm_use(context.instance, str(multi_key(topic, round_key)),
                                   [s for s in stages if s != "feedback_summary"], llm.calls()[n0:])
    rows = with_usage([r.model_copy(update={"round_analysis": analysis}) for r in rows], total, by_idea)
    df = to_frame(rows, Feedback)
    check = expectation_check("verdicts_valid", df.with_columns(
        judged_has_metric=(pl.col("verdict") == "failed") | pl.col("metric_value").is_not_null()), [
        E("ExpectColumnValuesToBeInSet", column="verdict", value_set=VERDICTS),
        E("ExpectColumnValuesToBeInSet", column="judged_has_metric", value_set=[True]),
    ], asset_key="feedback_summary")
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    tracker.close_round(tracker.round_run(topic, round_key),
                        {f"n_{k}": v for k, v in counts.items()} | {"baseline": base.metric_value})
    history = progress_rows(Store(), topic) + [{"round": round_key, "ideas": len(rows), **counts,
                                               "best": max((r.metric_value for r in rows if r.metric_value is not None), default=None),
                                               "baseline": base.metric_value}]
    history = sorted({h["round"]: h for h in history}.values(), key=lambda h: round_number(h["round"]))
    for h in history:  # LLM use per round, from each stage's materialisation metadata; this
        # round's feedback_summary is not materialised yet: its use is `total`, computed above
        u = total if h["round"] == round_key else round_usage(context.instance, str(multi_key(topic, h["round"])),
                                                                 stages)
        h.update(tokens=int(u["prompt_tokens"] + u["completion_tokens"]), cost_usd=round(u["cost_usd"], 6),
                 cost_per_idea=round(u["cost_usd"] / h["ideas"], 6) if h["ideas"] else 0.0)
    png = progress_png(history, spec.metric.name, f"{topic}: progress by round")
    plot_path = under_home("plots", topic) / f"progress-{round_key}.png"
    plot_path.write_bytes(png)
    tracker.log_image(tracker.round_run(topic, round_key), "progress.png", png)
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        **counts, "improvement_rate": dg.MetadataValue.float(counts["improvement"] / len(rows) if rows else 0.0),
        "baseline": dg.MetadataValue.float(float(base.metric_value)),
        "effective_ideas": dg.MetadataValue.json([r.idea_id for r in rows if r.effective]),
        "verdicts": dg.MetadataValue.md(md_table([{**r.model_dump(), "tokens": r.tokens} for r in rows],
                                                 ["idea_id", "verdict", "metric_value", "baseline_value", "delta",
                                                  "llm_calls", "tokens", "cost_usd", "shared_tokens", "shared_cost_usd",
                                                  "reason"])),
        "round_tokens": int(total["prompt_tokens"] + total["completion_tokens"]),
        "round_cost_usd": dg.MetadataValue.float(round(total["cost_usd"], 6)),
        "cost_per_idea": dg.MetadataValue.float(round(total["cost_usd"] / len(rows), 6) if rows else 0.0),
        "rounds": dg.MetadataValue.md(md_table(history, ["round", "ideas", "improvement", "maintenance", "decline",
                                                         "failed", "best", "baseline", "tokens", "cost_usd",
                                                         "cost_per_idea"])),
        "lineage": dg.MetadataValue.md(lineage_table(ideas, results, rows)),
        "analysis": dg.MetadataValue.md(analysis or f"(no analysis: {analysis_error})"),
        **usage_metadata(llm.calls()[n0:]),
        "progress_plot": dg.MetadataValue.md(f"![progress](data:image/png;base64,{base64.b64encode(png).decode()})"),
        "progress_plot_file": dg.MetadataValue.path(str(plot_path)),
    })
