"""feedback_summary (DOLPHIN 3.3): verdicts, the idea bank and the round's analysis."""
import base64

import dagster as dg
import polars as pl

from assets.feedback_summary.feedback import (
    VERDICTS,
    analyse_round,
    lineage_table,
    progress_rows,
    summarise,
    verdict_table,
    with_usage,
)
from assets.round_reference.reference import reference_metadata, reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import (
    md_table,
    round_llm_use,
    round_usage,
    topic_metadata,
    usage_metadata,
)
from assets.shared.partitions import multi_key, round_asset, round_key_of
from assets.shared.plots import progress_png
from assets.shared.stages import ROUND_STAGES
from assets.shared.topics import topic_of
from resources.llm import LLM
from resources.paths import under_home
from resources.store import RecordStore, round_number
from resources.tracker import Tracker
from schemas.frames import from_frame, to_frame
from schemas.records import Feedback, FilteredIdea, RunResult


@round_asset(
    "verdicts_valid", "each verdict is one of the four; judged ideas carry a metric",
    "Per idea: improvement / maintenance / decline / failed vs the round's reference code (the baseline, or the "
    "best code so far with `reference: best`), also reported vs the original baseline and the current best; the "
    "effective ideas for the next round.",
    topic_inputs=("baseline_results", "topic_brief"), kinds=("python", "mlflow"),
)
def feedback_summary(context: dg.AssetExecutionContext, run_results: pl.DataFrame, filtered_ideas: pl.DataFrame,
                     baseline_results: pl.DataFrame, topic_brief: pl.DataFrame, round_reference: pl.DataFrame,
                     tracker: Tracker, llm: LLM, store: RecordStore):
    topic, round_key = round_key_of(context)
    captured = topic_of(topic_brief)
    rt = reference_of(topic_brief, round_reference)  # verdicts against the round's reference and the current best
    spec = captured.spec  # the tolerance and direction the round started with
    base = from_frame(baseline_results, RunResult)[0]
    if base.metric_value is None:
        raise ValueError(f"the baseline of {topic} has no {spec.metric.name}: {base.reason}")
    ideas, results = from_frame(filtered_ideas, FilteredIdea), from_frame(run_results, RunResult)
    rows = summarise(ideas, results, base.metric_value, spec.metric.goal, spec.metric.tolerance,
                     baseline_values=base.seed_values, reference=rt.reference)
    with llm.track("feedback_summary") as usage:
        analysis, analysis_error = analyse_round(spec, base.metric_value, rows, llm)
    stages = list(ROUND_STAGES)
    total, by_idea = round_llm_use(context.instance, str(multi_key(topic, round_key)),
                                   [s for s in stages if s != "feedback_summary"], usage.calls)
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
    history = progress_rows(store, topic) + [{"round": round_key, "ideas": len(rows), **counts,
                                               "best": max((r.metric_value for r in rows if r.metric_value is not None),
                                                           default=None),
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
        "verdicts": dg.MetadataValue.md(verdict_table(rows)),
        "round_tokens": int(total["prompt_tokens"] + total["completion_tokens"]),
        "round_cost_usd": dg.MetadataValue.float(round(total["cost_usd"], 6)),
        "cost_per_idea": dg.MetadataValue.float(round(total["cost_usd"] / len(rows), 6) if rows else 0.0),
        "rounds": dg.MetadataValue.md(md_table(history, ["round", "ideas", "improvement", "maintenance", "decline",
                                                         "failed", "best", "baseline", "tokens", "cost_usd",
                                                         "cost_per_idea"])),
        "lineage": dg.MetadataValue.md(lineage_table(ideas, results, rows)),
        "analysis": dg.MetadataValue.md(analysis or f"(no analysis: {analysis_error})"),
        **usage_metadata(usage), **topic_metadata(captured), **reference_metadata(rt),
        "current_best": rt.best.source,
        "progress_plot": dg.MetadataValue.md(f"![progress](data:image/png;base64,{base64.b64encode(png).decode()})"),
        "progress_plot_file": dg.MetadataValue.path(str(plot_path)),
    })
