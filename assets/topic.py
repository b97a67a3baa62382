"""topic_brief and baseline_results: partitioned by topic only (DOLPHIN 3.1 / 3.3)."""

import dagster as dg
import polars as pl

from assets.checks import E, expectation_check
from assets.experimenting import run_reference
from assets.partitions import topic_partitions
from assets.prompts import topic as prompts
from assets.report import md_table, usage_metadata
from resources.llm import LLM
from resources.devices import device_slot
from resources.paths import resolve_topic_dir, under_home
from resources.runner import Runner
from resources.tracker import Tracker
from schemas.frames import to_frame
from schemas.llm_outputs import TaskAttributes
from schemas.records import RunResult, TopicBrief
from schemas.topic import load_topic


def topic_spec(topic: str):
    return load_topic(resolve_topic_dir(topic))


def build_brief(spec, llm: LLM) -> tuple[TopicBrief, object]:
    res = llm.complete(prompts.task_attributes(spec.title, spec.description, spec.metric.name),
                       stage="topic_brief", schema=TaskAttributes, max_tokens=300)
    if res.ok:
        a: TaskAttributes = res.value
        attrs = a.model_dump()
    else:  # honest fallback: the topic's own words, with the failure recorded in llm_error
        attrs = {"task": spec.title, "input": "unknown", "output": "unknown", "domain": "unknown",
                 "evaluation": spec.metric.name, "search_query": spec.title}
    code = spec.code_path.read_text()
    brief = TopicBrief(topic=spec.name, title=spec.title, description=spec.description.strip(),
                       metric_name=spec.metric.name, metric_goal=spec.metric.goal,
                       code_excerpt=code[:6000], llm_error=res.error, **attrs)
    return brief, res


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


@dg.asset(
    partitions_def=topic_partitions, group_name="topic", kinds={"python", "mlflow"},
    check_specs=[dg.AssetCheckSpec("baseline_has_metric", asset="baseline_results", blocking=True,
                                   description="the unmodified code ran and reported the topic's metric")],
    description="Metrics of the unmodified reference code, the bar every idea is judged against.",
)
def baseline_results(context: dg.AssetExecutionContext, runner: Runner, tracker: Tracker):
    spec = topic_spec(context.partition_key)
    # the same device share as each idea's run gets, so thread counts do not tilt the comparison
    with device_slot(under_home("slots")) as env:
        result = run_reference(spec, runner, tracker, log=context.log.info, env=env)
    df = to_frame([result], RunResult)
    check = expectation_check(
        "baseline_has_metric", df.with_columns(ok=pl.col("status") == "success"),
        [E("ExpectColumnValuesToNotBeNull", column="metric_value"),
         E("ExpectColumnValuesToBeInSet", column="ok", value_set=[True])],
        asset_key="baseline_results")
    a = result.attempts[-1] if result.attempts else None
    return dg.MaterializeResult(
        value=df, check_results=[check],
        metadata={spec.metric.name: dg.MetadataValue.float(float(result.metric_value)) if result.metric_value is not None else "n/a",
                  "status": result.status, "reason": result.reason or "",
                  "duration_s": dg.MetadataValue.float(float(round(a.duration_s, 2))) if a else 0.0,
                  "metrics": dg.MetadataValue.json(result.metrics),
                  "mlflow_run_id": result.mlflow_run_id or ""})
