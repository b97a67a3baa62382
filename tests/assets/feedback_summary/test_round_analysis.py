"""The round analysis the next round's ideas prompt quotes ("What the last round taught us") is
grounded in the verdicts: an answer that says an idea worked which was not judged an improvement
is asked again, told which verdicts it got wrong (the diabetes run's r1 analysis said "Worked:
Regularization Parameter Tuning" of an idea that crashed, and r2 proposed it again)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from assets.feedback_summary.feedback import analyse_round, grounded_analysis
from resources.llm import LLM, RejectedAnswer
from schemas.records import Feedback
from tests.support.fake_llm import FakeLLMServer


def row(title: str, verdict: str) -> Feedback:
    return Feedback(idea_id=f"t/r1/{title[:5]}", name=title[:5], title=title, summary="s", verdict=verdict,
                    reason="x", metric_value=None if verdict == "failed" else 0.5, baseline_value=0.5,
                    delta=None if verdict == "failed" else 0.0, effective=verdict == "improvement")


ROWS = [row("Regularization Parameter Tuning", "failed"), row("Early Stopping", "maintenance"),
        row("Polynomial Features", "improvement")]


def answer(worked: str) -> str:
    return json.dumps({"worked": worked, "failed": "Tuning crashed.", "next_direction": "Try interactions."})


def test_an_analysis_naming_a_failed_idea_as_worked_is_rejected():
    parse = grounded_analysis(ROWS)
    with pytest.raises(RejectedAnswer, match=r"ungrounded: .*'Regularization Parameter Tuning' \(failed\)"):
        parse(answer("Regularization parameter tuning helped the most."))
    with pytest.raises(RejectedAnswer, match=r"'Early Stopping' \(maintenance\)"):
        parse(answer("Early stopping and polynomial features."))
    assert parse(answer("Polynomial Features lifted r2: the target is not linear.")).worked.startswith("Polynomial")
    assert parse(answer("Nothing worked this round.")).worked == "Nothing worked this round."


class Analyst:
    """Answers the analysis request wrongly first, then right once told why."""

    def __init__(self):
        self.requests: list[dict] = []

    def answer(self, req: dict) -> str:
        self.requests.append(req)
        told = req["messages"][-1]["content"]
        if "could not be used" in told:
            return answer("Polynomial Features: the target is not linear in the raw features.")
        return answer("Regularization Parameter Tuning worked best.")


def test_analyse_round_asks_again_until_the_analysis_matches_the_verdicts(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    spec = SimpleNamespace(title="t", metric=SimpleNamespace(name="r2", goal="maximize"))
    analyst = Analyst()
    with FakeLLMServer(analyst) as server:
        llm = LLM(base_url=server.base_url, api_key="sk-test", model="fake-model", max_retries=1, use_cache=False)
        text, error = analyse_round(spec, 0.53, ROWS, llm)
    assert error is None and text.startswith("Worked: Polynomial Features")
    assert len(analyst.requests) == 2
    assert "'Regularization Parameter Tuning' (failed)" in analyst.requests[1]["messages"][-1]["content"]

    with FakeLLMServer(SimpleNamespace(answer=lambda req: answer("Early Stopping helped."))) as server:
        llm = LLM(base_url=server.base_url, api_key="sk-test", model="fake-model", max_retries=1, use_cache=False)
        text, error = analyse_round(spec, 0.53, ROWS, llm)
    assert text == "" and "ungrounded" in error  # wrong twice: no analysis rather than a false one
