"""round_reference: what a round works on, decided before its first stage (stacked wins)."""
import dagster as dg
import polars as pl

from assets.round_reference.reference import make_reference, previous_best
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, topic_metadata
from assets.shared.partitions import round_asset, round_key_of
from assets.shared.topics import code_sha256, topic_of
from resources.store import RecordStore
from schemas.frames import from_frame, to_frame
from schemas.records import RoundReference, RunResult


@round_asset(
    "reference_valid", "one reference, its code matching its sha256, with seed values to judge against",
    "The code this round's stages edit and run: the best verified code so far (topic.yaml `reference: best`) "
    "or the original (`baseline`), with the current best every verdict is also reported against.",
    topic_inputs=("topic_brief", "baseline_results"),
)
def round_reference(context: dg.AssetExecutionContext, topic_brief: pl.DataFrame, baseline_results: pl.DataFrame,
                    store: RecordStore):
    topic, round_key = round_key_of(context)
    captured = topic_of(topic_brief)
    base = from_frame(baseline_results, RunResult)[0]
    if base.metric_value is None:
        raise ValueError(f"the baseline of {topic} has no {captured.spec.metric.name}: {base.reason}")
    prev, read_from = previous_best(store, topic, round_key)  # the previous round's best_code, via the store
    ref = make_reference(captured, base, prev, round_key, read_from)
    context.log.info(f"{round_key}: reference {ref.mode}: {ref.source} ({ref.note})")
    df = to_frame([ref], RoundReference)
    check = expectation_check("reference_valid", df.with_columns(
        sha_ok=pl.lit(code_sha256(ref.code) == ref.code_sha256), n_values=pl.lit(len(ref.values))), [
        E("ExpectColumnValuesToBeInSet", column="sha_ok", value_set=[True]),
        E("ExpectColumnValuesToBeBetween", column="n_values", min_value=1),
        E("ExpectColumnValueLengthsToBeBetween", column="code", min_value=1),
    ], asset_key="round_reference")
    best = ref.best
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "mode": ref.mode, "source": ref.source, "note": ref.note,
        "reference_code_sha256": ref.code_sha256, "reads_partitions": dg.MetadataValue.json(
            [read_from] if read_from else []),
        "current_best": best.source, "current_best_metric": dg.MetadataValue.float(float(best.metric_value))
        if best.metric_value is not None else "n/a",
        "chain": dg.MetadataValue.md(md_table(
            [{"round": r, "idea_id": i, "title": t} for r, i, t in zip(ref.best.chain_rounds, ref.best.chain,
                                                                        ref.best.chain_titles)],
            ["round", "idea_id", "title"]) if ref.best.chain else "(the original reference code)"),
        **topic_metadata(captured),
    })
