"""experiment_plans (DOLPHIN 3.2): one plan per kept idea."""
import dagster as dg
import polars as pl

from assets.experiment_plans.planning import kept_ideas, make_plan
from assets.round_reference.reference import reference_metadata, reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, topic_metadata, usage_metadata
from assets.shared.partitions import round_asset
from assets.shared.topics import topic_of
from resources.llm import LLM
from schemas.frames import to_frame
from schemas.records import ExperimentPlan


@round_asset(
    "plans_complete", "one plan with at least one change per kept idea",
    "One detailed experiment plan per surviving idea.",
    topic_inputs=("topic_brief",),
)
def experiment_plans(context: dg.AssetExecutionContext, filtered_ideas: pl.DataFrame, topic_brief: pl.DataFrame,
                     round_reference: pl.DataFrame, llm: LLM):
    captured = topic_of(topic_brief)
    rt = reference_of(topic_brief, round_reference)
    spec, code = captured.spec, rt.code  # plans for the round's reference code
    with llm.track("experiment_plans") as usage:
        plans = llm.map(lambda i: make_plan(spec, code, i, llm), kept_ideas(filtered_ideas), shared_prefix=True)
    df = to_frame(plans, ExperimentPlan)
    check = expectation_check("plans_complete", df.with_columns(n_changes=pl.col("changes").list.len()), [
        E("ExpectColumnValuesToBeUnique", column="idea_id"),
        E("ExpectColumnValuesToBeBetween", column="n_changes", min_value=1),
    ], asset_key="experiment_plans")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "count": len(plans), "fallbacks": sum(p.error is not None for p in plans),
        "plans": dg.MetadataValue.md(md_table([{**p.model_dump(), "changes": "; ".join(p.changes)} for p in plans],
                                              ["name", "changes", "location", "expected_effect", "error"])),
        **usage_metadata(usage, by_idea=True), **topic_metadata(captured), **reference_metadata(rt),
    })
