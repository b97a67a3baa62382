"""assets/filtered_ideas/similarity.py: DOLPHIN Algorithm 1 on hand-made unit vectors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from assets.filtered_ideas.similarity import IndependenceDecision, independence_filter


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


def at_cos(c: float) -> np.ndarray:
    """Unit vector in the x-y plane with cosine c to e1=(1,0,0)."""
    return np.array([c, math.sqrt(1 - c * c), 0.0])


E1, E2, E3 = np.eye(3)


def test_empty_bank_keeps_first_idea():
    d = independence_filter(np.stack([E1]), ["t/r1/a"], None, [])
    assert d == [IndependenceDecision(0, True, 0.0, None)]


def test_empty_bank_array_same_as_none():
    ideas = np.stack([E1, E2])
    a = independence_filter(ideas, ["a", "b"], np.empty((0, 3)), [])
    b = independence_filter(ideas, ["a", "b"], None, [])
    assert a == b
    assert [x.independent for x in a] == [True, True]
    # the second idea is compared with the first (orthogonal): similarity 0, nearest = first
    assert a[1].nearest == "a" and a[1].max_similarity == 0.0


def test_no_ideas():
    assert independence_filter(np.empty((0, 3)), [], np.stack([E1]), ["old"]) == []


def test_idea_near_bank_entry_is_dropped_with_nearest_id():
    bank = np.stack([E2, at_cos(0.9), E3])
    d = independence_filter(np.stack([E1]), ["new"], bank, ["old_y", "old_near", "old_z"])
    assert len(d) == 1
    assert d[0].independent is False
    assert d[0].nearest == "old_near"
    assert d[0].max_similarity == pytest.approx(0.9, abs=1e-4)


def test_kept_idea_still_reports_nearest():
    bank = np.stack([at_cos(0.3), at_cos(0.5)])
    d = independence_filter(np.stack([E1]), ["new"], bank, ["far", "closer"])
    assert d[0].independent is True
    assert d[0].nearest == "closer"
    assert d[0].max_similarity == pytest.approx(0.5, abs=1e-4)


def test_near_duplicates_in_one_round():
    ideas = np.stack([E1, unit(1, 0.1, 0), E2])
    d = independence_filter(ideas, ["t/r1/first", "t/r1/dup", "t/r1/other"], np.stack([E3]), ["bank0"])
    assert [x.index for x in d] == [0, 1, 2]
    assert [x.independent for x in d] == [True, False, True]
    assert d[0].nearest == "bank0"
    assert d[1].nearest == "t/r1/first"  # the bank grew by the first idea
    assert d[1].max_similarity == pytest.approx(float(unit(1, 0.1, 0)[0]), abs=1e-4)


def test_dropped_idea_does_not_join_bank():
    # b is near the bank entry (dropped); c is near b but not near the bank: c is kept
    b = at_cos(math.cos(math.radians(30)))  # 0.866 to E1 (bank)
    c = at_cos(math.cos(math.radians(45)))  # 0.707 to E1, 0.966 to b
    assert float(b @ c) >= 0.8
    d = independence_filter(np.stack([b, c]), ["b", "c"], np.stack([E1]), ["bank"])
    assert [x.independent for x in d] == [False, True]
    assert d[1].nearest == "bank"


def test_threshold_boundary():
    bank = np.stack([E1])
    exact = independence_filter(np.stack([np.array([0.8, 0.6, 0.0])]), ["x"], bank, ["b"])
    assert exact[0].independent is False and exact[0].max_similarity == 0.8
    below = independence_filter(np.stack([at_cos(0.79)]), ["y"], bank, ["b"])
    assert below[0].independent is True and below[0].max_similarity == pytest.approx(0.79, abs=1e-4)


def test_custom_threshold():
    bank = np.stack([E1])
    v = np.stack([at_cos(0.6)])
    assert independence_filter(v, ["x"], bank, ["b"], threshold=0.5)[0].independent is False
    assert independence_filter(v, ["x"], bank, ["b"], threshold=0.7)[0].independent is True


def test_max_similarity_is_rounded_float():
    d = independence_filter(np.stack([at_cos(0.123456789)]), ["x"], np.stack([E1]), ["b"])
    assert isinstance(d[0].max_similarity, float)
    assert d[0].max_similarity == 0.1235


def test_identical_idea_twice_in_a_round():
    d = independence_filter(np.stack([E1, E1, E1]), ["a", "b", "c"], None, [])
    assert [(x.independent, x.nearest) for x in d] == [(True, None), (False, "a"), (False, "a")]
    assert d[1].max_similarity == pytest.approx(1.0)
