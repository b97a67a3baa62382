"""bench/broken/<suite>: the broken variants the repair benchmark uses (pointcloud, and the
held-out image and sentiment suites that check the repair loop beyond pointcloud)."""
from __future__ import annotations

import difflib
import json

import pytest

from assets.editing.honesty import honesty_problems
from bench.broken_suite import SCRIPT_SUITES, SUITES, SuiteError, load_script_suite, load_suite, reference
from resources.paths import REPO_ROOT

REFERENCES = {s: reference(s) for s in SUITES}
MANIFESTS = {s: load_suite(s) for s in SUITES}
VARIANTS = [pytest.param(s, v, id=f"{s}-{v['name']}") for s in SUITES for v in MANIFESTS[s]]
# the dry runs: the first variant of each suite in `make test`, every variant in `make test-all`
DRY_RUNS = [pytest.param(s, v, id=f"{s}-{v['name']}", marks=() if i == 0 else pytest.mark.extended)
            for s in SUITES for i, v in enumerate(MANIFESTS[s])]
HELD_OUT = ("image", "sentiment")
KINDS = {"shape mismatch", "missing attribute", "dtype error", "device error", "wrong import", "undefined name",
         "wrong tensor layout", "bug two frames away", "wrong argument name", "off-by-one in a view"}
HELD_OUT_KINDS = {"shape mismatch", "wrong tensor layout", "dtype error", "missing attribute", "undefined name",
                  "wrong argument name", "wrong import", "bug two frames away", "indexing error",
                  "non-serialisable result"}


def test_manifest_covers_the_required_kinds():
    manifest = MANIFESTS["pointcloud"]
    assert len(manifest) >= 15
    assert len({v["name"] for v in manifest}) == len(manifest)
    assert KINDS <= {v["kind"] for v in manifest}
    assert all(v["bug"].strip() and v["old"] != v["new"] for v in manifest)


@pytest.mark.parametrize("suite", HELD_OUT)
def test_held_out_suite_has_ten_distinct_variants(suite):
    manifest = MANIFESTS[suite]
    assert len(manifest) >= 10
    assert len({v["name"] for v in manifest}) == len(manifest)
    assert HELD_OUT_KINDS <= {v["kind"] for v in manifest}
    assert all(v["bug"].strip() and v["old"] != v["new"] for v in manifest)


def test_an_edit_the_reference_lost_is_named(tmp_path, monkeypatch):
    import bench.broken_suite as bs

    folder = tmp_path / "bench" / "broken" / "pointcloud"
    folder.mkdir(parents=True)
    (folder / "manifest.jsonl").write_text(json.dumps({"name": "gone", "kind": "k", "bug": "b",
                                                       "old": "no such text", "new": "x"}) + "\n")
    monkeypatch.setattr(bs, "ROOT", tmp_path)
    monkeypatch.setattr(bs, "reference", lambda suite="pointcloud": REFERENCES["pointcloud"])
    with pytest.raises(SuiteError, match="variant gone: its `old` text occurs 0 times"):
        bs.load_suite("pointcloud")


@pytest.mark.parametrize(("suite", "variant"), VARIANTS)
def test_variant_is_one_small_bug_whose_true_fix_is_honest(suite, variant):
    code, ref = variant["code"], REFERENCES[suite]
    compile(code, variant["name"], "exec")
    changed = [l for l in difflib.unified_diff(ref.splitlines(), code.splitlines(), lineterm="", n=0)
               if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert 1 <= len(changed) <= 3, changed
    assert honesty_problems(code, ref, "accuracy") == []  # restoring the reference is an honest repair


@pytest.mark.slow
@pytest.mark.parametrize(("suite", "variant"), DRY_RUNS)
def test_variant_fails_its_dry_run(suite, variant, tmp_path):
    from assets.run_results.experimenting import RunTarget, run_once
    from resources.runner import Runner
    from schemas.topic import load_topic

    spec = load_topic(REPO_ROOT / "experiments" / SUITES[suite])
    a = run_once(RunTarget.of_topic(spec, "check"), variant["code"], Runner(), tmp_path, 1)
    assert a.exit_code not in (0, None) and a.error and not a.timed_out
    assert a.frames and a.frames[0].file == "experiment.py"


# -- suites of standalone scripts, for `researchloop debug` (bench/debug_bench.py) -------------------

SCRIPT_VARIANTS = {s: load_script_suite(s) for s in SCRIPT_SUITES}
# the in-sample suite's first variant runs in `make test`; the others in `make test-all`
SCRIPT_RUNS = [pytest.param(s, v, id=f"{s}-{v['name']}",
                            marks=() if (s, i) == ("scripts_dev", 0) else pytest.mark.extended)
               for s in SCRIPT_SUITES for i, v in enumerate(SCRIPT_VARIANTS[s])]


@pytest.mark.parametrize("suite", SCRIPT_SUITES)
def test_a_script_suite_has_ten_one_bug_variants_of_bases_that_print_their_result(suite):
    variants = SCRIPT_VARIANTS[suite]
    assert len(variants) == 10 and len({v["name"] for v in variants}) == 10
    for v in variants:
        assert v["code"] != v["base_code"] and v["kind"] and v["bug"]
        assert "RESULT " in v["base_code"]
    assert len({v["base"] for v in variants}) >= 3  # spread over several scripts


def test_a_script_variant_whose_edit_no_longer_fits_is_named(tmp_path, monkeypatch):
    import bench.broken_suite as bs

    (tmp_path / "bench" / "broken" / "s" / "bases").mkdir(parents=True)
    (tmp_path / "bench" / "broken" / "s" / "bases" / "a.py").write_text("x = 1\nprint('RESULT r=1')\n")
    (tmp_path / "bench" / "broken" / "s" / "manifest.jsonl").write_text(
        json.dumps({"name": "gone", "base": "a.py", "kind": "k", "bug": "b", "old": "y = 2", "new": "y = 3"}) + "\n")
    monkeypatch.setattr(bs, "ROOT", tmp_path)
    with pytest.raises(SuiteError, match="variant gone: its `old` text occurs 0 times in s/bases/a.py"):
        bs.load_script_suite("s")


@pytest.mark.slow
@pytest.mark.parametrize("suite, variant", SCRIPT_RUNS)
def test_a_script_variant_crashes_and_says_what_it_held(suite, variant, tmp_path):
    from assets.editing.tracebacks import crash_values, error_line
    from bench.debug_bench import run_script

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / variant["base"]).write_text(variant["code"])
    r = run_script(ws, variant["base"], timeout_s=300)
    assert r["exit_code"] not in (0, None) and r["result"] is None
    stderr = next(tmp_path.glob("logs/*.stderr.log")).read_text()
    assert error_line(stderr) and crash_values(stderr).startswith(f"  {variant['base']}:")
