"""Guards for the labelled development topics (bench/labels/dev_topics.yaml).

Every topic's label file must be a usable evaluation set: at least 40 candidates, about a third
relevant, every paper in the corpus, every label explained, DOLPHIN-style distractors of both
kinds among the irrelevant ones, and the retrieval provenance of each row recorded. The slow test
re-runs the corpus search and checks that the labels still cover what it returns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.make_candidates import dev_topics, main, query_of, topic_query, unlabelled
from tests.support import paths

ROOT = paths.REPO
LABELS = ROOT / "bench" / "labels"
TOPICS = dev_topics()
FIELDS_OUTSIDE_VISION_NLP = {"tabular", "time series", "graphs", "reinforcement learning", "audio"}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def corpus_ids() -> set[str]:
    return {r["paper_id"] for r in _rows(ROOT / "corpus" / "papers.jsonl")}


def test_manifest_covers_at_least_five_topics_two_outside_vision_and_nlp():
    names = [t["name"] for t in TOPICS]
    assert len(names) == len(set(names)) >= 5
    assert len({t["field"] for t in TOPICS} & FIELDS_OUTSIDE_VISION_NLP) >= 2
    labels = [t["labels"] for t in TOPICS]
    assert len(labels) == len(set(labels))


def test_every_dev_label_file_is_in_the_manifest():
    """A new dev set must be registered, or no evaluation would read it. pointcloud_relevance.jsonl is
    the older whole-corpus rule labelling read by bench/ranking_bench.py, not a dev set."""
    listed = {t["labels"].name for t in TOPICS}
    files = {p.name for p in LABELS.glob("*.jsonl")} - {"idea_pairs.jsonl", "pointcloud_relevance.jsonl"}
    assert files - listed == set()


@pytest.mark.parametrize("topic", TOPICS, ids=lambda t: t["name"])
def test_topic_gives_a_query(topic):
    q = query_of(topic["topic"])
    assert len(q.split()) >= 30  # title + a real description
    if topic["topic"].is_file():  # a bare topic: exactly what the search reads, nothing else
        assert set(yaml.safe_load(topic["topic"].read_text())) <= {"name", "title", "description"}


@pytest.mark.parametrize("topic", TOPICS, ids=lambda t: t["name"])
def test_label_file_is_a_balanced_explained_candidate_set(topic, corpus_ids):
    rows = _rows(topic["labels"])
    ids = [r["paper_id"] for r in rows]
    assert len(rows) >= 40
    assert len(ids) == len(set(ids)), "a paper is labelled twice"
    assert sorted(set(ids) - corpus_ids) == [], "every labelled paper is a corpus paper"
    relevant = [r for r in rows if r["relevant"] is True]
    assert all(isinstance(r["relevant"], bool) for r in rows)
    assert 0.25 <= len(relevant) / len(rows) <= 0.45, f"{len(relevant)}/{len(rows)} relevant"
    assert all(isinstance(r.get("reason"), str) and len(r["reason"].split()) >= 3 for r in rows), "a one-line reason"
    assert all("\n" not in r["reason"] for r in rows)
    assert all(r.get("area") for r in rows)


@pytest.mark.parametrize("topic", TOPICS, ids=lambda t: t["name"])
def test_irrelevant_candidates_include_both_kinds_of_distractor(topic):
    """DOLPHIN's distractors: the same data type with another task, the same task on other data."""
    reasons = [r["reason"] for r in _rows(topic["labels"]) if not r["relevant"]]
    assert sum(x.startswith("Same data type") for x in reasons) >= 3
    assert sum(x.startswith("Same task") for x in reasons) >= 3


@pytest.mark.parametrize("topic", TOPICS, ids=lambda t: t["name"])
def test_rows_record_where_they_came_from(topic):
    rows = _rows(topic["labels"])
    depth = topic["retrieved"]
    assert all(r["origin"] in ("retrieved", "added") for r in rows)
    for r in rows:
        assert r["rank"] is None or (isinstance(r["rank"], int) and r["rank"] >= 1)
        assert (r["origin"] == "retrieved") == (r["rank"] is not None and r["rank"] <= depth), r["paper_id"]
    ranks = sorted(r["rank"] for r in rows if r["origin"] == "retrieved")
    assert ranks == list(range(1, depth + 1)), "the search results down to the labelled depth, none skipped"


def test_topic_query_needs_title_and_description(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("title: Graph things\n")
    with pytest.raises(ValueError, match="description"):
        topic_query(topic_yaml=f)
    f.write_text("title: Graph things\ndescription: >\n  Classify the\n  nodes.\n")
    assert topic_query(topic_yaml=f) == "Graph things. Classify the nodes."


def test_unlabelled_reads_only_down_to_the_depth():
    rows = [{"rank": i, "paper_id": p} for i, p in enumerate(["a", "b", "c", "d"], 1)]
    assert unlabelled(rows, {"a": {}, "c": {}}, 3) == ["b"]
    assert unlabelled(rows, {"a": {}, "c": {}}, 4) == ["b", "d"]


def test_cli_marks_labelled_candidates(monkeypatch, tmp_path, capsys):
    import bench.make_candidates as mc

    seen = {}

    def fake(query, n, corpus=None, index_dir=None):
        seen.update(query=query, n=n)
        return [{"rank": i, "paper_id": p, "title": p, "abstract": "", "retrieval_score": 0.1}
                for i, p in enumerate(["kipf2017semi", "nobody2099"], 1)][:n]

    monkeypatch.setattr(mc, "candidates", fake)
    out = tmp_path / "c.jsonl"
    assert main(["--dev", "graph_node_classification", "--n", "2", "--out", str(out)]) == 0
    rows = _rows(out)
    assert seen["query"].startswith("Semi-supervised node classification on a citation graph. ")
    assert [(r["paper_id"], r["labelled"], r["relevant"]) for r in rows] == [
        ("kipf2017semi", True, True), ("nobody2099", False, None)]
    assert "1 of them unlabelled: nobody2099" in capsys.readouterr().err
    main(["--dev", "graph_node_classification", "--out", str(out)])
    assert seen["n"] == 50  # without --n, the depth the topic's labels cover
    main(["--topic-yaml", str(ROOT / "bench" / "labels" / "graph_topic.yaml"), "--out", str(out)])
    assert seen["n"] == 60


@pytest.mark.slow
@pytest.mark.parametrize("topic", [t for t in TOPICS if t["retrieved"]], ids=lambda t: t["name"])
def test_labels_cover_what_the_search_returns(topic, tmp_path):
    """The corpus search (BM25 + the local embedding model) for the topic: every paper down to the
    labelled depth is labelled, at the rank the label file records (fails when the corpus, the
    embedding model or the search changes: regenerate with bench/make_candidates.py)."""
    from bench.make_candidates import candidates

    rows = candidates(query_of(topic["topic"]), topic["retrieved"], index_dir="/tmp/rl_bench_home/index")
    labels = {r["paper_id"]: r for r in _rows(topic["labels"])}
    assert unlabelled(rows, labels, topic["retrieved"]) == []
    assert {r["paper_id"]: r["rank"] for r in rows} == {
        p: r["rank"] for p, r in labels.items() if r["origin"] == "retrieved"}
