"""Repairs that do not loop: an answer that gives back a version already run is asked again
once with a prompt that shows the versions already run and asks for a different change; a
second repeat ends the search with no further run. An answer that edits another file than the
code file (the harness, the scorer) is refused before a run. Sandboxed runs are real; the LLM
is the scripted fake of tests/assets/run_results/test_debugging.py, which records every prompt it was sent."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from assets.run_results.edit_scope import OTHER_FILE, EditScope, named_paths
from assets.run_results.prompts import DIFFERENT_CHANGE
from assets.run_results.repair_search import REPEATED, RepairPolicy, run_with_repair
from tests.support.debugging import BROKEN, FIX, SAME_ERROR, CountingRunner, FakeLLM, target

# an evaluator beside the code file: what a repair must never edit
HARNESS = textwrap.dedent("""\
    import json
    import sys


    def load(path):
        with open(path) as f:
            return json.load(f)


    def check(result, expected):
        if result["total"] != expected:
            print("wrong total", result["total"], "expected", expected)
            sys.exit(1)
        print("ok", result["total"])


    if __name__ == "__main__":
        check(load("result.json"), 12)
    """)


@pytest.fixture
def calc(tmp_path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "calc.py").write_text(BROKEN)
    (folder / "harness.py").write_text(HARNESS)
    return folder / "calc.py"


def search(script: Path, llm, workdir: Path, runner=None, **policy):
    return run_with_repair(target(script), script.read_text(), runner=runner or CountingRunner(), llm=llm,
                           workdir=workdir, idea_id=script.stem, log=lambda s: None,
                           policy=RepairPolicy(**{"max_repairs": 5, "edit_format": "functions", "mode": "traceback",
                                                  "suggestions": False, **policy}))


def debug_prompts(llm) -> list[str]:
    return [m[-1]["content"] for s, m in llm.requests if s == "debug"]


# -- a repeat is asked again once, differently; a second repeat ends the search ------------

def test_a_repeated_version_gets_a_different_prompt_and_a_second_repeat_ends_the_search(calc, tmp_path):
    """The model answers the same fix however it is asked: run once (same error, set aside),
    given back once (asked again, shown that version), given back again: the search stops with
    3 of its 5 asks spent and no run after the first fix."""
    llm, runner = FakeLLM(fix=SAME_ERROR), CountingRunner()
    res = search(calc, llm, tmp_path / "w", runner=runner)
    assert runner.runs == 2 and res.n_attempts == 2 and res.status == "failed"
    assert res.attempts[1].outcome == "same_error"
    asked = debug_prompts(llm)
    assert len(asked) == 3  # the first fix, its repeat, the re-ask: not the whole budget of 5
    assert DIFFERENT_CHANGE not in asked[1]  # the repeat came from the ordinary prompt
    again = asked[2]
    assert DIFFERENT_CHANGE in again and "already run (attempt 2)" in again
    assert "sum(list(values)) * factr" in again  # the version already run, as a diff against the current code
    assert "-    return sum(values) * factr" in again
    assert "still failed with the same error" not in again  # the ordinary notes give way to the list
    # lineage: the attempt whose repairs repeated says so, and the result says why the search ended
    last = res.attempts[-1]
    assert last.fix_status == REPEATED and "stopped" in last.fix_error and last.fix_rounds == 2
    assert "versions already run" in res.reason and "different change" in res.reason


def test_after_a_repeat_a_different_answer_runs(calc, tmp_path):
    llm = FakeLLM(fix=[SAME_ERROR, SAME_ERROR, FIX])
    res = search(calc, llm, tmp_path / "w")
    assert res.status == "success" and res.n_attempts == 3
    asked = debug_prompts(llm)
    assert len(asked) == 3 and DIFFERENT_CHANGE in asked[2]
    assert res.attempts[2].parent == 1 and res.attempts[2].fix_source == "llm"
    assert res.attempts[1].fix_rounds == 2  # the repeat and the re-ask, both after attempt 2


def test_a_repeat_with_no_budget_left_asks_nothing_more(calc, tmp_path):
    llm = FakeLLM(fix=SAME_ERROR)
    res = search(calc, llm, tmp_path / "w", max_repairs=2)
    assert res.n_attempts == 2 and len(debug_prompts(llm)) == 2
    assert res.attempts[-1].fix_status == REPEATED and "already run" in res.reason


def test_a_version_differing_only_in_comments_is_the_same_version(calc, tmp_path):
    """The same program with a comment added is not run again: it would repeat its result."""
    commented = SAME_ERROR.replace("    return", "    # keep the factor\n    return")
    llm = FakeLLM(fix=[SAME_ERROR, commented, commented])
    res = search(calc, llm, tmp_path / "w")
    assert res.n_attempts == 2 and len(debug_prompts(llm)) == 3 and res.attempts[-1].fix_status == REPEATED


# -- an answer that edits another file is refused before a run --------------------------------

EDITED_HARNESS = HARNESS.replace("sys.exit(1)", "pass")


@pytest.mark.parametrize("answer", [
    f"harness.py\n```python\n{EDITED_HARNESS}```",                  # aider's layout: the file name above the fence
    f"```python harness.py\n{EDITED_HARNESS}```",                   # the name in the fence's info string
    f"```python\n# harness.py\n{EDITED_HARNESS}```",                # a first-line comment naming the file
    "```python\n# harness.py, lines 12-13\n            pass\n```",  # the functions format's segment header
    f"```python\n{EDITED_HARNESS}```",                              # no name: the harness's content, edited
], ids=["name-above", "fence-info", "first-comment", "segment", "content"])
def test_an_answer_that_edits_the_harness_is_refused_without_a_run(calc, tmp_path, answer):
    llm, runner = FakeLLM(fix=answer), CountingRunner()
    res = search(calc, llm, tmp_path / "w", runner=runner, max_repairs=1, repair_format="whole")
    first = res.attempts[0]
    assert runner.runs == 1 and res.n_attempts == 1 and res.status == "failed"
    assert first.fix_status == OTHER_FILE and "harness.py" in first.fix_error and "calc.py" in first.fix_error
    assert "harness.py" in res.reason


def test_naming_the_code_file_itself_is_fine(calc, tmp_path):
    llm = FakeLLM(fix=f"calc.py\n{FIX}")
    res = search(calc, llm, tmp_path / "w")
    assert res.status == "success" and res.n_attempts == 2


def test_a_copy_of_the_code_beside_it_is_no_other_file(calc, tmp_path):
    """A fix that makes the code more like a copy kept in the folder (the reference) is still a
    fix of the code file: only an answer clearly more like another file is refused."""
    (calc.parent / "calc_reference.py").write_text(BROKEN.replace("factr", "factor"))
    res = search(calc, FakeLLM(fix=FIX), tmp_path / "w")
    assert res.status == "success" and res.n_attempts == 2


def test_named_paths_reads_header_positions_only(tmp_path):
    answer = ("Change the scorer:\n`score.py`:\n```python\nx = 1\n```\n"
              "--- a/topic.yaml\n+++ b/topic.yaml\n"
              "```python\nimport numpy as np\nnp.mean\n```\n")
    assert named_paths(answer) == ["score.py", "topic.yaml", "topic.yaml"]
    (tmp_path / "score.py").write_text("print(1)\n")
    scope = EditScope(tmp_path, "train.py")
    assert scope.refusal(answer, "x = 0\n") and "score.py" in scope.refusal(answer, "x = 0\n")
    # a name that is no file of the folder (a module attribute, a file to be written) is no edit of one
    assert scope.refusal("np.mean\n```python\nx = 2\n```", "x = 0\n", "x = 2\n") is None
    # a path outside the folder is never the code file
    assert scope.refusal("../evaluate.py\n```python\nx = 2\n```", "x = 0\n") is not None
    assert scope.refusal("```python /srv/grader/score.py\nx = 2\n```", "x = 0\n") is not None
