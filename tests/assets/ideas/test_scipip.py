"""SciPIP retrieval as an idea source (assets/ideas/scipip.py) and topic.yaml `ideation.sources`:
the option's validation, the retrieval's pure parts with hand-made embeddings, the entity memo
(resume, malformed answers) against the scripted fake LLM, and the ideas asset with the
ranking and scipip sources."""
from __future__ import annotations

import json

import dagster as dg
import numpy as np
import pytest

from assets.ideas import prompts
from assets.ideas.generation import History, drafts_to_ideas, merge_paths
from assets.ideas.scipip import (
    NO_CITATIONS,
    citation_scores,
    cluster,
    entity_key,
    entity_score,
    expand_entities,
    extract_entities,
    prompt_papers,
    retrieve,
    same_entity,
    scipip_retrieval,
)
from resources.llm import LLM
from resources.store import Store
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import IdeaDraft
from schemas.records import Idea, Paper, PaperEntities
from schemas.topic import IdeationSpec, ScipipSpec, TopicSpecError, load_topic
from tests.support.fake_llm import FakeLLMServer
from tests.support.scipip import EntityScript, llm_for, unit
from tests.support.topics import VALID, ideation, make_topic

TOPIC = "toy_classification"


# -- topic.yaml `ideation.sources` ---------------------------------------------------------

def test_sources_default_to_the_ranking_and_the_tuning_moves(tmp_path):
    cfg = load_topic(make_topic(tmp_path, "toy", VALID)).ideation
    assert cfg.sources == ["ranking", "tuning"] and cfg.brainstorm is False
    assert cfg.scipip == ScipipSpec() and cfg.scipip.papers == 8 and cfg.scipip.duplicate_threshold == 0.85


@pytest.mark.parametrize("section,sources,brainstorm", [
    ({"brainstorm": True}, ["ranking", "tuning", "brainstorm"], True),     # the older flag still works
    ({"sources": ["scipip", "brainstorm"]}, ["scipip", "brainstorm"], True),
    ({"sources": "scipip"}, ["scipip"], False),                    # one source as a plain string
    ({"sources": ["ranking", "scipip"], "brainstorm": True}, ["ranking", "scipip", "brainstorm"], True),
    ({"sources": ["brainstorm", "ranking"], "brainstorm": True}, ["brainstorm", "ranking"], True),
])
def test_sources_combinations_and_the_brainstorm_flag(tmp_path, section, sources, brainstorm):
    cfg = ideation(tmp_path, section)
    assert cfg.sources == sources and cfg.brainstorm is brainstorm
    assert IdeationSpec.model_validate_json(cfg.model_dump_json()) == cfg  # stored briefs load the same


@pytest.mark.parametrize("section,message", [
    ({"sources": []}, "field 'ideation.sources': List should have at least 1 item"),
    ({"sources": ["ranking", "arxiv"]}, "field 'ideation.sources.1': Input should be 'ranking', 'scipip', 'chains', "
                                        "'brainstorm' or 'tuning'"),
    ({"sources": ["scipip", "scipip"]}, "field 'ideation.sources': Value error, lists scipip more than once"),
    ({"sources": None}, "field 'ideation.sources'"),
    ({"scipip": {"papers": 0}}, "field 'ideation.scipip.papers'"),
    ({"scipip": {"duplicate_threshold": 1.5}}, "field 'ideation.scipip.duplicate_threshold'"),
    ({"scipip": {"clusters": 3}}, "field 'ideation.scipip.clusters'"),
])
def test_bad_sources_are_named(tmp_path, section, message):
    with pytest.raises(TopicSpecError) as ei:
        ideation(tmp_path, section)
    assert message in str(ei.value)


# -- entities: matching and expansion ------------------------------------------------------

def test_entity_matching_ignores_case_plurals_and_filler_but_not_single_generic_words():
    assert entity_key("Point Clouds") == entity_key("point cloud")
    assert same_entity(entity_key("point cloud"), entity_key("classification of point clouds"))
    assert not same_entity(entity_key("classification"), entity_key("image classification"))
    assert same_entity(entity_key("classification"), entity_key("Classification"))
    assert not same_entity(entity_key("point cloud"), entity_key("point process"))
    assert not same_entity(frozenset(), entity_key("x"))


PAPER_ENTITIES = {
    "p1": ["point cloud", "graph convolution", "ModelNet40"],
    "p2": ["point clouds", "graph convolution", "edge features"],
    "p3": ["graph convolution", "citation networks"],
    "p4": ["point cloud", "ModelNet40"],
    "p5": ["image classification", "graph convolution"],
}


def test_expansion_adds_co_occurring_entities_rarest_first():
    # with "point cloud": graph convolution (p1, p2) and ModelNet40 (p1, p4) twice, edge features once;
    # ModelNet40 is in 2 papers, graph convolution in 4: the rarer comes first
    assert expand_entities(["point cloud"], PAPER_ENTITIES) == ["ModelNet40", "graph convolution"]
    assert expand_entities(["point cloud"], PAPER_ENTITIES, keep=1) == ["ModelNet40"]
    assert expand_entities(["point cloud"], PAPER_ENTITIES, min_papers=1, keep=5) == [
        "edge features", "ModelNet40", "graph convolution"]
    assert expand_entities(["protein folding"], PAPER_ENTITIES) == []  # no paper shares a topic entity
    assert expand_entities([], PAPER_ENTITIES) == []


def test_entity_score_counts_expanded_matches_half():
    score, matched, more = entity_score(["Point Clouds", "graph convolution", "voxels"], ["point cloud"],
                                        ["graph convolution"])
    assert score == pytest.approx((1 + 0.5) / 3) and matched == ["Point Clouds"] and more == ["graph convolution"]
    assert entity_score([], ["point cloud"], []) == (0.0, [], [])
    assert entity_score(["voxels"], ["point cloud"], [])[0] == 0.0


# -- citations ------------------------------------------------------------------------------

def test_co_citation_scores_and_the_co_cited_retrieval():
    refs = {"c1": ["a", "b"], "c2": ["a", "b", "x"], "c3": ["a", "d"]}
    scores, found = citation_scores(refs, ["a", "b", "d", "e"], ["a"])
    assert scores == {"a": 0.0, "b": 1.0, "d": 0.5, "e": 0.0}  # b is cited with a twice, d once
    assert found == {"b", "d"}
    assert citation_scores(refs, ["a", "b", "d", "e"], ["a"], per_seed=1)[1] == {"b"}
    # no citation data: nothing is invented
    assert citation_scores({}, ["a", "b"], ["a"]) == ({"a": 0.0, "b": 0.0}, set())


# -- retrieval and clustering with hand-made embeddings --------------------------------------


TOPIC_VEC = unit(1, 0, 0, 0)
VECS = {  # cosine with the topic: p1 0.97, p1_copy ~0.97 (and ~1.0 with p1), p2 0.8, p3 0.6, p4 0.1, p5 0.0
    "p1": unit(0.97, 0.243, 0, 0), "p1_copy": unit(0.965, 0.262, 0, 0), "p2": unit(0.8, 0, 0.6, 0),
    "p3": unit(0.6, 0, 0, 0.8), "p4": unit(0.1, 0, 0.995, 0), "p5": unit(0, 0, 0, 1),
}


def run_retrieve(entities, references=None, **cfg):
    ids = list(VECS)
    return retrieve(ids, [f"Title {i}" for i in ids], np.stack([VECS[i] for i in ids]), TOPIC_VEC, entities,
                    ["point cloud"], references or {}, ScipipSpec(**{"semantic_k": 3, "papers": 8, **cfg}))


def test_retrieval_is_the_union_of_the_three_signals_in_score_order():
    entities = {"p1": ["point cloud"], "p1_copy": ["point cloud"], "p4": ["point cloud", "voxel grid"],
                "p2": ["attention"]}
    refs = {"c1": ["p3", "p5"], "c2": ["p3", "p5"]}  # p5 is cited together with p3 (a semantic hit) twice
    r = run_retrieve(entities, refs, duplicate_threshold=0.99)
    by = {p.paper_id: p for p in r.papers}
    # semantic top 3: p1, p1_copy, p2; entity: p4 (far in meaning, shares "point cloud"); citation: p5 via p3?
    # p3 is not a seed (neither top-3 semantic nor an entity match), so p5 is not co-cited with a seed
    assert set(by) == {"p1", "p1_copy", "p2", "p4"}
    assert by["p4"].via == ["entity"] and by["p4"].entity == 0.5 and by["p4"].matched_entities == ["point cloud"]
    assert by["p1"].via == ["semantic", "entity"] and by["p2"].via == ["semantic"] and by["p2"].entity == 0.0
    scores = [p.score for p in r.papers]
    assert scores == sorted(scores, reverse=True)
    assert by["p1"].score == pytest.approx(by["p1"].semantic + by["p1"].entity + by["p1"].citation, abs=1e-3)
    # the near-duplicate of p1 (cosine ~1.0) is dropped, the better scored p1 stays
    assert by["p1_copy"].duplicate_of == "p1" and by["p1_copy"].duplicate_similarity >= 0.99
    assert not by["p1_copy"].shown and by["p1"].shown
    assert [p.paper_id for p in r.shown] == ["p1", "p2", "p4"]  # 1.97, 0.8, 0.6
    assert r.citations == "2 papers carry references"


def test_co_cited_papers_join_and_scores_say_so():
    entities = {"p3": ["point cloud"]}  # p3 becomes a seed through its entity
    refs = {"x1": ["p3", "p5"], "x2": ["p3", "p5"], "x3": ["p5", "p1"]}
    r = run_retrieve(entities, refs)
    by = {p.paper_id: p for p in r.papers}
    assert "citation" in by["p5"].via and by["p5"].citation == 1.0  # co-cited with p3 twice (the most)
    assert by["p1"].citation == 0.0 and "citation" not in by["p1"].via  # co-cited with p5 only, not a seed
    assert "p4" not in by  # far in meaning, no shared entity, never cited
    assert r.citations == "3 papers carry references"


def test_without_citation_data_the_signal_is_zero_and_said():
    r = run_retrieve({"p4": ["point cloud"]})
    assert all(p.citation == 0.0 and "citation" not in p.via for p in r.papers)
    assert r.citations == NO_CITATIONS


def test_prompt_budget_and_threshold():
    entities = {p: ["point cloud"] for p in VECS}
    assert len(run_retrieve(entities, papers=2).shown) == 2
    loose = run_retrieve(entities, duplicate_threshold=0.5)  # p1's cluster swallows its close neighbours
    assert len(loose.shown) < len(run_retrieve(entities, duplicate_threshold=0.999).shown)


def test_cluster_keeps_the_first_of_each_group():
    vecs = {"a": unit(1, 0), "b": unit(0.99, 0.14), "c": unit(0, 1), "d": unit(0.1, 0.995)}
    assert cluster(["a", "b", "c", "d"], vecs, 0.95) == {"b": ("a", pytest.approx(0.99, abs=0.01)),
                                                        "d": ("c", pytest.approx(0.995, abs=0.01))}
    assert set(cluster(["b", "a", "c", "d"], vecs, 0.95)) == {"a", "d"}  # the order decides who stays
    assert cluster(["a", "c"], vecs, 0.95) == {}


# -- the entity memo against the scripted LLM ----------------------------------------------


ITEMS = [("p1", "PointNet on point sets", "A network for point cloud classification."),
         ("p2", "A BROKEN abstract", "text the fake answers with broken JSON"),
         ("p3", "Graph convolution on meshes", "Segmentation of meshes with graph convolution.")]


def test_entity_memo_resume_asks_nothing_twice(home, tmp_path):
    with FakeLLMServer(EntityScript()) as server:
        first = extract_entities(llm_for(server), ITEMS, tmp_path / "memo")
        asked = len(server.script.asked)
        assert asked == 1 + 2 + 1  # p1, p2 twice (one retry of a malformed answer), p3
        assert first["p1"].entities == ["point cloud", "point set", "classification"] and first["p1"].error is None
        again = extract_entities(llm_for(server), ITEMS, tmp_path / "memo")
        assert len(server.script.asked) == asked and again == first  # resumed: no request at all
        # another text for a paper (a corrected abstract) is asked again, alone
        changed = [ITEMS[0], ITEMS[1], (ITEMS[2][0], ITEMS[2][1], "Now about voxel segmentation.")]
        third = extract_entities(llm_for(server), changed, tmp_path / "memo")
        assert len(server.script.asked) == asked + 1
        assert third["p3"].entities == ["segmentation", "graph convolution", "voxel"]
    files = sorted((tmp_path / "memo").glob("*.json"))
    assert len(files) == 4 and all(PaperEntities.model_validate_json(f.read_text()) for f in files)


def test_a_malformed_answer_is_recorded_as_failed_without_failing(home, tmp_path):
    with FakeLLMServer(EntityScript()) as server:
        out = extract_entities(llm_for(server), ITEMS, tmp_path / "memo")
    bad = out["p2"]
    assert bad.entities == [] and bad.error and "invalid answer" in bad.error
    assert [out[p].error for p in ("p1", "p3")] == [None, None]  # the other papers are unaffected
    memo = [PaperEntities.model_validate_json(f.read_text()) for f in (tmp_path / "memo").glob("p2-*.json")]
    assert len(memo) == 1 and memo[0].error == bad.error  # remembered: a resumed run does not ask again


def test_a_corrupt_memo_is_asked_again(home, tmp_path):
    with FakeLLMServer(EntityScript()) as server:
        extract_entities(llm_for(server), ITEMS[:1], tmp_path / "memo")
        (f,) = (tmp_path / "memo").glob("p1-*.json")
        f.write_text("{not json")
        out = extract_entities(llm_for(server), ITEMS[:1], tmp_path / "memo")
        assert len(server.script.asked) == 2 and out["p1"].entities


def fake_encode(texts: list[str]) -> np.ndarray:
    """An embedding that is near the topic for texts about point clouds (a bag of a few words)."""
    words = ("point", "cloud", "graph", "mesh", "image", "toy")
    v = np.asarray([[t.lower().count(w) for w in words] + [0.1] for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_scipip_retrieval_extracts_only_the_closest_papers(home, tmp_path):
    papers = [Paper(paper_id="pc1", title="Point cloud nets", abstract="point cloud classification with point sets"),
              Paper(paper_id="pc2", title="Point cloud transformer", abstract="attention over point cloud points"),
              Paper(paper_id="mesh", title="Mesh graph convolution", abstract="graph convolution segmentation"),
              Paper(paper_id="img", title="Image nets", abstract="image classification with a transformer")]
    with FakeLLMServer(EntityScript()) as server:
        r = scipip_retrieval(llm_for(server), fake_encode, "toy", "Toy point cloud classification", papers, {},
                             ScipipSpec(entity_papers=2, semantic_k=1), tmp_path / "memo")
        assert len(server.script.asked) == 3  # the topic and the 2 papers closest to it
    assert r.topic_entities == ["point cloud", "classification"] and r.candidates == 4 and r.with_entities == 2
    by = {p.paper_id: p for p in r.papers}
    assert by["pc1"].via == ["semantic", "entity"] and "point cloud" in by["pc1"].matched_entities
    assert "img" not in by  # far in meaning and never asked for entities
    assert r.citations == NO_CITATIONS and r.entity_failures == {}
    refs = prompt_papers(r, papers)
    assert refs[0][0] == 1 and refs[0][1] == by[r.shown[0].paper_id].title and refs[0][3] == r.shown[0].entities


# -- the prompt and the records ------------------------------------------------------------

def test_the_scipip_prompt_shares_the_head_and_numbers_the_papers():
    head = ("Toy", "Classify points.", "accuracy", "maximize", "print(1)\n")
    msgs = prompts.scipip(*head, [(1, "PointNet", "sets of points", ["point set", "max pooling"])], [], [], 2)
    plain = prompts.generate(*head, [(1, "PointNet", "sets of points")], [], [], 2)
    user = msgs[1]["content"]
    assert "[1] PointNet (key terms: point set, max pooling): sets of points" in user
    assert "Propose 2 different ideas" in user and msgs[0] == plain[0]
    assert user[:user.index("Retrieved papers")] == plain[1]["content"][:user.index("Retrieved papers")]


def test_ideas_record_their_source_and_the_papers_shown():
    r = run_retrieve({"p4": ["point cloud"]})
    d = IdeaDraft(Name="borrow", Title="Borrow", Experiment="e", Summary="s", References=[2, 9])
    (i,) = drafts_to_ideas([d], "t", "r1", r.shown, History(), source="scipip")
    assert i.source == "scipip" and i.inspired_by_papers == [r.shown[1].paper_id]
    assert i.source_papers == [p.paper_id for p in r.shown]
    assert from_frame(to_frame([i], Idea), Idea) == [i]
    # records stored before these fields load with the defaults
    old = to_frame([i], Idea).drop("source_papers")
    assert from_frame(old, Idea)[0].source_papers == []
    a, b, c = ([Idea(idea_id=f"t/r1/{s}{k}", topic="t", round="r1", name=f"{s}{k}", title="x", experiment="e",
                     summary="s") for k in range(n)] for s, n in (("a", 2), ("b", 1), ("c", 3)))
    assert [x.name for x in merge_paths(a, b, c)] == ["a0", "b0", "c0", "a1", "c1", "c2"]


# -- the ideas asset with the ranking and scipip sources -----------------------------------

def test_ideas_asset_with_ranking_and_scipip_sources(home, fake_llm):
    from assets import ALL_ASSETS
    from assets.shared.partitions import multi_key
    from tests.support.ideation import set_ideation
    from tests.support.resources import make_resources

    set_ideation(home, sources=["ranking", "scipip"], scipip={"papers": 3})
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    resources = make_resources(fake_llm.base_url)
    assert dg.materialize(ALL_ASSETS, selection=dg.AssetSelection.groups("topic"), partition_key=TOPIC,
                          instance=instance, resources=resources).success
    assert dg.materialize(ALL_ASSETS, selection=["round_reference", "papers", "paper_rankings", "ideas",
                                                 "filtered_ideas"],
                          partition_key=str(multi_key(TOPIC, "r1")), instance=instance, resources=resources).success
    ideas = from_frame(Store().read("ideas", TOPIC, "r1"), Idea)
    papers = {p.paper_id for p in from_frame(Store().read("papers", TOPIC, "r1"), Paper)}
    meta = instance.get_latest_materialization_event(dg.AssetKey("ideas")).asset_materialization.metadata
    assert [i.source for i in ideas] == ["ranking", "scipip"] * 3  # interleaved in the topic's order
    sci = [i for i in ideas if i.source == "scipip"]
    assert all(len(i.inspired_by_papers) == 1 and i.inspired_by_papers[0] in i.source_papers for i in sci)
    assert all(len(i.source_papers) == 3 and set(i.source_papers) <= papers for i in sci)
    assert meta["ideas_by_source"].value == {"ranking": 3, "scipip": 3} and meta["from_scipip"].value == 3
    assert meta["sources"].value == ["ranking", "scipip"] and meta["error"].value == ""
    table = meta["scipip_retrieved"].value
    assert "| paper_id | title | semantic | entity | citation | score | via |" in table
    assert table.count("| yes |") == 3 and meta["scipip_shown"].value == 3
    assert meta["scipip_citations"].value == NO_CITATIONS  # the shipped corpus has no citation edges
    assert meta["scipip_topic_entities"].value == ["logistic regression", "gradient descent", "2d points",
                                                   "classification"]
    assert meta["scipip_entity_failures"].value == {}
    # every candidate's entities were asked once (8 papers + the topic), and a second run asks nothing new
    assert fake_llm.script.counts["Entities"] == 9
    memo = list((home / "dagster_home" / "scipip" / "entities").glob("*.json"))
    assert len(memo) == 9 and json.loads(memo[0].read_text())["model"] == "fake-model"
    # both sources went through the same filters, in the merged order, keeping their source and papers
    from schemas.records import FilteredIdea
    filtered = from_frame(Store().read("filtered_ideas", TOPIC, "r1"), FilteredIdea)
    assert [(f.name, f.source, f.source_papers) for f in filtered] == [
        (i.name, i.source, i.source_papers) for i in ideas]
    assert sum(f.kept for f in filtered) == 3 and all(f.novel is not None or not f.kept for f in filtered)


def test_refills_follow_the_sources():
    from assets.ideas.generation import refill_inputs
    from schemas.records import PaperScore

    papers = to_frame([Paper(paper_id=p, title=f"T{p}", abstract=f"about {p}") for p in ("a", "b", "c")], Paper)
    ranks = to_frame([PaperScore(paper_id="a", title="Ta", relevance="same_task", attribute_match="x", score=9,
                                 kept=True, reason="")], PaperScore)
    sci = Idea(idea_id="t/r1/s", topic="t", round="r1", name="s", title="S", experiment="e", summary="s",
               source="scipip", source_papers=["c", "b", "gone"])
    tag, shown, refs, _ = refill_inputs(["ranking", "scipip"], [sci], papers, ranks, History())
    assert tag == "ranking" and [p.paper_id for p in shown] == ["a"] and refs == [(1, "Ta", "about a")]
    tag, shown, refs, _ = refill_inputs(["scipip", "brainstorm"], [sci], papers, ranks, History())
    assert tag == "scipip" and [p.paper_id for p in shown] == ["c", "b"] and refs[1] == (2, "Tb", "about b")
    assert refill_inputs(["brainstorm"], [sci], papers, ranks, History())[:3] == ("brainstorm", [], [])


# -- the real local model (slow; not run in the fast suite) ---------------------------------

@pytest.mark.slow
@pytest.mark.extended  # make test runs SciPIP scripted; the real model's round with every source is extended too
def test_scipip_on_the_local_model(home, tmp_path, local_llm):
    """Entities of a few corpus papers and ideas from them, with the local 0.5B model and the
    real embedder: whatever the model answers, every paper ends with entities or a recorded
    failure, a second retrieval asks the model nothing, and the ideas carry their source."""
    from resources.embedder import Embedder
    from resources.literature import Literature
    from schemas.llm_outputs import IdeaList

    llm = LLM(local_llm=local_llm)
    corpus = {p.paper_id: p for p in Literature().papers()}
    papers = [corpus[p] for p in ("qi2017pointnet", "thomas2019kpconv", "li2020pointaugment",
                                  "goyal2021revisiting")]
    cfg = ScipipSpec(entity_papers=4, semantic_k=2, papers=3)
    background = "Point cloud classification. Classify 3D shapes given as sets of points."
    r = scipip_retrieval(llm, Embedder().encode, "pc", background, papers, {}, cfg, tmp_path / "memo")
    asked = len(llm.calls())
    assert asked == 5  # the topic and 4 papers, once each
    for p in r.papers:
        assert (1 <= len(p.entities) <= 5 and all(len(e) <= 50 for e in p.entities)) or p.entity_error
    assert 1 <= len(r.shown) <= 3 and r.citations == NO_CITATIONS
    again = scipip_retrieval(llm, Embedder().encode, "pc", background, papers, {}, cfg, tmp_path / "memo")
    assert len(llm.calls()) == asked and [p.paper_id for p in again.papers] == [p.paper_id for p in r.papers]
    head = ("Point cloud classification", background, "accuracy", "maximize", "EPOCHS = 5\nprint('train')\n")
    res = llm.complete(prompts.scipip(*head, prompt_papers(r, papers), [], [], 2), stage="ideas", schema=IdeaList,
                       max_tokens=800)
    ideas = drafts_to_ideas(res.value.ideas[:2] if res.ok else [], "pc", "r1", r.shown, History(), source="scipip")
    assert all(i.source == "scipip" and i.source_papers == [p.paper_id for p in r.shown] for i in ideas)
    assert set().union(*[i.inspired_by_papers for i in ideas]) <= set(i.paper_id for i in r.shown)
