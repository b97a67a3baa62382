"""bench/repair_scoring.py: a repair counts only when the repaired file's full run scores, and
older records are re-scored from the fixes they recorded as diffs."""
from __future__ import annotations

import json

import pytest

from assets.editing.edit_formats import unified_diff
from bench.broken_suite import load_suite
from bench.repair_scoring import DiffError, apply_unified_diff, code_id, final_code, score_row
from resources.paths import REPO_ROOT

SOURCE = "".join(f"line {i}\n" for i in range(1, 31))


@pytest.mark.parametrize("edit", [
    lambda s: "import os\n" + s,                                     # insertion before the first line
    lambda s: s.replace("line 30\n", ""),                             # deletion of the last line
    lambda s: s.replace("line 3\n", "line three\n").replace("line 25\n", "line 25\nextra\n"),  # two hunks
    lambda s: s.replace("line 10\nline 11\n", ""),                    # a deletion in the middle
    lambda s: s + "tail\n",                                           # an append
])
def test_apply_reverses_difflib(edit):
    new = edit(SOURCE)
    assert apply_unified_diff(SOURCE, unified_diff(SOURCE, new, "experiment.py")) == new


def test_a_diff_that_does_not_fit_is_refused():
    diff = unified_diff(SOURCE, SOURCE.replace("line 12\n", "twelve\n"), "experiment.py")
    with pytest.raises(DiffError, match="line 12: expected 'line 12'"):
        apply_unified_diff(SOURCE.replace("line 12\n", "changed meanwhile\n"), diff)
    with pytest.raises(DiffError, match="no hunk"):
        apply_unified_diff(SOURCE, "--- a/x\n+++ b/x\n")


def test_a_run_with_an_undone_fix_is_not_rebuilt_from_its_diffs():
    row = {"name": "v", "mode": "structure", "reverted": 1, "diffs": []}
    with pytest.raises(DiffError, match="undone"):
        final_code(SOURCE, row)
    assert final_code(SOURCE, {**row, "final_code": "kept\n"}) == "kept\n"  # newer records keep the code


def test_only_a_full_run_that_scores_counts():
    row = {"name": "v", "mode": "structure", "fixed": True}
    ok = {"full_run_ok": True, "full_run_metric": 0.8, "full_run_error": None, "full_run_s": 30.0}
    bad = {"full_run_ok": False, "full_run_metric": None, "full_run_error": "RuntimeError: shape", "full_run_s": 3.0}
    assert score_row(row, ok)["fixed"] is True
    scored = score_row(row, bad)
    assert scored["fixed"] is False and scored["dry_run_ok"] is True and scored["full_run_error"].startswith("Runtime")
    never = score_row({**row, "fixed": False}, None)
    assert never["fixed"] is False and never["dry_run_ok"] is False and never["full_run_ok"] is False


@pytest.mark.parametrize(("suite", "record"), [("pointcloud", "repair_results.json"),
                                                ("image", "repair_results_image.json"),
                                                ("sentiment", "repair_results_sentiment.json")])
def test_recorded_fixes_rebuild_the_code_that_was_scored(suite, record):
    """Every dry-run pass of the committed records rebuilds from its diffs; where a full run was
    made, the rebuilt code is the code it ran (same hash)."""
    data = json.loads((REPO_ROOT / "bench" / record).read_text())
    # a record made before the reference experiment changed keeps the reference it was made with
    variants = {v["name"]: v["code"] for v in load_suite(suite, data.get("reference_code"))}
    passes = [r for r in data["rows"] if r.get("dry_run_ok", r["fixed"])]
    assert passes
    for r in passes:
        code = final_code(variants[r["name"]], r)
        assert code != variants[r["name"]], r["name"]
        if r.get("final_code_id"):
            assert code_id(code) == r["final_code_id"], r["name"]
