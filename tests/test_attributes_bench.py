"""bench/attributes_bench.py without the LLM: the trace rank.ask_attributes gives (first answer, re-ask,
drop) against a scripted server, the per-paper rows and counts built from it, and the section it renders
(which the RESULTS.md checks accept)."""
from __future__ import annotations

import json

import pytest

from schemas.records import Paper
from tests.test_bench_records import section_problems
from tests.test_ranking import IDS, ReplayServer, _llm


@pytest.fixture
def ab(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    import bench.attributes_bench as ab

    return ab


PAPERS = [
    Paper(paper_id="own", title="PointNet: Deep Learning on Point Sets for 3D Classification",
          abstract="Point clouds are an important type of geometric data structure. We design a network."),
    Paper(paper_id="fixed", title="Graph Attention Networks for Node Classification",
          abstract="We present graph attention networks, novel neural network architectures on graphs."),
    Paper(paper_id="stuck", title="Temporal Fusion Transformers",
          abstract="Multi-horizon forecasting often contains a complex mix of inputs. We propose a model."),
]
OWN = {"own": {"task": "shape classification", "input": "point cloud", "output": "class label"},
       "fixed": {"task": "node classification", "input": "graph with node features", "output": "node labels"}}


def answer(name, messages):
    """'own' answers in its own words; 'fixed' copies its title first, then answers in its own words when
    asked again; 'stuck' copies its abstract's opening both times (and its output repeats its input)."""
    user = messages[1]["content"]
    again = "in your own few words" in user
    items = []
    for pid, title in IDS.findall(user):
        if pid == "own" or (pid == "fixed" and again):
            items.append({"id": pid, **OWN[pid]})
        elif pid == "fixed":
            items.append({"id": pid, "task": title, "input": "graphs", "output": "node labels"})
        else:
            items.append({"id": pid, "task": "time series forecasting", "input": "multi-horizon forecasting often "
                          "contains", "output": "multi-horizon forecasting often contains"})
    return json.dumps(items[0] if name == "PaperAttributesById" else {"papers": items})


def _rows(ab):
    from assets.paper_rankings.rank import ask_attributes

    trace: dict = {}
    with ReplayServer(fallback=answer) as srv:
        finals = ask_attributes(PAPERS, _llm(srv.base_url), batch=5, trace=trace)
    assert srv.requests == 1 + 2   # one batch, then the two copies alone
    return [ab.paper_row(p, p.paper_id == "own", trace[p.paper_id], f) for p, f in zip(PAPERS, finals)]


def test_the_trace_gives_first_answers_reasks_and_drops(home, ab):
    own, fixed, stuck = _rows(ab)
    assert own["first_copied"] == {} and not own["reasked"] and own["final"] == OWN["own"] and own["again"] is None
    assert fixed["first_copied"] == {"task": "title"} and fixed["first_problem"] == "copies task = title"
    assert fixed["reasked"] and fixed["again"] == OWN["fixed"] and fixed["again_copied"] == {}
    assert fixed["final"] == OWN["fixed"] and not fixed["dropped"]
    assert stuck["first_copied"] == {"input": "abstract", "output": "abstract"} and stuck["reasked"]
    assert stuck["again_copied"] == stuck["first_copied"] and stuck["again_problem"].startswith("copies")
    assert stuck["final"] is None and stuck["dropped"] and "attributes dropped" in stuck["error"]


def test_summary_counts(home, ab):
    s = ab.summarise(_rows(ab))
    assert s == {"papers": 3, "relevant": 1, "first_fields_copied": 3, "first_papers_copied": 2,
                 "first_by_source": {"title": 1, "abstract": 2, "input": 0}, "first_other_problem": 0,
                 "reasked": 2, "again_fields_copied": 2, "dropped": 1, "no_answer": 0, "usable": 2}
    # a first answer missing under its id is asked again but is no copy; an error left is no drop
    missing = {"paper_id": "x", "relevant": False, "first": None, "first_copied": {}, "first_problem":
               "no answer under its id", "reasked": True, "again": None, "again_copied": {},
               "again_problem": "invalid answer", "final": None, "dropped": False, "error": "invalid answer"}
    s = ab.summarise([missing])
    assert (s["first_other_problem"], s["reasked"], s["dropped"], s["no_answer"], s["usable"]) == (1, 1, 0, 1, 0)


def test_section(home, ab):
    rows = _rows(ab)
    cost = {"requests": 3, "timed": 3, "prompt_tokens": 900, "completion_tokens": 90, "prompt_evaluated": 600,
            "prompt_cached": 300, "server_s": 12.0, "wall_s": 16.0, "this_run_wall_s": 16.0}
    clean = [{**r, "first_copied": {}, "first_problem": None, "reasked": False, "again": None, "again_copied": {},
              "again_problem": None, "final": r["final"] or OWN["own"], "dropped": False, "error": None} for r in rows]
    topics = []
    for name, part in (("graph_node_classification", slice(0, 2)), ("audio_keyword_spotting", slice(2, 3))):
        topics.append({"name": name, "sample": ab.sample(name), "candidates": "c", "topic": "t", "labels": "l",
                       "batch": 5, "cost": {"topic_brief": cost},
                       "variants": {"corpus": {"papers": clean[part], "cost": cost},
                                    "unstated": {"papers": rows[part], "cost": cost}},
                       "topic_attributes": {"task": "node classification", "input": "a graph", "output": "labels",
                                            "domain": "graphs", "copied": {}, "llm_error": None}})
    rec = {"script": "bench/attributes_bench.py", "date": "2026-11-28", "machine": "2 cores (test)",
           "machine_note": "test", "model": "m", "k": 2, "topics": topics}
    body = ab.render(rec)
    head, _, rest = body.partition("\n")
    assert [x for x in section_problems(head, rest) if not x.startswith("record bench/records/")] == []
    summary = rec["summary"]
    assert summary["corpus"]["overall"]["usable"] == 3 and summary["corpus"]["overall"]["first_fields_copied"] == 0
    assert summary["unstated"]["overall"]["usable"] == 2 and summary["unstated"]["held_out"]["dropped"] == 1
    corpus, unstated = body.split("### Papers shown as: corpus")[1].split("### Papers shown as: unstated")
    assert "| **all** | - | 3 (1) | **0** (0) | 0 | 0 | **0** | 0 | **3/3** | 32.0 / 24.0 |" in corpus
    assert "| **all** | - | 3 (1) | **3** (2) | 0 | 2 | **2** | 1 | **2/3** | 32.0 / 24.0 |" in unstated
    assert "| audio_keyword_spotting | held-out |" in body and "| graph_node_classification | in-sample |" in body
    assert ab.render(rec) == body   # the section is a function of the record


def test_unstated_cuts_the_stated_attributes():
    from assets.paper_rankings.scoring import unstated

    text = "Applies a CNN to classify sentences. Task: sentence classification; input: words; output: label."
    assert unstated(text).strip() == "Applies a CNN to classify sentences."
    assert unstated("No statement here.") == "No statement here."


def test_the_committed_section_is_its_record_rendered(ab):
    from tests.test_bench_records import RESULTS

    rec = json.loads((ab.ROOT / "bench" / "records" / f"{ab.RECORD}.json").read_text())
    text = RESULTS.read_text()
    begin, end = f"<!-- bench:{ab.SECTION}:begin -->", f"<!-- bench:{ab.SECTION}:end -->"
    assert text.split(begin, 1)[1].split(end, 1)[0].strip() == ab.render(rec).strip()
