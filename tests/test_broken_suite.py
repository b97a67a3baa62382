"""bench/broken/pointcloud: the broken variants the repair benchmark uses."""
from __future__ import annotations

import difflib
import json

import pytest

from assets.honesty import honesty_problems
from resources.paths import REPO_ROOT

SUITE = REPO_ROOT / "bench" / "broken" / "pointcloud"
REFERENCE = (REPO_ROOT / "experiments" / "pointcloud_classification" / "experiment.py").read_text()
MANIFEST = [json.loads(l) for l in (SUITE / "manifest.jsonl").read_text().splitlines() if l.strip()]
KINDS = {"shape mismatch", "missing attribute", "dtype error", "device error", "wrong import", "undefined name",
         "wrong tensor layout", "bug two frames away", "wrong argument name", "off-by-one in a view"}


def test_manifest_covers_the_required_kinds():
    assert len(MANIFEST) >= 15
    assert len({v["name"] for v in MANIFEST}) == len(MANIFEST)
    assert KINDS <= {v["kind"] for v in MANIFEST}
    assert all(v["bug"].strip() and v["file"] == v["name"] + ".py" for v in MANIFEST)
    assert {p.name for p in SUITE.glob("*.py")} == {v["file"] for v in MANIFEST}


@pytest.mark.parametrize("variant", MANIFEST, ids=lambda v: v["name"])
def test_variant_is_one_small_bug_whose_true_fix_is_honest(variant):
    code = (SUITE / variant["file"]).read_text()
    compile(code, variant["file"], "exec")
    changed = [l for l in difflib.unified_diff(REFERENCE.splitlines(), code.splitlines(), lineterm="", n=0)
               if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert 1 <= len(changed) <= 3, changed
    assert honesty_problems(code, REFERENCE, "accuracy") == []  # restoring the reference is an honest repair


@pytest.mark.slow
@pytest.mark.parametrize("variant", MANIFEST, ids=lambda v: v["name"])
def test_variant_fails_its_dry_run(variant, tmp_path):
    from assets.experimenting import RunTarget, run_once
    from resources.runner import Runner
    from schemas.topic import load_topic

    spec = load_topic(REPO_ROOT / "experiments" / "pointcloud_classification")
    a = run_once(RunTarget.of_topic(spec, "check"), (SUITE / variant["file"]).read_text(), Runner(), tmp_path, 1)
    assert a.exit_code not in (0, None) and a.error and not a.timed_out
    assert a.frames and a.frames[0].file == "experiment.py"
