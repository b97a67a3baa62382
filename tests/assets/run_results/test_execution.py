"""A topic's `execution:` block (schemas/topic.py ExecutionSpec) and the seed fan-out.

The block's backend and Ray request travel TopicSpec -> RunTarget -> Runner.run(execution=) ->
run_on_ray's task options, the topic's fields winning over the environment's; a result's extra
seeds and the baseline's seeds run side by side on the ray backend and one after the other on
the local one, each memoised, and so do an idea's drafts (each in its own folder). No cluster
here: fake runners and a fake `ray` module (the real cluster test is in tests/resources/test_ray_backend.py)."""
from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest

from assets.run_results.experimenting import RunTarget, run_once
from assets.run_results.seeds import baseline_values, repeat_seeds
from schemas.records import RunResult
from schemas.topic import ExecutionSpec
from tests.support.execution import SCRIPT, FakeRunner, topic


def first_seed(spec) -> RunResult:
    return RunResult(idea_id="seedy/r1/x", status="success", metric_value=0.80, final_code=SCRIPT,
                     metrics={"accuracy": 0.80})


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    for var in ("RESEARCHLOOP_BACKEND", "RESEARCHLOOP_RAY_CPUS", "RESEARCHLOOP_RAY_GPUS", "RESEARCHLOOP_RAY_RESOURCES",
                "RESEARCHLOOP_UNSANDBOXED"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))


# --------------------------------------------------------------------------- the block reaches the runner

def test_the_topics_block_reaches_runner_run_and_a_topic_without_it_passes_nothing(tmp_path):
    spec = topic(tmp_path / "a", {"backend": "ray", "gpus": 1, "resources": {"gpu_slot": 1}})
    runner = FakeRunner()
    a = run_once(RunTarget.of_topic(spec), SCRIPT, runner, tmp_path / "wa", 1)
    assert a.error is None and a.metrics == {"accuracy": pytest.approx(0.80)}
    assert runner.calls[0]["execution"] is spec.execution and runner.calls[0]["memory_mb"] == 1024
    assert RunTarget.of_topic(spec, "run", seed=2).execution is spec.execution
    plain = topic(tmp_path / "b")
    runner = FakeRunner()
    assert run_once(RunTarget.of_topic(plain), SCRIPT, runner, tmp_path / "wb", 1).error is None
    assert "execution" not in runner.calls[0]  # runners written before the block keep working


def test_the_scorer_and_the_patch_self_check_go_where_the_topic_says_too(tmp_path):
    from assets.patched_code.patching import self_check
    from schemas.records import FilteredIdea

    spec = topic(tmp_path, {"backend": "ray"}, extra={"score": "python score.py --pred {pred_dir} --out {out_dir}",
                                                      "check": "python exp.py --dry_run --out_dir {out_dir}"})
    runner = FakeRunner()
    a = run_once(RunTarget.of_topic(spec), SCRIPT, runner, tmp_path / "w", 1)
    assert a.error is None and len(runner.calls) == 2  # the run, then its scorer
    assert all(c["execution"] is spec.execution for c in runner.calls)
    idea = FilteredIdea(idea_id="seedy/r1/x", topic="seedy", round="r1", name="x", title="X", experiment="e",
                        summary="s", max_similarity=0.0, independent=True, kept=True)
    assert self_check(spec, idea, SCRIPT, runner)[0] is True
    assert len(runner.calls) == 3 and runner.calls[2]["execution"] is spec.execution


@pytest.mark.parametrize("env,block,where", [
    ("", None, "local"),                       # nothing said: local, as before
    ("ray", None, "ray"),                      # the environment alone still works
    ("", {"backend": "ray"}, "ray"),           # the topic's choice wins over the environment's default
    ("ray", {"backend": "local"}, "local"),
    ("ray", {"gpus": 1}, "ray"),               # no backend in the block: the environment's
    ("local", {"gpus": 1}, "local"),
])
def test_runner_run_goes_where_the_topic_says_else_the_environment(ws, monkeypatch, env, block, where):
    import resources.ray_backend as rb
    import resources.runner as rr
    from resources.ray_backend import lost_result

    if env:
        monkeypatch.setenv("RESEARCHLOOP_BACKEND", env)
    seen: list = []

    def record(where):
        return lambda cmd, wd, **kw: seen.append((where, kw)) or lost_result(cmd, wd, "x")

    monkeypatch.setattr(rb, "run_on_ray", record("ray"))
    monkeypatch.setattr(rr, "run_in_sandbox", record("local"))
    execution = ExecutionSpec.model_validate(block) if block is not None else None
    rr.Runner().run(["python", "-c", "pass"], ws, timeout_s=5, execution=execution)
    assert [s[0] for s in seen] == [where]
    kw = seen[0][1]
    sandbox = kw["sandbox"] if where == "local" else kw["limits"]["sandbox"]
    assert sandbox is True  # the block never turns the sandbox off, on a worker neither
    if where == "ray":
        assert kw["execution"] is execution
    # the old call, without the keyword, is the environment's choice
    seen.clear()
    rr.Runner().run(["python", "-c", "pass"], ws, timeout_s=5)
    assert [s[0] for s in seen] == ["ray" if env == "ray" else "local"]


def _fake_ray(monkeypatch) -> list[dict]:
    """A `ray` module that records the task options and job of each submitted attempt and then
    times out (so run_on_ray returns the 'no node free' record naming what was asked for)."""
    submitted: list[dict] = []
    rx = types.SimpleNamespace(GetTimeoutError=type("GetTimeoutError", (Exception,), {}),
                               RayTaskError=type("RayTaskError", (Exception,), {}),
                               RayError=type("RayError", (Exception,), {}))

    class Remote:
        def options(self, **opts):
            submitted.append({"opts": opts})
            return self

        def remote(self, job):
            submitted[-1]["job"] = job
            return "ref"

    def get(ref, timeout):
        raise rx.GetTimeoutError()

    fake = types.SimpleNamespace(is_initialized=lambda: True, remote=lambda fn: Remote(), get=get,
                                 cancel=lambda ref, force: None, exceptions=rx)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setitem(sys.modules, "ray.exceptions", rx)
    return submitted


def test_the_ray_task_asks_for_the_topics_resources_field_by_field(ws, monkeypatch):
    from resources.runner import Runner

    monkeypatch.setenv("RESEARCHLOOP_RAY_CPUS", "4")
    monkeypatch.setenv("RESEARCHLOOP_RAY_GPUS", "0")
    monkeypatch.setenv("RESEARCHLOOP_RAY_RESOURCES", "gpu_slot=1")
    submitted = _fake_ray(monkeypatch)
    ex = ExecutionSpec(backend="ray", gpus=1, resources={"a100": 1})
    r = Runner().run(["python", "x.py"], ws, timeout_s=5, memory_mb=2048, execution=ex)
    opts, job = submitted[0]["opts"], submitted[0]["job"]
    assert (opts["num_cpus"], opts["num_gpus"], opts["resources"]) == (4.0, 1.0, {"a100": 1.0})  # cpus: the env's
    assert opts["memory"] == 2048 << 20 and job["cpus"] == 4.0 and job["limits"]["sandbox"] is True
    assert r.exit_code is None and "{'a100': 1.0} 4 CPU / 1 GPU" in r.stderr_tail
    # no block (or empty fields): the environment's request, as before
    monkeypatch.setenv("RESEARCHLOOP_BACKEND", "ray")
    Runner().run(["python", "x.py"], ws, timeout_s=5, memory_mb=2048)
    opts = submitted[1]["opts"]
    assert (opts["num_cpus"], opts["num_gpus"], opts["resources"]) == (4.0, 0.0, {"gpu_slot": 1.0})
    # `resources: {}` asks for no custom resource at all, cpus from the block
    Runner().run(["python", "x.py"], ws, timeout_s=5, execution=ExecutionSpec(cpus=0.5, resources={}))
    opts, job = submitted[2]["opts"], submitted[2]["job"]
    assert opts["resources"] == {} and opts["num_cpus"] == 0.5 and job["cpus"] == 0.5


# --------------------------------------------------------------------------- seeds

@pytest.mark.parametrize("env,block", [("", {"backend": "ray"}), ("ray", None)])
def test_a_results_seeds_run_side_by_side_on_the_ray_backend(tmp_path, monkeypatch, env, block):
    if env:
        monkeypatch.setenv("RESEARCHLOOP_BACKEND", env)
    spec = topic(tmp_path, block, seeds=4)
    runner = FakeRunner(barrier=threading.Barrier(3, timeout=20))  # seeds 1, 2, 3 must be in flight together
    logs: list[str] = []
    r = repeat_seeds(spec, first_seed(spec), runner, tmp_path / "work", log=logs.append, reference=0.5)
    assert sorted(runner.seeds()) == [1, 2, 3] and runner.max_active == 3
    assert r.status == "success" and r.seed_values == pytest.approx([0.80, 0.81, 0.82, 0.83])  # in seed order
    assert any("seeds 1, 2, 3 submitted together" in m for m in logs)


@pytest.mark.parametrize("env,block", [("", None), ("ray", {"backend": "local"})])
def test_a_results_seeds_run_one_after_the_other_on_the_local_backend(tmp_path, monkeypatch, env, block):
    if env:
        monkeypatch.setenv("RESEARCHLOOP_BACKEND", env)
    spec = topic(tmp_path, block, seeds=4)
    runner = FakeRunner()
    r = repeat_seeds(spec, first_seed(spec), runner, tmp_path / "work", reference=0.5)
    assert runner.seeds() == [1, 2, 3] and runner.max_active == 1
    assert r.seed_values == pytest.approx([0.80, 0.81, 0.82, 0.83])
    # a failing seed stops the others, as before
    runner = FakeRunner(fail={1})
    r = repeat_seeds(spec, first_seed(spec), runner, tmp_path / "work2", reference=0.5)
    assert runner.seeds() == [1] and r.status == "failed" and r.reason.startswith("seed 1 failed: ")


def test_a_memoised_seed_is_not_run_again(tmp_path):
    spec = topic(tmp_path, {"backend": "ray"})
    runner, work = FakeRunner(), tmp_path / "work"
    done = repeat_seeds(spec, first_seed(spec), runner, work, reference=0.5)
    assert sorted(runner.seeds()) == [1, 2] and done.seed_values == pytest.approx([0.80, 0.81, 0.82])
    again = repeat_seeds(spec, first_seed(spec), runner, work, reference=0.5)  # a resumed step
    assert sorted(runner.seeds()) == [1, 2] and again.seed_values == done.seed_values
    for memo in (work / "seed-2").glob("result-*.json"):  # seed 2 was cut short this time
        memo.unlink()
    assert repeat_seeds(spec, first_seed(spec), runner, work, reference=0.5).seed_values == done.seed_values
    assert sorted(runner.seeds()) == [1, 2, 2]


def test_on_ray_a_failing_seed_is_recorded_and_the_others_still_finish(tmp_path):
    spec = topic(tmp_path, {"backend": "ray"}, seeds=4)
    runner = FakeRunner(barrier=threading.Barrier(3, timeout=20), fail={1})
    r = repeat_seeds(spec, first_seed(spec), runner, tmp_path / "work", reference=0.5)
    assert r.status == "failed" and r.reason.startswith("seed 1 failed: ") and "diverged" in r.reason
    assert sorted(runner.seeds()) == [1, 2, 3]
    assert all(list((tmp_path / "work" / f"seed-{s}").glob("result-*.json")) for s in (2, 3))  # memoised
    # an exception (not a failed run) is raised as before, once the other seeds have finished
    runner = FakeRunner(barrier=threading.Barrier(3, timeout=20), boom={2})
    with pytest.raises(RuntimeError, match="no sandbox for seed 2"):
        repeat_seeds(spec, first_seed(spec), runner, tmp_path / "work3", reference=0.5)
    assert sorted(runner.seeds()) == [1, 2, 3]
    assert all(list((tmp_path / "work3" / f"seed-{s}").glob("result-*.json")) for s in (1, 3))


def test_the_baselines_seeds_run_side_by_side_on_ray_and_stay_memoised(tmp_path):
    spec = topic(tmp_path, {"backend": "ray"})
    runner = FakeRunner(barrier=threading.Barrier(2, timeout=20))  # seeds 1 and 2 together (seed 0 first)
    assert baseline_values(spec, runner) == pytest.approx([0.80, 0.81, 0.82])
    assert runner.seeds()[0] == 0 and sorted(runner.seeds()[1:]) == [1, 2] and runner.max_active == 2
    assert baseline_values(spec, runner) == pytest.approx([0.80, 0.81, 0.82]) and len(runner.calls) == 3


class DraftRunner(FakeRunner):
    """FakeRunner whose full runs of drafts 0 and 1 wait for each other at `together` (only runs
    in flight at once get through); `drafts`: the draft folder of each call, in call order."""

    def __init__(self, together: threading.Barrier | None = None, **kw):
        super().__init__(**kw)
        self.together, self.drafts = together, []

    def run(self, command, workdir, timeout_s, env=None, memory_mb=None, hide=(), **kw):
        draft = Path(workdir).parent.name
        with self.lock:
            self.drafts.append(draft)
        if self.together is not None and draft in ("draft-0", "draft-1"):
            self.together.wait()
        return super().run(command, workdir, timeout_s, env=env, memory_mb=memory_mb, hide=hide, **kw)


def test_an_ideas_drafts_run_together_on_ray_in_their_own_folders_and_a_resumed_step_redoes_none(tmp_path,
                                                                                               monkeypatch):
    """The real run_with_repair: promote 2, three drafts, on ray drafts 0 and 1 run at once, each
    in its workspaces/.../draft-<i> (memo, attempts, logs); the third never runs. Run again (a
    resumed step) nothing runs; with draft 1's memo gone only draft 1 runs again."""
    from assets.editing.drafts import program_hash
    from assets.run_results import running
    from schemas.records import Draft, FilteredIdea, Patch

    monkeypatch.setattr(running, "track_idea", lambda *a, **k: None)
    spec = topic(tmp_path, {"backend": "ray"}, seeds=1, promote=2)
    codes = [SCRIPT + f"# draft {k}\n" for k in range(3)]
    drafts = [Draft(index=k, edit_format="whole", status="ok", code=c, code_sha256=program_hash(c), diff=f"d{k}")
              for k, c in enumerate(codes)]
    patch = Patch(idea_id="seedy/r1/x", edit_format="whole", status="ok", code=codes[0], diff="d0", compiles=True,
                  drafts=drafts)
    idea = FilteredIdea(idea_id="seedy/r1/x", topic="seedy", round="r1", name="x", title="x", experiment="x",
                        summary="x", max_similarity=0.0, independent=True, novel=True, kept=True)

    def run(runner) -> RunResult:
        return running.run_idea(spec, patch, idea, llm=None, runner=runner, tracker=None, parent_run=None,
                                log=lambda m: None)

    runner = DraftRunner(together=threading.Barrier(2, timeout=20))
    first = run(runner)
    assert sorted(runner.drafts) == ["draft-0", "draft-1"]  # together: one after the other breaks the barrier
    assert first.status == "success" and first.draft == 0 and [d.promoted for d in first.drafts] == [True, True, False]
    root = tmp_path / "home" / "workspaces" / "seedy" / "r1" / "x"
    for k in (0, 1):
        folder = root / f"draft-{k}"
        assert len(list(folder.glob("result-*.json"))) == 1 and (folder / "attempt-1").is_dir()
    again = DraftRunner()
    assert run(again).model_dump() == first.model_dump() and again.drafts == []  # resumed: nothing runs
    for memo in (root / "draft-1").glob("result-*.json"):
        memo.unlink()
    assert run(again).model_dump() == first.model_dump() and again.drafts == ["draft-1"]


# --------------------------------------------------------------------------- the second look

REF = [0.80, 0.81, 0.82, 0.805, 0.815, 0.81]      # the reference code, seeds 0..5
IDEA = [0.83, 0.80, 0.835, 0.83, 0.825, 0.835]    # the idea's code: better, noisy


class CodeRunner(FakeRunner):
    """Reports by which code is in the workspace: the idea's (a marker line) or the reference's."""

    def run(self, command, workdir, timeout_s, env=None, memory_mb=None, hide=(), **kw):
        r = super().run(command, workdir, timeout_s, env=env, memory_mb=memory_mb, hide=hide, **kw)
        seed = self.calls[-1]["seed"]
        self.calls[-1]["idea"] = idea = "# idea" in (Path(workdir) / "exp.py").read_text()
        if r.exit_code == 0:
            (Path(workdir) / "out" / "final_info.json").write_text(f'{{"accuracy": {(IDEA if idea else REF)[seed]}}}')
        return r


def _first_look(spec) -> RunResult:
    return RunResult(idea_id="seedy/r1/x", status="success", metric_value=sum(IDEA[:3]) / 3, seed_values=IDEA[:3],
                     final_code=SCRIPT + "# idea\n", metrics={"accuracy": sum(IDEA[:3]) / 3, "accuracy_seed0": IDEA[0]})


def test_a_better_but_not_significant_result_gets_a_second_look_on_both_sides(tmp_path):
    """p = 0.21 on 3 vs 3 seeds: seeds 3..5 run for the idea and for the reference code (once per
    reference code: a second idea reuses them); 6 vs 6 is then significant at the second look's
    0.02, which 6 vs the first 3 would not be."""
    from assets.run_results.seeds import second_look_seeds
    from assets.shared.verdicts import ALPHA_SECOND_LOOK, judge_seeds

    spec, runner = topic(tmp_path), CodeRunner()
    r = second_look_seeds(spec, _first_look(spec), REF[:3], SCRIPT, runner, tmp_path / "work")
    assert r.seed_values == pytest.approx(IDEA) and r.reference_values == pytest.approx(REF)
    assert sorted((c["idea"], c["seed"]) for c in runner.calls) == [(False, 3), (False, 4), (False, 5),
                                                                   (True, 3), (True, 4), (True, 5)]
    assert r.metric_value == pytest.approx(sum(IDEA) / 6) and r.metrics["accuracy_seed0"] == IDEA[0]
    assert judge_seeds(r.seed_values, r.reference_values, "maximize", 0.001, alpha=ALPHA_SECOND_LOOK)[0] \
        == "improvement"
    assert judge_seeds(r.seed_values, REF[:3], "maximize", 0.001, alpha=ALPHA_SECOND_LOOK)[0] == "maintenance"
    # the reference's extra seeds are memoised per code: another idea of the round reuses them
    second = second_look_seeds(spec, _first_look(spec).model_copy(update={"idea_id": "seedy/r1/y"}), REF[:3], SCRIPT,
                               runner, tmp_path / "work-y")
    assert second.reference_values == pytest.approx(REF)
    assert [c["idea"] for c in runner.calls[6:]] == [True, True, True]
    # a result already looked at twice is left alone (a resumed step)
    assert second_look_seeds(spec, r, REF[:3], SCRIPT, runner, tmp_path / "work") is r


def test_no_second_look_when_significant_far_off_switched_off_or_the_reference_fails(tmp_path):
    from assets.run_results.seeds import second_look_seeds

    spec, runner = topic(tmp_path), CodeRunner()
    first = _first_look(spec)
    clear = first.model_copy(update={"seed_values": [0.90, 0.905, 0.91], "metric_value": 0.905})
    assert second_look_seeds(spec, clear, REF[:3], SCRIPT, runner, tmp_path / "a") is clear      # already p < 0.05
    worse = first.model_copy(update={"seed_values": [0.80, 0.79, 0.81], "metric_value": 0.80})
    assert second_look_seeds(spec, worse, REF[:3], SCRIPT, runner, tmp_path / "b") is worse      # not better
    off = spec.model_copy(update={"budget": spec.budget.model_copy(update={"second_look": False})})
    assert second_look_seeds(off, first, REF[:3], SCRIPT, runner, tmp_path / "c") is first
    assert runner.calls == []
    failing = CodeRunner(fail={4})
    r = second_look_seeds(spec, first, REF[:3], SCRIPT, failing, tmp_path / "d")
    assert r.seed_values == first.seed_values and r.reference_values == []      # the first look stands
    assert all(not c["idea"] for c in failing.calls)                            # the idea's seeds never ran


def test_a_second_look_verdict_is_tested_against_the_reference_values_at_the_stricter_level():
    from assets.feedback_summary.feedback import summarise
    from schemas.records import FilteredIdea

    idea = FilteredIdea(idea_id="seedy/r1/x", topic="seedy", round="r1", name="x", title="x", experiment="x",
                        summary="x", max_similarity=0.0, independent=True, novel=True, kept=True)
    looked = RunResult(idea_id="seedy/r1/x", status="success", metric_value=sum(IDEA) / 6, seed_values=IDEA,
                       reference_values=REF)
    [f] = summarise([idea], [looked], baseline=0.81, goal="maximize", tolerance=0.001, baseline_values=REF[:3])
    assert f.verdict == f.baseline_verdict == "improvement" and "(second look)" in f.reason
    assert (f.n_seeds, f.n_baseline_seeds) == (6, 6) and f.p_value < 0.02
    assert f.reference_value == pytest.approx(sum(REF) / 6)
    # p = 0.0167 passes 0.02; the same numbers judged at 0.01 would not: the level is the second look's
    from assets.shared.verdicts import judge_seeds
    assert judge_seeds(IDEA, REF, "maximize", 0.001, alpha=0.01)[0] == "maintenance"
