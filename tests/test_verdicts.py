"""assets/feedback_summary/verdicts.py (judge, parse_metrics) and assets/paper_rankings/scoring.py (score_paper, is_kept)."""
from __future__ import annotations

import itertools
import typing

import pytest

from assets.feedback_summary.verdicts import judge, parse_metrics
from assets.paper_rankings.scoring import (
    ATTRIBUTE_POINTS,
    KEEP_AT,
    NAIVE_POINTS,
    RELEVANCE_POINTS,
    is_kept,
    score_paper,
)
from schemas.llm_outputs import AttributeMatch, Relevance

# -- judge ------------------------------------------------------------------------------


@pytest.mark.parametrize("value,verdict", [
    (0.75, "improvement"), (0.25, "decline"), (0.5, "maintenance"),
    (0.5625, "maintenance"), (0.4375, "maintenance"),   # |delta| < tolerance
    (0.625, "maintenance"), (0.375, "maintenance"),     # |delta| == tolerance exactly
    (0.6875, "improvement"), (0.3125, "decline"),
])
def test_judge_maximize(value, verdict):
    assert judge(value, 0.5, "maximize", 0.125)[0] == verdict


@pytest.mark.parametrize("value,verdict", [
    (0.25, "improvement"), (0.75, "decline"), (0.5, "maintenance"),
    (0.625, "maintenance"), (0.6875, "decline"), (0.3125, "improvement"),
])
def test_judge_minimize(value, verdict):
    assert judge(value, 0.5, "minimize", 0.125)[0] == verdict


def test_judge_zero_tolerance_and_ints():
    assert judge(3, 3, "maximize", 0.0)[0] == "maintenance"
    assert judge(4, 3, "maximize", 0.0)[0] == "improvement"
    assert judge(4, 3, "minimize", 0.0)[0] == "decline"


def test_judge_reasons():
    v, why = judge(0.9, 0.8, "maximize", 0.005)
    assert v == "improvement" and "0.1" in why and "0.005" in why
    v, why = judge(0.3, 0.2, "minimize", 0.01)
    assert v == "decline" and "worse" in why
    v, why = judge(0.802, 0.8, "maximize", 0.005)
    assert v == "maintenance" and "+0.002" in why


@pytest.mark.parametrize("value", [None, float("nan"), "0.9"])
def test_judge_failed(value):
    assert judge(value, 0.8, "maximize", 0.005) == ("failed", "no valid metric")


# -- parse_metrics ----------------------------------------------------------------------

def test_parse_metrics_plain_and_means():
    assert parse_metrics({"accuracy": 0.9, "loss": 1}, "accuracy") == ({"accuracy": 0.9, "loss": 1.0}, None)
    out, err = parse_metrics({"accuracy": {"means": 0.9, "stderrs": 0.01}, "f1": {"means": 0.5}}, "accuracy")
    assert err is None and out == {"accuracy": 0.9, "f1": 0.5}
    assert all(type(v) is float for v in out.values())


def test_parse_metrics_missing_metric():
    out, err = parse_metrics({"loss": 0.3}, "accuracy")
    assert out == {"loss": 0.3}
    assert err == "final_info.json has no 'accuracy'"


@pytest.mark.parametrize("bad", ["0.9", float("nan"), float("inf"), None, [0.9], {"means": "x"}, True, {"std": 1.0}])
def test_parse_metrics_unusable_primary(bad):
    out, err = parse_metrics({"accuracy": bad, "loss": 0.1}, "accuracy")
    assert out == {"loss": 0.1}
    assert err is not None and err.startswith("'accuracy' in final_info.json is not a finite number")


def test_parse_metrics_bools_ignored():
    out, err = parse_metrics({"accuracy": 0.8, "converged": True, "diverged": {"means": False}}, "accuracy")
    assert err is None and out == {"accuracy": 0.8}


@pytest.mark.parametrize("info", [[0.9], "accuracy: 0.9", None, 0.9])
def test_parse_metrics_non_dict(info):
    assert parse_metrics(info, "accuracy") == ({}, "final_info.json is not a JSON object")


# -- score_paper / is_kept ------------------------------------------------------------

def test_categories_match_llm_output_literals():
    assert set(RELEVANCE_POINTS) == set(typing.get_args(Relevance)) == set(NAIVE_POINTS)
    assert set(ATTRIBUTE_POINTS) == set(typing.get_args(AttributeMatch))


@pytest.mark.parametrize("rel,attr", list(itertools.product(RELEVANCE_POINTS, ATTRIBUTE_POINTS)))
def test_every_combination_in_range(rel, attr):
    s = score_paper(rel, attr)
    assert isinstance(s, int) and 1 <= s <= 10
    assert is_kept(s) == (s >= 8)


def test_kept_combinations_exactly():
    kept = {(r, a) for r, a in itertools.product(RELEVANCE_POINTS, ATTRIBUTE_POINTS)
            if is_kept(score_paper(r, a))}
    # measured: the 1.5B model calls nearly every 3D paper (detection, completion too)
    # "neighbouring_task, input_and_output_match", so only "same_task" papers are kept
    assert kept == {("same_task", "input_and_output_match"), ("same_task", "only_output_matches")}


@pytest.mark.parametrize("rel,attr,score", [
    ("same_task", "input_and_output_match", 10),
    ("same_task", "only_output_matches", 8),
    ("same_task", "only_input_matches", 7),
    ("neighbouring_task", "input_and_output_match", 7),
    ("neighbouring_task", "only_input_matches", 4),
    ("same_field_other_task", "neither_matches", 1),
    ("unrelated", "neither_matches", 1),     # 0 points clamped to 1
    ("unrelated", "input_and_output_match", 4),
])
def test_scores(rel, attr, score):
    assert score_paper(rel, attr) == score


def test_score_monotone_in_both_categories():
    rels = ["unrelated", "same_field_other_task", "neighbouring_task", "same_task"]
    attrs = ["neither_matches", "only_input_matches", "only_output_matches", "input_and_output_match"]
    for a in attrs:
        s = [score_paper(r, a) for r in rels]
        assert s == sorted(s)
    for r in rels:
        s = [score_paper(r, a) for a in attrs]
        assert s == sorted(s)


def test_naive_mode():
    assert {r: score_paper(r, None) for r in RELEVANCE_POINTS} == {
        "same_task": 10, "neighbouring_task": 8, "same_field_other_task": 5, "unrelated": 1}
    assert [r for r in RELEVANCE_POINTS if is_kept(score_paper(r, None))] == ["same_task", "neighbouring_task"]


def test_keep_threshold():
    assert KEEP_AT == 8
    assert is_kept(8) and not is_kept(7) and is_kept(10)
    assert is_kept(5, keep_at=5) and not is_kept(4, keep_at=5)


def test_unknown_category_raises():
    with pytest.raises(KeyError):
        score_paper("same-task", "input_and_output_match")
    with pytest.raises(KeyError):
        score_paper("same_task", "both")
