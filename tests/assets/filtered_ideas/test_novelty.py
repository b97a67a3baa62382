"""assets/filtered_ideas/novelty.py: the AI-Scientist-style novelty loop with a scripted LLM and a fake search."""
from __future__ import annotations

import pytest

from assets.filtered_ideas.novelty import novelty_check
from schemas.records import Paper
from tests.support.novelty import IDEA, ScriptedLLM, judge, q


def paper(i: int) -> Paper:
    return Paper(paper_id=f"p{i}", title=f"Paper {i}", abstract=f"Abstract of paper {i}. " * 5)


class FakeSearch:
    def __init__(self, results: dict[str, list[int]]):
        self.results = results
        self.calls: list[tuple[str, int]] = []

    def __call__(self, query: str, k: int) -> list[Paper]:
        self.calls.append((query, k))
        return [paper(i) for i in self.results.get(query, [])][:k]


def step(decision, query="", closest=0, reason="r"):
    return {"decision": decision, "query": query, "closest_paper": closest, "reason": reason}


def test_two_rounds_record_every_query_and_paper():
    search = FakeSearch({"rotation augmentation point cloud": [1, 2, 3], "rotation invariant pointnet": [3, 4]})
    llm = ScriptedLLM(q("rotation augmentation point cloud"),
                      step("search_again", "rotation invariant pointnet"),
                      judge("not_novel", closest=4, reason="paper 4 trains with random rotations"))
    out = novelty_check(*IDEA, search, llm, rounds=2, k=3)
    assert out.novel is False and out.decided
    assert out.queries == ["rotation augmentation point cloud", "rotation invariant pointnet"]
    assert [p.paper_id for p in out.papers] == ["p1", "p2", "p3", "p4"]  # p3 seen twice, kept once
    assert out.closest.paper_id == "p4" and out.reason == "paper 4 trains with random rotations"
    assert out.error is None
    assert search.calls == [("rotation augmentation point cloud", 3), ("rotation invariant pointnet", 3)]
    assert llm.schemas == ["NoveltyQuery", "NoveltyStep", "NoveltyJudgement"]
    # the conversation only grows at its end: each request starts with the whole previous one
    for (prev, _), (cur, _) in zip(llm.requests, llm.requests[1:]):
        assert cur[:len(prev)] == prev
    # a paper shown before is listed by number only, its summary is not repeated
    last = llm.requests[-1][0][-1]["content"]
    assert "[3] Paper 3 (shown above)" in last and "[4] Paper 4: Abstract of paper 4" in last


def test_stops_at_novelty_rounds_even_if_model_keeps_searching():
    search = FakeSearch({})
    llm = ScriptedLLM(q("first query"), step("search_again", "second query"), step("search_again", "third query"),
                      judge("novel"))
    out = novelty_check(*IDEA, search, llm, rounds=3, k=5)
    assert [c[0] for c in search.calls] == ["first query", "second query", "third query"]
    assert llm.schemas == ["NoveltyQuery", "NoveltyStep", "NoveltyStep", "NoveltyJudgement"]  # last must decide
    assert out.novel is True and out.papers == [] and out.closest is None
    assert "(no papers found)" in llm.requests[1][0][-1]["content"]


def test_early_decision_uses_one_search():
    search = FakeSearch({"rotation": [1, 2]})
    llm = ScriptedLLM(q("rotation"), step("novel", closest=2, reason="no paper does this"))
    out = novelty_check(*IDEA, search, llm, rounds=2, k=5)
    assert out.novel is True and out.queries == ["rotation"] and len(search.calls) == 1
    assert out.closest.paper_id == "p2"


def test_closest_paper_out_of_range_is_none():
    llm = ScriptedLLM(q("rotation"), judge("not_novel", closest=9))
    out = novelty_check(*IDEA, FakeSearch({"rotation": [1]}), llm, rounds=1)
    assert out.novel is False and out.closest is None


def test_repeated_query_forces_a_decision_without_searching_again():
    search = FakeSearch({"rotation": [1]})
    llm = ScriptedLLM(q("rotation"), step("search_again", "  Rotation "), judge("novel"))
    out = novelty_check(*IDEA, search, llm, rounds=3, item="t/r1/rotate")
    assert len(search.calls) == 1 and out.queries == ["rotation"]
    assert llm.schemas == ["NoveltyQuery", "NoveltyStep", "NoveltyJudgement"]
    assert llm.items == ["t/r1/rotate"] * 3  # every call, the forced decision too, is the idea's
    assert "already searched" in llm.requests[-1][0][-1]["content"]
    assert out.novel is True


def test_malformed_query_falls_back_to_title_and_is_recorded():
    search = FakeSearch({"Random rotation augmentation": [1]})
    llm = ScriptedLLM("no json here", judge("novel", closest=1))
    out = novelty_check(*IDEA, search, llm, rounds=1)
    assert out.queries == ["Random rotation augmentation"]
    assert out.novel is True and out.closest.paper_id == "p1"
    assert out.error.startswith("query step failed") and "invalid answer" in out.error


def test_malformed_decision_leaves_novelty_undecided_with_evidence():
    search = FakeSearch({"rotation": [1, 2]})
    llm = ScriptedLLM(q("rotation"), '{"decision": "maybe"}')
    out = novelty_check(*IDEA, search, llm, rounds=1)
    assert out.novel is None and not out.decided
    assert out.reason.startswith("novelty not judged: decision step 1 failed")
    assert "invalid answer" in out.error
    assert [p.paper_id for p in out.papers] == ["p1", "p2"] and out.queries == ["rotation"]


def test_zero_rounds_switches_the_check_off():
    llm = ScriptedLLM()
    out = novelty_check(*IDEA, FakeSearch({}), llm, rounds=0)
    assert out.novel is None and out.error is None and llm.requests == []
    assert "switched off" in out.reason


@pytest.mark.parametrize("rounds", [1, 2, 4])
def test_llm_calls_bounded(rounds):
    answers = [q("a")] + [step("search_again", f"q{i}") for i in range(rounds - 1)] + [judge("novel")]
    llm = ScriptedLLM(*answers)
    novelty_check(*IDEA, FakeSearch({}), llm, rounds=rounds)
    assert len(llm.requests) == rounds + 1 and llm.answers == []


def test_an_idea_that_applies_a_method_card_skips_the_literature_check_unless_asked():
    from types import SimpleNamespace

    from assets.filtered_ideas.novelty import NoveltyOutcome, unless_card

    checked = []

    def check(item):
        checked.append(item.name)
        return NoveltyOutcome(novel=False, reason="published")

    card = SimpleNamespace(name="forest", method_card="breiman2001random")
    plain = SimpleNamespace(name="plain", method_card=None)
    out = unless_card(check)(card)
    assert out.novel is None and not out.decided and "breiman2001random" in out.reason and checked == []
    assert unless_card(check)(plain).novel is False and checked == ["plain"]
    assert unless_card(check, cards_checked=True)(card).novel is False and checked == ["plain", "forest"]
