"""Paper ranking (DOLPHIN 3.1): the pure attribute scoring, the ranking replayed from the local
model's recorded answers, naive vs attribute mode, malformed answers, `researchloop rank`, and
bounded concurrency against a slow remote endpoint."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from assets.paper_rankings.rank import DEFAULT_MODE, rank_papers
from assets.paper_rankings.scoring import (
    ATTRIBUTE_RELEVANCE_POINTS,
    ATTRIBUTES,
    KEEP_AT,
    agreement,
    agreement_label,
    attribute_similarities,
    copied_fields,
    grade,
    is_kept,
    parts,
    score_attributes,
)
from resources.llm import LLM
from resources.paths import REPO_ROOT
from schemas.frames import from_frame, to_frame
from schemas.records import Paper, PaperScore, TopicBrief
from tests.support import paths
from tests.support.llm_servers import QueueServer

FIXTURE = paths.FIXTURES / "ranking" / "pointcloud_8.json"
LEVELS = ("match", "partial", "differs")


# -- pure scoring ------------------------------------------------------------------------------

def test_parts_split_lists_of_tasks_and_outputs():
    assert parts("class label or per-point labels") == ["class label or per-point labels", "class label",
                                                        "per-point labels"]
    assert parts("shape classification, part segmentation and normal estimation")[1:] == [
        "shape classification", "part segmentation", "normal estimation"]
    assert parts("  3D  boxes (with classes). ") == ["3D boxes (with classes).", "3D boxes", "classes"]
    assert parts("") == [""]


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in for the embedder: normalised word counts over a fixed vocabulary."""
    vocab = sorted({w for t in texts for w in t.lower().split()})
    m = np.array([[t.lower().split().count(w) for w in vocab] for t in texts], dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


def test_attribute_similarities_take_the_best_piece_and_encode_each_text_once():
    seen = []

    def encode(texts):
        seen.append(list(texts))
        return bag_of_words(texts)

    topic = {"task": "point cloud classification", "input": "point cloud", "output": "class label"}
    papers = [{"task": "point cloud segmentation and point cloud classification", "input": "point cloud",
               "output": "boxes or class label"},
              {"task": "object detection", "input": "images", "output": "boxes"}]
    sims = attribute_similarities(topic, papers, encode)
    assert len(seen) == 1 and len(seen[0]) == len(set(seen[0]))   # one call, no text twice
    assert sims[0] == {"task": 1.0, "input": 1.0, "output": 1.0}   # an exact piece matches fully
    assert sims[1] == {"task": 0.0, "input": 0.0, "output": 0.0}
    assert attribute_similarities(topic, [], encode) == []


def test_grades_and_label():
    assert [grade(s) for s in (0.95, 0.6, 0.59, 0.4, 0.39, -0.1)] == [
        "match", "match", "partial", "partial", "differs", "differs"]
    assert grade(0.5, match_at=0.5, partial_at=0.2) == "match"
    levels = agreement({"task": 0.7, "input": 0.45, "output": 0.1})
    assert levels == {"task": "match", "input": "partial", "output": "differs"}
    assert agreement_label(levels) == "task match, input partial, output differs"
    assert agreement({"task": 0.7, "input": 0.2, "output": 0.9})["input"] == "foreign"
    assert agreement({"task": 0.7, "input": 0.3, "output": 0.9})["input"] == "differs"


def test_a_foreign_input_is_never_kept():
    """A 2D image classifier has our task name and output but another kind of data."""
    for rel in ATTRIBUTE_RELEVANCE_POINTS:
        levels = {"task": "match", "input": "foreign", "output": "match"}
        assert score_attributes(rel, levels) < KEEP_AT
    assert is_kept(score_attributes("same_task", {"task": "match", "input": "differs", "output": "match"}))


def test_parts_split_at_prepositions_and_drop_fillers():
    ps = parts("unordered point clouds sampled on the surface of one of 12 generated shapes")
    assert "unordered point clouds" in ps and "surface" in ps and "12 generated shapes" in ps
    assert not {"one", "the surface", ""} & set(ps)
    assert "detection" in parts("image classification, also used for detection")


@pytest.mark.parametrize("rel,levels", list(itertools.product(
    ATTRIBUTE_RELEVANCE_POINTS, itertools.product(LEVELS, repeat=3))))
def test_every_attribute_score_in_range(rel, levels):
    s = score_attributes(rel, dict(zip(ATTRIBUTES, levels)))
    assert isinstance(s, int) and 1 <= s <= 10


def test_which_papers_the_attribute_score_keeps():
    def kept(rel, task, inp, out):
        return is_kept(score_attributes(rel, {"task": task, "input": inp, "output": out}))

    assert score_attributes("same_task", dict.fromkeys(ATTRIBUTES, "match")) == 10
    assert score_attributes("unrelated", dict.fromkeys(ATTRIBUTES, "differs")) == 1   # 0 clamped to 1
    # the output decides between our task and a neighbouring one on the same data: the 1.5B model
    # calls detection papers "same_task", and their task name and input look like ours
    assert kept("same_task", "partial", "differs", "match")
    assert not kept("same_task", "match", "match", "differs")
    # a method for our task whose own output is something else (augmentation) needs the task too
    assert kept("same_task", "match", "partial", "partial")
    assert not kept("same_task", "partial", "match", "partial")
    # a neighbouring task is kept only when its own output agrees with ours
    assert kept("neighbouring_task", "partial", "partial", "match")
    assert not kept("neighbouring_task", "match", "match", "partial")
    # another field never is, whatever its words
    assert not kept("same_field_other_task", "match", "match", "match")
    assert not kept("unrelated", "match", "match", "match")


def test_attribute_score_monotone():
    order = ["differs", "partial", "match"]
    rels = ["unrelated", "same_field_other_task", "neighbouring_task", "same_task"]
    for levels in itertools.product(order, repeat=3):
        s = [score_attributes(r, dict(zip(ATTRIBUTES, levels))) for r in rels]
        assert s == sorted(s)
    for r in rels:
        for a in ATTRIBUTES:
            s = [score_attributes(r, {**dict.fromkeys(ATTRIBUTES, "partial"), a: lv}) for lv in order]
            assert s == sorted(s)


def test_paper_score_round_trips_through_a_frame():
    s = PaperScore(paper_id="p", title="t", relevance="same_task", attribute_match="task match, input partial, "
                   "output match", score=9, kept=True, reason="r", mode="attributes", paper_task="x",
                   paper_input="y", paper_output="z", task_similarity=0.7, input_similarity=0.5, output_similarity=1.0)
    old = PaperScore(paper_id="q", title="t", relevance="unknown", attribute_match="unknown", score=1, kept=False,
                     reason="not judged", error="boom")
    df = to_frame([s, old], PaperScore)
    assert str(df.schema["task_similarity"]) == "Float64" and str(df.schema["paper_task"]) == "String"
    assert from_frame(df, PaperScore) == [s, old]


# -- replaying the local model's recorded answers ------------------------------------------------

def _key(schema: str | None, messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps([schema, messages], sort_keys=True).encode()).hexdigest()


IDS = re.compile(r"^\[id (\S+)\] (.*)$", re.M)


def by_id_answers(exchanges) -> dict[tuple[str, ...], list[dict]]:
    """The recorded attribute answers keyed by the papers' titles in request order. They were
    recorded with the earlier prompt that numbered the papers and answered in the same order;
    the replay hands the same answers back under each paper's id (the id-tied prompt's format)."""
    out = {}
    for e in exchanges:
        if e["schema"] == "PaperAttributesBatch":
            titles = tuple(re.findall(r"^Paper \d+: (.*)$", e["messages"][1]["content"], re.M))
            out[titles] = json.loads(e["answer"])["papers"]
    return out


class ReplayServer:
    """The QueueServer of test_llm_resource answering recorded requests (by schema name and
    messages) with the recorded text (an id-tied attribute request: the recorded answers for the
    same papers, under their ids), or `fallback(schema, messages)`, optionally after a delay;
    counts the requests in flight."""

    def __init__(self, exchanges=(), delay_s: float = 0.0, fallback=None):
        self.answers = {_key(e["schema"], e["messages"]): e["answer"] for e in exchanges}
        self.attributes = by_id_answers(exchanges)
        self.delay_s, self.fallback = delay_s, fallback
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.unknown: list[dict] = []
        self.srv = QueueServer()
        self.srv.respond = self.respond
        self.base_url = self.srv.base_url

    @property
    def requests(self) -> int:
        return self.srv.n

    def respond(self, body: dict) -> str:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay_s)
            name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
            text = self.answers.get(_key(name, body["messages"]))
            papers = IDS.findall(body["messages"][-1]["content"])
            if name == "PaperAttributesByIdBatch" and (items := self.attributes.get(tuple(t for _, t in papers))):
                text = json.dumps({"papers": [{"id": i, **a} for (i, _), a in zip(papers, items)]})
            if text is None and self.fallback is not None:
                text = self.fallback(name, body["messages"])
            if text is None:
                self.unknown.append(body)
            return "no recorded answer" if text is None else text
        finally:
            with self.lock:
                self.in_flight -= 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.close()


@pytest.fixture(scope="module")
def recorded():
    data = json.loads(FIXTURE.read_text())
    brief = TopicBrief(**data["brief"])
    papers = [Paper(**p) for p in data["papers"]]
    return data, brief, papers


def _llm(base_url: str, **kw) -> LLM:
    return LLM(base_url=base_url, api_key="sk-test", model="fake-model", max_retries=1, **kw)


def test_recorded_answers_attribute_mode(home, recorded):
    """The local model's real answers (8 papers, 4 per request): its relevance calls every 3D paper
    relevant; the paper's own output, compared in code, drops detection / completion / registration."""
    data, brief, papers = recorded
    with ReplayServer(data["exchanges"]) as srv:
        scores = rank_papers(brief, papers, _llm(srv.base_url), mode="attributes", batch=data["batch"])
    assert not srv.unknown, "a request differs from the recording (prompt or schema changed?): re-record"
    assert srv.requests == 8 + 2   # relevance one paper per request, attributes 4 per request (tied by id)
    by_id = {s.paper_id: s for s in scores}
    assert [s.paper_id for s in scores] == [p.paper_id for p in papers]
    assert all(s.error is None and s.mode == "attributes" for s in scores)
    assert all(s.kept == (s.score >= KEEP_AT) and 1 <= s.score <= 10 for s in scores)
    for s in scores:   # every judgement recorded, and a one-line reason naming them
        assert s.paper_task and s.paper_input and s.paper_output and s.task_similarity is not None
        assert s.attribute_match.startswith("task ") and "\n" not in s.reason and s.relevance in s.reason
    # the point-cloud classifiers stay, the distractors on the same data go
    assert {i for i, s in by_id.items() if s.kept} >= {"qi2017pointnet", "wang2019dynamic"}
    assert not any(by_id[i].kept for i in ("zhou2018voxelnet", "yuan2018pcn", "aoki2019pointnetlk", "he2016deep"))
    # what the model wrote for them is the reason: their output differs from a class label
    for i in ("zhou2018voxelnet", "yuan2018pcn", "aoki2019pointnetlk"):
        assert "output differs" in by_id[i].attribute_match or "output partial" in by_id[i].attribute_match
    # none of the model's answers is a copy of its paper's title or abstract opening (none asked again)
    for p in papers:
        s = by_id[p.paper_id]
        answer = {"task": s.paper_task, "input": s.paper_input, "output": s.paper_output}
        assert copied_fields(answer, p.title, p.abstract) == {}, answer
    # identical to what the ranking computed when the answers were recorded
    assert [(s.paper_id, s.score, s.kept) for s in scores] == [
        (s["paper_id"], s["score"], s["kept"]) for s in data["scores_when_recorded"]]


def test_recorded_answers_naive_mode_keeps_the_distractors(home, recorded):
    """The same recorded relevance answers, scored naively: DOLPHIN's failure reproduced."""
    data, brief, papers = recorded
    with ReplayServer(data["exchanges"]) as srv:
        naive = rank_papers(brief, papers, _llm(srv.base_url), mode="naive", batch=data["batch"])
    assert not srv.unknown and srv.requests == 8
    kept = {s.paper_id for s in naive if s.kept}
    assert all(s.mode == "naive" and s.attribute_match == "n/a" and s.paper_task is None for s in naive)
    assert kept & {"zhou2018voxelnet", "yuan2018pcn", "aoki2019pointnetlk"}, "naive ranking kept no distractor"


def test_malformed_answers_fall_back_to_single_papers_and_are_recorded(home, recorded):
    """An attribute batch whose answer stays invalid is asked again paper by paper; a paper whose
    own answer stays invalid is recorded as not judged, with the reason; the others are scored. A
    paper whose relevance answer stays invalid is not asked for its attributes."""
    data, brief, papers = recorded
    bad_attr, bad_rel = papers[1].title, papers[2].title
    attrs = {"task": "shape classification", "input": "point cloud", "output": "class label"}

    def fallback(name, messages):   # one paper: the item; several: {"papers": [items]}
        user = messages[1]["content"]   # the papers (a retry appends the error after them)
        if (bad_attr in user and name.startswith("PaperAttributes")) or (bad_rel in user and name == "PaperRelevance"):
            return '{"papers": [{"task": "oops"'   # truncated JSON, every time
        if name == "PaperRelevance":
            return json.dumps({"relevance": "same_task"})
        items = [{"id": i, **attrs} for i, _ in IDS.findall(user)]
        return json.dumps(items[0] if name == "PaperAttributesById" else {"papers": items})

    with ReplayServer(fallback=fallback) as srv:
        scores = rank_papers(brief, papers[:4], _llm(srv.base_url), mode="attributes", batch=4)
    for i in (1, 2):
        s = scores[i]
        assert s.error and "invalid answer" in s.error and not s.kept and s.score == 1
        assert s.relevance == "unknown" and s.reason.startswith("not judged: invalid answer")
    assert all(s.error is None and s.kept for i, s in enumerate(scores) if i not in (1, 2))
    # relevance: 3 papers once, the bad one twice (1 retry); attributes: the batch of the 3 papers
    # with a relevance twice, then each alone (the bad one twice)
    assert srv.requests == (3 + 2) + (2 + 2 + 2)


def test_unknown_mode_is_refused(recorded):
    _, brief, papers = recorded
    with pytest.raises(ValueError, match="unknown ranking mode"):
        rank_papers(brief, papers, _llm("http://127.0.0.1:9/v1"), mode="both")
    assert rank_papers(brief, [], _llm("http://127.0.0.1:9/v1")) == []


# -- concurrency against a remote endpoint -------------------------------------------------------

def test_remote_calls_run_concurrently_with_a_bound(home, recorded):
    """50 papers, one per request, 0.3 s per request, at most 8 in flight: about 50/8 x 0.3 s,
    not 50 x 0.3 s = 15 s."""
    _, brief, papers = recorded
    many = [p.model_copy(update={"paper_id": f"{p.paper_id}-{i}", "title": f"{p.title} ({i})"})
            for i in range(7) for p in papers][:50]   # distinct requests: no cache hit between them

    def answer(name, messages):
        assert name == "PaperRelevance"   # one paper per request: the item itself
        return json.dumps({"relevance": "same_task"})

    with ReplayServer(delay_s=0.3, fallback=answer) as srv:
        t0 = time.monotonic()
        scores = rank_papers(brief, many, _llm(srv.base_url, max_concurrency=8), mode="naive")
        took = time.monotonic() - t0
    assert len(scores) == 50 and all(s.kept for s in scores)
    assert srv.requests == 50 and srv.max_in_flight == 8
    assert 7 * 0.3 <= took < 50 * 0.3 / 2, took   # ceil(50 / 8) rounds of 0.3 s = 2.1 s, not 15 s


# -- researchloop rank ---------------------------------------------------------------------------

def _rank_cli(*args, env):
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "rank", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _rank_here(capsys, monkeypatch, *args, env):
    """`researchloop rank` through pipelines.cli.main in this process, under `env`: the
    (returncode, stdout, stderr) of the call as a CompletedProcess."""
    from pipelines.cli import main

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    capsys.readouterr()
    try:
        rc = main(["rank", *args])
    except SystemExit as e:  # argparse and the CLI's own refusals exit
        rc = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["researchloop", "rank", *args], rc, out.out, out.err)


def test_rank_cli(home, fake_llm, tmp_path, monkeypatch, capsys):
    """The first call goes through the installed entry point (a process of its own); the others
    call the same `main` in this process, which keeps the embedder loaded between them."""
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model"}
    papers = tmp_path / "papers.jsonl"
    papers.write_text("\n".join(json.dumps(p) for p in [
        {"paper_id": "a", "title": "PointNet: deep learning on point sets for classification",
         "abstract": "Classifies point clouds.", "year": 2017, "venue": "CVPR"},
        {"paper_id": "b", "title": "VoxelNet: LiDAR object detection", "abstract": "Finds 3D boxes."},
        {"paper_id": "c", "title": "Point cloud classification with kernels", "abstract": "Labels shapes."},
    ]) + "\n")

    def rank(*args):
        return _rank_here(capsys, monkeypatch, *args, env=env)

    r = _rank_cli("--topic", "toy_classification", "--papers", str(papers), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["paper_id"] for x in rows] == ["a", "b", "c"]
    assert all(x["mode"] == DEFAULT_MODE and x["kept"] == (x["score"] >= 8) for x in rows)
    assert all("similarity" in x["reason"] for x in rows) and any(x["kept"] for x in rows)

    # the combined mode: the fake endpoint answers yes / no without log-probabilities
    r = rank("--topic", "toy_classification", "--papers", str(papers), "--mode", "combined")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert {x["paper_id"]: x["kept"] for x in rows} == {"a": True, "b": False, "c": True}
    assert [x["relevance"] for x in rows] == ["yes", "no", "yes"] and all("P(yes)" in x["reason"] for x in rows)

    r = rank("--topic", "toy_classification", "--papers", str(papers), "--mode", "attributes")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert {x["paper_id"]: x["kept"] for x in rows} == {"a": True, "b": False, "c": True}
    for x in rows:
        assert {"score", "kept", "relevance", "attribute_match", "reason", "paper_task"} <= x.keys()
        assert x["mode"] == "attributes" and x["kept"] == (x["score"] >= 8)
    assert rows[1]["paper_output"] == "bounding boxes" and "output differs" in rows[1]["attribute_match"]
    assert "kept 2/3" in r.stderr

    r = rank("--topic", "toy_classification", "--papers", str(papers), "--naive", "--batch", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    naive = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["kept"] for x in naive] == [True, True, True]   # "neighbouring_task" scores 8 naively
    assert all(x["mode"] == "naive" and x["attribute_match"] == "n/a" for x in naive)

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"paper_id": "x", "title": "no abstract field"}\n')
    r = rank("--topic", "toy_classification", "--papers", str(bad))
    assert r.returncode == 2 and "abstract" in r.stderr and r.stdout == ""
    r = rank("--topic", "no_such_topic", "--papers", str(papers))
    assert r.returncode == 2 and "no_such_topic" in r.stderr
    r = rank("--topic", "toy_classification", "--papers", str(tmp_path / "missing.jsonl"))
    assert r.returncode == 2 and "missing.jsonl" in r.stderr


# -- the asset ---------------------------------------------------------------------------------

def test_paper_rankings_asset_metadata(home, fake_llm):
    """The asset (invoked directly) ranks with the default mode; the attribute mode (through its
    config) shows the kept / dropped table with the paper's own task and output; the naive mode too."""
    import dagster as dg

    from assets.paper_rankings.defs import RankingConfig, paper_rankings
    from resources.embedder import Embedder

    brief = TopicBrief(topic="t", title="Point cloud classification", description="Classify point clouds.",
                       metric_name="accuracy", metric_goal="maximize", task="point cloud classification",
                       input="3D point sets", output="class label", domain="3D vision", evaluation="accuracy",
                       search_query="q")
    papers = [Paper(paper_id="a", title="PointNet: point set classification", abstract="Labels shapes."),
              Paper(paper_id="b", title="VoxelNet: LiDAR detection", abstract="Finds boxes.")]
    args = (to_frame(papers, Paper), to_frame([brief], TopicBrief))
    default = paper_rankings(dg.build_asset_context(), RankingConfig(), *args, llm=_llm(fake_llm.base_url),
                             embedder=Embedder())
    assert default.metadata["mode"] == DEFAULT_MODE and all(c.passed for c in default.check_results)
    combined = paper_rankings(dg.build_asset_context(), RankingConfig(mode="combined"), *args,
                              llm=_llm(fake_llm.base_url), embedder=Embedder())
    table = combined.metadata["rankings"].value
    assert "P(yes)" in table and "attribute_match" not in table
    assert [s.paper_id for s in from_frame(combined.value, PaperScore) if s.kept] == ["a"]
    assert all(c.passed for c in combined.check_results)
    res = paper_rankings(dg.build_asset_context(), RankingConfig(mode="attributes"), *args,
                         llm=_llm(fake_llm.base_url), embedder=Embedder())
    table = res.metadata["rankings"].value
    assert res.metadata["mode"] == "attributes" and res.metadata["kept"] == 1 and res.metadata["dropped"] == 1
    assert "| paper_task | paper_output |" in table and "bounding boxes" in table
    assert table.index("PointNet") < table.index("VoxelNet")   # kept rows first
    assert all(c.passed for c in res.check_results)
    assert [s.paper_id for s in from_frame(res.value, PaperScore) if s.kept] == ["a"]
    naive = paper_rankings(dg.build_asset_context(), RankingConfig(mode="naive"), *args,
                           llm=_llm(fake_llm.base_url), embedder=Embedder())
    assert naive.metadata["mode"] == "naive" and naive.metadata["kept"] == 2
    assert "paper_task" not in naive.metadata["rankings"].value
