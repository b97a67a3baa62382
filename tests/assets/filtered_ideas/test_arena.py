"""assets/filtered_ideas/arena.py: the Idea Arena (pairwise, both orders, ELO) with scripted judges."""
from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from assets.filtered_ideas.arena import (
    INITIAL_RATING,
    ROW_COLUMNS,
    Judgement,
    arena_order,
    elo,
    llm_judge,
    needed,
    spearman,
    tournament,
    with_ratings,
)
from assets.filtered_ideas.arena_prompts import CRITERIA
from assets.filtered_ideas.filtering import filter_ideas
from assets.filtered_ideas.novelty import NoveltyOutcome
from assets.shared.metadata import md_table
from resources.llm import LLMCall, LLMResult
from schemas.records import FilteredIdea, Idea
from schemas.topic import IdeationSpec


def idea(n: int, quality: int) -> Idea:
    # the quality is written into the title, where the scripted judges read it
    return Idea(idea_id=f"i{n}", topic="t", round="r1", name=f"idea_{n}", title=f"Change {n} (q{quality})",
                experiment=f"edit line {n}", summary=f"Summary of change {n}.")


QUALITY = re.compile(r"Idea ([AB]): Change \d+ \(q(\d+)\)")


class FakeJudgeLLM:
    """Answers ArenaJudgement requests by a rule over the two ideas' qualities in the prompt; a list
    of raw answers, when given, is served first (malformed ones included)."""

    def __init__(self, rule, raw: list[str] | None = None):
        self.rule = rule
        self.raw = list(raw or [])
        self.asked: list[tuple[str, str]] = []   # (title shown as A, title shown as B)
        self.kwargs: list[dict] = []

    def complete(self, messages, *, stage, schema=None, max_tokens=512, item=None, temperature=None, seed=None):
        user = messages[-1]["content"]
        q = {label: int(v) for label, v in QUALITY.findall(user)}
        titles = re.findall(r"Idea [AB]: (.*)", user)
        self.asked.append((titles[0], titles[1]))
        self.kwargs.append({"stage": stage, "temperature": temperature, "seed": seed})
        text = self.raw.pop(0) if self.raw else json.dumps(
            {"reason": "compared", **{c: self.rule(q["A"], q["B"]) for c in CRITERIA}})
        call = LLMCall(stage=stage, model="fake")
        try:
            return LLMResult(value=schema.model_validate_json(text), text=text, call=call)
        except ValidationError as e:
            return LLMResult(text=text, call=call, error=f"invalid answer (try 3): {str(e)[:60]}")


def consistent(qa: int, qb: int) -> str:
    return "A" if qa > qb else "B" if qb > qa else "tie"


def first_always(qa: int, qb: int) -> str:
    return "A"


def judge_with(llm):
    return llm_judge(llm, "Point clouds", "Classify shapes.", "accuracy", "maximize", "LR = 0.1\n")


def test_every_pair_is_asked_in_both_orders():
    items = [idea(n, n) for n in range(4)]
    llm = FakeJudgeLLM(consistent)
    out = tournament(items, judge_with(llm))
    assert len(llm.asked) == 4 * 3  # 6 pairs x 2 orders
    assert len(set(llm.asked)) == 12
    for a, b in llm.asked:
        assert (b, a) in llm.asked
    assert {(j.first, j.second) for j in out.judgements} == {(a.idea_id, b.idea_id) for a in items for b in items
                                                             if a is not b}
    assert all(kw["stage"] == "arena" for kw in llm.kwargs)


def test_a_judge_that_always_prefers_the_first_gives_equal_ratings():
    items = [idea(n, n) for n in range(5)]
    out = tournament(items, judge_with(FakeJudgeLLM(first_always)))
    assert all(j.error is None for j in out.judgements)
    assert all(r == pytest.approx(INITIAL_RATING) for r in out.ratings.values())
    for c in CRITERIA:
        assert all(r == pytest.approx(INITIAL_RATING) for r in out.by_criterion[c].values())
    assert out.order == [i.idea_id for i in items]  # equal ratings keep the input order
    # each idea won exactly the games it was shown first in: 4 opponents x 4 criteria
    assert all(out.record(i.idea_id) == (16, 16, 0) for i in items)


def test_a_consistent_judge_ranks_the_ideas_by_quality():
    quality = [2, 5, 1, 4, 3]
    items = [idea(n, q) for n, q in enumerate(quality)]
    out = tournament(items, judge_with(FakeJudgeLLM(consistent)))
    assert out.order == ["i1", "i3", "i4", "i0", "i2"]
    ratings = [out.ratings[i] for i in out.order]
    assert all(a > b for a, b in zip(ratings, ratings[1:]))
    assert out.ratings["i1"] > INITIAL_RATING > out.ratings["i2"]
    assert sum(out.ratings.values()) == pytest.approx(INITIAL_RATING * len(items))  # ELO is zero-sum
    assert out.top(2) == ["i1", "i3"]


def test_order_of_the_input_does_not_change_the_ranking():
    quality = [3, 1, 4, 2]
    items = [idea(n, q) for n, q in enumerate(quality)]
    a = tournament(items, judge_with(FakeJudgeLLM(consistent)))
    b = tournament(list(reversed(items)), judge_with(FakeJudgeLLM(consistent)))
    assert a.order == b.order == ["i2", "i0", "i3", "i1"]


def test_elo_documented_constants():
    # one match between two fresh players: the winner gains K * (1 - 0.5) = 16
    r = elo(["a", "b"], [("a", "b", 1.0)], orders=1)
    assert r == {"a": pytest.approx(1016.0), "b": pytest.approx(984.0)}
    r = elo(["a", "b"], [("a", "b", 0.5)], orders=1)
    assert r == {"a": 1000.0, "b": 1000.0}


def test_malformed_judgement_is_asked_again_then_counted_as_a_tie():
    items = [idea(0, 1), idea(1, 2)]
    # first pair's first order: malformed, then valid on the re-ask; second order: malformed twice
    good = json.dumps({"reason": "B is better", **{c: "B" for c in CRITERIA}})
    llm = FakeJudgeLLM(consistent, raw=["not json", good, "{\"reason\": \"x\"}", "still not json"])
    out = tournament(items, judge_with(llm))
    first, second = out.judgements
    assert first.error is None and first.asks == 2 and first.choices == {c: "second" for c in CRITERIA}
    assert llm.kwargs[1]["temperature"] is not None  # the re-ask is sampled, the first ask greedy
    assert llm.kwargs[0]["temperature"] is None
    assert second.asks == 2 and second.error.startswith("malformed judgement after 2 asks, counted as a tie")
    assert second.choices == {c: "tie" for c in CRITERIA}
    assert len(llm.asked) == 4
    # i1 (q2) won one order, the other was a tie: i1 rated above i0
    assert out.order == ["i1", "i0"] and out.record("i1") == (4, 0, 4)
    rows = out.rows({"i0": "idea_0", "i1": "idea_1"})
    assert rows[0]["name"] == "idea_1" and rows[0]["malformed"] == 1
    assert "won-lost-tied" in md_table(rows, ROW_COLUMNS)


def test_option_selects_the_top_k_and_stores_the_ratings():
    quality = [1, 4, 2, 5, 3]   # best: i3, i1, i4
    items = [idea(n, q) for n, q in enumerate(quality)]
    budget = 3
    cfg = IdeationSpec(arena=True)
    assert IdeationSpec().arena is False  # off by default
    assert needed(len(items), budget, cfg.arena) and not needed(3, budget, True) and not needed(5, budget, False)
    out = tournament(items, judge_with(FakeJudgeLLM(consistent)))
    ordered = arena_order(items, out)
    assert [i.idea_id for i in ordered] == ["i3", "i1", "i4", "i2", "i0"]

    def novel(_item):
        return NoveltyOutcome(novel=True, reason="ok")

    def embed(texts):
        import numpy as np
        return np.eye(len(texts))  # all independent

    filtered = with_ratings(filter_ideas(ordered, [], embed, novel, keep_at_most=budget), out)
    kept = [f.idea_id for f in filtered if f.kept]
    assert kept == ["i3", "i1", "i4"]
    by_id = {f.idea_id: f for f in filtered}
    assert by_id["i3"].arena_rank == 1 and by_id["i0"].arena_rank == 5
    assert by_id["i3"].arena_rating > by_id["i0"].arena_rating
    assert by_id["i3"].arena_record == "32-0-0"  # 4 opponents x 2 orders x 4 criteria
    # stored: the ratings survive the asset's frame round trip
    from schemas.frames import from_frame, to_frame
    back = {f.idea_id: f for f in from_frame(to_frame(filtered, FilteredIdea), FilteredIdea)}
    assert back["i4"].arena_rating == by_id["i4"].arena_rating and back["i4"].arena_rank == 3


def test_dropped_top_idea_is_replaced_by_the_next_best():
    items = [idea(n, q) for n, q in enumerate([1, 4, 2, 5, 3])]
    out = tournament(items, judge_with(FakeJudgeLLM(consistent)))

    def novel(item):  # the best rated idea turns out not novel
        return NoveltyOutcome(novel=item.idea_id != "i3", reason="r")

    import numpy as np
    filtered = filter_ideas(arena_order(items, out), [], lambda t: np.eye(len(t)), novel, keep_at_most=3)
    assert [f.idea_id for f in filtered if f.kept] == ["i1", "i4", "i2"]


def test_without_the_arena_ratings_stay_empty():
    f = FilteredIdea(**idea(0, 1).model_dump(), max_similarity=0.1, independent=True, kept=True)
    assert with_ratings([f], None) == [f]
    assert arena_order([idea(1, 1), idea(0, 2)], None) == [idea(1, 1), idea(0, 2)]
    assert f.arena_rating is None and f.arena_rank is None and f.arena_record == ""


def test_duplicate_ids_are_refused():
    with pytest.raises(ValueError):
        tournament([idea(0, 1), idea(0, 2)], lambda a, b: Judgement(a.idea_id, b.idea_id, {}))


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # monotone but not linear: rank correlation 1
    assert spearman([1, 2, 3, 4, 5], [1, 8, 27, 64, 1000]) == pytest.approx(1.0)
    # ties take the mean rank (scipy's definition)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
    # missing values are left out; too few pairs or a constant side: no correlation
    assert spearman([1, None, 3, 4], [1, 5, 3, 2]) == pytest.approx(0.5)
    assert spearman([1, 2], [2, 1]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def _spec(arena: bool, budget: int):
    from types import SimpleNamespace

    return SimpleNamespace(title="Point clouds", description="Classify shapes.", ideation=IdeationSpec(arena=arena),
                           budget=SimpleNamespace(ideas_per_round=budget),
                           metric=SimpleNamespace(name="accuracy", goal="maximize"))


def test_stage_entry_runs_only_when_switched_on_and_over_budget():
    from assets.filtered_ideas.arena import arena_for, arena_metadata

    items = [idea(n, q) for n, q in enumerate([1, 3, 2, 4])]
    llm = FakeJudgeLLM(consistent)
    assert arena_for(items, _spec(False, 2), "code", llm) is None
    assert arena_for(items, _spec(True, 4), "code", llm) is None
    assert llm.asked == [] and arena_metadata(None, items) == {}
    out = arena_for(items, _spec(True, 2), "LR = 0.1\n", llm)
    assert len(llm.asked) == 12 and out.top(2) == ["i3", "i1"]
    meta = arena_metadata(out, items)
    table = meta["arena"].value
    assert table.splitlines()[0] == "| " + " | ".join(ROW_COLUMNS) + " |"
    assert table.splitlines()[2].startswith("| 1 | idea_3 |")
    assert meta["arena_judgements"] == 12 and meta["arena_malformed"] == 0 and "K=32" in meta["arena_elo"]


def test_the_judge_sees_the_code_and_both_ideas():
    from assets.filtered_ideas.arena_prompts import judge

    msgs = judge("T", "D", "accuracy", "maximize", "EPOCHS = 3\n", ("ta", "sa", "ea"), ("tb", "sb", "eb"))
    user = msgs[-1]["content"]
    assert "EPOCHS = 3" in user and user.index("Idea A: ta") < user.index("Idea B: tb")
    assert all(c in user for c in CRITERIA)


# -- the stage with the option on (Dagster, the scripted fake LLM server) --------------------------

JUDGED_QUALITY = {"Smooth the labels": 6, "Add an RBF kernel feature map": 5, "Train longer": 4,
                  "Standardise the inputs": 3, "Train for more epochs": 2}   # any other title: 1


def materialize_filter(server, round_key: str):
    """topic_brief, then the round's assets up to filtered_ideas; the stored ideas and metadata."""
    import dagster as dg

    from assets import ALL_ASSETS
    from assets.shared.partitions import multi_key
    from resources.store import Store
    from schemas.frames import from_frame
    from tests.support.ideation import TOPIC
    from tests.support.resources import make_resources

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", [round_key])
    resources = make_resources(server.base_url)
    keys = {k.to_user_string() for a in ALL_ASSETS for k in a.keys}
    # the topic's set-up (round_reference, where it exists, reads the baseline: one run of the toy script)
    setup = [k for k in ("topic_brief", "baseline_results") if k == "topic_brief" or "round_reference" in keys]
    assert dg.materialize(ALL_ASSETS, selection=setup, partition_key=TOPIC, instance=instance,
                          resources=resources).success
    wanted = [k for k in ("papers", "paper_rankings", "round_reference", "ideas", "filtered_ideas") if k in keys]
    res = dg.materialize(ALL_ASSETS, selection=wanted, partition_key=str(multi_key(TOPIC, round_key)),
                         instance=instance, resources=resources)
    assert res.success
    meta = instance.get_latest_materialization_event(dg.AssetKey("filtered_ideas")).asset_materialization.metadata
    return {i.name: i for i in from_frame(Store().read("filtered_ideas", TOPIC, round_key), FilteredIdea)}, meta


def test_filtered_ideas_with_the_arena_keeps_the_top_rated(home):
    from tests.support.fake_llm import FakeLLMServer, Script, arena_answer
    from tests.support.ideation import set_ideation

    class ArenaScript(Script):
        """The round's scripted answers, plus a consistent arena judge over JUDGED_QUALITY."""

        def answer(self, req):
            if (judged := arena_answer(req, lambda text: JUDGED_QUALITY.get(text, 1))) is None:
                return super().answer(req)
            self.count("ArenaJudgement")
            return judged

    set_ideation(home, brainstorm=True, arena=True)
    with FakeLLMServer(ArenaScript()) as server:
        out, meta = materialize_filter(server, "r1")
        assert server.script.counts["ArenaJudgement"] == 6 * 5  # 15 pairs, both orders
    ranked = sorted(out.values(), key=lambda f: f.arena_rank)
    assert [f.name for f in ranked[:3]] == ["label_smoothing", "fancy_kernel_r1", "train_until_converged"]
    assert all(f.arena_rating is not None and f.arena_record for f in out.values())
    assert ranked[0].arena_rating > ranked[-1].arena_rating
    # the filters spent the budget of 3 on the best rated (without the arena: the first three proposed)
    assert {n for n, f in out.items() if f.kept} == {"label_smoothing", "fancy_kernel_r1", "train_until_converged"}
    fm = meta
    assert "label_smoothing" in fm["arena"].value and fm["arena_judgements"].value == 30
    assert fm["arena_malformed"].value == 0


def test_asking_the_source_for_more_candidates_than_the_budget_lets_the_arena_choose(home):
    """ideation.candidates: the LLM source is asked for 5 ideas for a budget of 3, so the Arena has
    more candidates than places, rates all 5 and the filters keep the 3 best rated."""
    from tests.support.fake_llm import FakeLLMServer, Script, arena_answer
    from tests.support.ideation import set_ideation

    quality = {f"Idea number {i}": i for i in range(5)}

    class FiveIdeas(Script):
        def answer(self, req):
            name = (req.get("response_format") or {}).get("json_schema", {}).get("name")
            user = req["messages"][-1]["content"]
            if name == "IdeaList":
                self.count("IdeaList")
                self.asked = int(re.search(r"Propose (\d+) different ideas", user).group(1))
                return json.dumps({"ideas": [
                    {"Name": f"idea_{i}", "Title": f"Idea number {i}", "Experiment": f"Change part {i} of the model.",
                     "Summary": f"A distinct change number {i} to how the classifier is trained, about topic {i}.",
                     "References": [], "Builds_on": []} for i in range(self.asked)]})
            if (judged := arena_answer(req, lambda text: quality.get(text, -1))) is not None:
                self.count("ArenaJudgement")
                return judged
            return super().answer(req)

    set_ideation(home, arena=True, candidates=5, novelty_rounds=0, independence_threshold=0.999)
    with FakeLLMServer(FiveIdeas()) as server:
        out, meta = materialize_filter(server, "r1")
        assert server.script.asked == 5 and server.script.counts["ArenaJudgement"] == 5 * 4
    assert len(out) == 5 and all(f.arena_rating is not None for f in out.values())
    assert {n for n, f in out.items() if f.kept} == {"idea_4", "idea_3", "idea_2"}  # the best rated 3


def test_candidates_below_one_or_above_twelve_are_refused():
    from schemas.topic import IdeationSpec

    assert IdeationSpec(candidates=6).candidates == 6 and IdeationSpec().candidates is None
    for bad in (0, 13):
        with pytest.raises(ValueError):
            IdeationSpec(candidates=bad)
