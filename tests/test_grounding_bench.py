"""bench/grounding_bench.py without the LLM: which papers are shown (the held-out rule's kept papers,
best cosine first, capped), the citation shares, the topic head for an experiment folder and for a
topic described in words, and the committed record rendered to the committed section."""
from __future__ import annotations

from bench import grounding_bench as gb
from bench.common import read_record
from resources.paths import REPO_ROOT


def _paper(pid, cos, kept, relevant):
    return {"paper_id": pid, "title": pid, "cosine": cos, "relevant": relevant,
            "kept": {"centred": {"held_out": kept, "in_sample": not kept}}}


def test_shown_papers_are_the_held_out_kept_ones_best_first_and_capped():
    topic = {"papers": [_paper("a", 0.2, True, False), _paper("b", 0.9, False, True), _paper("c", 0.5, True, True),
                        _paper("d", 0.7, True, False)]}
    kept, shown = gb.shown(topic, 2)
    assert [p["paper_id"] for p in kept] == ["a", "c", "d"] and [p["paper_id"] for p in shown] == ["d", "c"]


def test_citation_shares_count_ideas_not_references():
    ideas = [{"references": ["a", "c"]}, {"references": ["a"]}, {"references": []}, {"references": ["x"]}]
    s = gb.citation_shares(ideas, kept={"a", "c"}, relevant={"c", "x"})
    assert (s["ideas"], s["citing_kept"], s["citing_relevant"]) == (4, 2, 1)
    assert s["share_citing_kept"] == 0.5 and s["share_citing_relevant"] == 0.25
    assert gb.citation_shares([], set(), set())["share_citing_kept"] is None


def test_head_of_an_experiment_topic_and_of_a_topic_in_words():
    title, _, metric, goal, code = gb.head({"topic": "experiments/diabetes_regression"})
    assert metric == "r2" and goal == "maximize" and "Ridge" in code and title
    title, desc, metric, goal, code = gb.head({"topic": "bench/labels/rl_topic.yaml"})
    assert code == "" and metric == "the task's metric" and desc


def test_the_committed_record_renders_to_the_committed_section():
    rec = read_record(gb.NAME)
    body = (REPO_ROOT / "bench" / "RESULTS.md").read_text().split(f"<!-- bench:{gb.NAME}:begin -->")[1]
    assert body.split(f"<!-- bench:{gb.NAME}:end -->")[0].strip() == gb.section(rec).strip()
    sim = {t["name"]: t for t in read_record("ranking_similarity_all")["topics"]}
    for t in rec["topics"]:  # the counts are the similarity record's, under the held-out rule
        kept, _ = gb.shown(sim[t["name"]], rec["papers"])
        assert (t["kept"], t["relevant_kept"]) == (len(kept), sum(p["relevant"] for p in kept))
        assert t["citing_kept"] == sum(bool(i["references"]) for i in t["answer_ideas"])
