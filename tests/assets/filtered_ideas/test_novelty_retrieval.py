"""topic.yaml `ideation.novelty_retrieval` (assets/filtered_ideas/retrieval.py, assets/ideas/scipip.py
`rank_for_query` / `query_retrieval`): the novelty check's search as SciPIP's retrieval for the query,
with hand-made embeddings, the scripted fake LLM's entities, and the filtered_ideas asset."""
from __future__ import annotations

import numpy as np
import pytest

from assets.filtered_ideas.novelty import novelty_check
from assets.filtered_ideas.retrieval import POOL_FACTOR, NoveltySearch
from assets.ideas.scipip import query_entities, rank_for_query
from schemas.records import Paper
from schemas.topic import ScipipSpec, TopicSpecError
from tests.support.fake_llm import FakeLLMServer
from tests.support.scipip import EntityScript, llm_for, unit
from tests.support.topics import ideation

QUERY_VEC = unit(1, 0, 0, 0)
# cosine with the query: lex 0.8 (matches its words only), lex_copy 0.79 (a near-duplicate of lex),
# ent 0.6 (shares "point cloud" with the query), far 0.0 (co-cited with ent), other 0.3
POOL_VECS = {"lex": unit(0.8, 0.6, 0, 0), "lex_copy": unit(0.79, 0.613, 0, 0), "ent": unit(0.6, 0, 0.8, 0),
             "far": unit(0, 0, 0, 1), "other": unit(0.3, -0.954, 0, 0)}
ENTITIES = {"lex": ["image rotation"], "lex_copy": [], "ent": ["point cloud"], "far": [], "other": ["mesh"]}
COCITED = {"c1": ["ent", "far"], "c2": ["ent", "far"]}  # two papers cite ent and far together
QUERY = "rotation augmentation for point clouds"


def rank(entities=ENTITIES, references=COCITED, k=2, **cfg):
    ids = list(POOL_VECS)
    return rank_for_query(QUERY, QUERY_VEC, ids, [f"Title {i}" for i in ids], np.stack([POOL_VECS[i] for i in ids]),
                          entities, references, k, ScipipSpec(**cfg))


def test_query_entities_are_the_papers_entities_found_in_the_query():
    assert query_entities(QUERY, ENTITIES) == ["point cloud"]  # "image rotation": "image" is not in the query
    assert query_entities("Point Clouds on a mesh", ENTITIES) == ["point cloud", "mesh"]
    assert query_entities(QUERY, {}) == []


def test_an_entity_match_outranks_a_lexical_one_and_a_co_cited_paper_joins():
    r = rank()  # k = 2: the 4 closest are the semantic retrieval
    assert r.topic_entities == ["point cloud"]
    # ent 0.6 + 1 entity; far 0 + 1 citation; lex 0.8 semantic only
    assert [p.paper_id for p in r.papers] == ["ent", "far", "lex", "lex_copy", "other"]
    assert [p.paper_id for p in r.shown] == ["ent", "far"]
    by = {p.paper_id: p for p in r.papers}
    assert "entity" in by["ent"].via and by["ent"].matched_entities == ["point cloud"]
    assert by["far"].via == ["citation"] and by["far"].citation == 1.0
    assert by["lex"].via == ["semantic"] and by["lex"].entity == 0.0
    # near-duplicates dropped: lex_copy is lex again
    assert by["lex_copy"].duplicate_of == "lex" and not by["lex_copy"].shown
    # without entities and citations the lexical match is first: the signals made the difference
    assert [p.paper_id for p in rank(entities={}, references={}).shown] == ["lex", "ent"]


def test_the_result_has_at_most_k_papers():
    assert len(rank(k=1).shown) == 1 and [p.paper_id for p in rank(k=1).shown] == ["ent"]
    assert len(rank(k=5).shown) == 4  # 5 candidates, one a near-duplicate


# -- NoveltySearch: the search the novelty check uses ---------------------------------------

class PlainSearch:
    """The literature search's stand-in: the pool in a fixed (lexical) order; records its calls."""

    def __init__(self, papers: list[Paper]):
        self.papers, self.calls = papers, []

    def __call__(self, query: str, k: int) -> list[Paper]:
        self.calls.append((query, k))
        return self.papers[:k]


PAPERS = [Paper(paper_id="lex", title="Random jitter for shape sketches", abstract="Sketch jitter."),
          Paper(paper_id="lex_copy", title="Random jitter for shape sketches, again", abstract="Sketch jitter."),
          Paper(paper_id="ent", title="Networks on point clouds", abstract="Learning on a point cloud."),
          Paper(paper_id="far", title="A BROKEN abstract", abstract="Unrelated."),
          Paper(paper_id="other", title="Meshes", abstract="Surface meshes.")]


def encode(texts: list[str]) -> np.ndarray:
    """The hand-made embeddings: the query's, and each paper's by its title."""
    titles = {p.title: POOL_VECS[p.paper_id] for p in PAPERS}
    return np.stack([QUERY_VEC if t.startswith("random shape") else
                     titles[max((x for x in titles if t.startswith(x)), key=len)] for t in texts])


def test_scipip_search_ranks_records_and_survives_a_failed_extraction(home, tmp_path):
    plain = PlainSearch(PAPERS)
    with FakeLLMServer(EntityScript()) as server:
        searches = NoveltySearch("scipip", plain, llm_for(server), encode, ScipipSpec(), COCITED, tmp_path / "memo")
        found = searches.for_idea("t/r1/a")("random shape jitter for point clouds", 2)
        asked = len(server.script.asked)
        assert asked == 5 + 1  # each pool paper once, "far" twice (one retry of its malformed answer); not the query
        assert plain.calls == [("random shape jitter for point clouds", 2 * POOL_FACTOR)]
        assert [p.paper_id for p in found] == ["ent", "far"] and found[0] == PAPERS[2]  # the pool's own Paper
        # the same pool again (another idea): every paper's entities come from the memo
        searches.for_idea("t/r1/b")("random shape jitter for point clouds", 2)
        assert len(server.script.asked) == asked
    meta = searches.metadata()
    assert meta["novelty_retrieval"] == "scipip"
    assert meta["novelty_papers_via"]["t/r1/a"] == {"ent": ["entity", "semantic"], "far": ["citation"]}
    assert (meta["novelty_via_entity"], meta["novelty_via_citation"], meta["novelty_via_semantic"]) == (2, 2, 2)
    assert "invalid answer" in meta["novelty_entity_failures"]["far"]  # the step went on without its entities


def test_search_mode_is_the_plain_search_unchanged():
    plain = PlainSearch(PAPERS)
    searches = NoveltySearch("search", plain)
    assert searches.for_idea("t/r1/a") is plain and searches.metadata() == {"novelty_retrieval": "search"}
    from tests.support.novelty import IDEA, ScriptedLLM, judge, q
    out = novelty_check(*IDEA, searches.for_idea("t/r1/a"), ScriptedLLM(q("jitter"), judge("novel")), rounds=1, k=3)
    assert plain.calls == [("jitter", 3)] and out.papers == PAPERS[:3]


# -- topic.yaml and the filtered_ideas asset ----------------------------------------------------

def test_the_option_defaults_to_search_and_rejects_other_values(tmp_path):
    assert ideation(tmp_path / "a", {}).novelty_retrieval == "search"
    assert ideation(tmp_path / "b", {"novelty_retrieval": "scipip"}).novelty_retrieval == "scipip"
    with pytest.raises(TopicSpecError) as ei:
        ideation(tmp_path / "c", {"novelty_retrieval": "bm25"})
    assert "field 'ideation.novelty_retrieval': Input should be 'search' or 'scipip'" in str(ei.value)


@pytest.mark.extended
def test_filtered_ideas_with_scipip_novelty_retrieval(home, fake_llm):
    from tests.support.ideation import materialize_filter, set_ideation

    set_ideation(home, novelty_retrieval="scipip", novelty_papers=3)
    out, meta = materialize_filter(fake_llm, "r1")
    m = meta["filtered_ideas"]
    assert m["novelty_retrieval"].value == "scipip"
    via = m["novelty_papers_via"].value
    checked = [o for o in out.values() if o.novelty_queries]
    assert checked and set(via) == {o.idea_id for o in checked}
    for o in checked:  # every compared paper is recorded with the signals that found it
        assert 1 <= len(o.novelty_evidence) <= 3 * len(o.novelty_queries)
        assert set(via[o.idea_id]) == set(o.novelty_evidence)
    pairs = [v for papers in via.values() for v in papers.values()]
    assert m["novelty_via_entity"].value == sum("entity" in v for v in pairs) > 0  # the queries name "classification"
    assert m["novelty_via_citation"].value == sum("citation" in v for v in pairs)
    assert fake_llm.script.counts["Entities"] > 0 and m["novelty_entity_failures"].value == {}
