"""Shared checks for the shipped topics: the `check` dry run in the sandbox, and one whole round
on a shipped topic with the scripted fake LLM (tests/support/fake_llm.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from resources.runner import Runner
from resources.sandbox import prepare_workspace, sandbox_available
from schemas.topic import TopicSpec, load_topic
from tests.support import paths
from tests.support.topics import set_budget

EXPERIMENTS = paths.EXPERIMENTS

_OK, _WHY = sandbox_available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"sandbox unavailable: {_WHY}")


def load_module(topic_name: str, filename: str):
    """A helper module of a topic folder (e.g. its data loader), imported from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(filename).stem, EXPERIMENTS / topic_name / filename)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def topic(name: str) -> TopicSpec:
    return load_topic(EXPERIMENTS / name)


def sandboxed_run(spec: TopicSpec, tmp_path: Path, which: str = "check", timeout_s: float = 120):
    """Run the topic's `check` (or `run`) command in a fresh workspace under the sandbox;
    returns (ProcessResult, parsed final_info.json or None)."""
    ws = prepare_workspace(spec.path, tmp_path / "ws")
    res = Runner().run(spec.run_command("out", which), ws, timeout_s=timeout_s, memory_mb=spec.budget.memory_mb)
    info_file = ws / "out" / "final_info.json"
    return res, (json.loads(info_file.read_text()) if info_file.exists() else None)


def run_round(name: str, home: Path, base_url: str, budget: dict | None = None):
    """Materialise the topic assets and round r1 of the shipped topic `name` (copied into the
    test's experiments root, its budget updated with `budget`) with the fake LLM; returns
    (result, records by asset)."""
    from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
    from assets.shared.partitions import multi_key
    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import Feedback, Patch, RunResult
    from tests.support.resources import make_resources

    shutil.copytree(EXPERIMENTS / name, home / "experiments" / name,
                    ignore=shutil.ignore_patterns("__pycache__", "out", "runs"))
    if budget:
        set_budget(home / "experiments" / name, **budget)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [name])
    resources = make_resources(base_url)
    assert dg.materialize(ALL_ASSETS, selection=TOPIC_ASSETS, partition_key=name, instance=instance,
                          resources=resources).success
    instance.add_dynamic_partitions("rounds", ["r1"])
    res = dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key(name, "r1")),
                         instance=instance, resources=resources)
    store = Store()

    def by_name(asset, model):
        return {r.idea_id.split("/")[-1]: r for r in from_frame(store.read(asset, name, "r1"), model)}

    return res, {"patched_code": by_name("patched_code", Patch), "run_results": by_name("run_results", RunResult),
                 "feedback_summary": by_name("feedback_summary", Feedback)}


def check_round(name: str, home: Path, fake_llm, baseline_floor: float) -> None:
    """A whole round on a shipped topic: every check passes, the scripted edits apply to its
    experiment.py (gradient ascent; an EPOCHS bug that the debugging stage repairs by doubling
    EPOCHS), the runs finish in the sandbox and the verdicts compare with a real baseline.

    One seed a side and one full run a draft: what is checked here is the topic's code under the
    loop's stages, not the statistics of its seeds (tests/assets/shared/test_verdicts.py covers those)."""
    spec = topic(name)
    res, rec = run_round(name, home, fake_llm.base_url, budget={"seeds": 1, "promote": 1})
    assert res.success
    checks = res.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks), [(c.check_name, c.metadata) for c in checks if not c.passed]

    patches, runs, fb = rec["patched_code"], rec["run_results"], rec["feedback_summary"]
    neg = patches["negative_step_r1"]
    assert neg.status == "ok" and neg.imports_ok, neg.reason
    assert "maximize=True" in neg.diff  # the fake's sign flip for a torch optimiser (it refuses lr < 0)
    assert runs["negative_step_r1"].status == "success"

    longer = runs["longer_training_r1"]
    assert longer.status == "success" and longer.n_attempts == 2, longer.reason
    assert "NameError" in longer.attempts[0].error and longer.attempts[0].frames[0].file == spec.code
    epochs = int(next(l for l in spec.code_path.read_text().splitlines() if l.startswith("EPOCHS = ")).split()[2])
    assert f"EPOCHS = {2 * epochs}" in longer.final_code
    for r in (runs["negative_step_r1"], longer):
        assert 0.0 <= r.metric_value <= 1.0
        assert r.attempts[-1].duration_s < spec.budget.run_timeout_s

    base = fb["negative_step_r1"].baseline_value
    assert baseline_floor < base <= 1.0  # the real baseline ran in the round
    assert fb["negative_step_r1"].verdict == "decline"  # gradient ascent unlearns
    # the repaired run's verdict (whichever it is) follows from its metric, the baseline and the
    # tolerance, and the round's records link up (tests/support/round_checks.py)
    from resources.store import Store
    from tests.support.round_checks import link_problems, round_records, stored_baseline

    store = Store()
    assert fb["longer_training_r1"].verdict != "failed"
    assert link_problems(round_records(store, name, "r1"), name, "r1", stored_baseline(store, name), spec.metric.goal,
                         spec.metric.tolerance, spec.metric.name, max_attempts=spec.budget.debug_attempts + 1) == []
    moves = [k for k in fb if k.startswith("tune_")]
    if "tuning" in spec.ideation.sources:  # the topic's first move took one of the round's 3 places
        assert len(moves) == 1 and "fancy_kernel_r1" not in fb  # the scripted third idea: over the budget
        move = patches[moves[0]]
        assert move.status == "ok" and move.drafts[0].how.startswith("tuning move"), move.reason
        assert runs[moves[0]].status == "success" and fb[moves[0]].verdict != "failed"
    else:
        assert moves == [] and fb["fancy_kernel_r1"].verdict == "failed"
