"""A whole round against the real local model (Qwen2.5-Coder-0.5B through xllamacpp), with
every other part real too. Weak models may produce failed ideas: that is a recorded result,
not a crash, so the assertions are about the loop completing honestly."""
import dagster as dg
import pytest

from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
from assets.run_results.defs import STEP_IO
from assets.shared.partitions import multi_key
from resources.store import Store
from schemas.frames import from_frame
from schemas.records import Feedback, FilteredIdea, PaperScore, RunResult

TOPIC = "toy_classification"
MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture
def local_llm(tmp_path):
    """A private server for this test; the GGUF is linked from the shared model cache."""
    import resources.local_llm as ll

    model = ll.assemble_model(MODEL, progress=False)
    cache = tmp_path / "llm"
    (cache / "models").mkdir(parents=True)
    for p in (model, model.with_name(model.name + ".sha256ok")):
        (cache / "models" / p.name).symlink_to(p)
    res = ll.LocalLLM(model=MODEL, cache_dir=str(cache), ctx_size=8192)
    yield res
    ll.stop_server(cache)


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

    store = Store()
    scores = from_frame(store.read("paper_rankings", TOPIC, "r1"), PaperScore)
    judged = [s for s in scores if s.error is None]
    assert judged, "the real model judged no paper"
    assert all(1 <= s.score <= 10 and s.kept == (s.score >= 8) for s in judged)
    ideas = from_frame(store.read("filtered_ideas", TOPIC, "r1"), FilteredIdea)
    assert ideas, "the real model proposed no idea"
    assert all(i.summary.strip() for i in ideas)
    runs = from_frame(store.read("run_results", TOPIC, "r1"), RunResult)
    fb = from_frame(store.read("feedback_summary", TOPIC, "r1"), Feedback)
    assert len(fb) == sum(i.kept for i in ideas)
    for f in fb:
        assert f.verdict in ("improvement", "maintenance", "decline", "failed")
        assert f.verdict == "failed" or f.metric_value is not None
    for r in runs:
        assert r.status in ("success", "failed", "not_implemented")
        if r.status == "failed":
            assert r.reason  # every failure says why
    meta = instance.get_latest_materialization_event(dg.AssetKey("paper_rankings")).asset_materialization.metadata
    assert meta["prompt_tokens"].value > 0 and meta["completion_tokens"].value > 0
