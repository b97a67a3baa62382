"""A whole round against the real local model (Qwen2.5-Coder-0.5B through xllamacpp), with
every other part real too. Weak models may produce failed ideas: that is a recorded result,
not a crash, so the assertions are about what holds whatever the model answered: the round's
records link up (every kept idea has a plan, a patch, a run result and a verdict), the verdicts
agree with the metric, the baseline and the tolerance, and every recorded number traces back
to a run or an LLM call (tests/round_checks.py)."""
import dagster as dg
import pytest

from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
from assets.run_results.defs import STEP_IO
from assets.shared.partitions import multi_key
from schemas.topic import load_topic
from tests.round_checks import link_problems, round_records, stored_baseline

TOPIC = "toy_classification"


@pytest.mark.slow
def test_round_with_real_local_model(home, local_llm):
    from resources.embedder import Embedder
    from resources.literature import Literature
    from resources.llm import LLM
    from resources.runner import Runner
    from resources.store import RecordIOManager, RecordStore
    from resources.tracker import Tracker

    llm = LLM(local_llm=local_llm)
    assert llm.is_local() and llm.resolved_edit_format() == "whole"
    resources = {"llm": llm, "embedder": Embedder(), "literature": Literature(), "runner": Runner(),
                 "tracker": Tracker(), "io_manager": RecordIOManager(), "store": RecordStore(),
                 STEP_IO: dg.FilesystemIOManager()}
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    assert dg.materialize(ALL_ASSETS, selection=TOPIC_ASSETS, partition_key=TOPIC, instance=instance,
                          resources=resources).success
    res = dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key(TOPIC, "r1")),
                         instance=instance, resources=resources, raise_on_error=False)
    assert res.success, [e.event_specific_data for e in res.all_events if e.is_failure]
    assert {c.asset_key.to_user_string() for c in res.get_asset_check_evaluations()} == {
        a.key.to_user_string() for a in ROUND_ASSETS}

    store = resources["store"]
    spec = load_topic(home / "experiments" / TOPIC)
    rec = round_records(store, TOPIC, "r1")
    judged = [s for s in rec["scores"] if s.error is None]
    assert judged, "the real model judged no paper"
    assert all(1 <= s.score <= 10 for s in judged)
    assert rec["ideas"], "the real model proposed no idea"
    assert all(i.summary.strip() and i.title.strip() for i in rec["ideas"])
    baseline = stored_baseline(store, TOPIC)
    assert baseline is not None and 0.5 < baseline <= 1.0  # the toy reference learns its two clusters
    # the records link up and the verdicts follow the rule, whatever the model answered
    assert link_problems(rec, TOPIC, "r1", baseline, spec.metric.goal, spec.metric.tolerance, spec.metric.name,
                         max_attempts=spec.budget.debug_attempts + 1) == []

    # LLM usage is real: the local server reported tokens, and the per-idea accounting adds up
    # (ideas: the default ranking, `similarity`, asks the LLM nothing; bench/RESULTS.md "ranking (LOTO)")
    meta = instance.get_latest_materialization_event(dg.AssetKey("ideas")).asset_materialization.metadata
    assert meta["llm_calls"].value >= 1 and meta["prompt_tokens"].value > 0 and meta["completion_tokens"].value > 0
    fb_meta = instance.get_latest_materialization_event(dg.AssetKey("feedback_summary")).asset_materialization.metadata
    fb = rec["feedback"]
    if fb:
        assert sum(f.tokens + f.shared_tokens for f in fb) == pytest.approx(fb_meta["round_tokens"].value)
