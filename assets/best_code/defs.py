"""best_code: the best verified code of a topic after each round (stacked wins)."""
import dagster as dg
import polars as pl

from assets.best_code.stacking import chain_rows, chain_table, interval_text, next_best, summary_table
from assets.round_reference.reference import reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import topic_metadata
from assets.shared.partitions import round_asset, round_key_of
from assets.shared.topics import code_sha256
from schemas.frames import from_frame, to_frame
from schemas.records import BestCode, Feedback, FilteredIdea, RunResult

DIFF_CHARS = 6000  # of the diff shown in the UI (the record holds all of it)


@round_asset(
    "best_code_valid", "one row; the code matches its sha256; a new best was judged an improvement over the old",
    "The best verified code after this round: the current best, or this round's idea judged an improvement over "
    "it (best mean over seeds among several), with its metric, its diff against the original reference code and "
    "the chain of ideas it contains. With `reference: best` the next round edits it.",
    topic_inputs=("topic_brief",),
)
def best_code(context: dg.AssetExecutionContext, round_reference: pl.DataFrame, feedback_summary: pl.DataFrame,
              run_results: pl.DataFrame, filtered_ideas: pl.DataFrame, topic_brief: pl.DataFrame):
    topic, round_key = round_key_of(context)
    rt = reference_of(topic_brief, round_reference)  # the best before this round, and what the round edited
    fb = from_frame(feedback_summary, Feedback)
    best = next_best(rt.captured, rt.reference, fb, from_frame(run_results, RunResult),
                     from_frame(filtered_ideas, FilteredIdea), round_key)
    context.log.info(f"{round_key}: best {best.source} ({interval_text(best)}); {best.reason}")
    df = to_frame([best], BestCode)
    verdicts = {f.idea_id: f.best_verdict for f in fb}
    check = expectation_check("best_code_valid", df.with_columns(
        sha_ok=pl.lit(code_sha256(best.code) == best.code_sha256),
        new_best_judged=pl.lit(not best.improved or verdicts.get(best.source) == "improvement")), [
        E("ExpectColumnValuesToBeInSet", column="sha_ok", value_set=[True]),
        E("ExpectColumnValuesToBeInSet", column="new_best_judged", value_set=[True]),
        E("ExpectColumnValueLengthsToBeBetween", column="code", min_value=1),
    ], asset_key="best_code")
    diff = best.diff if len(best.diff) <= DIFF_CHARS else best.diff[:DIFF_CHARS] + "\n... (cut; the record holds all)"
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "source": best.source, "improved": best.improved, "reason": best.reason,
        best.metric_name: (dg.MetadataValue.float(float(best.metric_value)) if best.metric_value is not None
                           else "n/a"),
        "interval_95": interval_text(best), "seed_values": dg.MetadataValue.json(best.seed_values),
        "gain_vs_baseline": (dg.MetadataValue.float(round(best.metric_value - best.baseline_value, 6))
                             if best.metric_value is not None and best.baseline_value is not None else "n/a"),
        "code_sha256": best.code_sha256, "previous_best": rt.best.source, "candidates": dg.MetadataValue.json(
            best.candidates),
        "best": dg.MetadataValue.md(summary_table(best)),
        "chain": dg.MetadataValue.md(chain_table(best)), "chain_ids": dg.MetadataValue.json(chain_rows(best)),
        "diff_vs_original": dg.MetadataValue.md(f"```diff\n{diff}\n```" if diff else "(no change: the original)"),
        **topic_metadata(rt.captured),
    })
