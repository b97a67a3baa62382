"""Chains of papers as an idea source (assets/ideas/chains.py, Chain-of-Ideas): topic.yaml
`ideation.chains`, the pure chain building with hand-made papers and embeddings (citations first,
similarity links only to earlier papers and marked as such, no repeats, time order, anchors), the
prompt, and the ideas asset with the chains and ranking sources (recorded answers from the scripted
fake LLM, a malformed answer, the filters and the Arena after it)."""
from __future__ import annotations

import json

import dagster as dg
import numpy as np
import pytest

from assets.ideas import prompts
from assets.ideas.chains import (
    FORWARD,
    anchors,
    build_chain,
    build_chains,
    build_forward,
    citing_index,
    paper_chains,
    per_chain,
    prompt_chain,
    reachable,
)
from assets.ideas.generation import History, drafts_to_ideas
from resources.llm import strict_schema
from schemas.llm_outputs import ChainIdeas, IdeaDraft, chain_ideas
from schemas.records import Paper, PaperChain, PaperScore
from schemas.topic import ChainsSpec, IdeationSpec, TopicSpecError
from tests.support.topics import ideation

TOPIC = "toy_classification"


# -- topic.yaml `ideation.chains` ------------------------------------------------------------

def test_chains_is_a_source_with_defaults(tmp_path):
    cfg = ideation(tmp_path, {"sources": ["chains", "ranking"]})
    assert cfg.sources == ["chains", "ranking"] and cfg.chains == ChainsSpec()
    assert (cfg.chains.count, cfg.chains.length, cfg.chains.newer) == (2, 4, 1)
    cfg = ideation(tmp_path / "second", {"sources": "chains", "chains": {"count": 3, "length": 5}})
    assert cfg.sources == ["chains"] and (cfg.chains.count, cfg.chains.length) == (3, 5)
    assert IdeationSpec.model_validate_json(cfg.model_dump_json()) == cfg
    assert "chains = from chains of papers" in IdeationSpec.model_fields["sources"].description


@pytest.mark.parametrize("section,message", [
    ({"chains": {"count": 0}}, "field 'ideation.chains.count'"),
    ({"chains": {"count": 6}}, "field 'ideation.chains.count'"),
    ({"chains": {"length": 1}}, "field 'ideation.chains.length'"),  # one paper shows no step
    ({"chains": {"length": 9}}, "field 'ideation.chains.length'"),
    ({"chains": {"newer": 5}}, "field 'ideation.chains.newer'"),
    ({"chains": {"newer": -1}}, "field 'ideation.chains.newer'"),
    ({"chains": {"width": 2}}, "field 'ideation.chains.width'"),
    ({"sources": ["chains", "chains"]}, "lists chains more than once"),
])
def test_bad_chain_settings_are_named(tmp_path, section, message):
    with pytest.raises(TopicSpecError) as ei:
        ideation(tmp_path, section)
    assert message in str(ei.value)


# -- pure chain building ---------------------------------------------------------------------

def unit(*v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def paper(pid: str, year: int | None, refs=(), title: str | None = None) -> Paper:
    return Paper(paper_id=pid, title=title or f"Title {pid}", abstract=f"Abstract of {pid}.", year=year,
                 references=list(refs))


def build(pids_or_papers, refs_only=(), vecs=None, topic_sim=None, length=4, anchor="a"):
    """build_chain over `papers` (the round's candidates) plus `refs_only` (known papers outside
    the round); default embeddings: all equal, topic similarity by the given map."""
    papers = list(pids_or_papers)
    library = {p.paper_id: p for p in [*refs_only, *papers]}
    vecs = vecs or {pid: unit(1, 0) for pid in library}
    return build_chain(anchor, library, [p.paper_id for p in papers], topic_sim or {}, vecs, length)


def kinds(chain) -> list[tuple[str, str]]:
    return [(link.paper_id, link.link) for link in chain]


def test_a_cited_paper_is_preferred_to_a_more_similar_uncited_one():
    ps = [paper("a", 2021, refs=["b", "c"]), paper("b", 2019), paper("c", 2018), paper("d", 2020)]
    vecs = {"a": unit(1, 0), "b": unit(0, 1), "c": unit(0.2, 1), "d": unit(1, 0.01)}  # d is a's twin, uncited
    chain = build(ps, vecs=vecs, topic_sim={"b": 0.9, "c": 0.5, "d": 0.99}, length=2)
    assert kinds(chain) == [("a", "anchor"), ("b", "cites")]  # among the cited papers, the most topic-similar
    assert chain[1].link_similarity is None and chain[1].topic_similarity == 0.9


def test_similarity_links_go_only_to_earlier_papers_and_are_marked():
    ps = [paper("a", 2019), paper("later", 2021), paper("same", 2019), paper("older", 2015),
          paper("undated", None)]
    vecs = {"a": unit(1, 0), "later": unit(1, 0.01), "undated": unit(1, 0.02), "same": unit(1, 0.5),
            "older": unit(1, 1)}
    chain = build(ps, vecs=vecs)
    # 'later' and 'undated' are the most similar but not known to be earlier; same year is allowed
    assert kinds(chain) == [("a", "anchor"), ("same", "similarity"), ("older", "similarity")]
    assert chain[1].link_similarity == pytest.approx(float(vecs["same"] @ vecs["a"]), abs=1e-3)
    years = [link.year for link in chain]
    assert years == sorted(years, reverse=True)  # built newest first


def test_citations_are_followed_outside_the_round_and_then_similarity_resumes_in_it():
    corpus_only = [paper("x", 2016, refs=["y"]), paper("y", 2012, title="Outside the round too")]
    ps = [paper("a", 2020, refs=["x"]), paper("b", 2014), paper("c", 2010)]
    vecs = {"a": unit(1, 0), "x": unit(1, 0.1), "y": unit(0, 1), "b": unit(1, 0.2), "c": unit(0.1, 1)}
    chain = build(ps, refs_only=corpus_only, vecs=vecs, length=5)
    # a cites x (corpus), x cites y (corpus); y has no references: the round's most similar paper not later
    # than 2012 is c (b, from 2014, would be later than y)
    assert kinds(chain) == [("a", "anchor"), ("x", "cites"), ("y", "cites"), ("c", "similarity")]


def test_no_paper_is_repeated_even_when_citations_loop():
    ps = [paper("a", 2020, refs=["b"]), paper("b", 2020, refs=["a", "c"]), paper("c", 2020, refs=["a", "b"])]
    chain = build(ps, length=8)
    assert [link.paper_id for link in chain] == ["a", "b", "c"] and len({lnk.paper_id for lnk in chain}) == 3
    assert [link.link for link in chain] == ["anchor", "cites", "cites"]  # c cites only papers already used


def test_a_cited_paper_later_than_the_chain_is_not_taken():
    # bad citation data (a 2023 paper 'cited' by a 2019 one) cannot break the time order
    ps = [paper("a", 2019, refs=["late", "ok"]), paper("late", 2023), paper("ok", 2017)]
    chain = build(ps, topic_sim={"late": 0.99, "ok": 0.1})
    assert kinds(chain)[:2] == [("a", "anchor"), ("ok", "cites")]
    assert all(link.year <= 2019 for link in chain)


def test_the_length_caps_the_chain_and_the_anchor_counts():
    ps = [paper(pid, 2020 - i) for i, pid in enumerate("abcdef")]
    assert len(build(ps, length=3)) == 3 and len(build(ps, length=8)) == 6
    assert build([paper("a", 2020)], length=4)[0].link == "anchor"


def test_anchors_kept_papers_first_then_by_topic_similarity():
    ps = [paper(p, 2020) for p in ("k1", "k2", "s1", "s2")]
    scores = [PaperScore(paper_id="k1", title="", relevance="", attribute_match="", score=8, kept=True, reason=""),
              PaperScore(paper_id="k2", title="", relevance="", attribute_match="", score=9, kept=True, reason=""),
              PaperScore(paper_id="s1", title="", relevance="", attribute_match="", score=5, kept=False, reason="")]
    out = anchors(ps, scores, {"s1": 0.2, "s2": 0.7, "k1": 0.1, "k2": 0.0})
    assert [a for a, _ in out] == ["k2", "k1", "s2", "s1"]
    assert out[0][1] == "kept by paper_rankings (score 9)" and out[2][1] == "similar to the topic (cosine 0.700)"
    assert [a for a, _ in anchors(ps, [], {"s1": 0.2, "s2": 0.7, "k1": 0.1})] == ["s2", "s1", "k1", "k2"]


def test_chains_have_distinct_anchors_time_order_and_notes():
    ps = [paper("a", 2022, refs=["b"]), paper("b", 2019), paper("c", 2021), paper("d", 2018), paper("e", 2010)]
    library = {p.paper_id: p for p in ps}
    vecs = {"a": unit(1, 0), "b": unit(1, 0.3), "c": unit(0, 1), "d": unit(0.1, 1), "e": unit(-1, 0)}
    order = [("e", "oldest"), ("b", "in a's chain"), ("a", "kept"), ("c", "similar")]
    # e: no earlier paper, passed over; b: b, then by similarity d and e; a: a cites b (chains may share
    # papers other than their anchors), then d by similarity
    chains, notes = build_chains(order, library, list(library), {}, vecs, count=2, length=3)
    assert [c.anchor for c in chains] == ["b", "a"] and [c.index for c in chains] == [1, 2]
    assert notes == ["e: no earlier paper to link to"]
    for c in chains:
        assert c.links[-1].paper_id == c.anchor and c.links[-1].link == "anchor"
        years = [link.year for link in c.links]
        assert years == sorted(years)  # oldest first
        assert len({link.paper_id for link in c.links}) == len(c.links)
    assert [(lnk.paper_id, lnk.link) for lnk in chains[1].links] == [("d", "similarity"), ("b", "cites"),
                                                                     ("a", "anchor")]
    # an anchor already inside an earlier chain is not started again
    chains, notes = build_chains([("a", "kept"), ("b", "in a's chain"), ("c", "similar")], library, list(library),
                                 {}, vecs, count=2, length=3)
    assert [c.anchor for c in chains] == ["a", "c"] and "b: already in an earlier chain" in notes


def test_reachable_follows_known_references_a_bounded_depth():
    library = {p.paper_id: p for p in [paper("a", 2020, refs=["b", "gone"]), paper("b", 2019, refs=["c"]),
                                       paper("c", 2018, refs=["d"]), paper("d", 2017)]}
    assert reachable([library["a"]], library, 1) == ["a", "b"]
    assert reachable([library["a"]], library, 3) == ["a", "b", "c", "d"]  # 'gone' is not a known paper


def test_forward_prefers_a_citing_paper_then_similarity_to_later_papers_only():
    ps = [paper("a", 2019, refs=["old"]), paper("old", 2016), paper("citer", 2021, refs=["a"]),
          paper("twin", 2020), paper("earlier_twin", 2018), paper("newest", 2023)]
    library = {p.paper_id: p for p in ps}
    vecs = {"a": unit(1, 0), "old": unit(0, 1), "citer": unit(0, 1), "twin": unit(1, 0.01),
            "earlier_twin": unit(1, 0), "newest": unit(0.2, 1)}
    cited_by = citing_index(library)
    assert cited_by == {"old": ["a"], "a": ["citer"]}
    ahead = build_forward("a", library, list(library), {}, vecs, 3, cited_by)
    # citer cites a (a known citation beats the more similar twin); nothing cites citer: the round's paper of
    # 2021 or later most similar to it is newest (twin, from 2020, would go back in time; earlier_twin too)
    assert kinds(ahead) == [("citer", "cites_earlier"), ("newest", "similar_later")]
    assert ahead[0].link_similarity is None and ahead[1].link_similarity == pytest.approx(
        float(vecs["newest"] @ vecs["citer"]), abs=1e-3)
    # both ways within the length: forward first (up to `newer`), then back; oldest first, the anchor between
    (c,), _ = build_chains([("a", "kept")], library, list(library), {}, vecs, count=1, length=3, newer=1,
                           cited_by=cited_by)
    assert [(lnk.paper_id, lnk.link) for lnk in c.links] == [("old", "cites"), ("a", "anchor"),
                                                             ("citer", "cites_earlier")]
    shown = prompt_chain(c, library)
    assert [how for *_, how in shown] == ["", "cites [1]", "cites [2]"]  # citer cites a, a cites old
    (c2,), _ = build_chains([("a", "kept")], library, list(library), {}, vecs, count=1, length=4, newer=2,
                            cited_by=cited_by)
    assert [lnk.paper_id for lnk in c2.links] == ["old", "a", "citer", "newest"]
    assert [how for *_, how in prompt_chain(c2, library)][-1] == "similar to [3]"   # never called a citation
    # a length of 2 leaves room for the forward paper only; newer 0 keeps the chain behind the anchor
    (c3,), _ = build_chains([("a", "kept")], library, list(library), {}, vecs, count=1, length=2, newer=3,
                            cited_by=cited_by)
    assert [lnk.paper_id for lnk in c3.links] == ["a", "citer"]
    (c4,), _ = build_chains([("a", "kept")], library, list(library), {}, vecs, count=1, length=3, newer=0,
                            cited_by=cited_by)
    assert c4.links[-1].link == "anchor" and all(lnk.link not in FORWARD for lnk in c4.links)


def test_a_newest_anchor_with_no_later_paper_goes_back_only_and_undated_papers_are_not_reached_forward():
    ps = [paper("a", 2023, refs=["b"]), paper("b", 2020), paper("undated", None)]
    library = {p.paper_id: p for p in ps}
    vecs = {pid: unit(1, 0) for pid in library}
    assert build_forward("a", library, list(library), {}, vecs, 2, citing_index(library)) == []
    (c,), notes = build_chains([("a", "kept")], library, list(library), {}, vecs, count=1, length=4, newer=1,
                               cited_by=citing_index(library))
    assert [(lnk.paper_id, lnk.link) for lnk in c.links][-2:] == [("b", "cites"), ("a", "anchor")]
    (_, none), = [build_chains([("undated", "x")], {"undated": library["undated"]}, ["undated"], {}, vecs, 1, 4, 1,
                               {})]
    assert none == ["undated: no earlier or later paper to link to"]


def test_reachable_follows_citing_papers_forward_too():
    library = {p.paper_id: p for p in [paper("a", 2020, refs=["b"]), paper("b", 2019),
                                       paper("c", 2021, refs=["a"]), paper("d", 2022, refs=["c"])]}
    cited_by = citing_index(library)
    assert reachable([library["a"]], library, 1, 0, cited_by) == ["a", "b"]
    assert reachable([library["a"]], library, 1, 1, cited_by) == ["a", "c", "b"]
    assert set(reachable([library["a"]], library, 1, 2, cited_by)) == {"a", "b", "c", "d"}


def fake_encode(texts: list[str]) -> np.ndarray:
    words = ("point", "cloud", "graph", "image", "toy")
    v = np.asarray([[t.lower().count(w) for w in words] + [0.1] for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_paper_chains_reads_the_corpus_for_cited_papers():
    round_papers = [paper("pc2021", 2021, refs=["pc2015"], title="Point cloud graph nets"),
                    paper("pc2019", 2019, title="Point cloud nets")]
    corpus = [paper("pc2015", 2015, title="Graph nets on point sets"), *round_papers]
    chains, notes, known = paper_chains(fake_encode, "Point cloud classification", round_papers, [], corpus, 2, 4)
    # pc2019 is the closest to the topic but no round paper is as old: no chain; pc2021 cites pc2015 (a corpus
    # paper the round did not retrieve), which cites nothing known and has no round paper as old: the end
    assert known == 3 and notes == ["pc2019: no earlier paper to link to"]
    (c,) = chains
    assert [(lnk.paper_id, lnk.link) for lnk in c.links] == [("pc2015", "cites"), ("pc2021", "anchor")]
    assert paper_chains(fake_encode, "x", [], [], corpus, 2, 4) == ([], ["the round has no papers"], 0)


def test_ideas_per_chain():
    assert [per_chain(3, k) for k in (0, 1, 2, 3, 5)] == [3, 3, 2, 1, 1]


# -- the prompt and the records ----------------------------------------------------------------

def test_the_prompt_reads_the_chain_oldest_first_and_never_calls_similarity_a_citation():
    ps = [paper("a", 2021, refs=["b"], title="Anchor net"), paper("b", 2019, title="Cited net"),
          paper("c", 2015, title="Similar net")]
    library = {p.paper_id: p for p in ps}
    links = build_chain("a", library, list(library), {}, {p: unit(1, 0) for p in library}, 4)
    chain = PaperChain(index=1, anchor="a", links=links[::-1])
    shown = prompt_chain(chain, library)
    assert [(i, y, t, how) for i, y, t, _, how in shown] == [
        (1, 2015, "Similar net", ""), (2, 2019, "Cited net", "similar to [1]"), (3, 2021, "Anchor net", "cites [2]")]
    head = ("Toy", "Classify points.", "accuracy", "maximize", "print(1)\n")
    msgs = prompts.chain(*head, shown, [], [], 2)
    user = msgs[1]["content"]
    assert "[1] 2015: Similar net\n" in user
    assert "[2] 2019: Cited net (close in content to [1]; no citation between them is known)" in user
    assert "[3] 2021: Anchor net (cites [2])" in user
    assert user.index("[1] 2015") < user.index("[2] 2019") < user.index("[3] 2021")
    assert "trend:" in user and "prediction:" in user and "ideas: 2 different ideas" in user
    plain = prompts.generate(*head, [], [], [], 2)
    assert msgs[0] == plain[0] and user.startswith(plain[1]["content"][:plain[1]["content"].index("Reference")])
    # the answer's schema: the trend and prediction come before the ideas (generated in this order)
    assert list(ChainIdeas.model_fields) == ["trend", "prediction", "ideas"]
    two = strict_schema(chain_ideas(2))
    assert chain_ideas(2).__name__ == "ChainIdeas" and list(two["properties"]) == ["trend", "prediction", "ideas"]
    assert two["properties"]["ideas"]["maxItems"] == 2 and chain_ideas(9).model_fields["ideas"].metadata
    d = IdeaDraft(Name="next", Title="Next", Experiment="e", Summary="s", References=[3, 2, 7])
    (idea,) = drafts_to_ideas([d], "t", "r1", chain.links, History(), source="chains")
    assert idea.source == "chains" and idea.source_papers == ["c", "b", "a"] and idea.inspired_by_papers == ["a", "b"]


# -- the ideas asset: chains and ranking, recorded answers ----------------------------------------

CORPUS = [  # a small corpus with citation edges (each cited paper is older); titles the fake ranking judges
    ("pc2022", 2022, "Revisiting point cloud classification with residual MLPs", ["pc2019g", "pc2017"]),
    ("pc2021", 2021, "Curves for point cloud shape classification", ["pc2019k"]),
    ("pc2020", 2020, "Augmentation for point cloud classification", []),
    ("pc2019g", 2019, "Dynamic graph features for point cloud classification", ["pc2017", "adam2015"]),
    ("pc2019k", 2019, "Kernel point convolution for point cloud classification", ["pc2017"]),
    ("pc2018", 2018, "Self-organising maps for point cloud classification", []),
    ("pc2017", 2017, "PointNet: deep learning on point sets for classification", []),
    ("pc2016", 2016, "Volumetric networks for point cloud classification", []),
    ("adam2015", 2015, "Adam: a method for stochastic optimisation", []),
    ("lm2020", 2020, "Language models are few-shot learners", []),
    ("attn2017", 2017, "Attention is all you need", []),
]


def write_corpus(folder) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "papers.jsonl", "w") as f:
        for pid, year, title, _ in CORPUS:
            f.write(json.dumps({"paper_id": pid, "title": title, "year": year, "authors": [],
                                "summary": f"{title}. We study {title.lower()} and report accuracy."}) + "\n")
    with open(folder / "citations.jsonl", "w") as f:
        for pid, _, _, refs in CORPUS:
            for r in refs:
                f.write(json.dumps({"citing": pid, "cited": r, "source": "test", "path": "", "commit": "",
                                    "evidence": ""}) + "\n")
    return str(folder / "papers.jsonl")


def materialize_round(home, server, **ideation_cfg):
    """topic_brief, then the round's assets up to filtered_ideas over the small corpus; the stored
    ideas and filtered ideas and the two assets' metadata."""
    from assets import ALL_ASSETS
    from assets.shared.partitions import multi_key
    from resources.literature import Literature
    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import FilteredIdea, Idea
    from tests.support.ideation import set_ideation
    from tests.support.resources import make_resources

    set_ideation(home, **ideation_cfg)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    resources = {**make_resources(server.base_url), "literature": Literature(corpus=write_corpus(home / "corpus"))}
    assert dg.materialize(ALL_ASSETS, selection=["topic_brief", "baseline_results"], partition_key=TOPIC,
                          instance=instance, resources=resources).success
    assert dg.materialize(ALL_ASSETS, selection=["round_reference", "papers", "paper_rankings", "ideas",
                                                 "filtered_ideas"],
                          partition_key=str(multi_key(TOPIC, "r1")), instance=instance, resources=resources).success
    meta = {k: instance.get_latest_materialization_event(dg.AssetKey(k)).asset_materialization.metadata
            for k in ("ideas", "filtered_ideas")}
    store = Store()
    return (from_frame(store.read("ideas", TOPIC, "r1"), Idea),
            from_frame(store.read("filtered_ideas", TOPIC, "r1"), FilteredIdea),
            {p.paper_id: p for p in from_frame(store.read("papers", TOPIC, "r1"), Paper)}, meta)


def check_chain_invariants(table: str, corpus: dict[str, tuple]) -> list[list[tuple[str, str]]]:
    """The chains of the metadata's Markdown: a link is `cites` exactly when the next paper cites it
    (a real edge), years never go down, no paper twice in a chain. Returns [(paper_id, link)] per chain."""
    chains = []
    for block in table.split("### Chain ")[1:]:
        rows = [r.split(" | ") for r in block.splitlines() if r.startswith("| 20")]
        links = [(r[2].strip(), r[3].strip()) for r in rows]
        years = [int(r[0].strip("| ")) for r in rows]
        assert years == sorted(years) and len({p for p, _ in links}) == len(links)
        assert [k for _, k in links].count("anchor") == 1
        for (older, kind), (newer, newer_kind) in zip(links, links[1:]):  # a similarity link is never a citation
            if newer_kind in FORWARD:  # reached forward: the newer paper's own link names the relation
                assert (older in corpus[newer][3]) == (newer_kind == "cites_earlier"), (older, newer_kind, newer)
            else:
                assert (older in corpus[newer][3]) == (kind == "cites"), (older, kind, newer)
        chains.append(links)
    return chains


def test_ideas_asset_with_the_chains_and_ranking_sources_then_the_filters_and_the_arena(home):
    from pipelines.lineage import idea_lineage
    from tests.support.fake_llm import FakeLLMServer, Script, arena_answer

    class ArenaScript(Script):   # a chain's idea beats any other
        def answer(self, req):
            if (judged := arena_answer(req, lambda text: text.startswith("Take the next step"))) is None:
                return super().answer(req)
            self.count("ArenaJudgement")
            return judged

    with FakeLLMServer(ArenaScript()) as server:
        ideas, filtered, papers, meta = materialize_round(home, server, sources=["chains", "ranking"], arena=True)
        asked = dict(server.script.counts)
    corpus = {c[0]: c for c in CORPUS}
    m = meta["ideas"]
    assert asked["ChainIdeas"] == 2 == m["chains_count"].value  # one request per chain, count 2
    assert m["error"].value == "" and m["chain_failures"].value == [] and m["chain_known_papers"].value == 11
    assert [i.source for i in ideas] == ["chains", "ranking"] * 3  # interleaved in the topic's order
    assert m["ideas_by_source"].value == {"chains": 3, "ranking": 3} and m["from_chains"].value == 3
    table = m["chains"].value
    assert table.count("| year | title | paper_id | link | similarity |") == 2 and "**Predicted next step:**" in table
    chains = check_chain_invariants(table, corpus)
    assert m["chain_citation_links"].value >= 1 and m["chain_citation_links"].value == sum(
        k in ("cites", "cites_earlier") for c in chains for _, k in c)
    assert m["chain_papers"].value == sum(len(c) for c in chains)
    assert m["chain_newer_papers"].value == sum(k in FORWARD for c in chains for _, k in c) >= 1
    anchors_ = {p for c in chains for p, k in c if k == "anchor"}
    assert anchors_ <= set(papers) and len(anchors_) == 2  # distinct anchors
    assert len(m["chain_trends"].value) == 2 and m["chain_trends"].value[0]["prediction"]
    by_chain = {tuple(p for p, _ in c) for c in chains}
    for i in (i for i in ideas if i.source == "chains"):
        assert tuple(i.source_papers) in by_chain  # the chain's papers, oldest first
        assert len(i.inspired_by_papers) == 1 and i.inspired_by_papers[0] in i.source_papers
    # the filters and the Arena treat the chains' ideas like any other, keeping their source and papers
    assert sorted((f.name, f.source, f.source_papers) for f in filtered) == sorted(
        (i.name, i.source, i.source_papers) for i in ideas)
    assert all(f.arena_rating is not None for f in filtered) and asked["ArenaJudgement"] == 6 * 5
    # the scripted judge prefers the chains' ideas: the best rated of those the similarity filter let through
    passed = [f for f in filtered if "too similar" not in (f.drop_reason or "")]
    top = sorted(passed, key=lambda f: f.arena_rank)[:3]
    assert top[0].source == "chains" and {f.name for f in filtered if f.kept} == {f.name for f in top}
    assert sorted(filtered, key=lambda f: f.arena_rank)[0].source == "chains"
    lineage = idea_lineage(top[0].idea_id)
    assert "origin chains" in lineage and " -> ".join(top[0].source_papers) in lineage


def test_a_malformed_chain_answer_is_recorded_and_the_other_chain_goes_on(home):
    from tests.support.fake_llm import FakeLLMServer, Script

    class BrokenFirstChain(Script):
        """Broken JSON for every try of the first chain's request; the second chain is answered."""
        first: str | None = None

        def answer(self, req):
            fmt = req.get("response_format") or {}
            if fmt.get("json_schema", {}).get("name") == "ChainIdeas":
                text = req["messages"][1]["content"]
                self.first = self.first or text
                if text == self.first:
                    self.count("ChainIdeas")
                    return '{"trend": "From the first paper on, ever'
            return super().answer(req)

    with FakeLLMServer(BrokenFirstChain()) as server:
        ideas, filtered, _, meta = materialize_round(home, server, sources=["chains", "ranking"],
                                                     chains={"count": 2, "length": 3})
        assert server.script.counts["ChainIdeas"] == 2 + 1  # the first chain: one try and one retry
    m = meta["ideas"]
    (failure,) = m["chain_failures"].value
    assert failure.startswith("chain 1: invalid answer") and m["error"].value.startswith("chains: chain 1:")
    assert "**Failed:** invalid answer" in m["chains"].value and len(m["chain_trends"].value) == 1
    chain_ideas = [i for i in ideas if i.source == "chains"]
    assert 1 <= len(chain_ideas) <= 3 and {i.source for i in ideas} == {"chains", "ranking"}
    assert all(len(i.source_papers) <= 3 for i in chain_ideas)
    assert {f.name for f in filtered} == {i.name for i in ideas}


def test_refills_of_a_chains_only_topic_show_a_chain():
    from assets.ideas.generation import LLM_SOURCES, refill_inputs
    from schemas.frames import to_frame
    from schemas.records import Idea

    papers = to_frame([paper(p, 2020) for p in ("a", "b", "c")], Paper)
    ranks = to_frame([PaperScore(paper_id="a", title="Ta", relevance="same_task", attribute_match="x", score=9,
                                 kept=True, reason="")], PaperScore)
    ch = Idea(idea_id="t/r1/s", topic="t", round="r1", name="s", title="S", experiment="e", summary="s",
              source="chains", source_papers=["c", "gone", "a"])
    tag, shown, refs, _ = refill_inputs(["chains"], [ch], papers, ranks, History())
    assert tag == "chains" and [p.paper_id for p in shown] == ["c", "a"] and refs[0][:2] == (1, "Title c")
    assert refill_inputs(["ranking", "chains"], [ch], papers, ranks, History())[0] == "ranking"
    assert "chains" in LLM_SOURCES


# -- the real local model (slow; not run in the fast suite) ---------------------------------

@pytest.mark.extended
@pytest.mark.slow
def test_chains_on_the_local_model(home, local_llm):
    """One chain of corpus papers from 3DETR (kept; it cites 40 corpus papers) and one request to
    the local 0.5B model: whatever it answers, the chain's ideas carry the chain as their papers, or
    the failure is recorded with its reason."""
    from resources.embedder import Embedder
    from resources.literature import Literature
    from resources.llm import LLM

    llm = LLM(local_llm=local_llm)
    corpus = Literature().papers()
    by_id = {p.paper_id: p for p in corpus}
    round_papers = [by_id[p] for p in ("misra2021end", "qi2017pointnet", "thomas2019kpconv", "goyal2021revisiting",
                                       "li2018sonet")]
    background = "Point cloud classification. Classify 3D shapes given as sets of points."
    kept = [PaperScore(paper_id="misra2021end", title="", relevance="same_task", attribute_match="", score=8,
                       kept=True, reason="")]
    chains, _, _ = paper_chains(Embedder().encode, background, round_papers, kept, corpus, 1, 3)
    (c,) = chains
    assert c.anchor == "misra2021end" and c.links[1].link == "cites"  # the anchor's reference, from the corpus
    head = ("Point cloud classification", background, "accuracy", "maximize", "EPOCHS = 5\nprint('train')\n")
    res = llm.complete(prompts.chain(*head, prompt_chain(c, by_id), [], [], 1), stage="ideas",
                       schema=chain_ideas(1), max_tokens=700)
    assert len(llm.calls()) == 1
    if not res.ok:
        assert res.error and res.error_kind
        return
    assert res.value.trend.strip() and res.value.prediction.strip()
    ideas = drafts_to_ideas(res.value.ideas[:1], "pc", "r1", c.links, History(), source="chains")
    assert all(i.source == "chains" and i.source_papers == [lnk.paper_id for lnk in c.links] for i in ideas)
