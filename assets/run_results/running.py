"""Running one idea: its drafts (screened, then full runs: assets/run_results/screening.py), its
attempts, its seeds and its MLflow runs."""
import math
import re

from assets.editing.drafts import cheap_order, program_hash
from assets.run_results.experimenting import OUT_DIR, RunTarget
from assets.run_results.repair_search import RepairPolicy, run_with_repair
from assets.run_results.screening import RULE_CHEAP, RULE_SCREENED, full_run_order, next_wave, pick_best
from assets.run_results.seeds import each_at_once, repeat_seeds, second_look_seeds
from resources.llm import LLM
from resources.paths import under_home
from resources.runner import chosen_backend
from resources.safe_io import read_text_or
from resources.tracker import Tracker
from schemas.records import Draft, DraftRun, FilteredIdea, Patch, RunResult
from schemas.topic import TopicSpec


def candidates(patch: Patch) -> list[Draft]:
    """The patch's viable drafts in cheap order; a patch recorded before drafts existed is its
    own single draft."""
    if patch.drafts:
        return cheap_order(patch.drafts)
    return [Draft(index=0, edit_format=patch.edit_format, status="ok", diff=patch.diff, code=patch.code,
                  imports_ok=patch.imports_ok)]


UNDONE = "the repairs undid the idea's change: the code that ran is the round's reference code"


def undone(result: RunResult, reference_code: str | None) -> RunResult:
    """`result` marked failed when its repairs turned the draft back into the reference code
    (e.g. a wrong keyword dropped, and with it the idea's only change): its metric would be the
    reference's, not the idea's, so it is no evidence about the idea."""
    if (reference_code and result.status == "success" and result.n_attempts > 1
            and program_hash(result.final_code) == program_hash(reference_code)):
        return result.model_copy(update={"status": "failed", "reason": UNDONE})
    return result


NO_EFFECT = "its run reported exactly the reference code's values"  # + (keys): ...
# values that differ between two runs of the same program (clock, memory): not compared
MACHINE_VALUE = re.compile(r"(^|_)(time|times|duration|elapsed|wall|clock|seconds|secs|sec|s|ms|speed|throughput|"
                           r"memory|mem|rss|peak|mb|gb|gpu|cpu|device|host|pid|timestamp)($|_)", re.IGNORECASE)


def no_effect(result: RunResult, reference_metrics: dict[str, float]) -> RunResult:
    """`result` marked failed when its seed-0 run reported exactly what the reference code's
    seed-0 run reported, in at least two values besides timings (e.g. accuracy and train loss
    to the last digit): a change that computes the same numbers is an edit with no effect (dead
    code, a value overwritten later, a branch never taken), whatever its diff looks like. With
    one value (a held-out score alone) an equal value could be chance, and nothing is said."""
    if result.status != "success" or not reference_metrics:
        return result
    def values(m: dict) -> dict[str, float]:
        return {k: float(v) for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                and math.isfinite(v) and not MACHINE_VALUE.search(k)}
    mine, ref = values(result.metrics), values(reference_metrics)
    shared = sorted(set(mine) & set(ref))
    if len(shared) >= 2 and all(mine[k] == ref[k] for k in shared):
        return result.model_copy(update={"status": "failed", "reason": f"{NO_EFFECT} ({', '.join(shared)}): the "
                                         "change does not alter what is computed"})
    return result


def not_the_idea(result: RunResult) -> bool:
    """A run failed by `undone` or `no_effect`: it measured the reference, not the idea."""
    return result.status == "failed" and bool(result.reason) and (
        result.reason == UNDONE or result.reason.startswith(NO_EFFECT))


def run_idea(spec: TopicSpec, patch: Patch, idea: FilteredIdea, llm: LLM, runner, tracker: Tracker,
             parent_run: str | None, log, env: dict[str, str] | None = None,
             reference: float | None = None, reference_code: str | None = None,
             reference_metrics: dict[str, float] | None = None,
             reference_values: list[float] | None = None) -> RunResult:
    """Run an idea's drafts by the rule of assets/run_results/screening.py: short runs rank them
    when the topic has `screen:`, full runs (with repairs) go to the best until `budget.promote`
    succeeded, the best full metric is the result and only it repeats its seeds. `reference`: the
    mean of the round's reference code's seeds, which seed 0 must beat for the seeds to be repeated
    (None: the baseline's, see seeds.repeat_seeds). `reference_code`: the round's
    reference code; a full run whose repairs turned the draft back into it counts as failed
    (`undone`), and an idea whose chosen run was undone is not implemented. `reference_metrics`:
    what the reference code's seed-0 run reported; a full run that reports the same is failed
    too (`no_effect`), so the next draft gets its full run, and an idea left with only such runs
    is not implemented. `reference_values`: the reference code's seed values, against which a
    better but not yet significant result gets its second look (seeds.second_look_seeds).

    On the ray backend (`chosen_backend`, as for the seeds) the drafts' screen runs are submitted
    together, and the full runs go in waves (screening.next_wave): the next `promote` minus
    successes so far drafts at once, until `promote` succeeded; those are the drafts the local
    backend runs one after the other, with the same records and the same choice. Each draft has
    its own work dir (draft-<i>), so its runs are memoised as alone; an exception in one draft's
    run is raised once the others of its wave have finished."""
    if patch.status == "no_op":
        return RunResult(idea_id=patch.idea_id, status="not_implemented", reason=patch.reason)
    if patch.status != "ok":
        return RunResult(idea_id=patch.idea_id, status="failed", reason=f"patch {patch.status}: {patch.reason}")
    drafts = {d.index: d for d in candidates(patch)}
    cheap = list(drafts)
    root = under_home("workspaces", spec.name, idea.round, idea.name)
    single = len(cheap) == 1
    runs = {i: DraftRun(index=i) for i in cheap}

    def say(i: int):
        return log if single else (lambda m: log(f"[draft {i}] {m}"))

    def workdir(i: int):
        return root if single else root / f"draft-{i}"

    together = chosen_backend(spec.execution) == "ray"

    def each(run, which: list[int], what: str) -> list[RunResult]:
        """run(i) for the drafts `which`: at once on the ray backend, else one after the other."""
        if together and len(which) > 1:
            log(f"{patch.idea_id}: {what} of drafts {', '.join(map(str, which))} submitted together")
            return each_at_once(run, which)
        return [run(i) for i in which]

    def screen_run(i: int) -> RunResult:
        return run_with_repair(RunTarget.of_topic(spec, "screen"), drafts[i].code, runner=runner,
                               workdir=workdir(i) / "screen", idea_id=patch.idea_id, title=idea.title,
                               policy=RepairPolicy(edit_format=drafts[i].edit_format), log=say(i), env=env)

    def full_run(i: int) -> RunResult:
        policy = RepairPolicy(max_repairs=spec.budget.debug_attempts, edit_format=drafts[i].edit_format)
        r = run_with_repair(spec, drafts[i].code, runner=runner, llm=llm, workdir=workdir(i), idea_id=patch.idea_id,
                            title=idea.title, policy=policy, log=say(i), env=env)
        r = no_effect(undone(r, reference_code), reference_metrics or {})
        if not_the_idea(r):
            say(i)(f"{patch.idea_id}: {r.reason}")
        return r

    screened = None
    if spec.screen and len(cheap) > spec.budget.promote:  # rung 0: one short run per draft, no repairs
        for i, r in zip(cheap, each(screen_run, cheap, "screen runs")):
            runs[i].screen_status, runs[i].screen_value, runs[i].screen_reason = r.status, r.metric_value, r.reason
        screened = runs
    order = full_run_order(cheap, screened, spec.metric.goal)
    results = {}
    # rung 1: full runs with the repair search, down the ranking, until `promote` succeeded
    while wave := next_wave(order, runs, spec.budget.promote, together):
        for i, r in zip(wave, each(full_run, wave, "full runs")):
            results[i] = r
            runs[i] = runs[i].model_copy(update={"promoted": True, "status": r.status, "metric_value": r.metric_value,
                                                 "reason": r.reason, "n_attempts": r.n_attempts})
    chosen = pick_best(order, runs, spec.metric.goal)
    chosen = order[0] if chosen is None else chosen
    if not single:
        log(f"{patch.idea_id}: draft {chosen} chosen of {len(cheap)} viable draft(s); full runs: "
            + ", ".join(f"{i}={runs[i].status}" for i in order if runs[i].promoted))
    result = repeat_seeds(spec, results[chosen], runner, workdir(chosen), env=env, log=say(chosen),
                          reference=reference)
    result = second_look_seeds(spec, result, reference_values or [], reference_code, runner, workdir(chosen), env=env,
                               log=say(chosen))
    if not_the_idea(result):
        result = result.model_copy(update={"status": "not_implemented"})
    rule = (RULE_SCREENED if screened is not None else RULE_CHEAP).format(promote=spec.budget.promote)
    result = result.model_copy(update={"draft": chosen, "drafts": [runs[i] for i in cheap], "rule": rule})
    if result.mlflow_run_id is None:
        result.mlflow_run_id = track_idea(tracker, spec, idea, patch.model_copy(update={
            "diff": drafts[chosen].diff, "edit_format": drafts[chosen].edit_format}), result, parent_run,
            workdir(chosen))
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
