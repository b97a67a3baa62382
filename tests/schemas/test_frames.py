"""schemas/frames.py: records <-> polars frames (and through Parquet) with explicit schemas."""
from __future__ import annotations

import json

import polars as pl

from schemas.frames import frame_schema, from_frame, to_frame
from schemas.records import Attempt, FilteredIdea, Paper, RunResult, TraceFrame


def run_results() -> list[RunResult]:
    a1 = Attempt(attempt=1, command=["python", "experiment.py", "--out_dir", "out"], exit_code=1, timed_out=False,
                 duration_s=1.5, stderr_tail="Traceback ...\nNameError: name 'EPOCH_COUNT' is not defined",
                 error="NameError: name 'EPOCH_COUNT' is not defined",
                 frames=[TraceFrame(file="experiment.py", line=4, function="<module>", code="EPOCHS = EPOCH_COUNT")],
                 local_structure="# experiment.py, lines 1-8\n...", fix_status="ok", fix_diff="-a\n+b\n")
    a2 = Attempt(attempt=2, command=["python", "experiment.py"], exit_code=None, timed_out=True, duration_s=60.0,
                 metrics={"accuracy": 0.9, "loss": 0.25})
    return [
        RunResult(idea_id="toy/r1/longer", status="success", attempts=[a1, a2], n_attempts=2,
                  metrics={"accuracy": 0.9}, metric_value=0.9, final_code="EPOCHS = 60\n", mlflow_run_id="abc"),
        RunResult(idea_id="toy/r1/broken", status="not_implemented", reason="patch llm_failed"),
    ]


def filtered_ideas() -> list[FilteredIdea]:
    return [
        FilteredIdea(idea_id="toy/r1/a", topic="toy", round="r1", name="a", title="A", experiment="e", summary="s",
                     inspired_by_papers=["p1", "p2"], builds_on_ideas=[], max_similarity=0.42,
                     nearest_bank_idea=None, independent=True, novel=None, novelty_evidence=[], kept=True),
        FilteredIdea(idea_id="toy/r1/b", topic="toy", round="r1", name="b", title="B", experiment="e", summary="s",
                     source="brainstorm", max_similarity=0.91, nearest_bank_idea="toy/r1/a", independent=False,
                     novel=False, novelty_reason="done before", novelty_evidence=["p3"], kept=False,
                     drop_reason="similar to toy/r1/a"),
    ]


def test_run_result_round_trip_with_nested_attempts(tmp_path):
    recs = run_results()
    df = to_frame(recs, RunResult)
    assert df.height == 2
    assert df.schema["attempts"] == pl.String and df.schema["metrics"] == pl.String
    assert df.schema["metric_value"] == pl.Float64 and df.schema["n_attempts"] == pl.Int64
    assert df.schema["status"] == pl.String
    # nested records are JSON text readable without pydantic
    first = json.loads(df["attempts"][0])
    assert first[0]["frames"][0]["code"] == "EPOCHS = EPOCH_COUNT" and first[1]["exit_code"] is None
    assert df["metric_value"].to_list() == [0.9, None]

    p = tmp_path / "r.parquet"
    df.write_parquet(p)
    back = from_frame(pl.read_parquet(p), RunResult)
    assert back == recs
    assert isinstance(back[0].attempts[0].frames[0], TraceFrame)
    assert back[0].attempts[1].metrics == {"accuracy": 0.9, "loss": 0.25}


def test_filtered_idea_round_trip(tmp_path):
    recs = filtered_ideas()
    df = to_frame(recs, FilteredIdea)
    assert df.schema["inspired_by_papers"] == pl.List(pl.String)
    assert df.schema["novelty_evidence"] == pl.List(pl.String)
    assert df.schema["novel"] == pl.Boolean and df.schema["kept"] == pl.Boolean
    assert df.schema["max_similarity"] == pl.Float64
    assert df["inspired_by_papers"].to_list() == [["p1", "p2"], []]
    assert df["nearest_bank_idea"].to_list() == [None, "toy/r1/a"]
    assert df["novel"].to_list() == [None, False]
    p = tmp_path / "f.parquet"
    df.write_parquet(p)
    assert from_frame(pl.read_parquet(p), FilteredIdea) == recs


def test_empty_list_keeps_schema(tmp_path):
    for model in (RunResult, FilteredIdea, Paper):
        df = to_frame([], model)
        assert df.height == 0
        assert list(df.columns) == list(model.model_fields)
        assert dict(df.schema) == frame_schema(model)
        p = tmp_path / f"{model.__name__}.parquet"
        df.write_parquet(p)
        back = pl.read_parquet(p)
        assert dict(back.schema) == frame_schema(model)
        assert from_frame(back, model) == []


def test_schema_types_for_optional_scalars():
    s = frame_schema(Paper)
    assert s["year"] == pl.Int64 and s["venue"] == pl.String and s["authors"] == pl.List(pl.String)
    assert s["retrieval_score"] == pl.Float64


def test_excluded_fields_not_stored():
    from schemas.topic import TopicSpec

    assert "dir" not in frame_schema(TopicSpec)
    assert "name" in frame_schema(TopicSpec)


def test_column_order_follows_model_not_dump():
    df = to_frame(filtered_ideas(), FilteredIdea)
    assert df.columns == list(FilteredIdea.model_fields)


def test_feedback_stored_before_per_idea_usage_still_loads(tmp_path):
    from schemas.records import Feedback

    fb = Feedback(idea_id="t/r1/a", name="a", title="A", summary="s", verdict="decline", reason="worse",
                  metric_value=0.5, baseline_value=0.8, delta=-0.3, effective=False, prompt_tokens=300,
                  completion_tokens=60, cost_usd=8e-05, shared_tokens=720.5, llm_calls=3)
    df = to_frame([fb], Feedback)
    assert df.schema["prompt_tokens"] == pl.Int64 and df.schema["shared_tokens"] == pl.Float64
    df.write_parquet(tmp_path / "fb.parquet")
    back = from_frame(pl.read_parquet(tmp_path / "fb.parquet"), Feedback)[0]
    assert back == fb and back.tokens == 360
    usage = ["llm_calls", "prompt_tokens", "completion_tokens", "cost_usd", "shared_tokens", "shared_cost_usd"]
    old = from_frame(df.drop(usage), Feedback)[0]  # a frame written before the usage columns existed
    assert old.verdict == "decline" and old.tokens == 0 and old.shared_cost_usd == 0.0
