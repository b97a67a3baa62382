"""experiment_plans, patched_code and run_results (DOLPHIN 3.2): plan each kept idea, edit a
copy of the reference file, run it sandboxed and repair it from its traceback."""

import hashlib
import json
import re

import dagster as dg
import polars as pl

from assets.checks import E, expectation_check
from assets.experimenting import OUT_DIR, repeat_seeds, run_with_repair
from assets.partitions import round_asset, round_key_of, round_x_topic
from assets.patching import WHOLE_FILE_RETRIES, apply_edit, complete_resampled, status_of
from assets.prompts import patching as patch_prompts
from assets.prompts import plans as plan_prompts
from assets.report import md_table, usage_metadata
from assets.topic import topic_spec
from resources.devices import device_slot, parallel_limit
from resources.llm import LLM, LLMCall
from resources.paths import under_home
from resources.runner import Runner, prepare_workspace
from resources.store import split_partition_key
from resources.tracker import Tracker
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import PlanDraft
from schemas.records import ExperimentPlan, FilteredIdea, Patch, RunResult
from schemas.topic import TopicSpec

STEP_IO = "step_io_manager"  # per-idea outputs between the fan-out steps (pickled files in the instance)
CHECK_OUT = "run_results_success_has_metrics"


def make_plan(spec: TopicSpec, code: str, idea: FilteredIdea, llm: LLM) -> ExperimentPlan:
    res = llm.complete(plan_prompts.plan(code, spec.metric.name, idea.name, idea.title, idea.experiment, idea.summary),
                       stage="experiment_plans", schema=PlanDraft, max_tokens=400, item=idea.idea_id)
    if not res.ok:  # a plan is a refinement: fall back to the idea's own experiment text
        return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=[idea.experiment], location="",
                              evaluation=spec.metric.name, expected_effect="", error=res.error)
    p: PlanDraft = res.value
    return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=p.changes or [idea.experiment],
                          location=p.location, evaluation=p.evaluation, expected_effect=p.expected_effect)


def make_patch(spec: TopicSpec, code: str, idea: FilteredIdea, plan: ExperimentPlan, llm: LLM, runner) -> Patch:
    fmt = llm.resolved_edit_format()
    # an unchanged or uncompilable file is asked for again, sampled, before the idea counts as
    # not implemented (the 1.5B model returned the file unchanged for most ideas: bench/RESULTS.md "loop")
    res, resamples = complete_resampled(
        llm, patch_prompts.implement(code, spec.code, fmt, idea.title, idea.summary, plan.changes),
        resample_on=("no_op", "syntax_error"), stage="patched_code",
        parse=lambda t: apply_edit(code, t, fmt, spec.code), max_tokens=2500 if fmt == "whole" else 900,
        max_retries=WHOLE_FILE_RETRIES, item=idea.idea_id)
    if not res.ok:
        return Patch(idea_id=idea.idea_id, edit_format=fmt, status=status_of(res.error), reason=res.error,
                     resamples=resamples)
    patch = Patch(idea_id=idea.idea_id, edit_format=fmt, status="ok", diff=res.value.diff, code=res.value.code,
                  compiles=True, resamples=resamples)
    if spec.check:  # quick dry run in the sandbox: does it import and start?
        ws = under_home("workspaces", spec.name, idea.round, idea.name, "check")
        memo = ws.parent / f"check-{hashlib.sha256((spec.check + patch.code).encode()).hexdigest()[:16]}.json"
        if memo.exists():  # checked before (a resumed round): not again
            checked = json.loads(memo.read_text())
        else:
            prepare_workspace(spec.path, ws)
            (ws / spec.code).write_text(patch.code)
            r = runner.run(spec.run_command(OUT_DIR, "check"), ws, timeout_s=min(120.0, spec.budget.run_timeout_s),
                           memory_mb=spec.budget.memory_mb)
            checked = {"ok": r.exit_code == 0 and not r.timed_out,
                       "last_line": (r.stderr_tail.strip().splitlines() or ["(no output)"])[-1][:300]}
            memo.write_text(json.dumps(checked))
        patch.imports_ok = checked["ok"]
        if not patch.imports_ok:
            patch.reason = "self-check failed: " + checked["last_line"]
    return patch


def kept_ideas(df: pl.DataFrame) -> list[FilteredIdea]:
    return [i for i in from_frame(df, FilteredIdea) if i.kept]


@round_asset(
    "plans_complete", "one plan with at least one change per kept idea",
    "One detailed experiment plan per surviving idea.",
)
def experiment_plans(context: dg.AssetExecutionContext, filtered_ideas: pl.DataFrame, llm: LLM):
    topic, _ = round_key_of(context)
    spec = topic_spec(topic)
    code = spec.code_path.read_text()
    n0 = len(llm.calls())
    plans = llm.map(lambda i: make_plan(spec, code, i, llm), kept_ideas(filtered_ideas))
    df = to_frame(plans, ExperimentPlan)
    check = expectation_check("plans_complete", df.with_columns(n_changes=pl.col("changes").list.len()), [
        E("ExpectColumnValuesToBeUnique", column="idea_id"),
        E("ExpectColumnValuesToBeBetween", column="n_changes", min_value=1),
    ], asset_key="experiment_plans")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "count": len(plans), "fallbacks": sum(p.error is not None for p in plans),
        "plans": dg.MetadataValue.md(md_table([{**p.model_dump(), "changes": "; ".join(p.changes)} for p in plans],
                                              ["name", "changes", "location", "expected_effect", "error"])),
        **usage_metadata(llm.calls()[n0:], by_idea=True),
    })


@round_asset(
    "patches_compile", "every applied patch compiles and changes the file",
    "Per idea: the edit (diff), the patched file and its self-check.",
)
def patched_code(context: dg.AssetExecutionContext, experiment_plans: pl.DataFrame, filtered_ideas: pl.DataFrame,
                 llm: LLM, runner: Runner):
    topic, _ = round_key_of(context)
    spec = topic_spec(topic)
    code = spec.code_path.read_text()
    ideas_by_id = {i.idea_id: i for i in kept_ideas(filtered_ideas)}
    n0 = len(llm.calls())
    patches = []
    for plan in from_frame(experiment_plans, ExperimentPlan):
        p = make_patch(spec, code, ideas_by_id[plan.idea_id], plan, llm, runner)
        context.log.info(f"{plan.name}: {p.status}" + (f" ({p.reason})" if p.reason else ""))
        patches.append(p)
    df = to_frame(patches, Patch)
    check = expectation_check("patches_compile", df.with_columns(
        ok_compiles=(pl.col("status") != "ok") | (pl.col("compiles") & (pl.col("diff").str.len_chars() > 0))), [
        E("ExpectColumnValuesToBeInSet", column="status",
          value_set=["ok", "no_op", "not_applied", "syntax_error", "llm_failed"]),
        E("ExpectColumnValuesToBeInSet", column="ok_compiles", value_set=[True]),
    ], asset_key="patched_code")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "applied": sum(p.status == "ok" for p in patches), "failed": sum(p.status != "ok" for p in patches),
        "edit_format": llm.resolved_edit_format(),
        "patches": dg.MetadataValue.md(md_table([{**p.model_dump(), "diff_lines": p.diff.count("\n")} for p in patches],
                                                ["idea_id", "status", "diff_lines", "imports_ok", "reason"])),
        **usage_metadata(llm.calls()[n0:], by_idea=True),
    })


def run_idea(spec: TopicSpec, patch: Patch, idea: FilteredIdea, llm: LLM, runner, tracker: Tracker,
             parent_run: str | None, log, env: dict[str, str] | None = None) -> RunResult:
    if patch.status == "no_op":
        return RunResult(idea_id=patch.idea_id, status="not_implemented", reason=patch.reason)
    if patch.status != "ok":
        return RunResult(idea_id=patch.idea_id, status="failed", reason=f"patch {patch.status}: {patch.reason}")
    workdir = under_home("workspaces", spec.name, idea.round, idea.name)
    result = run_with_repair(spec, patch.code, runner=runner, llm=llm, workdir=workdir, idea_id=patch.idea_id,
                             title=idea.title, max_repairs=spec.budget.debug_attempts,
                             edit_format=patch.edit_format, log=log, env=env)
    result = repeat_seeds(spec, result, runner, workdir, env=env, log=log)
    if result.mlflow_run_id is None:
        result.mlflow_run_id = track_idea(tracker, spec, idea, patch, result, parent_run, workdir)
    return result


def track_idea(tracker: Tracker, spec: TopicSpec, idea: FilteredIdea, patch: Patch, result: RunResult,
               parent_run: str | None, workdir) -> str | None:
    """MLflow: a run per idea (nested in the round's run) holding the patch and the final code,
    and under it a run per attempt (params idea/attempt/edit format, its metrics, its logs, fix
    diff and final_info.json)."""
    run_id = tracker.log_run(
        spec.name, idea.name, {"researchloop.idea_id": idea.idea_id, "researchloop.round": idea.round,
                               "researchloop.kind": "idea"},
        params={"idea_id": idea.idea_id, "title": idea.title, "edit_format": patch.edit_format,
                "attempts": result.n_attempts, "status": result.status, "seeds": spec.budget.seeds},
        metrics={**result.metrics, **({"metric_spread": result.metric_spread} if result.seed_values else {})},
        texts={"patch.diff": patch.diff, "final_experiment.py": result.final_code},
        parent_id=parent_run, failed=result.status != "success")
    for a in result.attempts:
        info = workdir / f"attempt-{a.attempt}" / OUT_DIR / "final_info.json"
        tracker.log_run(
            spec.name, f"{idea.name} attempt {a.attempt}",
            {"researchloop.idea_id": idea.idea_id, "researchloop.kind": "attempt", "researchloop.attempt": str(a.attempt)},
            params={"idea_id": idea.idea_id, "attempt": a.attempt, "edit_format": patch.edit_format,
                    "exit_code": a.exit_code, "timed_out": a.timed_out, "fix_status": a.fix_status or "",
                    "error": a.error or ""},
            metrics={**a.metrics, "duration_s": a.duration_s},
            texts={"stdout_tail.txt": a.stdout_tail, "stderr_tail.txt": a.stderr_tail, "fix.diff": a.fix_diff,
                   "local_structure.txt": a.local_structure,
                   "error_notes.txt": a.error_notes,
                   "final_info.json": info.read_text() if info.is_file() else ""},
            parent_id=run_id, failed=a.error is not None)
    return run_id


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
                 tracker: Tracker):
    """One dynamic output per patched idea: each becomes its own `run_idea` step."""
    topic, round_key = split_partition_key(context.partition_key)
    ideas_by_id = {i.idea_id: i for i in kept_ideas(filtered_ideas)}
    parent = tracker.round_run(topic, round_key)
    taken: set[str] = set()
    for patch in from_frame(patched_code, Patch):
        idea = ideas_by_id[patch.idea_id]
        yield dg.DynamicOutput({"patch": patch.model_dump_json(), "idea": idea.model_dump_json(), "parent": parent},
                               mapping_key=_mapping_key(idea.name, taken))


@dg.op(out=dg.Out(io_manager_key=STEP_IO), tags={"kind": "experiment"})
def run_idea_step(context: dg.OpExecutionContext, job: dict, llm: LLM, runner: Runner, tracker: Tracker) -> dict:
    """Run (and repair) one idea's experiment while holding a device slot. Never raises: a
    crash becomes this idea's failed result, so the other ideas and the round go on."""
    patch, idea = Patch.model_validate_json(job["patch"]), FilteredIdea.model_validate_json(job["idea"])
    spec = topic_spec(idea.topic)
    n0 = len(llm.calls())  # in-process, steps share one resource: only this step's calls
    try:
        with device_slot(under_home("slots")) as env:
            context.log.info(f"{idea.idea_id}: running with {env}")
            r = run_idea(spec, patch, idea, llm, runner, tracker, job["parent"], context.log.info, env=env)
    except Exception as e:  # one idea's crash never fails the round
        context.log.exception(f"{idea.idea_id} crashed")
        r = RunResult(idea_id=idea.idea_id, status="failed", reason=f"{type(e).__name__}: {e}")
    context.log.info(f"{idea.idea_id}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
    return {"result": r.model_dump_json(), "calls": [c.model_dump() for c in llm.calls()[n0:]]}


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
                                                ["idea_id", "status", "n_attempts", "metric_value", "reason", "mlflow_run_id"])),
        **usage_metadata(calls, by_idea=True),
    })
    yield expectation_check("success_has_metrics", df.with_columns(
        success_has_metric=(pl.col("status") != "success") | pl.col("metric_value").is_not_null()), [
        E("ExpectColumnValuesToBeInSet", column="status", value_set=["success", "failed", "not_implemented"]),
        E("ExpectColumnValuesToBeInSet", column="success_has_metric", value_set=[True]),
    ], asset_key="run_results")


@dg.graph_asset(
    partitions_def=round_x_topic, group_name="round", kinds={"python", "mlflow"},
    description="Per idea (one step each, run concurrently up to the parallel limit): every attempt (command, "
                "exit, traceback frames, local code structure, fix) and the final metrics.",
    check_specs=[dg.AssetCheckSpec("success_has_metrics", asset="run_results", blocking=True,
                                   description="a run claiming success reports the topic's metric")],
)
def run_results(patched_code, filtered_ideas):
    outcomes = ideas_to_run(patched_code, filtered_ideas).map(run_idea_step).collect()
    result, check = collect_run_results(outcomes)
    return {"result": result, CHECK_OUT: check}
