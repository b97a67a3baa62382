"""assets/editing/honesty.py: a repair that deletes the training or the evaluation is a failure."""
from __future__ import annotations

import pytest

from assets.editing.honesty import essentials, honesty_problems
from resources.paths import REPO_ROOT

REF = (REPO_ROOT / "experiments/pointcloud_classification/experiment.py").read_text()


def test_reference_has_every_essential():
    e = essentials(REF, "accuracy")
    assert e["backward"] == 1 and e["optimizer_step"] == 1 and e["training_loop"] >= 1
    assert e["evaluation"] >= 1 and e["writes_results"] >= 1 and e["metric"] == 1
    assert e["silenced_errors"] == 0 and e["constant_metric"] == 0


def test_honest_fix_passes():
    fixed = REF.replace("x.transpose(1, 2)", "x.permute(0, 2, 1)")
    assert honesty_problems(REF, fixed, "accuracy") == []


@pytest.mark.parametrize("old,new,problem", [
    ("        loss.backward()\n", "", "removes the backward pass"),
    ("        optimizer.step()\n", "", "removes the optimizer step"),
    ("model.eval()\nwith torch.no_grad():\n    pred", "if True:\n    pred", "removes the evaluation"),
    ('    json.dump({"accuracy": accuracy, "train_loss": train_loss, "train_time_s": train_time}, f, indent=2)',
     "    f.write('{}')", "removes the metric"),
    ('{"accuracy": accuracy,', '{"acc": accuracy,', "removes the metric"),
    ('{"accuracy": accuracy,', '{"accuracy": 0.99,', "adds a constant written as the metric"),
    ("accuracy = (pred == y_test).float().mean().item()", "accuracy = 0.95", "adds a constant written as the metric"),
    ("        loss.backward()\n",
     "        try:\n            loss.backward()\n        except Exception:\n            pass\n",
     "adds a try/except that silences errors"),
])
def test_dishonest_fixes_are_named(old, new, problem):
    assert REF.count(old) == 1
    problems = honesty_problems(REF, REF.replace(old, new), "accuracy")
    assert any(p.startswith(problem) for p in problems), problems


def test_results_not_written_at_all_is_flagged():
    no_results = REF[:REF.index("os.makedirs(args.out_dir")]
    assert honesty_problems(REF, no_results, "accuracy") == [
        "removes the writing of the results (json.dump / final_info.json)", "removes the metric in the results"]


def test_training_loop_replaced_by_a_single_step_is_flagged():
    start = REF.index("for epoch in range(epochs):")
    end = REF.index("train_time = time.time() - t0")
    one_step = "loss = F.cross_entropy(model(x_train), y_train)\nloss.backward()\noptimizer.step()\n"
    no_loop = REF[:start] + one_step + REF[end:]
    assert honesty_problems(REF, no_loop, "accuracy") == [
        "removes the training loop (a loop around the backward pass or optimizer step)"]


def test_without_metric_name_only_structure_is_checked():
    assert honesty_problems(REF, REF.replace('{"accuracy": accuracy,', '{"acc": accuracy,')) == []


def test_features_absent_from_the_original_are_not_required():
    script = "import json\nprint(json.dumps({'a': 1}))\n"
    assert honesty_problems(script, "print('{\"a\": 1}')\n") == [
        "removes the writing of the results (json.dump / final_info.json)"]
    assert honesty_problems("x = 1\nprint(x)\n", "print(1)\n") == []


def test_existing_silencing_try_is_not_new():
    src = "try:\n    import yaml\nexcept Exception:\n    pass\nprint(1)\n"
    assert honesty_problems(src, src.replace("print(1)", "print(2)")) == []


def test_required_calls_and_unparsable_original():
    broken = REF.replace("for epoch in range(epochs):", "for epoch in range(epochs)")  # SyntaxError
    assert essentials(broken) is None
    fixed_but_no_step = REF.replace("        optimizer.step()\n", "")
    assert "removes the optimizer step (optimizer.step())" in honesty_problems(broken, fixed_but_no_step)
    assert honesty_problems(broken, REF) == []
    # (still writes final_info.json, so only the required call is missing)
    assert honesty_problems(REF, REF.replace("json.dump(", "print("), required_calls=["json.dump"]) == \
        ["no longer calls json.dump()"]
    assert honesty_problems(REF, REF, required_calls=["json.dump", "not_called_anywhere"]) == []


def test_unparsable_repair_is_left_to_the_compile_check():
    assert honesty_problems(REF, "def (:\n") == []


# -- idea patches (assets/patched_code/patching.py make_patch) ------------------------------

class _EditLLM:
    """Answers whole files in order (the last repeats), parsed like resources.llm.LLM does."""

    def __init__(self, *files: str):
        self.files, self.asked = list(files), 0

    def resolved_edit_format(self) -> str:
        return "whole"

    def complete(self, messages, *, stage, parse=None, item=None, **kw):
        from resources.llm import LLMCall, LLMResult, RejectedAnswer

        self.asked += 1
        text = f"```python\n{self.files[min(self.asked, len(self.files)) - 1]}```"
        try:
            return LLMResult(value=parse(text), text=text, call=LLMCall(stage=stage, model="scripted"))
        except RejectedAnswer as e:
            return LLMResult(text=text, call=LLMCall(stage=stage, model="scripted"), error=str(e), error_kind=e.kind)


def _patch(code: str, llm):
    from assets.patched_code.patching import make_patch
    from schemas.records import ExperimentPlan, FilteredIdea
    from schemas.topic import load_topic

    spec = load_topic(REPO_ROOT / "experiments/pointcloud_classification").model_copy(update={"check": None})
    # one draft: its own re-asks are what is tested (drafts: tests/assets/patched_code/test_drafts.py)
    spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"drafts": 1})})
    idea = FilteredIdea(idea_id="p/r1/x", topic=spec.name, round="r1", name="x", title="x", experiment="x",
                        summary="x", max_similarity=0.0, independent=True, novel=True, kept=True)
    plan = ExperimentPlan(idea_id=idea.idea_id, name="x", changes=["c"], location="", evaluation="accuracy",
                          expected_effect="")
    return make_patch(spec, code, idea, plan, llm, runner=None)


@pytest.mark.parametrize("old,new,problem", [
    ("        loss.backward()\n", "", "removes the backward pass"),
    ("accuracy = (pred == y_test).float().mean().item()", "accuracy = 0.97", "adds a constant written as the metric"),
    ('{"accuracy": accuracy,', '{"acc": accuracy,', "removes the metric"),
])
def test_an_idea_patch_that_drops_training_evaluation_or_the_metric_is_rejected(old, new, problem):
    assert REF.count(old) == 1
    llm = _EditLLM(REF.replace(old, new))
    p = _patch(REF, llm)
    assert p.status == "dishonest" and problem in p.reason and llm.asked == 3  # asked again, sampled, twice
    honest = REF.replace("x.transpose(1, 2)", "x.permute(0, 2, 1)")
    p = _patch(REF, _EditLLM(REF.replace(old, new), honest))  # a later answer that keeps everything is used
    assert p.status == "ok" and p.code == honest
