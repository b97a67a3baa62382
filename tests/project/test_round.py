"""A whole round materialised in-process: real Dagster instance, real embeddings, real
sandboxed runs, real MLflow and GX checks; the LLM is the scripted local fake server."""
import dagster as dg
import pytest

from assets import ROUND_ASSETS
from resources.store import Store
from schemas.frames import from_frame
from schemas.records import Feedback, FilteredIdea, Patch, RunResult
from tests.support.resources import make_resources
from tests.support.rounds import TOPIC, materialize_round, materialize_topic


@pytest.fixture
def topic_ready(home, fake_llm):
    instance = dg.DagsterInstance.ephemeral()
    resources = make_resources(fake_llm.base_url, model="gpt-4o-mini")  # a priced name: costs are not 0
    materialize_topic(instance, resources)
    return instance, resources


def test_whole_round_with_fake_llm(topic_ready, fake_llm):
    instance, resources = topic_ready
    requests_before = fake_llm.script.total
    res = materialize_round(instance, resources, "r1")
    assert res.success
    checks = res.get_asset_check_evaluations()
    assert {c.asset_key.to_user_string() for c in checks} >= {a.key.to_user_string() for a in ROUND_ASSETS}
    assert all(c.passed for c in checks), [(c.check_name, c.metadata) for c in checks if not c.passed]

    store = Store()
    patches = {p.idea_id.split("/")[-1]: p for p in from_frame(store.read("patched_code", TOPIC, "r1"), Patch)}
    assert patches["negative_step_r1"].status == "ok" and "-LR = 0.05" in patches["negative_step_r1"].diff
    assert patches["fancy_kernel_r1"].status == "not_applied"  # malformed answers, retried, recorded

    runs = {r.idea_id.split("/")[-1]: r for r in from_frame(store.read("run_results", TOPIC, "r1"), RunResult)}
    fixed = runs["longer_training_r1"]
    assert fixed.status == "success" and fixed.n_attempts == 2
    assert "NameError" in fixed.attempts[0].error and fixed.attempts[0].frames[0].file == "experiment.py"
    assert "EPOCHS = EPOCH_COUNT" in fixed.attempts[0].local_structure  # the module-level window
    assert fixed.mlflow_run_id
    # MLflow: the idea's run holds one nested run per attempt, with its logs, fix and final_info.json
    from resources.tracker import Tracker

    client, exp = Tracker().client(), Tracker().experiment_id(TOPIC)
    attempts = client.search_runs([exp], filter_string=f"tags.`researchloop.kind` = 'attempt' and "
                                                       f"tags.`researchloop.idea_id` = '{fixed.idea_id}'")
    assert sorted(r.data.params["attempt"] for r in attempts) == ["1", "2"]
    assert all(r.data.tags["mlflow.parentRunId"] == fixed.mlflow_run_id for r in attempts)
    by_n = {r.data.params["attempt"]: r for r in attempts}
    assert by_n["1"].info.status == "FAILED" and "NameError" in by_n["1"].data.params["error"]
    assert "fix.diff" in {f.path for f in client.list_artifacts(by_n["1"].info.run_id)}
    assert by_n["2"].info.status == "FINISHED" and "accuracy" in by_n["2"].data.metrics
    assert "final_info.json" in {f.path for f in client.list_artifacts(by_n["2"].info.run_id)}

    fb = {f.name: f for f in from_frame(store.read("feedback_summary", TOPIC, "r1"), Feedback)}
    assert fb["negative_step_r1"].verdict == "decline"
    assert fb["longer_training_r1"].verdict in ("maintenance", "improvement")
    # each verdict follows from its metric, the baseline and the tolerance; the records link up
    from tests.support.round_checks import link_problems, round_records, stored_baseline

    assert link_problems(round_records(store, TOPIC, "r1"), TOPIC, "r1", stored_baseline(store, TOPIC), "maximize",
                         0.005, "accuracy", max_attempts=3) == []
    assert fb["fancy_kernel_r1"].verdict == "failed" and "not_applied" in fb["fancy_kernel_r1"].reason
    assert all(f.round_analysis.startswith("Worked: Longer training helped") for f in fb.values())
    base = fb["negative_step_r1"].baseline_value
    assert 0.5 < base <= 1.0
    meta = instance.get_latest_materialization_event(dg.AssetKey("feedback_summary")).asset_materialization.metadata
    assert meta["progress_plot"].value.startswith("![progress](data:image/png;base64,iVBOR")  # a PNG inline
    from pathlib import Path

    assert Path(meta["progress_plot_file"].value).read_bytes()[:4] == b"\x89PNG"
    rounds_table = meta["rounds"].value
    assert "toy_classification/r1/fancy_kernel_r1" in meta["lineage"].value and "mlflow_run" in meta["lineage"].value
    assert "tokens" in rounds_table and "cost_per_idea" in rounds_table
    tokens = int(rounds_table.splitlines()[2].split("|")[9])  # the r1 row: the fake server reports usage
    assert tokens > 0

    # LLM use per idea: the per-idea stages record it in their metadata ...
    def meta_of(asset: str):
        return instance.get_latest_materialization_event(dg.AssetKey(asset)).asset_materialization.metadata

    fixed_id = fixed.idea_id
    repairs = meta_of("run_results")["usage_by_idea"].value
    assert repairs[fixed_id]["llm_calls"] == 2  # the repair: its analysis and its fix, this idea's only
    assert set(repairs) == {fixed_id}
    assert set(meta_of("filtered_ideas")["usage_by_idea"].value) >= set(f.idea_id for f in fb.values())
    assert set(meta_of("experiment_plans")["usage_by_idea"].value) == set(f.idea_id for f in fb.values())
    # ... and feedback_summary adds them up per idea, plus an even share of the round-level calls
    round_tokens = (fake_llm.script.total - requests_before) * 120  # the fake reports 100 + 20 per request
    assert meta["round_tokens"].value == tokens == round_tokens
    assert all(f.llm_calls > 0 and f.tokens > 0 and f.cost_usd > 0 and f.shared_tokens > 0 for f in fb.values())
    neg, longer, fancy = fb["negative_step_r1"], fb["longer_training_r1"], fb["fancy_kernel_r1"]
    assert longer.tokens == neg.tokens + 240  # the same stages plus a repair (two calls)
    assert fancy.tokens > neg.tokens  # its malformed patch answers were retried
    assert len({f.shared_tokens for f in fb.values()}) == 1
    assert sum(f.tokens + f.shared_tokens for f in fb.values()) == pytest.approx(round_tokens)
    assert sum(f.cost_usd + f.shared_cost_usd for f in fb.values()) == pytest.approx(meta["round_cost_usd"].value,
                                                                                   abs=1e-6)
    assert meta["cost_per_idea"].value == pytest.approx(meta["round_cost_usd"].value / len(fb), abs=1e-6)
    assert "shared_tokens" in meta["verdicts"].value

    # round 2 reads round 1 through the store: the declining idea is in the bank
    res2 = materialize_round(instance, resources, "r2")
    assert res2.success
    ideas_mat = instance.get_latest_materialization_event(dg.AssetKey("ideas"))
    assert "r1|toy_classification" in str(ideas_mat.asset_materialization.metadata["reads_partitions"].value)
    # round 1's analysis is fed forward into round 2's idea prompt
    assert ideas_mat.asset_materialization.metadata["analysis_in_prompt"].value.startswith("Worked: Longer training")
    fi = from_frame(store.read("filtered_ideas", TOPIC, "r2"), FilteredIdea)
    neg = next(i for i in fi if i.name.startswith("negative_step"))
    assert neg.nearest_bank_idea == f"{TOPIC}/r1/negative_step_r1" and neg.max_similarity > 0.8
    assert not neg.kept

    # lineage tells the whole chain, including what round 2 did with the round-1 idea
    from pipelines.lineage import idea_lineage

    text = idea_lineage(f"{TOPIC}/r1/negative_step_r1")
    for part in ("## topic", "literature query", "## inspired by papers", "novelty queries", "## patch",
                 "## verdict", "the round's analysis", "## later ideas compared with it in the idea bank"):
        assert part in text, part
    assert f"{neg.idea_id}: similarity" in text and "dropped as a near-duplicate" in text
    fixed_text = idea_lineage(f"{TOPIC}/r1/longer_training_r1")
    assert "    fix:" in fixed_text and "EPOCHS" in fixed_text  # the repair's diff
    # what the repair prompt was told about the NameError: the names bound before the failing line
    assert "    notes on the error:" in fixed_text and "Names defined at the top level of" in fixed_text
    assert f"- this idea: {longer.llm_calls} calls, {longer.prompt_tokens} prompt + " in fixed_text


def test_rematerialising_makes_no_llm_call(topic_ready, fake_llm):
    instance, resources = topic_ready
    assert materialize_round(instance, resources, "r1").success
    before = fake_llm.script.total
    assert before > 0
    assert materialize_round(instance, resources, "r1").success
    assert fake_llm.script.total == before, fake_llm.script.counts
