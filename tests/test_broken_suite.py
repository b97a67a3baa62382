"""bench/broken/pointcloud: the broken variants the repair benchmark uses."""
from __future__ import annotations

import difflib
import json

import pytest

from assets.honesty import honesty_problems
from bench.broken_suite import SuiteError, load_suite, reference
from resources.paths import REPO_ROOT

REFERENCE = reference("pointcloud")
MANIFEST = load_suite("pointcloud")
KINDS = {"shape mismatch", "missing attribute", "dtype error", "device error", "wrong import", "undefined name",
         "wrong tensor layout", "bug two frames away", "wrong argument name", "off-by-one in a view"}


def test_manifest_covers_the_required_kinds():
    assert len(MANIFEST) >= 15
    assert len({v["name"] for v in MANIFEST}) == len(MANIFEST)
    assert KINDS <= {v["kind"] for v in MANIFEST}
    assert all(v["bug"].strip() and v["old"] != v["new"] for v in MANIFEST)


def test_an_edit_the_reference_lost_is_named(tmp_path, monkeypatch):
    import bench.broken_suite as bs

    folder = tmp_path / "bench" / "broken" / "pointcloud"
    folder.mkdir(parents=True)
    (folder / "manifest.jsonl").write_text(json.dumps({"name": "gone", "kind": "k", "bug": "b",
                                                       "old": "no such text", "new": "x"}) + "\n")
    monkeypatch.setattr(bs, "ROOT", tmp_path)
    monkeypatch.setattr(bs, "reference", lambda suite="pointcloud": REFERENCE)
    with pytest.raises(SuiteError, match="variant gone: its `old` text occurs 0 times"):
        bs.load_suite("pointcloud")


@pytest.mark.parametrize("variant", MANIFEST, ids=lambda v: v["name"])
def test_variant_is_one_small_bug_whose_true_fix_is_honest(variant):
    code = variant["code"]
    compile(code, variant["name"], "exec")
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
    a = run_once(RunTarget.of_topic(spec, "check"), variant["code"], Runner(), tmp_path, 1)
    assert a.exit_code not in (0, None) and a.error and not a.timed_out
    assert a.frames and a.frames[0].file == "experiment.py"
