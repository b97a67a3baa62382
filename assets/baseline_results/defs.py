"""baseline_results: the unmodified reference code's metrics (DOLPHIN 3.3)."""
import dagster as dg
import polars as pl

from assets.run_results.seeds import run_reference
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import topic_metadata
from assets.shared.partitions import topic_partitions
from assets.shared.topics import code_sha256, topic_of
from resources.devices import device_slot
from resources.paths import under_home
from resources.runner import Runner
from resources.tracker import Tracker
from schemas.frames import to_frame
from schemas.records import RunResult


@dg.asset(
    partitions_def=topic_partitions, group_name="topic", kinds={"python", "mlflow"},
    check_specs=[dg.AssetCheckSpec("baseline_has_metric", asset="baseline_results", blocking=True,
                                   description="the unmodified code ran and reported the topic's metric")],
    description="Metrics of the unmodified reference code, the bar every idea is judged against.",
)
def baseline_results(context: dg.AssetExecutionContext, topic_brief: pl.DataFrame, runner: Runner, tracker: Tracker):
    topic = topic_of(topic_brief)
    spec = topic.spec
    # the baseline runs the code topic_brief captured; the seed repeats of later rounds run the file in the
    # topic folder, so a changed file means the set-up must be captured again
    if (on_disk := code_sha256(spec.code_path.read_text())) != topic.code_sha256:
        raise ValueError(f"{spec.code} changed since topic_brief captured it (sha256 {topic.code_sha256[:12]}, now "
                         f"{on_disk[:12]}): materialise topic_brief again before the baseline")
    # the same device share as each idea's run gets, so thread counts do not tilt the comparison
    with device_slot(under_home("slots")) as env:
        result = run_reference(spec, runner, tracker, log=context.log.info, env=env, code=topic.code)
    df = to_frame([result], RunResult)
    check = expectation_check(
        "baseline_has_metric", df.with_columns(ok=pl.col("status") == "success"),
        [E("ExpectColumnValuesToNotBeNull", column="metric_value"),
         E("ExpectColumnValuesToBeInSet", column="ok", value_set=[True])],
        asset_key="baseline_results")
    a = result.attempts[-1] if result.attempts else None
    return dg.MaterializeResult(
        value=df, check_results=[check],
        metadata={spec.metric.name: (dg.MetadataValue.float(float(result.metric_value))
                                     if result.metric_value is not None else "n/a"),
                  "status": result.status, "reason": result.reason or "",
                  "duration_s": dg.MetadataValue.float(float(round(a.duration_s, 2))) if a else 0.0,
                  "metrics": dg.MetadataValue.json(result.metrics),
                  "mlflow_run_id": result.mlflow_run_id or "", **topic_metadata(topic)})
