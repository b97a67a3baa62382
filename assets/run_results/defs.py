"""run_results (DOLPHIN 3.2): one step per idea runs (and repairs) its experiment."""
import re

import dagster as dg
import polars as pl

from assets.experiment_plans.planning import kept_ideas
from assets.round_reference.reference import reference_of
from assets.run_results.running import run_idea
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, usage_metadata
from assets.shared.partitions import round_x_topic, topic_in
from assets.shared.topics import spec_and_code_from_json
from resources.devices import device_slot, parallel_limit
from resources.llm import LLM, LLMCall
from resources.paths import under_home
from resources.runner import Runner
from resources.store import split_partition_key
from resources.tracker import Tracker
from schemas.frames import from_frame, to_frame
from schemas.records import FilteredIdea, Patch, RunResult

STEP_IO = "step_io_manager"  # per-idea outputs between the fan-out steps (pickled files in the instance)


CHECK_OUT = "run_results_success_has_metrics"


def _mapping_key(name: str, taken: set[str]) -> str:
    """A Dagster mapping key (letters, digits, underscores) unique within the round."""
    key = re.sub(r"[^A-Za-z0-9_]", "_", name)[:60] or "idea"
    base, n = key, 2
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    taken.add(key)
    return key


@dg.op(out=dg.DynamicOut(io_manager_key=STEP_IO), tags={"kind": "fan-out"})
def ideas_to_run(context: dg.OpExecutionContext, patched_code: pl.DataFrame, filtered_ideas: pl.DataFrame,
                 topic_brief: pl.DataFrame, round_reference: pl.DataFrame, tracker: Tracker):
    """One dynamic output per patched idea: each becomes its own `run_idea` step, carrying the
    topic as topic_brief captured it with the round's reference code (round_reference) and the
    mean of that code's seeds, the bar an idea's first seed must beat to be repeated."""
    topic, round_key = split_partition_key(context.partition_key)
    rt = reference_of(topic_brief, round_reference)
    captured = rt.to_json()
    ideas_by_id = {i.idea_id: i for i in kept_ideas(filtered_ideas)}
    parent = tracker.round_run(topic, round_key)
    taken: set[str] = set()
    for patch in from_frame(patched_code, Patch):
        idea = ideas_by_id[patch.idea_id]
        yield dg.DynamicOutput({"patch": patch.model_dump_json(), "idea": idea.model_dump_json(), "parent": parent,
                                "topic": captured, "reference_mean": rt.reference_mean,
                                "reference_metrics": rt.reference_metrics,
                                "reference_values": rt.reference.values},
                               mapping_key=_mapping_key(idea.name, taken))


@dg.op(out=dg.Out(io_manager_key=STEP_IO), tags={"kind": "experiment"})
def run_idea_step(context: dg.OpExecutionContext, job: dict, llm: LLM, runner: Runner, tracker: Tracker) -> dict:
    """Run (and repair) one idea's experiment while holding a device slot. Never raises: a
    crash becomes this idea's failed result, so the other ideas and the round go on."""
    patch, idea = Patch.model_validate_json(job["patch"]), FilteredIdea.model_validate_json(job["idea"])
    spec, reference_code = spec_and_code_from_json(job["topic"])
    with llm.track("run_results") as usage:  # in-process steps share the resource and run one by one
        try:
            with device_slot(under_home("slots")) as env:
                context.log.info(f"{idea.idea_id}: running with {env}")
                r = run_idea(spec, patch, idea, llm, runner, tracker, job["parent"], context.log.info, env=env,
                             reference=job.get("reference_mean"), reference_code=reference_code,
                             reference_metrics=job.get("reference_metrics") or {},
                             reference_values=job.get("reference_values") or [])
        except Exception as e:  # one idea's crash never fails the round
            context.log.exception(f"{idea.idea_id} crashed")
            r = RunResult(idea_id=idea.idea_id, status="failed", reason=f"{type(e).__name__}: {e}")
    context.log.info(f"{idea.idea_id}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
    return {"result": r.model_dump_json(), "calls": [c.model_dump() for c in usage.calls]}


@dg.op(out={"result": dg.Out(), CHECK_OUT: dg.Out()}, tags={"kind": "collect"})
def collect_run_results(context: dg.OpExecutionContext, outcomes: list, tracker: Tracker):
    results = [RunResult.model_validate_json(o["result"]) for o in outcomes]
    calls = [LLMCall.model_validate(c) for o in outcomes for c in o["calls"]]
    df = to_frame(results, RunResult)
    topic, round_key = split_partition_key(context.partition_key)
    yield dg.Output(df, "result", metadata={
        "succeeded": sum(r.status == "success" for r in results), "failed": sum(r.status == "failed" for r in results),
        "attempts": sum(r.n_attempts for r in results), "parallel_limit": parallel_limit(),
        "mlflow_round_run": tracker.round_run(topic, round_key) or "",
        "results": dg.MetadataValue.md(md_table([r.model_dump() for r in results],
                                                ["idea_id", "status", "draft", "n_attempts", "metric_value",
                                                 "reason", "mlflow_run_id"])),
        **usage_metadata(calls, by_idea=True),
    })
    yield expectation_check("success_has_metrics", df.with_columns(
        success_has_metric=(pl.col("status") != "success") | pl.col("metric_value").is_not_null()), [
        E("ExpectColumnValuesToBeInSet", column="status", value_set=["success", "failed", "not_implemented"]),
        E("ExpectColumnValuesToBeInSet", column="success_has_metric", value_set=[True]),
    ], asset_key="run_results")


@dg.graph_asset(
    partitions_def=round_x_topic, group_name="round", kinds={"python", "mlflow"}, ins={"topic_brief": topic_in()},
    description="Per idea (one step each, run concurrently up to the parallel limit): every attempt (command, "
                "exit, traceback frames, local code structure, fix) and the final metrics.",
    check_specs=[dg.AssetCheckSpec("success_has_metrics", asset="run_results", blocking=True,
                                   description="a run claiming success reports the topic's metric")],
)
def run_results(patched_code, filtered_ideas, topic_brief, round_reference):
    outcomes = ideas_to_run(patched_code, filtered_ideas, topic_brief, round_reference).map(run_idea_step).collect()
    result, check = collect_run_results(outcomes)
    return {"result": result, CHECK_OUT: check}
