"""Blocking asset checks stop a round, and a finished round's records link up.

One toy topic, materialised in-process with the scripted fake LLM (tests/support/fake_llm.py):
round r1 as scripted (its records must link up, and the link checks must catch broken copies
of them); round r2 with the idea generator answering one idea with a blank summary, so the
blocking check `ideas_complete` fails and nothing downstream of `ideas` may run."""
from __future__ import annotations

import json
import shutil

import dagster as dg
import pytest

from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
from assets.shared.partitions import multi_key
from tests.support.fake_llm import FakeLLMServer, Script
from tests.support.paths import FIXTURES
from tests.support.resources import make_resources
from tests.support.round_checks import link_problems, round_records, stored_baseline

TOPIC = "toy_classification"
DOWNSTREAM_OF_IDEAS = ["filtered_ideas", "experiment_plans", "patched_code", "run_results", "feedback_summary"]


class BlankSummaryScript(Script):
    """The scripted model, except that with `blank_summary` on, the first idea of every idea
    list comes back with a summary of spaces (the schema accepts it; the stage strips it)."""

    blank_summary = False

    def answer(self, req: dict) -> str:
        text = super().answer(req)
        fmt = req.get("response_format") or {}
        if self.blank_summary and fmt.get("json_schema", {}).get("name") == "IdeaList":
            ideas = json.loads(text)
            ideas["ideas"][0]["Summary"] = "   "
            return json.dumps(ideas)
        return text


@pytest.fixture(scope="module")
def topic_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("blocking")
    (root / "dagster_home").mkdir()
    shutil.copytree(FIXTURES / "toy_classification", root / "experiments" / TOPIC)
    script = BlankSummaryScript()
    with pytest.MonkeyPatch.context() as mp, FakeLLMServer(script) as server:
        mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        mp.setenv("RESEARCHLOOP_EXPERIMENTS", str(root / "experiments"))
        for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RESEARCHLOOP_MODEL"):
            mp.delenv(var, raising=False)
        instance = dg.DagsterInstance.ephemeral()
        resources = make_resources(server.base_url)
        instance.add_dynamic_partitions("topics", [TOPIC])
        assert dg.materialize(ALL_ASSETS, selection=TOPIC_ASSETS, partition_key=TOPIC, instance=instance,
                              resources=resources).success
        yield instance, resources, script


def materialize_round(instance, resources, round_key: str):
    instance.add_dynamic_partitions("rounds", [round_key])
    return dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key(TOPIC, round_key)),
                          instance=instance, resources=resources, raise_on_error=False)


def materialized_in(instance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    return {r.event_log_entry.dagster_event.asset_key.to_user_string() for r in records}


@pytest.fixture(scope="module")
def scripted_round(topic_env):
    instance, resources, script = topic_env
    script.blank_summary = False
    res = materialize_round(instance, resources, "r1")
    assert res.success, [e.message for e in res.all_events if e.is_failure]
    store = resources["store"]
    return round_records(store, TOPIC, "r1"), stored_baseline(store, TOPIC)


def test_scripted_round_records_link_up(scripted_round):
    rec, baseline = scripted_round
    kept = [i for i in rec["ideas"] if i.kept]
    assert len(kept) >= 2  # enough ideas to make the linking non-trivial
    assert {f.verdict for f in rec["feedback"]} >= {"decline", "failed"}  # both branches of the rule are exercised
    assert link_problems(rec, TOPIC, "r1", baseline, "maximize", 0.005, "accuracy", max_attempts=3) == []


def _id(row) -> str:
    return getattr(row, "idea_id", None) or row.paper_id


def _without(rec, key, row_id):
    return {**rec, key: [r for r in rec[key] if _id(r) != row_id]}


def _edit(rec, key, row_id, **update):
    return {**rec, key: [r.model_copy(update=update) if _id(r) == row_id else r for r in rec[key]]}


def test_link_checks_catch_broken_records(scripted_round):
    rec, baseline = scripted_round
    judged = next(f for f in rec["feedback"] if f.verdict == "decline")
    failed = next(f for f in rec["feedback"] if f.verdict == "failed")
    some = judged.idea_id

    def problems(r, base=baseline, tol=0.005):
        return " | ".join(link_problems(r, TOPIC, "r1", base, "maximize", tol))

    assert "without a plan" in problems(_without(rec, "plans", some))
    assert "without a patch" in problems(_without(rec, "patches", some))
    assert "without a run result" in problems(_without(rec, "runs", some))
    assert "without a verdict" in problems(_without(rec, "feedback", some))
    assert "not kept" in problems(_edit(rec, "ideas", some, kept=False, drop_reason="not novel"))
    # a decline of `judged` is only right while its loss exceeds the tolerance
    loss = judged.baseline_value - judged.metric_value
    assert "decline although" in problems(rec, tol=loss + 0.01)
    assert "improvement although" in problems(_edit(rec, "feedback", some, verdict="improvement", effective=True))
    assert "maintenance although" in problems(_edit(rec, "feedback", some, verdict="maintenance"))
    assert "not the run's" in problems(_edit(rec, "feedback", some, metric_value=judged.metric_value + 0.1))
    assert "not the stored baseline" in problems(rec, base=baseline + 0.01)
    assert "but verdict" in problems(_edit(rec, "feedback", failed.idea_id, verdict="maintenance"))
    assert "success without a metric" in problems(_edit(rec, "runs", some, metric_value=None))
    assert "not what its last attempt measured" in problems(_edit(rec, "runs", some,
                                                                  metric_value=judged.metric_value + 0.1))
    assert "its code is not the patched file" in problems(_edit(rec, "runs", some, final_code="print('other')\n"))
    paper = rec["scores"][0]
    assert "ranked but never retrieved" in problems(_without(rec, "papers", paper.paper_id))
    # an idea cites only papers its source showed: the ranking's kept ones, the scipip retrieval's
    assert "cites papers its source did not show: ['nowhere']" in problems(
        _edit(rec, "ideas", some, inspired_by_papers=["nowhere"]))
    assert "cites papers the round did not retrieve: ['nowhere']" in problems(
        _edit(rec, "ideas", some, source="scipip", inspired_by_papers=["nowhere"], source_papers=["nowhere"]))
    assert "with score" in problems(_edit(rec, "scores", paper.paper_id, kept=not paper.kept))
    repaired = next(r for r in rec["runs"] if r.n_attempts == 2)  # the scripted bug the repair fixes
    over = link_problems(rec, TOPIC, "r1", baseline, "maximize", 0.005, "accuracy", max_attempts=1)
    assert over == [f"{repaired.idea_id}: 2 attempts, over the budget of 1"]


def test_failing_blocking_check_stops_the_downstream_assets(topic_env, scripted_round):
    instance, resources, script = topic_env
    script.blank_summary = True
    plans_asked = script.counts.get("PlanDraft", 0)
    try:
        res = materialize_round(instance, resources, "r2")
    finally:
        script.blank_summary = False
    assert not res.success

    # the check ran on the ideas and failed, naming the summary expectation
    checks = {c.check_name: c for c in res.get_asset_check_evaluations()}
    assert not checks["ideas_complete"].passed
    assert "| summary | NO |" in checks["ideas_complete"].metadata["expectations"].value

    # the stages before the check ran (and stored r2), the ones after it did not run at all
    done = materialized_in(instance, res.run_id)
    assert {"papers", "paper_rankings", "ideas"} <= done
    assert not done & set(DOWNSTREAM_OF_IDEAS), done
    started = {e.step_key.split(".")[0] for e in res.all_events if e.event_type == dg.DagsterEventType.STEP_START}
    assert not started & set(DOWNSTREAM_OF_IDEAS), started
    store = resources["store"]
    assert store.read("ideas", TOPIC, "r2") is not None
    for asset in DOWNSTREAM_OF_IDEAS:
        assert store.read(asset, TOPIC, "r2") is None, asset
        assert store.read(asset, TOPIC, "r1") is not None, asset  # round 1's records are untouched
    assert script.counts.get("PlanDraft", 0) == plans_asked  # no plan was asked for in r2
