"""assets/ideas/generation.py and assets/filtered_ideas/filtering.py: idea provenance, the
brainstorm path, the idea bank and the filter, and the topic's `ideation:` settings (pure
functions first, then the two assets with the fake LLM)."""
from __future__ import annotations

import pytest

from assets.filtered_ideas.filtering import filter_ideas
from assets.filtered_ideas.novelty import NoveltyOutcome
from assets.ideas.generation import (
    BANK_VERDICTS,
    History,
    drafts_to_ideas,
    merge_paths,
    read_history,
)
from resources.store import Store
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import IdeaDraft
from schemas.records import FilteredIdea, Paper, PaperScore
from schemas.topic import TopicSpecError, load_topic
from tests.support.ideation import (
    R1,
    TOPIC,
    Novelty,
    embed,
    fb,
    idea,
    materialize_filter,
    seed_round1,
    set_ideation,
)
from tests.support.topics import VALID, make_topic

# -- topic.yaml `ideation:` -------------------------------------------------------------

def test_ideation_defaults_are_dolphins(tmp_path):
    cfg = load_topic(make_topic(tmp_path, "toy", VALID)).ideation
    assert (cfg.brainstorm, cfg.independence_threshold, cfg.bank) == (False, 0.8, "ineffective")
    assert (cfg.novelty_rounds, cfg.novelty_papers) == (2, 5)


def test_ideation_section_loads(tmp_path):
    spec = {**VALID, "ideation": {"brainstorm": True, "independence_threshold": 0.9, "bank": "all_tried",
                                  "novelty_rounds": 0, "novelty_papers": 3}}
    cfg = load_topic(make_topic(tmp_path, "toy", spec)).ideation
    assert cfg.brainstorm and cfg.independence_threshold == 0.9 and cfg.bank == "all_tried"
    assert cfg.novelty_rounds == 0 and cfg.novelty_papers == 3


@pytest.mark.parametrize("section,field", [
    ({"independence_threshold": 1.5}, "field 'ideation.independence_threshold'"),
    ({"independence_threshold": 0}, "field 'ideation.independence_threshold'"),
    ({"bank": "effective"}, "field 'ideation.bank'"),
    ({"novelty_rounds": -1}, "field 'ideation.novelty_rounds'"),
    ({"novelty_papers": 0}, "field 'ideation.novelty_papers'"),
    ({"brainstrom": True}, "field 'ideation.brainstrom'"),  # a typo is an error, not ignored
])
def test_ideation_invalid_field_named(tmp_path, section, field):
    with pytest.raises(TopicSpecError) as ei:
        load_topic(make_topic(tmp_path, "toy", {**VALID, "ideation": section}))
    assert field in str(ei.value)


# -- provenance and names ---------------------------------------------------------------

def draft(name, refs=(), builds=(), summary="s"):
    return IdeaDraft(Name=name, Title=name.title(), Experiment="e", Summary=summary,
                     References=list(refs), Builds_on=list(builds))


def scores(*ids):
    return [PaperScore(paper_id=i, title=i, relevance="same_task", attribute_match="input_and_output_match",
                       score=10, kept=True, reason="") for i in ids]


def test_ideas_record_papers_and_earlier_ideas():
    h = History(names={"dropout", "mixup"}, ids={"dropout": "t/r1/dropout", "mixup": "t/r1/mixup"})
    out = drafts_to_ideas([draft("more_dropout", refs=[2, 2, 9, 0, 1],
                                 builds=["Dropout", "mixup: Mix shapes", "nope"])],
                          "t", "r2", scores("pa", "pb"), h)
    assert out[0].inspired_by_papers == ["pb", "pa"]  # numbers -> ids; out of range dropped; no repeats
    assert out[0].builds_on_ideas == ["t/r1/dropout", "t/r1/mixup"]  # unknown names dropped
    assert out[0].idea_id == "t/r2/more_dropout" and out[0].source == "ranking"


def test_names_unique_against_history_and_within_round():
    h = History(names={"dropout"})
    out = drafts_to_ideas([draft("dropout"), draft("Dropout"), draft("")], "t", "r2", [], h)
    assert [i.name for i in out] == ["dropout_2", "dropout_3", "idea"]


def test_brainstorm_merge_keeps_names_unique_and_records_origin():
    h = History(names={"mixup"})
    taken = set(h.names)
    lit = drafts_to_ideas([draft("mixup"), draft("dropout", refs=[1])], "t", "r2", scores("pa"), h, taken=taken)
    bs = drafts_to_ideas([draft("dropout", refs=[1]), draft("jitter"), draft("mixup")], "t", "r2", [], h,
                         source="brainstorm", taken=taken)
    merged = merge_paths(lit, bs)
    assert [(i.name, i.source) for i in merged] == [
        ("mixup_2", "ranking"), ("dropout_2", "brainstorm"), ("dropout", "ranking"),
        ("jitter", "brainstorm"), ("mixup_3", "brainstorm")]
    assert len({i.idea_id for i in merged}) == 5
    assert all(i.inspired_by_papers == [] for i in bs)  # no papers on the brainstorm path
    assert merge_paths(lit, []) == lit and merge_paths([], bs) == bs


# -- the bank from earlier rounds ------------------------------------------------------


@pytest.mark.parametrize("policy,expected", [
    ("ineffective", {"negative_step_r1", "steady_r1"}),
    ("ineffective_and_failed", {"negative_step_r1", "steady_r1", "fancy_kernel_r1"}),
    ("all_tried", set(R1)),
    ("none", set()),
])
def test_bank_seeded_by_policy(tmp_path, policy, expected):
    store = Store(tmp_path)
    seed_round1(store)
    h = read_history(store, TOPIC, "r2")
    assert {f.name for f in h.bank(BANK_VERDICTS[policy])} == expected
    assert h.ids["fancy_kernel_r1"] == f"{TOPIC}/r1/fancy_kernel_r1" and h.read == [f"r1|{TOPIC}"]
    assert read_history(store, TOPIC, "r1").feedback == []  # a round never reads itself or later ones


# -- filter_ideas with known embeddings ----------------------------------------------


def test_filter_bank_duplicates_budget_and_novelty():
    p = Paper(paper_id="p7", title="Seven", abstract="")
    nov = Novelty({
        "c": NoveltyOutcome(novel=False, reason="done", queries=["q1", "q2"], papers=[p], closest=p),
        "d": NoveltyOutcome(novel=None, reason="novelty not judged: decision step 1 failed: bad",
                            queries=["q"], papers=[p], error="decision step 1 failed: bad"),
    })
    bank = [fb(idea("old_a", "a"), "decline")]
    items = [idea("copy", "a2", "r2"), idea("b", "b", "r2"), idea("c", "c", "r2"), idea("d", "d", "r2"),
             idea("late", "f", "r2"), idea("e", "b", "r2")]
    # e repeats b's summary: caught inside the round because b joined the bank
    out = {o.name: o for o in filter_ideas(items, bank, embed, nov, threshold=0.8, keep_at_most=2)}
    assert not out["copy"].kept and out["copy"].nearest_bank_idea == f"{TOPIC}/r1/old_a"
    assert out["copy"].max_similarity == pytest.approx(0.95, abs=1e-3)
    assert "cosine 0.95 >= 0.8" in out["copy"].drop_reason
    assert out["b"].kept and out["b"].novel is True and out["b"].novelty_queries == ["b"]
    assert not out["c"].kept and out["c"].drop_reason == "not novel: done (closest: p7)"
    assert out["c"].novelty_evidence == ["p7"] and out["c"].novelty_evidence_titles == ["Seven"]
    assert out["c"].novelty_closest_paper == "p7" and out["c"].novelty_queries == ["q1", "q2"]
    # undecided novelty: kept, with the error recorded
    assert out["d"].kept and out["d"].novel is None and out["d"].novelty_error == "decision step 1 failed: bad"
    assert not out["e"].kept and out["e"].nearest_bank_idea == f"{TOPIC}/r2/b"
    # two kept: the budget is spent, `late` is not novelty-checked
    assert not out["late"].kept and out["late"].drop_reason == "over the round's budget of 2 ideas"
    assert nov.asked == ["b", "c", "d"]


def test_filter_threshold_and_empty_bank():
    items = [idea("a", "a", "r2"), idea("a2", "a2", "r2")]
    strict = filter_ideas(items, [], embed, Novelty({}), threshold=0.8)
    assert [o.kept for o in strict] == [True, False] and strict[0].nearest_bank_idea is None
    loose = filter_ideas(items, [], embed, Novelty({}), threshold=0.96)
    assert [o.kept for o in loose] == [True, True] and loose[1].nearest_bank_idea == f"{TOPIC}/r2/a"
    assert filter_ideas([], [], embed, Novelty({})) == []


def test_filtered_idea_frame_round_trip():
    p = Paper(paper_id="p1", title="T", abstract="")
    out = filter_ideas([idea("b", "b", "r2")], [], embed,
                       Novelty({"b": NoveltyOutcome(novel=True, reason="ok", queries=["q"], papers=[p], closest=p)}))
    df = to_frame(out, FilteredIdea)
    assert str(df.schema["novelty_queries"]) == "List(String)" and str(df.schema["novelty_closest_paper"]) == "String"
    assert from_frame(df, FilteredIdea) == out


# -- the assets, with the fake LLM ----------------------------------------------------


def test_brainstorm_path_merged_before_filtering(home, fake_llm):
    set_ideation(home, brainstorm=True)
    out, meta = materialize_filter(fake_llm, "r1")
    order = list(out)
    assert order == ["negative_step_r1", "longer_training_r1_2", "longer_training_r1", "train_until_converged",
                     "fancy_kernel_r1", "label_smoothing"]  # interleaved, the clashing name made unique
    assert [out[n].source for n in order] == ["ranking", "brainstorm"] * 3
    assert out["longer_training_r1_2"].title == "Standardise the inputs"
    assert out["longer_training_r1_2"].inspired_by_papers == []  # brainstorm ideas cite no paper
    # the brainstorm copy of a literature idea is caught inside the round
    dup = out["train_until_converged"]
    assert not dup.kept and dup.nearest_bank_idea == f"{TOPIC}/r1/longer_training_r1" and dup.max_similarity > 0.9
    # the round's budget (3) caps the kept ideas; the sixth is not novelty-checked
    assert [n for n in order if out[n].kept] == ["negative_step_r1", "longer_training_r1_2", "longer_training_r1"]
    assert out["label_smoothing"].drop_reason == "over the round's budget of 3 ideas"
    assert out["label_smoothing"].novelty_queries == []
    # novelty evidence: the fake searches twice (default novelty_rounds 2), then says novel
    neg = out["negative_step_r1"]
    assert neg.novel is True and len(neg.novelty_queries) == 2
    assert neg.novelty_queries[0] == "reverse the gradient step (round 1)"
    assert 5 <= len(neg.novelty_evidence) <= 10 and len(neg.novelty_evidence_titles) == len(neg.novelty_evidence)
    assert neg.novelty_closest_paper == neg.novelty_evidence[0]
    assert meta["ideas"]["from_brainstorm"].value == 3 and meta["ideas"]["from_ranking"].value == 3
    assert fake_llm.script.counts["IdeaList"] == 2


def test_filter_honours_bank_threshold_and_novelty_rounds(home, fake_llm):
    seed_round1(Store())
    set_ideation(home, bank="all_tried", independence_threshold=0.995, novelty_rounds=1, novelty_papers=3)
    out, meta = materialize_filter(fake_llm, "r2")
    assert meta["filtered_ideas"]["bank"].value == "all_tried" and meta["filtered_ideas"]["bank_size"].value == 4
    assert meta["filtered_ideas"]["threshold"].value == 0.995
    neg = next(o for o in out.values() if o.name.startswith("negative_step"))
    longer = next(o for o in out.values() if o.name.startswith("longer_training"))
    fancy = next(o for o in out.values() if o.name.startswith("fancy_kernel"))
    # 0.994 to its round-1 variant: kept under 0.995 (dropped under the default 0.8, see test_round)
    assert neg.kept and neg.nearest_bank_idea == f"{TOPIC}/r1/negative_step_r1" and 0.9 < neg.max_similarity < 0.995
    # improvement and failed ideas are in an all_tried bank: their exact repeats are dropped
    assert not longer.kept and longer.nearest_bank_idea == f"{TOPIC}/r1/longer_training_r1"
    assert not fancy.kept and fancy.nearest_bank_idea == f"{TOPIC}/r1/fancy_kernel_r1"
    assert len(neg.novelty_queries) == 1 and len(neg.novelty_evidence) == 3  # 1 search of 3 papers
    assert "NoveltyStep" not in fake_llm.script.counts  # one round: straight to the decision
