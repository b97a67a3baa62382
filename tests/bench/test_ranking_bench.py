"""bench/ranking_bench.py without the LLM: which labelled topics it picks up, the fixed choice of
papers, leave-one-topic-out tuning (a held-out topic never tunes its own values) and the section it
renders (which the checks of the pages accept)."""
from __future__ import annotations

import json
import random

import pytest

from tests.support.bench_records import section_problems


@pytest.fixture
def rb(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    import bench.ranking_bench as rb

    return rb


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_discover_reads_the_registry_then_any_other_label_set(rb, tmp_path):
    labels, experiments = tmp_path / "labels", tmp_path / "experiments"
    labels.mkdir()
    for d in ("fish_counting", "birds"):
        (experiments / d).mkdir(parents=True)
        (experiments / d / "topic.yaml").write_text("name: x\n")
    _jsonl(labels / "fish_relevance.jsonl", [{"paper_id": "a", "relevant": True}])   # -> experiments/fish_counting
    _jsonl(labels / "moss_relevance.jsonl", [{"paper_id": "a", "relevant": True}])   # its own topic yaml
    (labels / "moss_topic.yaml").write_text("title: Moss\ndescription: Moss growth.\n")
    _jsonl(labels / "rocks_relevance.jsonl", [{"paper_id": "a", "relevant": True}])  # no topic
    found = {e["name"]: e for e in rb.discover(labels, experiments)}
    assert found["fish_counting"]["topic_dir"] == experiments / "fish_counting"
    assert found["moss"]["topic_yaml"] == labels / "moss_topic.yaml"
    assert "missing" in found["rocks"] and "birds" not in found


def test_the_shipped_labels_give_every_development_topic_once(rb):
    found = [e for e in rb.discover() if "missing" not in e]
    names = [e["name"] for e in found]
    assert len(names) == len(set(names)) >= 5
    assert len({str(e.get("topic_dir") or e.get("topic_yaml")) for e in found}) == len(found)


def test_choose_keeps_the_relevant_share_and_is_fixed(rb):
    ids = [f"p{i}" for i in range(60)]
    relevant = {i: int(i[1:]) % 3 == 0 for i in ids}   # 20 of 60
    picked = rb.choose(ids, relevant, 30)
    assert len(picked) == 30 and sum(relevant[i] for i in picked) == 10
    assert picked == rb.choose(list(reversed(ids)), relevant, 30)[::-1]   # by id, not by the file's order
    assert rb.choose(ids, relevant, 100) == ids


def _record(seed=0):
    """Three topics whose relevant papers have higher P(yes) and similarity, on different scales."""
    rng = random.Random(seed)
    topics = []
    for name, shift in (("a", 0.0), ("b", 0.1), ("c", -0.1)):
        papers = []
        for i in range(20):
            rel = i < 7
            papers.append({"paper_id": f"{name}{i}", "title": "t", "relevant": rel,
                           "p_yes": min(1.0, max(0.0, (0.6 if rel else 0.3) + shift + rng.uniform(-0.15, 0.15))),
                           "similarity": (0.5 if rel else 0.3) + rng.uniform(-0.1, 0.1),
                           "attribute_kept": rel and i % 2 == 0, "naive_kept": True})
        topics.append({"name": name, "papers": papers, "cost": {
            "yes_no": {"requests": 20, "timed": 20, "prompt_tokens": 4000, "completion_tokens": 20,
                       "prompt_evaluated": 2000, "prompt_cached": 2000, "server_s": 40.0, "wall_s": 50.0},
            "similarity_s": 1.0, "attributes": None}})
    return {"script": "bench/ranking_bench.py", "date": "2026-11-23", "machine": "2 cores (test)", "model": "m",
            "n": 20, "attributes_n": 20, "topics": topics}


def test_leave_one_topic_out_tunes_on_the_other_topics_only(rb):
    rec = _record()
    topics = [{"name": t["name"], "papers": t["papers"],
               "relevant": {p["paper_id"] for p in t["papers"] if p["relevant"]}} for t in rec["topics"]]
    held = rb.loto("yesno", topics)
    for t in topics:
        assert held[t["name"]]["params"] == rb.tune("yesno", [u for u in topics if u is not t])
    # changing the held-out topic's own answers does not change the values it is scored with
    flipped = [{**t, "papers": [{**p, "p_yes": 1 - p["p_yes"]} for p in t["papers"]]} if t["name"] == "a" else t
               for t in topics]
    assert rb.loto("yesno", flipped)["a"]["params"] == held["a"]["params"]
    assert rb.loto("yesno", flipped)["a"]["precision"] < held["a"]["precision"]


def test_analysis_and_section(rb):
    rec = _record()
    rec["analysis"] = rb.analyse(rec)
    a = rec["analysis"]
    assert set(a["held_out"]) == set(rb.SIGNAL_MODES) and a["default"] in rb.SIGNAL_MODES
    assert a["fixed"]["naive"]["a"]["precision"] == pytest.approx(7 / 20) and a["fixed"]["naive"]["a"]["recall"] == 1
    assert a["fixed"]["attributes"]["a"] == {"kept": 4, "tp": 4, "precision": 1.0, "recall": 4 / 7}
    body = rb.render(rec)
    head, _, rest = body.partition("\n")
    assert head == "## ranking (LOTO)"
    # every other check passes (the record itself may be missing or uncommitted where this runs)
    assert [x for x in section_problems(head, rest) if not x.startswith("record bench/records/ranking_loto.json")] == []
    assert "held-out (tuned on the other topics)" in body and "in-sample (tuned on all topics)" in body


# -- the embedding-only rules on every labelled candidate (--similarity-only) ------------------------

def test_choose_zero_means_every_candidate(rb):
    ids = [f"p{i}" for i in range(9)]
    assert rb.choose(ids, {i: i == "p0" for i in ids}, 0) == ids


def test_similarity_rules_on_hand_made_cosines(rb):
    cos = [0.70, 0.62, 0.50, 0.40, 0.30]
    assert rb.similarity_kept("absolute", cos, 0.5) == [True, True, True, False, False]
    # centred: minus the median (0.50) plus 0.5, the shipped rule
    assert rb.similarity_kept("centred", cos, 0.6) == [True, True, False, False, False]
    assert rb.similarity_kept("below_best", cos, 0.08) == [True, True, False, False, False]
    assert rb.similarity_kept("below_best", cos, 0.0) == [True, False, False, False, False]
    # top_share: ceil(0.3 * 5) = 2 papers; at least one; ties at the last place kept
    assert rb.similarity_kept("top_share", cos, 0.3) == [True, True, False, False, False]
    assert rb.similarity_kept("top_share", cos, 0.01) == [True, False, False, False, False]
    assert rb.similarity_kept("top_share", [0.5, 0.4, 0.4, 0.1], 0.5) == [True, True, True, False]
    # z-score: mean 0.504, sd ~0.142: 0.70 -> 1.38, 0.62 -> 0.82, 0.50 -> -0.03
    assert rb.similarity_kept("z_score", cos, 1.0) == [True, False, False, False, False]
    assert rb.similarity_kept("z_score", cos, 0.0) == [True, True, False, False, False]
    assert rb.similarity_kept("z_score", [0.4, 0.4], 0.0) == [True, True]   # all equal: z = 0
    # the relative rules do not move when every cosine moves by the same amount; the absolute one does
    up = [c + 0.2 for c in cos]
    for rule, value in (("centred", 0.6), ("below_best", 0.1), ("top_share", 0.4), ("z_score", 0.5)):
        assert rb.similarity_kept(rule, up, value) == rb.similarity_kept(rule, cos, value), rule
    assert rb.similarity_kept("absolute", up, 0.5) != rb.similarity_kept("absolute", cos, 0.5)
    assert rb.similarity_kept("top_share", [], 0.5) == []
    with pytest.raises(ValueError):
        rb.similarity_kept("nearest", cos, 0.5)


def test_best_cut_is_the_topics_own_best_threshold(rb):
    cos = [0.9, 0.8, 0.7, 0.6, 0.5]
    rel = [True, False, True, True, False]
    best = rb.best_cut(cos, rel)   # recall >= 0.6 needs 2 of 3: from 0.7 precision 2/3, from 0.6 3/4 (the best)
    assert best == {"cut": 0.6, "precision": 0.75, "recall": 1.0, "kept": 4, "tp": 3}


def _similarity_record(seed=0):
    """Three topics whose cosines sit on different levels; relevant papers higher within each topic."""
    rng = random.Random(seed)
    topics = []
    for name, level in (("a", 0.0), ("b", 0.15), ("c", -0.15)):
        papers = [{"paper_id": f"{name}{i}", "title": "t", "relevant": i < 6,
                   "cosine": round((0.55 if i < 6 else 0.35) + level + rng.uniform(-0.12, 0.12), 4)}
                  for i in range(18)]
        topics.append({"name": name, "topic": f"bench/labels/{name}_topic.yaml", "labels": "x",
                       "candidates": "the 18 labelled candidates", "papers": papers})
    return {"script": "bench/ranking_bench.py --similarity-only", "date": "2026-11-26",
            "machine": "2 cores (test)", "topics": topics}


def test_similarity_leave_one_topic_out_and_section(rb):
    rec = _similarity_record()
    body = rb.render_similarity(rec)
    a = rec["analysis"]
    topics = [{"name": t["name"], "papers": t["papers"],
               "relevant": {p["paper_id"] for p in t["papers"] if p["relevant"]}} for t in rec["topics"]]
    for rule in rb.SIMILARITY_RULES:
        for t in topics:   # each held-out topic is scored with the value tuned on the others only
            assert a["held_out"][rule][t["name"]]["value"] == rb.tune_rule(rule, [u for u in topics if u is not t])
        assert a["in_sample"][rule]["value"] == rb.tune_rule(rule, topics)
    # every paper carries its cosine and what each rule kept, held-out and in-sample
    p = rec["topics"][1]["papers"][0]
    assert set(p["kept"]) == set(rb.SIMILARITY_RULES) and set(p["kept"]["z_score"]) == {"held_out", "in_sample"}
    # topics on other levels: a relative rule carries, the absolute threshold does not
    assert a["goal"]["z_score"]["precision"] > a["goal"]["absolute"]["precision"]
    head, _, rest = body.partition("\n")
    assert head == "## ranking by similarity on all labelled candidates (LOTO)"
    assert [x for x in section_problems(head, rest)
            if not x.startswith("record bench/records/ranking_similarity_all.json")] == []
    assert "held-out (keep_from tuned on the other 2 topics)" in body and "in-sample (tuned on all 3 topics)" in body


def test_the_similarity_section_is_its_record_rendered(rb):
    from bench.common import find_section, read_record

    page, section = find_section(rb.SIMILARITY_SECTION)
    rec = read_record(rb.SIMILARITY_RECORD)
    kept = [p["kept"] for t in rec["topics"] for p in t["papers"]]
    assert page.name == "ranking.md" and section == rb.render_similarity(rec).strip()
    assert kept == [p["kept"] for t in rec["topics"] for p in t["papers"]]   # the record's kept flags too


def test_auc_counts_pairs_and_ties(rb):
    assert rb.auc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert rb.auc([0.5, 0.5, 0.4, 0.6], [True, False, True, False]) == 0.125   # one tie (0.5) of 4 pairs
    assert rb.auc([0.3, 0.2], [True, True]) is None


def test_the_signals_are_compared_when_every_paper_has_both(rb):
    rec = _similarity_record()
    for t in rec["topics"]:   # a sentence signal that separates every topic perfectly, the cosine less so
        for p in t["papers"]:
            p[rb.SENTENCE] = 0.9 if p["relevant"] else 0.1
        t["papers"][-1]["cosine"] = 0.99   # an irrelevant paper above every relevant one
    rec["topics"][0]["name"] = rb.LABELLED_AFTER_CHOICE[0]
    body = rb.render_similarity(rec)
    sig = rec["analysis"]["signals"]
    assert set(sig) == set(rb.SIGNALS)
    assert all(v == 1.0 for v in sig[rb.SENTENCE]["auc"].values())
    assert all(v < 1.0 for v in sig["cosine"]["auc"].values())
    m = sig[rb.SENTENCE]["held_out"]["z_score"]["macro"]
    assert (m["precision"], m["recall"]) == (1.0, 1.0)
    assert "### Which text the cosine compares" in body and "on 3 of 3 topics" in body
    assert f"{rb.LABELLED_AFTER_CHOICE[0]} was labelled afterwards" in body
    assert "(whole abstract): the advantage seen on the first topics carried." in body
    # an older record without the sentence signal renders without the comparison
    old = _similarity_record()
    assert "### Which text" not in rb.render_similarity(old) and old["analysis"]["signals"] == {}


def test_abstract_sentences_split_and_keep_the_long_pieces(rb):
    text = "We study X. Results. A new loss for keyword spotting is proposed! Does it work? Yes it does, clearly."
    assert rb.abstract_sentences(text) == ["A new loss for keyword spotting is proposed!", "Yes it does, clearly."]
    assert rb.abstract_sentences("Short.") == ["Short."] and rb.abstract_sentences("") == [""]


def test_sentence_similarity_is_the_best_sentence_cosine(rb):
    import numpy as np

    from schemas.records import Paper, TopicBrief

    class Axes:   # each text is a unit vector on the axis its first word names
        def encode(self, texts):
            axes = {"topic": 0, "task": 0, "other": 1, "noise": 2}
            out = np.zeros((len(texts), 3), dtype=np.float32)
            for i, t in enumerate(texts):
                out[i, axes[t.split()[0].lower()]] = 1.0
            return out

    brief = TopicBrief(topic="t", title="Topic title", description="d", metric_name="m", metric_goal="maximize",
                       task="t", input="i", output="o", domain="d", evaluation="e", search_query="q")
    papers = [Paper(paper_id="a", title="x", abstract="Other things are studied here. Task sentence that matches."),
              Paper(paper_id="b", title="y", abstract="Noise sentence number one. Other sentence number two.")]
    assert rb.sentence_similarities(brief, papers, Axes()) == [1.0, 0.0]
    assert rb.sentence_similarities(brief, [], Axes()) == []
