"""Issue 14, "search, not a line": every kept idea gets several drafts, checked cheaply, near-
duplicates dropped; the run stage screens and runs the promising ones and keeps the best; the
local model writes changed definitions named by the plan. On the ray backend an idea's drafts
fan out (issue 17): screen runs together, full runs in waves of the promote budget."""
import threading
import time

import pytest

from assets.editing.drafts import cheap_order, failed_status, mark_duplicate, program_hash
from assets.run_results import running
from assets.run_results.experimenting import RunTarget
from assets.run_results.screening import full_run_order, next_wave, pick_best
from schemas.records import Draft, DraftRun, ExperimentPlan, FilteredIdea, Patch, RunResult
from schemas.topic import ExecutionSpec, TopicSpec, TopicSpecError, load_topic
from tests.support import paths


def _spec(home, **budget) -> TopicSpec:
    spec = load_topic(home / "experiments" / "toy_classification").model_copy(update={"check": None})
    return spec.model_copy(update={"budget": spec.budget.model_copy(update=budget)})


IDEA = FilteredIdea(idea_id="toy_classification/r1/x", topic="toy_classification", round="r1", name="x",
                    title="x", experiment="x", summary="x", max_similarity=0.0, independent=True, novel=True,
                    kept=True)
PLAN = ExperimentPlan(idea_id=IDEA.idea_id, name="x", changes=["raise the learning rate"], location="train",
                      evaluation="accuracy", expected_effect="", functions=["train"])


class SeededLLM:
    """Answers by how the call was sampled: greedy (seed None) and the resamples (seeds 1, 2) get
    `greedy`, the later drafts (their own seeds) get `by_seed[seed]`; parsed like resources.llm.LLM.
    `fmt` is the resource's own choice; `local` + edit_format "auto" is the local model."""

    def __init__(self, greedy: str, by_seed: dict[int, str], fmt: str = "whole", local: bool = False,
                 edit_format: str = "whole"):
        self.greedy, self.by_seed, self.fmt, self.local, self.edit_format = greedy, by_seed, fmt, local, edit_format
        self.asked: list[dict] = []

    def resolved_edit_format(self) -> str:
        return self.fmt

    def is_local(self) -> bool:
        return self.local

    def complete(self, messages, *, stage, parse=None, item=None, temperature=None, seed=None, max_retries=None,
                 **kw):
        from resources.llm import LLMCall, LLMResult, RejectedAnswer

        self.asked.append({"messages": messages, "temperature": temperature, "seed": seed})
        text = self.by_seed.get(seed, self.greedy)
        call = LLMCall(stage=stage, model="scripted")
        try:
            return LLMResult(value=parse(text), text=text, call=call)
        except RejectedAnswer as e:
            return LLMResult(text=text, call=call, error=str(e), error_kind=e.kind)


def _whole(code: str) -> str:
    return f"```python\n{code}```"


def _code(home) -> str:
    return (home / "experiments/toy_classification/experiment.py").read_text()


UNUSED_HELPER = '''

def cosine_lr(step, total):
    """A cosine schedule (never called)."""
    return LR * 0.5 * (1 + np.cos(np.pi * step / total))
'''


# -- drafts: asked, checked, deduplicated ---------------------------------------------------------

def test_each_idea_gets_its_drafts_and_the_first_viable_one_is_the_patch(home):
    from assets.patched_code.patching import make_patch

    code = _code(home)
    dead = code.replace("\n\ndef train(", UNUSED_HELPER + "\n\ndef train(")
    real = code.replace("LR = 0.05", "LR = 0.2")
    llm = SeededLLM(_whole(code), {11: _whole(dead), 12: _whole(real)})
    p = make_patch(_spec(home, drafts=3), code, IDEA, PLAN, llm, runner=None)
    assert [d.status for d in p.drafts] == ["no_op", "no_op", "ok"]
    assert "unchanged" in p.drafts[0].reason and "`cosine_lr`, which nothing calls" in p.drafts[1].reason
    assert p.status == "ok" and p.code == real and "LR = 0.2" in p.diff and p.drafts[2].diff == p.diff
    assert p.drafts[2].code_sha256 == program_hash(real) and p.drafts[2].how.startswith("sampled t=0.9")
    # the greedy draft was asked again (sampled) when unchanged; each later draft once, with its own seed
    assert [a["seed"] for a in llm.asked] == [None, 1, 2, 11, 12] and p.resamples == 2
    assert llm.asked[3]["messages"] != llm.asked[4]["messages"]  # each draft has its own instruction


def test_near_duplicate_drafts_are_dropped_before_any_run(home):
    from assets.patched_code.patching import make_patch

    code = _code(home)
    a = code.replace("LR = 0.05", "LR = 0.1")
    same_program = a.replace("LR = 0.1", "LR = 0.1  # a bolder step").replace(
        '"""Toy experiment', '"""Toy experiment, reformatted')  # comments and docstring only
    llm = SeededLLM(_whole(a), {11: _whole(same_program), 12: _whole(a)})
    p = make_patch(_spec(home, drafts=3), code, IDEA, PLAN, llm, runner=None)
    assert [d.status for d in p.drafts] == ["ok", "duplicate", "duplicate"]
    assert [d.duplicate_of for d in p.drafts] == [None, 0, 0]
    assert [d.index for d in cheap_order(p.drafts)] == [0]  # one run, not three


def test_a_patch_of_dead_code_only_is_not_implemented(home):
    from assets.patched_code.patching import make_patch

    code = _code(home)
    dead = code.replace("\n\ndef train(", UNUSED_HELPER + "\n\ndef train(")
    flag = code.replace('    ap.add_argument("--dry_run", action="store_true")\n',
                        '    ap.add_argument("--dry_run", action="store_true")\n'
                        '    ap.add_argument("--warmup", action="store_true")\n').replace(
        "    x, y = make_data(0)\n", "    x, y = make_data(0)\n    if args.warmup:\n        x = x * 0.5\n")
    llm = SeededLLM(_whole(dead), {11: _whole(flag)})
    p = make_patch(_spec(home, drafts=2), code, IDEA, PLAN, llm, runner=None)
    assert p.status == "no_op" and [d.status for d in p.drafts] == ["no_op", "no_op"]
    assert "never runs" in p.reason and "args.warmup" in p.reason
    r = running.run_idea(_spec(home), p, IDEA, llm, runner=None, tracker=None, parent_run=None, log=print)
    assert r.status == "not_implemented" and "never runs" in r.reason


def test_failed_status_says_no_op_only_when_every_draft_changed_nothing():
    d = lambda i, s: Draft(index=i, edit_format="whole", status=s)  # noqa: E731
    assert failed_status([d(0, "no_op"), d(1, "duplicate"), d(2, "no_op")])[0] == "no_op"
    assert failed_status([d(0, "no_op"), d(1, "syntax_error")])[0] == "syntax_error"
    assert failed_status([d(0, "llm_failed"), d(1, "dishonest")])[0] == "dishonest"
    ok = Draft(index=0, edit_format="whole", status="ok", code_sha256="h")
    assert mark_duplicate(ok.model_copy(update={"index": 3}), [ok]).status == "duplicate"
    assert cheap_order([ok.model_copy(update={"imports_ok": False}), ok.model_copy(update={"index": 1})])[0].index == 1


# -- the local model: changed definitions named by the plan, whole file as fallback ---------------

def test_local_model_writes_changed_definitions_named_by_the_plan(home):
    from assets.patched_code.patching import make_patch, patch_format

    code = _code(home)
    answer = ("```python\ndef train(x, y, epochs):\n    w, b = np.zeros(2), 0.0\n    for _ in range(epochs * 2):\n"
              "        p = 1 / (1 + np.exp(-(x @ w + b)))\n        w -= LR * x.T @ (p - y) / len(y)\n"
              "        b -= LR * float(np.mean(p - y))\n    return w, b\n```")
    llm = SeededLLM(answer, {}, local=True, edit_format="auto")
    assert patch_format(llm) == "functions"
    assert patch_format(SeededLLM("", {}, fmt="search_replace", edit_format="auto")) == "search_replace"
    p = make_patch(_spec(home, drafts=2), code, IDEA, PLAN, llm, runner=None)
    assert p.status == "ok" and p.edit_format == "functions" and "epochs * 2" in p.code
    assert "def make_data" in p.code  # the rest of the file is kept
    prompt = llm.asked[0]["messages"][-1]["content"]
    assert "The plan changes these parts of experiment.py: `train`" in prompt
    assert "only the code you change" in prompt  # the functions format's instructions


def test_whole_file_is_the_local_models_fallback(home):
    from assets.patched_code.patching import make_patch

    code = _code(home)
    whole = code.replace("EPOCHS = 30", "EPOCHS = 60")
    # every changed-definitions answer is unusable; the whole-file draft (greedy again) is not
    llm = SeededLLM("no code here", {}, local=True, edit_format="auto")
    ask = llm.complete

    def complete(messages, **kw):
        llm.greedy = _whole(whole) if "with every line of the file" in messages[-1]["content"] else "no code here"
        return ask(messages, **kw)

    llm.complete = complete
    p = make_patch(_spec(home, drafts=2), code, IDEA, PLAN, llm, runner=None)
    assert [d.edit_format for d in p.drafts] == ["functions", "functions", "whole"], p.drafts
    assert [d.status for d in p.drafts] == ["not_applied", "not_applied", "ok"]
    assert p.status == "ok" and p.edit_format == "whole" and "EPOCHS = 60" in p.code
    assert p.drafts[2].how.endswith("whole file (fallback)")


def test_plan_names_the_definitions_it_changes():
    from assets.experiment_plans.planning import MODULE, describe_definitions, plan_functions

    code = "LR = 0.1\n\nclass Net:\n    def forward(self, x):\n        return x\n\ndef train(n):\n    return n\n"
    assert plan_functions(code, "Net.forward", "add dropout before the head") == ["Net"]
    assert plan_functions(code, "train", "raise LR") == ["Net", "train", MODULE][1:]  # train, <module>
    assert plan_functions(code, "forward") == ["Net"]  # a method stands for its class
    assert plan_functions(code, "nothing relevant") == []
    assert "Net (class: forward)" in describe_definitions(code) and "assigning LR" in describe_definitions(code)


# -- the run stage: screening, full runs, the best kept -------------------------------------------

def _patch(codes: list[str | None], **extra) -> Patch:
    """A patch whose draft k has code codes[k] (None: a draft that changed nothing)."""
    drafts = [Draft(index=k, edit_format="whole", status="no_op" if c is None else "ok", code=c or "",
                    code_sha256=program_hash(c or str(k)), diff=f"diff {k}") for k, c in enumerate(codes)]
    first = cheap_order(drafts)[0]
    return Patch(idea_id=IDEA.idea_id, edit_format="whole", status="ok", code=first.code, diff=first.diff,
                 compiles=True, drafts=drafts, **extra)


class FakeRuns:
    """Stands in for run_with_repair / repeat_seeds: a code's (short, full) metric from a table
    (None: the run fails); counts screen and full runs."""

    def __init__(self, table: dict[str, tuple[float | None, float | None]], extra: dict[str, dict] | None = None):
        self.table, self.screen, self.full, self.seeded = table, [], [], []
        self.extra = extra or {}  # a code's other reported values (train loss, timings)

    def run_with_repair(self, target, code, *, workdir, **kw):
        screen = isinstance(target, RunTarget) and "--screen" in target.command
        (self.screen if screen else self.full).append(code)
        value = self.table[code][0 if screen else 1]
        if value is None:
            return RunResult(idea_id=kw["idea_id"], status="failed", reason="boom", n_attempts=1, final_code=code)
        return RunResult(idea_id=kw["idea_id"], status="success", metric_value=value,
                         metrics={"accuracy": value, **self.extra.get(code, {})}, n_attempts=1, final_code=code)

    def repeat_seeds(self, spec, result, runner, workdir, **kw):
        self.seeded.append(result.final_code)
        return result.model_copy(update={"seed_values": [result.metric_value]})


@pytest.fixture
def fake_runs(monkeypatch):
    def install(table, extra=None, fake=None):
        f = fake or FakeRuns(table, extra)
        monkeypatch.setattr(running, "run_with_repair", f.run_with_repair)
        monkeypatch.setattr(running, "repeat_seeds", f.repeat_seeds)
        monkeypatch.setattr(running, "track_idea", lambda *a, **k: None)
        return f
    return install


def _run(spec, patch, **kw):
    return running.run_idea(spec, patch, IDEA, llm=None, runner=None, tracker=None, parent_run=None,
                            **{"log": lambda m: None, **kw})


def test_drafts_are_searched_and_the_best_is_kept(home, fake_runs):
    """draft 0 changed nothing, draft 1 works but is worse, draft 2 is best: draft 2 wins."""
    runs = fake_runs({"worse": (None, 0.80), "best": (None, 0.85)})
    r = _run(_spec(home, promote=2), _patch([None, "worse", "best"]))
    assert r.status == "success" and r.draft == 2 and r.metric_value == 0.85 and r.final_code == "best"
    assert runs.full == ["worse", "best"] and runs.seeded == ["best"]  # only the winner repeats seeds
    assert [(d.index, d.status, d.metric_value) for d in r.drafts] == [(1, "success", 0.80), (2, "success", 0.85)]
    assert "cheap order" in r.rule


def test_without_screen_full_runs_stop_at_the_first_success(home, fake_runs):
    runs = fake_runs({"broken": (None, None), "ok": (None, 0.8), "better": (None, 0.9)})
    r = _run(_spec(home, promote=1), _patch(["broken", "ok", "better"]))
    assert runs.full == ["broken", "ok"] and r.draft == 1 and r.metric_value == 0.8
    assert [d.promoted for d in r.drafts] == [True, True, False]


def test_screening_promotes_only_the_top_drafts(home, fake_runs):
    spec = _spec(home, promote=1).model_copy(update={"screen": "python experiment.py --screen --out_dir {out_dir}"})
    runs = fake_runs({"a": (0.70, 0.80), "b": (0.75, 0.86), "c": (None, 0.99), "d": (0.72, 0.83)})
    r = _run(spec, _patch(["a", "b", "c", "d"]))
    assert runs.screen == ["a", "b", "c", "d"]  # every viable draft is screened
    assert runs.full == ["b"]  # one full run: the best short run
    assert r.draft == 1 and r.metric_value == 0.86 and "screened" in r.rule
    assert [d.screen_status for d in r.drafts] == ["success", "success", "failed", "success"]
    # promote 2: the two best short runs get full runs, the better full metric wins
    runs = fake_runs({"a": (0.70, 0.80), "b": (0.75, 0.82), "c": (None, 0.99), "d": (0.72, 0.83)})
    r = _run(spec.model_copy(update={"budget": spec.budget.model_copy(update={"promote": 2})}),
             _patch(["a", "b", "c", "d"]))
    assert runs.full == ["b", "d"] and r.draft == 3 and r.metric_value == 0.83


def test_a_promoted_draft_that_fails_passes_its_turn_down_the_ranking(home, fake_runs):
    spec = _spec(home, promote=1).model_copy(update={"screen": "python experiment.py --screen --out_dir {out_dir}"})
    runs = fake_runs({"a": (0.70, 0.80), "b": (0.75, None)})
    r = _run(spec, _patch(["a", "b"]))
    assert runs.full == ["b", "a"] and r.draft == 0 and r.status == "success"
    # nothing passes the screen: the first draft in cheap order still gets its full run (and repairs)
    runs = fake_runs({"a": (None, None), "b": (None, 0.9)})
    r = _run(spec, _patch(["a", "b"]))
    assert runs.full == ["a"] and r.status == "failed" and r.draft == 0


def test_one_viable_draft_is_not_screened(home, fake_runs):
    spec = _spec(home).model_copy(update={"screen": "python experiment.py --screen --out_dir {out_dir}"})
    runs = fake_runs({"a": (0.7, 0.8)})
    r = _run(spec, _patch([None, "a"]))
    assert runs.screen == [] and runs.full == ["a"] and r.draft == 1
    # no more viable drafts than promote: all get their full run, a short run would only add cost
    runs = fake_runs({"a": (0.7, 0.8), "b": (0.9, 0.85)})
    r = _run(spec.model_copy(update={"budget": spec.budget.model_copy(update={"promote": 2})}), _patch(["a", "b"]))
    assert runs.screen == [] and runs.full == ["a", "b"] and r.draft == 1 and "cheap order" in r.rule
    # a patch stored before drafts existed is its own single draft
    old = Patch(idea_id=IDEA.idea_id, edit_format="whole", status="ok", code="a", diff="d", compiles=True)
    assert _run(_spec(home), old).draft == 0


def test_screening_rule_minimises_too():
    runs = {i: DraftRun(index=i, screen_status="success", screen_value=v) for i, v in enumerate([0.3, 0.1, 0.2])}
    assert full_run_order([0, 1, 2], runs, "minimize") == [1, 2, 0]
    assert full_run_order([0, 1, 2], runs, "maximize") == [0, 2, 1]
    assert full_run_order([2, 0, 1], None, "maximize") == [2, 0, 1]
    done = {0: DraftRun(index=0, status="success", metric_value=0.5),
            1: DraftRun(index=1, status="success", metric_value=0.4), 2: DraftRun(index=2, status="failed")}
    assert pick_best([0, 1, 2], done, "minimize") == 1 and pick_best([0, 1, 2], done, "maximize") == 0
    assert pick_best([2], done, "maximize") is None


# -- the ray backend: an idea's drafts fan out (issue 17) -----------------------------------------

SCREEN = "python experiment.py --screen --out_dir {out_dir}"


def _ray(spec: TopicSpec) -> TopicSpec:
    return spec.model_copy(update={"execution": ExecutionSpec(backend="ray")})


class TogetherRuns(FakeRuns):
    """FakeRuns whose runs take a moment and are counted while in flight: the runs named in
    `meet` ((kind, code), kind "screen" or "full") wait at `barrier`, which opens only when all of
    them are in flight at once; codes in `boom` raise after it. `finished`: the runs that
    returned; `workdirs`: each run's work dir."""

    def __init__(self, table, barrier: threading.Barrier | None = None, meet=(), boom=()):
        super().__init__(table)
        self.barrier, self.meet, self.boom = barrier, set(meet), set(boom)
        self.lock = threading.Lock()
        self.active = self.max_active = 0
        self.finished, self.workdirs = [], {}

    def run_with_repair(self, target, code, *, workdir, **kw):
        kind = "screen" if isinstance(target, RunTarget) and "--screen" in target.command else "full"
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.workdirs[(kind, code)] = workdir
        try:
            if (kind, code) in self.meet:
                self.barrier.wait()
            if code in self.boom:
                raise RuntimeError(f"no sandbox for {code}")
            time.sleep(0.05)  # a run takes a while: one not waited for would not have finished
            r = super().run_with_repair(target, code, workdir=workdir, **kw)
            with self.lock:
                self.finished.append((kind, code))
            return r
        finally:
            with self.lock:
                self.active -= 1


def test_next_wave_is_one_draft_locally_and_the_missing_successes_on_ray():
    runs = {i: DraftRun(index=i) for i in range(4)}
    assert next_wave([2, 0, 1, 3], runs, 2) == [2] and next_wave([2, 0, 1, 3], runs, 2, together=True) == [2, 0]
    runs[2] = DraftRun(index=2, promoted=True, status="success", metric_value=0.5)
    runs[0] = DraftRun(index=0, promoted=True, status="failed")
    assert next_wave([2, 0, 1, 3], runs, 2, together=True) == [1] == next_wave([2, 0, 1, 3], runs, 2)
    assert next_wave([2, 0, 1, 3], runs, 4, together=True) == [1, 3]  # no more than the ranking holds
    assert next_wave([2, 0, 1, 3], runs, 1, together=True) == [] == next_wave([2, 0, 1, 3], runs, 1)  # enough
    done = {i: r.model_copy(update={"promoted": True}) for i, r in runs.items()}
    assert next_wave([2, 0, 1, 3], done, 2, together=True) == []  # the ranking is spent


def test_on_ray_the_full_runs_go_in_waves_of_the_promote_budget(home, fake_runs):
    """promote 2, three drafts: the first two full runs are in flight together (the barrier opens
    only then); the third runs only when one of them failed, in a wave of its own. The records
    and the chosen draft are the ones the local backend gives."""
    spec = _spec(home, promote=2)
    for table, full, chosen in [({"a": (None, 0.80), "b": (None, 0.85), "c": (None, 0.90)}, ["a", "b"], 1),
                                ({"a": (None, None), "b": (None, 0.85), "c": (None, 0.90)}, ["a", "b", "c"], 2)]:
        first_two = {("full", "a"), ("full", "b")}
        runs = fake_runs(table, fake=TogetherRuns(table, threading.Barrier(2, timeout=20), first_two))
        logs: list[str] = []
        r = _run(_ray(spec), _patch(["a", "b", "c"]), log=logs.append)
        assert sorted(runs.full[:2]) == ["a", "b"] and runs.full[2:] == full[2:] and runs.max_active == 2
        assert r.draft == chosen and runs.seeded == ["abc"[chosen]]
        assert [m for m in logs if "submitted together" in m] == [f"{IDEA.idea_id}: full runs of drafts 0, 1 "
                                                                  "submitted together"]
        assert len({str(w) for w in runs.workdirs.values()}) == len(full)  # a work dir per draft
        local = fake_runs(table)
        assert _run(spec, _patch(["a", "b", "c"])).model_dump() == r.model_dump() and local.full == full


def test_on_ray_the_screen_runs_of_all_drafts_go_together(home, fake_runs):
    spec = _spec(home, promote=1).model_copy(update={"screen": SCREEN})
    table = {"a": (0.70, 0.80), "b": (0.75, 0.86), "c": (None, 0.99)}
    meet = {("screen", c) for c in "abc"}
    runs = fake_runs(table, fake=TogetherRuns(table, threading.Barrier(3, timeout=20), meet))
    logs: list[str] = []
    r = _run(_ray(spec), _patch(["a", "b", "c"]), log=logs.append)
    assert sorted(runs.screen) == ["a", "b", "c"] and runs.max_active == 3 and runs.full == ["b"]
    assert f"{IDEA.idea_id}: screen runs of drafts 0, 1, 2 submitted together" in logs
    assert [str(runs.workdirs[("screen", c)].relative_to(home / "dagster_home")) for c in "abc"] == [
        f"workspaces/toy_classification/r1/x/draft-{k}/screen" for k in range(3)]
    fake_runs(table)
    assert _run(spec, _patch(["a", "b", "c"])).model_dump() == r.model_dump()


def test_on_the_local_backend_drafts_still_run_one_at_a_time(home, fake_runs, monkeypatch):
    monkeypatch.delenv("RESEARCHLOOP_BACKEND", raising=False)
    table = {"a": (0.9, None), "b": (0.8, 0.85), "c": (0.7, 0.90), "d": (None, 0.95)}
    logs: list[str] = []
    runs = fake_runs(table, fake=TogetherRuns(table))
    r = _run(_spec(home, promote=2), _patch(["a", "b", "c", "d"]), log=logs.append)
    assert runs.full == ["a", "b", "c"] and runs.max_active == 1 and r.draft == 2
    runs = fake_runs(table, fake=TogetherRuns(table))
    r = _run(_spec(home, promote=2).model_copy(update={"screen": SCREEN}), _patch(["a", "b", "c", "d"]),
             log=logs.append)
    assert runs.screen == ["a", "b", "c", "d"] and runs.full == ["a", "b", "c"] and runs.max_active == 1
    assert not [m for m in logs if "submitted together" in m]


def test_on_ray_an_exception_in_one_drafts_run_is_raised_after_the_others_finished(home, fake_runs):
    table = {"a": (0.9, 0.8), "b": (0.8, 0.85), "c": (0.7, 0.90)}
    runs = fake_runs(table, fake=TogetherRuns(table, threading.Barrier(2, timeout=20),
                                              {("full", "a"), ("full", "b")}, boom={"a"}))
    with pytest.raises(RuntimeError, match="no sandbox for a"):
        _run(_ray(_spec(home, promote=2)), _patch(["a", "b", "c"]))
    assert runs.finished == [("full", "b")] and "c" not in runs.full  # b ran to its end, no wave after
    # the same for a screen run
    spec = _ray(_spec(home, promote=1).model_copy(update={"screen": SCREEN}))
    runs = fake_runs(table, fake=TogetherRuns(table, threading.Barrier(3, timeout=20),
                                              {("screen", c) for c in "abc"}, boom={"b"}))
    with pytest.raises(RuntimeError, match="no sandbox for b"):
        _run(spec, _patch(["a", "b", "c"]))
    assert sorted(runs.finished) == [("screen", "a"), ("screen", "c")] and runs.full == []


def test_screen_field_needs_out_dir(tmp_path):
    import shutil

    d = tmp_path / "toy_classification"
    shutil.copytree(paths.FIXTURES / "toy_classification", d)
    y = d / "topic.yaml"
    y.write_text(y.read_text() + "screen: python experiment.py --screen\n")
    with pytest.raises(TopicSpecError, match="screen"):
        load_topic(d)
    y.write_text(y.read_text().replace("--screen\n", "--screen --out_dir {out_dir}\n"))
    spec = load_topic(d)
    assert spec.run_command("out", "screen")[-2:] == ["--out_dir", "out"] and spec.budget.drafts == 2


def test_shipped_screen_commands_are_shorter_runs_of_the_same_script():

    root = paths.EXPERIMENTS
    screened = [load_topic(d) for d in sorted(root.iterdir()) if (d / "topic.yaml").exists()]
    screened = [s for s in screened if s.screen]
    assert screened, "at least one shipped topic declares screen:"
    for s in screened:
        assert s.run_command("out", "screen")[:2] == s.run_command("out")[:2]
        assert "--screen" in s.screen and "--dry_run" not in s.screen
        assert "args.screen" in s.code_path.read_text()


def test_a_draft_that_computes_the_reference_numbers_is_no_effect_and_the_next_draft_runs(home, fake_runs):
    """Draft 0's run reports the reference's accuracy and train loss to the last digit (its
    timing differs): an edit with no effect, failed, so draft 1 gets its full run and is the
    idea's result. With only such drafts the idea is not implemented; its seeds never run."""
    ref = {"accuracy": 0.8, "train_loss": 0.412345, "train_time_s": 3.1}
    extra = {"dead": {"train_loss": 0.412345, "train_time_s": 2.9}, "real": {"train_loss": 0.39, "train_time_s": 3.3}}
    runs = fake_runs({"dead": (None, 0.8), "real": (None, 0.81)}, extra)
    r = _run(_spec(home, promote=1), _patch(["dead", "real"]), reference_metrics=ref)
    assert runs.full == ["dead", "real"] and r.status == "success" and r.draft == 1 and runs.seeded == ["real"]
    assert r.drafts[0].status == "failed" and r.drafts[0].reason.startswith(running.NO_EFFECT)
    assert "accuracy, train_loss" in r.drafts[0].reason
    runs = fake_runs({"dead": (None, 0.8)}, extra)
    r = _run(_spec(home, promote=1), _patch(["dead"]), reference_metrics=ref)
    assert r.status == "not_implemented" and r.reason.startswith(running.NO_EFFECT)
    # no reference values known (a record made before the rule): the run is the idea's result
    runs = fake_runs({"dead": (None, 0.8)}, extra)
    assert _run(_spec(home, promote=1), _patch(["dead"])).status == "success"


def test_the_no_effect_rule_needs_two_equal_values_besides_machine_values():
    ok = RunResult(idea_id="t/r1/i", status="success", metric_value=0.8, final_code="x",
                   metrics={"accuracy": 0.8, "train_loss": 0.41, "train_time_s": 3.0, "peak_mem_mb": 100.0})
    ref = {"accuracy": 0.8, "train_loss": 0.41, "train_time_s": 9.0, "peak_mem_mb": 120.0}
    assert running.no_effect(ok, ref).status == "failed"                        # timings and memory differ
    assert running.no_effect(ok, {**ref, "train_loss": 0.4100001}).status == "success"   # any value differs
    assert running.no_effect(ok, {"accuracy": 0.8, "train_time_s": 3.0}).status == "success"  # one value alone
    assert running.no_effect(ok, {}).status == "success"
    failed = ok.model_copy(update={"status": "failed", "reason": "boom"})
    assert running.no_effect(failed, ref).reason == "boom"


def test_seed0_metrics_reads_the_first_seed_back_from_a_repeated_result():
    from assets.shared.verdicts import seed0_metrics

    repeated = {"accuracy": 0.82, "accuracy_seed0": 0.8, "accuracy_spread": 0.01, "train_loss": 0.41}
    assert seed0_metrics(repeated, "accuracy") == {"accuracy": 0.8, "train_loss": 0.41}
    assert seed0_metrics({"accuracy": 0.8}, "accuracy") == {"accuracy": 0.8}


def test_an_idea_written_as_the_same_program_as_an_earlier_idea_is_not_run_twice():
    """Sentiment r2 of the effectiveness bench: the LLM's 'larger word embeddings' was exactly the
    round's tuning move EMBED_DIM 64 -> 128, and both ran (the same accuracy twice as evidence).
    The later idea's copy is a duplicate; with no other draft it is a no-op, with one it runs that."""
    from assets.patched_code.patching import without_repeated_programs

    def patch(idea: str, codes: list[str]) -> Patch:
        p = _patch(codes)
        return p.model_copy(update={"idea_id": f"t/r2/{idea}"})

    move, llm_same, llm_two, other = (patch("tune_embed_dim_up", ["EMBED_DIM = 128"]),
                                      patch("bigger_embeddings", ["EMBED_DIM = 128"]),
                                      patch("wider", ["EMBED_DIM = 128", "EMBED_DIM = 96"]),
                                      patch("bigrams", ["BIGRAMS = True"]))
    out = without_repeated_programs([move, llm_same, llm_two, other])
    assert out[0] is move and out[3] is other
    assert out[1].status == "no_op" and "the same program as t/r2/tune_embed_dim_up draft 0" in out[1].reason
    assert out[2].status == "ok" and out[2].code == "EMBED_DIM = 96"            # its other draft runs
    assert [d.status for d in out[2].drafts] == ["duplicate", "ok"]
    assert running.run_idea(None, out[1], IDEA, None, None, None, None, print).status == "not_implemented"
