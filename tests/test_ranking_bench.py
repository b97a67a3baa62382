"""bench/ranking_bench.py without the LLM: which labelled topics it picks up, the fixed choice of
papers, leave-one-topic-out tuning (a held-out topic never tunes its own values) and the section it
renders (which the RESULTS.md checks accept)."""
from __future__ import annotations

import json
import random

import pytest

from tests.test_bench_records import section_problems


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
