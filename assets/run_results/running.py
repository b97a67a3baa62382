"""Running one idea: its attempts, its seeds and its MLflow runs."""
from assets.run_results.experimenting import OUT_DIR, repeat_seeds, run_with_repair
from resources.llm import LLM
from resources.paths import under_home
from resources.safe_io import read_text_or
from resources.tracker import Tracker
from schemas.records import FilteredIdea, Patch, RunResult
from schemas.topic import TopicSpec


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
        tracker.log_run(
            spec.name, f"{idea.name} attempt {a.attempt}",
            {"researchloop.idea_id": idea.idea_id, "researchloop.kind": "attempt",
             "researchloop.attempt": str(a.attempt)},
            params={"idea_id": idea.idea_id, "attempt": a.attempt, "edit_format": patch.edit_format,
                    "exit_code": a.exit_code, "timed_out": a.timed_out, "fix_status": a.fix_status or "",
                    "error": a.error or ""},
            metrics={**a.metrics, "duration_s": a.duration_s},
            texts={"stdout_tail.txt": a.stdout_tail, "stderr_tail.txt": a.stderr_tail, "fix.diff": a.fix_diff,
                   "local_structure.txt": a.local_structure,
                   "error_notes.txt": a.error_notes,
                   # read safely: the run made it (a link to /proc/self/environ would copy ours)
                   "final_info.json": read_text_or(f"{OUT_DIR}/final_info.json", workdir / f"attempt-{a.attempt}")},
            parent_id=run_id, failed=a.error is not None)
    return run_id
