"""An experiment's seeds: a successful result's code run again with more seeds (`repeat_seeds`,
`with_more_seeds`), the second look at a better but not yet significant result
(`second_look_seeds`, `reference_seeds`), the baseline's memoised seeds (`baseline_values`,
`run_reference`), and the threads that wait on runs side by side on the ray backend
(`each_at_once`). Every seed is one run of the code, no repairs (`run_with_repair` with the
default RepairPolicy), memoised like any run."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from assets.run_results.experimenting import RunTarget, code_hash
from assets.run_results.repair_search import run_with_repair
from assets.shared.verdicts import beats, second_look, seed_summary
from resources.paths import under_home
from resources.runner import chosen_backend
from schemas.records import RunResult
from schemas.topic import TopicSpec


def repeat_seeds(spec: TopicSpec, result: RunResult, runner, workdir: Path, env: dict[str, str] | None = None,
                 log: Callable[[str], None] = print, reference: float | None = None, gate: bool = True) -> RunResult:
    """With budget.seeds = n > 1: run a successful result's final code again with seeds 1..n-1
    (the run itself was seed 0; `run_seeds`: side by side on the ray backend); the metric becomes
    the mean, with the per-seed values and their spread (sample standard deviation) beside it. A
    seed that fails fails the result: the change is not robust. With `gate` (ideas) only a result
    whose seed 0 beats the `reference` (default: the mean of the baseline's seeds, memoised, see
    `baseline_values`) is repeated; the others keep their one seed, which the verdict's test
    cannot call an improvement."""
    n = spec.budget.seeds or 1
    if result.status != "success" or result.seed_values:
        return result
    if n <= 1:
        return result.model_copy(update={"seed_values": [result.metric_value]})
    if gate:
        ref = reference
        if ref is None:
            base = baseline_values(spec, runner, env=env, log=log)
            ref = seed_summary(base)[0] if base else None
        if not beats(result.metric_value, ref, spec.metric.goal):
            log(f"{result.idea_id}: seed 0 gave {result.metric_value:.4g}, not better than the baseline's "
                f"{'?' if ref is None else f'{ref:.4g}'}: not repeated")
            return result.model_copy(update={"seed_values": [result.metric_value]})
    return with_more_seeds(spec, result, [result.metric_value], n, runner, workdir, env=env, log=log)


def with_more_seeds(spec: TopicSpec, result: RunResult, values: list[float], n: int, runner, workdir: Path,
                    env: dict[str, str] | None = None, log: Callable[[str], None] = print, **extra) -> RunResult:
    """`result` after its code ran seeds len(values)..n-1 as well (`run_seeds`): the metric
    becomes the mean of all n values, with their spread and seed 0's value beside it; `extra`
    fields are set too. A seed that fails fails the result: the change is not robust."""
    values = list(values)
    seeds = range(len(values), n)
    for seed, r in zip(seeds, run_seeds(spec, result.final_code, seeds, runner, workdir, result.idea_id, env=env,
                                        log=log)):
        if r.status != "success":
            return result.model_copy(update={"status": "failed", "reason": f"seed {seed} failed: {r.reason}"})
        values.append(r.metric_value)
    mean, spread = seed_summary(values)
    m = spec.metric.name
    return result.model_copy(update={
        "metric_value": mean, "seed_values": values, "metric_spread": spread, **extra,
        "metrics": {**result.metrics, f"{m}_seed0": values[0], m: mean, f"{m}_spread": spread}})


def second_look_seeds(spec: TopicSpec, result: RunResult, reference_values: list[float], reference_code: str | None,
                      runner, workdir: Path, env: dict[str, str] | None = None,
                      log: Callable[[str], None] = print) -> RunResult:
    """The second look (assets/shared/verdicts.py): a repeated result better than the
    reference's `reference_values` by more than the tolerance but not significant runs seeds
    n..2n-1, and the reference code the same seeds (`reference_seeds`); the result then carries
    all its 2n values and the reference's 2n (`reference_values`), which the verdict tests at the
    second look's level. A seed of the idea that fails fails the result (`with_more_seeds`);
    reference seeds that fail leave the result at its first look."""
    n = spec.budget.seeds or 1
    if (not spec.budget.second_look or result.status != "success" or result.reference_values or not reference_code
            or not second_look(result.seed_values, reference_values, spec.metric.goal, spec.metric.tolerance, n)):
        return result
    log(f"{result.idea_id}: better than the reference on {n} seeds but not significant: a second look, "
        f"seeds {n}..{2 * n - 1} for it and for the reference")
    ref = reference_seeds(spec, reference_code, reference_values, 2 * n, runner, env=env, log=log)
    if ref is None:
        log(f"{result.idea_id}: the reference's extra seeds failed: the first look stands")
        return result
    return with_more_seeds(spec, result, result.seed_values, 2 * n, runner, workdir, env=env, log=log,
                           reference_values=ref)


def reference_seeds(spec: TopicSpec, code: str, values: list[float], n: int, runner,
                    env: dict[str, str] | None = None, log: Callable[[str], None] = print) -> list[float] | None:
    """The reference code's metric for seeds 0..n-1: the `values` already known, then the missing
    seeds run, memoised per code (workspaces/<topic>/reference-<sha>/seed-<k>) under a lock, since
    the round's idea steps run side by side and need the same seeds. None when one fails."""
    if len(values) >= n:
        return list(values[:n])
    from filelock import FileLock

    root = under_home("workspaces", spec.name, f"reference-{hashlib.sha256(code.encode()).hexdigest()[:12]}")
    missing = range(len(values), n)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / "seeds.lock")):
        runs = run_seeds(spec, code, missing, runner, root, f"{spec.name}/reference", env=env, log=log)
    if len(runs) != len(missing) or any(r.status != "success" for r in runs):
        return None
    return list(values) + [r.metric_value for r in runs]


def run_seeds(spec: TopicSpec, code: str, seeds: Sequence[int], runner, workdir: Path, idea_id: str,
              env: dict[str, str] | None = None, log: Callable[[str], None] = print) -> list[RunResult]:
    """`code` run once per seed, no repairs, each memoised in workdir/seed-<k> (a resumed run
    redoes only the seeds that did not finish). On the ray backend (the topic's `execution.backend`,
    else RESEARCHLOOP_BACKEND) the seeds are submitted together, one thread per seed waiting on its
    Ray task, and each runs to its end whatever the others do; on the local backend they run one
    after the other (side by side they would only share the same cores) and stop at the first
    that fails. Returns the results in seed order up to and including the first that failed; an
    exception raised for a seed (e.g. no sandbox on a worker) is raised, after the other seeds
    finished, where the loop one after the other would have raised it."""
    def one(seed: int) -> RunResult:
        return run_with_repair(RunTarget.of_topic(spec, seed=seed), code, runner=runner,
                               workdir=workdir / f"seed-{seed}", idea_id=f"{idea_id} seed {seed}", log=log, env=env)

    seeds = list(seeds)
    fan_out = len(seeds) > 1 and chosen_backend(spec.execution) == "ray"
    if fan_out:
        log(f"{idea_id}: seeds {', '.join(map(str, seeds))} submitted together")
    outcomes = _each_in_a_thread(one, seeds) if fan_out else None
    results: list[RunResult] = []
    for i, seed in enumerate(seeds):
        if outcomes is None:
            r = one(seed)
        else:
            r, error = outcomes[i]
            if error is not None:
                raise error
        results.append(r)
        if r.status != "success":
            break
    return results


def _each_in_a_thread(fn: Callable, items: list) -> list[tuple[object, BaseException | None]]:
    """fn(item) for all items at once, one thread each (the caller bounds their number: seeds are
    at most 10, an idea's drafts at most 8); (result, exception) per item, in item order. Daemon
    threads: a step cancelled while they wait on their Ray tasks can still exit (Ray then ends the
    tasks of the gone process), where a ThreadPoolExecutor's threads would be waited for at exit."""
    out: list[tuple[object, BaseException | None]] = [(None, None)] * len(items)

    def work(i: int, item) -> None:
        try:
            out[i] = (fn(item), None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
            out[i] = (None, e)

    threads = [threading.Thread(target=work, args=(i, item), name=f"researchloop-{i}", daemon=True)
               for i, item in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def each_at_once(fn: Callable, items: list) -> list:
    """fn(item) for all items at once (`_each_in_a_thread`), the results in item order; an
    exception raised for one item is raised once all have finished (the first in item order,
    where a loop one after the other would have raised it)."""
    outcomes = _each_in_a_thread(fn, items)
    for _, error in outcomes:
        if error is not None:
            raise error
    return [r for r, _ in outcomes]


def baseline_values(spec: TopicSpec, runner, env: dict[str, str] | None = None,
                    log: Callable[[str], None] = print) -> list[float]:
    """The baseline's per-seed metric values: the memoised runs of `run_reference` (run now if the
    baseline has not run with these seeds yet); [] when the baseline fails."""
    from filelock import FileLock

    # idea steps run side by side: one of them runs what is missing, the others then read its memos
    with FileLock(str(under_home("workspaces", spec.name) / "baseline.lock")):
        r = run_reference(spec, runner, None, log=log, env=env)
    if r.status != "success":
        return []
    return r.seed_values or [r.metric_value]


def run_reference(spec: TopicSpec, runner, tracker, log: Callable[[str], None] = print,
                  env: dict[str, str] | None = None, code: str | None = None) -> RunResult:
    """The baseline: the unmodified reference code, no repairs. `code`: the reference as
    topic_brief captured it (default: the file in the topic folder, for code outside a round)."""
    code = spec.code_path.read_text() if code is None else code
    workdir = under_home("workspaces", spec.name, "baseline")
    result = run_with_repair(spec, code, runner=runner, workdir=workdir, idea_id=f"{spec.name}/baseline",
                             title="baseline", log=log, env=env)
    result = repeat_seeds(spec, result, runner, workdir, env=env, log=log, gate=False)
    if result.mlflow_run_id is None and tracker is not None:
        a = result.attempts[-1]
        result.mlflow_run_id = tracker.log_run(
            spec.name, f"{spec.name} baseline",
            {"researchloop.kind": "baseline", "researchloop.code": code_hash(code, spec)},
            params={"topic": spec.name, "command": " ".join(a.command)}, metrics=result.metrics,
            texts={"stdout_tail.txt": a.stdout_tail, "stderr_tail.txt": a.stderr_tail, "experiment.py": code},
            failed=result.status != "success")
    return result
