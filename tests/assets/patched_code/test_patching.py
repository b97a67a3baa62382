"""assets/editing/edit_formats/: edit formats (whole file / SEARCH-REPLACE) as pure functions."""
from __future__ import annotations

import textwrap

import pytest

from assets.editing.edit_formats import (
    EditError,
    apply_edit,
    check_compiles,
    edit_status,
)
from assets.editing.edit_formats.search_replace import (
    apply_search_replace,
    parse_search_replace,
)
from assets.editing.edit_formats.whole import extract_whole_file
from tests.support.patching import ScriptedLLM, _whole

SOURCE = textwrap.dedent("""\
    import numpy as np

    LR = 0.05
    EPOCHS = 30


    class Model:
        def __init__(self, dim):
            self.w = np.zeros(dim)

        def step(self, x, y):
            if x is not None:
                grad = x.T @ (x @ self.w - y)
                self.w -= LR * grad
            return self.w
    """)


def _status(excinfo) -> str:
    return excinfo.value.status


# -- extract_whole_file -----------------------------------------------------------------

def test_whole_file_python_fence():
    text = "Here you go:\n```python\nimport os\nprint(os.sep)\n```\nThat is all."
    assert extract_whole_file(text) == "import os\nprint(os.sep)\n"


def test_whole_file_fence_without_tag_and_py_tag():
    assert extract_whole_file("```\nx = 1\n```") == "x = 1\n"
    assert extract_whole_file("```py\nx = 2\n```") == "x = 2\n"


def test_whole_file_picks_longest_block():
    text = ("First a snippet:\n```python\nLR = 0.1\n```\nNow the file:\n"
            "```python\nimport os\n\nLR = 0.1\nEPOCHS = 60\nprint(LR, EPOCHS)\n```\n"
            "and again the key line:\n```python\nEPOCHS = 60\n```\n")
    assert extract_whole_file(text) == "import os\n\nLR = 0.1\nEPOCHS = 60\nprint(LR, EPOCHS)\n"


def test_whole_file_normalises_surrounding_newlines():
    assert extract_whole_file("```python\n\n\nx = 1\n\n\n```") == "x = 1\n"


@pytest.mark.parametrize("bare", ["import os\nprint(1)", "from a import b\n", '"""doc"""\nx = 1', "# c\nx = 1"])
def test_whole_file_bare_code(bare):
    out = extract_whole_file("\n\n" + bare + "\n\n")
    assert out == bare.strip("\n") + "\n"


@pytest.mark.parametrize("text", ["Sorry, I cannot write this code.", "", "def f():\n    return 1"])
def test_whole_file_no_code_is_not_applied(text):
    with pytest.raises(EditError) as ei:
        extract_whole_file(text)
    assert _status(ei) == "not_applied"
    assert str(ei.value).startswith("not_applied: ")


def test_whole_file_non_python_block_before_python_block():
    text = ("Run it with:\n```bash\npython experiment.py --out_dir out\n```\n"
            "The new file:\n```python\nimport os\nLR = 0.1\n```\n")
    assert extract_whole_file(text) == "import os\nLR = 0.1\n"


# -- parse_search_replace ---------------------------------------------------------------

def test_parse_single_aider_block_with_filename_line():
    text = textwrap.dedent("""\
        experiment.py
        ```python
        <<<<<<< SEARCH
        LR = 0.05
        =======
        LR = 0.1
        >>>>>>> REPLACE
        ```
        """)
    assert parse_search_replace(text) == [("LR = 0.05", "LR = 0.1")]


def test_parse_multiple_blocks_in_order_multiline():
    text = ("<<<<<<< SEARCH\nLR = 0.05\nEPOCHS = 30\n=======\nLR = 0.1\nEPOCHS = 60\n>>>>>>> REPLACE\n"
            "some words\n"
            "<<<<<<< SEARCH\n    def step(self, x, y):\n=======\n    def step(self, x, y, lr=LR):\n"
            ">>>>>>> REPLACE\n")
    assert parse_search_replace(text) == [
        ("LR = 0.05\nEPOCHS = 30", "LR = 0.1\nEPOCHS = 60"),
        ("    def step(self, x, y):", "    def step(self, x, y, lr=LR):"),
    ]


@pytest.mark.parametrize("n", [7, 8, 9, 10])
def test_parse_seven_or_more_markers(n):
    text = f"{'<' * n} SEARCH\na = 1\n{'=' * n}\na = 2\n{'>' * n} REPLACE\n"
    assert parse_search_replace(text) == [("a = 1", "a = 2")]


def test_parse_empty_search_and_empty_replace():
    assert parse_search_replace("<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE") == [("", "x = 1")]
    assert parse_search_replace("<<<<<<< SEARCH\nx = 1\n=======\n>>>>>>> REPLACE") == [("x = 1", "")]


def test_parse_no_block_is_not_applied():
    with pytest.raises(EditError) as ei:
        parse_search_replace("```python\nLR = 0.1\n```")
    assert _status(ei) == "not_applied"
    assert "SEARCH/REPLACE" in str(ei.value)


def test_parse_incomplete_block_is_not_applied():
    with pytest.raises(EditError) as ei:
        parse_search_replace("<<<<<<< SEARCH\nLR = 0.05\n=======\nLR = 0.1\n")  # no REPLACE marker
    assert _status(ei) == "not_applied"


# -- apply_search_replace ---------------------------------------------------------------

def test_apply_exact_match_replaces_first_occurrence_only():
    src = "a = 1\nb = 2\na = 1\n"
    assert apply_search_replace(src, [("a = 1", "a = 3")]) == "a = 3\nb = 2\na = 1\n"


def test_apply_blocks_in_sequence_see_previous_edits():
    out = apply_search_replace(SOURCE, [("LR = 0.05", "LR = 0.2"), ("LR = 0.2\nEPOCHS = 30", "LR = 0.2\nEPOCHS = 5")])
    assert "LR = 0.2\nEPOCHS = 5\n" in out
    assert "0.05" not in out and "EPOCHS = 30" not in out


def test_apply_whitespace_tolerant_reindents_replacement():
    # the model dropped the method's indentation in both SEARCH and REPLACE
    search = "if x is not None:\n    grad = x.T @ (x @ self.w - y)\n    self.w -= LR * grad"
    replace = ("if x is not None:\n    grad = x.T @ (x @ self.w - y)\n    grad = np.clip(grad, -1, 1)\n"
               "    self.w -= LR * grad")
    out = apply_search_replace(SOURCE, [(search, replace)])
    expected = SOURCE.replace(
        "            self.w -= LR * grad\n",
        "            grad = np.clip(grad, -1, 1)\n            self.w -= LR * grad\n")
    # the block sat at 8 spaces in the file: first line at 8, its body at 12
    assert out == expected
    assert check_compiles(out) is None


def test_apply_whitespace_tolerant_ignores_trailing_spaces_and_blank_edges():
    search = "\n   LR = 0.05   \nEPOCHS = 30\t\n\n"
    out = apply_search_replace(SOURCE, [(search, "LR = 0.01\nEPOCHS = 30")])
    assert "\nLR = 0.01\nEPOCHS = 30\n" in out
    assert out.endswith("return self.w\n")  # trailing newline of the file kept


def test_apply_tolerant_over_indented_search():
    src = "def f():\n    return 1\n"
    out = apply_search_replace(src, [("        return 1", "        x = 2\n        return x")])
    assert out == "def f():\n    x = 2\n    return x\n"


def test_apply_no_match_is_not_applied_and_names_block():
    with pytest.raises(EditError) as ei:
        apply_search_replace(SOURCE, [("LR = 0.05", "LR = 0.1"), ("BATCH = 64", "BATCH = 32")])
    assert _status(ei) == "not_applied"
    assert "SEARCH block 2" in str(ei.value) and "BATCH = 64" in str(ei.value)


def test_apply_partial_line_mismatch_is_not_applied():
    # every line but one matches: no tolerant match either
    with pytest.raises(EditError) as ei:
        apply_search_replace(SOURCE, [("LR = 0.05\nEPOCHS = 31", "LR = 0.1\nEPOCHS = 31")])
    assert _status(ei) == "not_applied"


def test_apply_empty_search_appends():
    out = apply_search_replace("x = 1\n\n\n", [("", "y = 2")])
    assert out == "x = 1\ny = 2\n"


def test_apply_search_must_match_whole_lines():
    with pytest.raises(EditError) as ei:
        apply_search_replace("LR = 0.055\n", [("LR = 0.05", "LR = 0.1")])
    assert _status(ei) == "not_applied"


# -- apply_edit -------------------------------------------------------------------------

def test_apply_edit_whole_returns_code_and_unified_diff():
    new = SOURCE.replace("EPOCHS = 30", "EPOCHS = 60")
    r = apply_edit(SOURCE, f"```python\n{new}```", "whole")
    assert r.code == new
    assert r.diff.startswith("--- a/experiment.py\n+++ b/experiment.py\n")
    assert "\n-EPOCHS = 30\n" in r.diff and "\n+EPOCHS = 60\n" in r.diff
    assert "LR = 0.05" in r.diff  # context line
    assert r.diff.count("\n-") == 1 and r.diff.count("\n+") == 2  # header +++ and one added line


def test_apply_edit_search_replace_with_custom_filename():
    r = apply_edit(SOURCE, "<<<<<<< SEARCH\nLR = 0.05\n=======\nLR = 0.5\n>>>>>>> REPLACE", "search_replace",
                   filename="train.py")
    assert "LR = 0.5\n" in r.code
    assert "--- a/train.py" in r.diff and "+++ b/train.py" in r.diff


@pytest.mark.parametrize("answer,fmt", [
    (f"```python\n{SOURCE}```", "whole"),
    (f"```python\n\n{SOURCE}\n\n```", "whole"),  # only surrounding blank lines differ
    ("<<<<<<< SEARCH\nLR = 0.05\n=======\nLR = 0.05\n>>>>>>> REPLACE", "search_replace"),
])
def test_apply_edit_no_op(answer, fmt):
    with pytest.raises(EditError) as ei:
        apply_edit(SOURCE, answer, fmt)
    assert _status(ei) == "no_op"


def test_apply_edit_syntax_error_names_line():
    bad = SOURCE.replace("EPOCHS = 30", "EPOCHS = = 30")
    with pytest.raises(EditError) as ei:
        apply_edit(SOURCE, f"```python\n{bad}```", "whole")
    assert _status(ei) == "syntax_error"
    assert "line 4" in str(ei.value)


def test_apply_edit_reindent_breaking_code_is_syntax_error():
    with pytest.raises(EditError) as ei:
        apply_edit(SOURCE, "<<<<<<< SEARCH\nLR = 0.05\n=======\nLR = (0.05\n>>>>>>> REPLACE", "search_replace")
    assert _status(ei) == "syntax_error"


def test_apply_edit_unknown_format():
    with pytest.raises(ValueError) as ei:
        apply_edit(SOURCE, "x", "udiff")
    assert not isinstance(ei.value, EditError)


# -- edit_status: the recorded status comes from the typed error kind, not the message -----

@pytest.mark.parametrize("kind,status", [
    ("not_applied", "not_applied"), ("no_op", "no_op"), ("syntax_error", "syntax_error"),
    ("dishonest", "dishonest"), ("invalid_answer", "llm_failed"), ("request_failed", "llm_failed"),
])
def test_edit_status_reads_the_error_kind(kind, status):
    from resources.llm import LLMCall, LLMResult

    call = LLMCall(stage="s", model="m", prompt_tokens=0, completion_tokens=0)
    # the message names another status: only the kind counts
    res = LLMResult(call=call, error="no_op: a message that says something else", error_kind=kind)
    assert edit_status(res) == status
    assert edit_status(LLMResult(call=call, value=1)) == "ok"


def test_comment_or_docstring_only_edit_is_a_no_op():
    src = '"""Baseline."""\nimport os\n\ndef f(x):\n    """Add one."""\n    return x + 1  # inc\n'
    new = '"""Baseline++ (improved)."""\nimport os\n\n\ndef f(x):\n    """Add one, better."""\n    return x + 1\n'
    with pytest.raises(EditError) as e:
        apply_edit(src, "```python\n" + new + "```", "whole")
    assert e.value.status == "no_op" and "comments" in str(e.value)
    changed = new.replace("x + 1", "x + 2")
    assert "x + 2" in apply_edit(src, "```python\n" + changed + "```", "whole").code


# -- resampling an answer that changed nothing ------------------------------------------------


def test_complete_resampled_asks_again_sampled_only_for_the_listed_statuses():
    from assets.editing.resampling import (
        NO_OP_RESAMPLES,
        RESAMPLE_TEMPERATURE,
        complete_resampled,
    )

    parse = lambda t: apply_edit(SOURCE, t, "whole", "train.py")  # noqa: E731
    changed = SOURCE.replace("LR = 0.05", "LR = 0.1")
    llm = ScriptedLLM(_whole(SOURCE), _whole(changed))
    res, k = complete_resampled(llm, [{"role": "user", "content": "q"}], stage="s", parse=parse, max_retries=1)
    assert res.ok and "LR = 0.1" in res.value.code and k == 1
    assert [(a["temperature"], a["seed"], a["max_retries"]) for a in llm.asked] == [
        (None, None, 1), (RESAMPLE_TEMPERATURE, 1, 0)]
    assert llm.asked[0]["messages"] == llm.asked[1]["messages"]
    llm = ScriptedLLM(_whole(SOURCE))  # never changes anything: bounded
    res, k = complete_resampled(llm, [], stage="s", parse=parse)
    assert not res.ok and edit_status(res) == "no_op" and k == NO_OP_RESAMPLES
    assert len(llm.asked) == 1 + NO_OP_RESAMPLES
    llm = ScriptedLLM(_whole("def broken(:\n"))  # syntax errors only when asked to
    assert complete_resampled(llm, [], stage="s", parse=parse)[1] == 0 and len(llm.asked) == 1
    assert complete_resampled(ScriptedLLM(_whole("def broken(:\n"), _whole(changed)), [], stage="s", parse=parse,
                              resample_on=("no_op", "syntax_error"))[0].ok


def test_an_unchanged_patch_is_asked_again_before_not_implemented(home):
    from assets.patched_code.patching import make_patch
    from assets.shared.topics import topic_spec
    from schemas.records import ExperimentPlan, FilteredIdea

    spec = topic_spec("toy_classification").model_copy(update={"check": None})
    # one draft: its own re-asks are what is tested (drafts: tests/assets/patched_code/test_drafts.py)
    spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"drafts": 1})})
    code = spec.code_path.read_text()
    idea = FilteredIdea(idea_id="toy_classification/r1/x", topic=spec.name, round="r1", name="x", title="x",
                        experiment="x", summary="x", max_similarity=0.0, independent=True, novel=True, kept=True)
    plan = ExperimentPlan(idea_id=idea.idea_id, name="x", changes=["change something"], location="",
                          evaluation="accuracy", expected_effect="")
    changed = code.replace("LR = 0.05", "LR = 0.1")  # a real change (an unused constant would be dead code)
    p = make_patch(spec, code, idea, plan, ScriptedLLM(_whole(code), _whole(changed)), runner=None)
    assert p.status == "ok" and p.resamples == 1 and "LR = 0.1" in p.code
    p = make_patch(spec, code, idea, plan, ScriptedLLM(_whole(code)), runner=None)
    assert p.status == "no_op" and p.resamples == 2
