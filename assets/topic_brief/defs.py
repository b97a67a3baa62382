"""topic_brief: partitioned by topic only (DOLPHIN 3.1)."""
import hashlib

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
    description="The topic spec plus the task attributes (task, input, output, ...) the LLM extracted. Records "
                "topic.yaml (parsed) and the reference code with its sha256: every later stage reads them from here.",
)
def topic_brief(context: dg.AssetExecutionContext, llm: LLM):
    spec = topic_spec(context.partition_key)  # the one place a stage reads the topic from disk
    with llm.track("topic_brief") as usage:
        brief, _ = build_brief(spec, llm)
    df = to_frame([brief], TopicBrief)
    attrs = {k: getattr(brief, k) for k in ("task", "input", "output", "domain", "evaluation", "search_query")}
    context.log.info(f"task attributes: {attrs}; reference code sha256 {brief.code_sha256}")
    check = expectation_check(
        "attributes_present", df,
        [E("ExpectColumnValueLengthsToBeBetween", column=c, min_value=1)
         for c in ("task", "input", "output", "search_query")],
        asset_key="topic_brief")
    spec_sha256 = hashlib.sha256(brief.spec_json.encode()).hexdigest()
    return dg.MaterializeResult(
        value=df, check_results=[check],
        # the version downstream stages see: it changes when the spec, the code or the attributes do
        data_version=dg.DataVersion(hashlib.sha256(brief.model_dump_json().encode()).hexdigest()[:24]),
        metadata={"topic": spec.name,
                  "metric": f"{spec.metric.goal} {spec.metric.name} (tolerance {spec.metric.tolerance})",
                  "code_sha256": brief.code_sha256, "code_file": spec.code, "code_lines": brief.code.count("\n"),
                  "spec_sha256": spec_sha256,
                  "spec": dg.MetadataValue.json(spec.model_dump(mode="json")),
                  "attributes": dg.MetadataValue.md(md_table([{"attribute": k, "value": v} for k, v in attrs.items()],
                                                             ["attribute", "value"])),
                  "llm_error": brief.llm_error or "", **usage_metadata(usage)})
