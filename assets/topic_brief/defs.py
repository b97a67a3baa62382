"""topic_brief: partitioned by topic only (DOLPHIN 3.1)."""
import dagster as dg

from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, usage_metadata
from assets.shared.partitions import topic_partitions
from assets.shared.topics import topic_spec
from assets.topic_brief.brief import build_brief
from resources.llm import LLM
from schemas.frames import to_frame
from schemas.records import TopicBrief


@dg.asset(
    partitions_def=topic_partitions, group_name="topic", kinds={"python"},
    check_specs=[dg.AssetCheckSpec("attributes_present", asset="topic_brief", blocking=True,
                                   description="task, input, output and a search query are filled")],
    description="The topic spec plus the task attributes (task, input, output, ...) the LLM extracted.",
)
def topic_brief(context: dg.AssetExecutionContext, llm: LLM):
    spec = topic_spec(context.partition_key)
    n0 = len(llm.calls())
    brief, res = build_brief(spec, llm)
    df = to_frame([brief], TopicBrief)
    attrs = {k: getattr(brief, k) for k in ("task", "input", "output", "domain", "evaluation", "search_query")}
    context.log.info(f"task attributes: {attrs}")
    check = expectation_check(
        "attributes_present", df,
        [E("ExpectColumnValueLengthsToBeBetween", column=c, min_value=1) for c in ("task", "input", "output", "search_query")],
        asset_key="topic_brief")
    return dg.MaterializeResult(
        value=df, check_results=[check],
        metadata={"topic": spec.name, "metric": f"{spec.metric.goal} {spec.metric.name} (tolerance {spec.metric.tolerance})",
                  "attributes": dg.MetadataValue.md(md_table([{"attribute": k, "value": v} for k, v in attrs.items()],
                                                             ["attribute", "value"])),
                  "llm_error": brief.llm_error or "", **usage_metadata(llm.calls()[n0:])})
