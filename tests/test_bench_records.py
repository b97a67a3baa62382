"""bench/RESULTS.md has no number without a committed record.

Every `## ` section either names the script that measured it and an existing raw record (JSON
or Parquet), says when and on what machine, and whether its figures are in-sample or held-out;
or is history marked "no record; not a result" with no figures left in it. Sections whose
script renders them from the record are checked to be exactly that rendering, so a figure typed
in by hand, or a record changed without re-rendering, fails. The repair records' rule: a
variant counts as repaired only when its full run scored."""
from __future__ import annotations

import importlib
import json
import re
import subprocess

import pytest

from resources.paths import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "RESULTS.md"
NO_RECORD = "no record; not a result"
SCRIPT = re.compile(r"bench/[\w/]+\.py\b|-m bench\.\w+")  # a file, or the module `python -m` runs
RECORD = re.compile(r"bench/[\w/.-]+\.(?:json|parquet)(?![\w])")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
SAMPLE = re.compile(r"in-sample|held-out|held out|not a sample", re.IGNORECASE)
# what a measured figure looks like in prose: a time, a rate, a ratio, an accuracy-like decimal
FIGURE = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|min|%|tok/s|GiB|MB|x)\b|\b\d+/\d+\b|\b0\.\d{2,}\b")
SECTION_MARK = re.compile(r"<!-- bench:([\w-]+):(begin|end) -->")


def sections(text: str) -> dict[str, str]:
    """`## ` heading -> its text up to the next heading (the file's own introduction excluded)."""
    parts = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    out = {}
    for p in parts:
        head, _, body = p.partition("\n")
        out[head.strip()] = SECTION_MARK.sub("", body)
    return out


def tracked(path: str) -> bool | None:
    """Whether git tracks `path` (None: not a git checkout)."""
    try:
        r = subprocess.run(["git", "ls-files", "--error-unmatch", path], cwd=REPO_ROOT, capture_output=True,
                           check=False, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 and b"not a git repository" in r.stderr:
        return None
    return r.returncode == 0


SECTIONS = sections(RESULTS.read_text())


def section_problems(head: str, body: str) -> list[str]:
    out = []
    if NO_RECORD in body.lower():
        if "|---" in body:
            out.append("a history section keeps a table")
        if figures := FIGURE.findall(body):
            out.append(f"a history section keeps figures: {figures[:5]}")
        return out
    scripts = {s if s.endswith(".py") else s.replace("-m bench.", "bench/") + ".py" for s in SCRIPT.findall(body)}
    records = set(RECORD.findall(body))
    if not scripts:
        out.append("names no script in bench/")
    out += [f"script {s} does not exist" for s in scripts if not (REPO_ROOT / s).is_file()]
    if not records:
        out.append("names no raw record (JSON or Parquet)")
    for r in records:
        path = REPO_ROOT / r
        if not path.is_file():
            out.append(f"record {r} does not exist")
            continue
        if path.suffix == ".json":
            try:
                json.loads(path.read_text())
            except ValueError as e:
                out.append(f"record {r} is not JSON: {e}")
        if tracked(r) is False:
            out.append(f"record {r} is not committed")
    if not DATE.search(head + body) or "cores" not in head + body:
        out.append("does not say when and on what machine")
    if not SAMPLE.search(body):
        out.append("does not say whether it is in-sample or held-out")
    return out


@pytest.mark.parametrize("head", list(SECTIONS))
def test_section_names_its_script_and_record(head):
    assert section_problems(head, SECTIONS[head]) == []


def test_results_has_sections_and_balanced_markers():
    text = RESULTS.read_text()
    assert len(SECTIONS) >= 5
    marks = SECTION_MARK.findall(text)
    begins = [n for n, k in marks if k == "begin"]
    assert begins == [n for n, k in marks if k == "end"]  # each section closed, in order
    assert len(begins) == len(set(begins))


def test_the_checks_catch_unsupported_numbers():
    prose = ("- Script: `bench/repair_bench.py`\n- Record: `bench/repair_results.json`\n"
             "- Measured: 2026-11-23 on 2 cores\n- Sample: held-out\n\nrepaired 8/10\n")
    assert section_problems("x", prose) == []
    assert "names no raw record (JSON or Parquet)" in section_problems("x", prose.replace("repair_results", "gone")
                                                                       .replace(".json", ".md"))
    assert "record bench/nowhere.json does not exist" in section_problems(
        "x", prose.replace("bench/repair_results.json", "bench/nowhere.json"))
    assert "does not say whether it is in-sample or held-out" in section_problems(
        "x", prose.replace("held-out", "whatever"))
    assert "script bench/nothing.py does not exist" in section_problems(
        "x", prose.replace("bench/repair_bench.py", "bench/nothing.py"))
    assert section_problems("x", prose.replace("`bench/repair_bench.py`", "`python -m bench.repair_bench`")) == []
    assert "script bench/nothing.py does not exist" in section_problems(
        "x", prose.replace("`bench/repair_bench.py`", "`python -m bench.nothing`"))
    history = "**No record; not a result.** It took 1615 s and fixed 12/19 at 0.7925.\n"
    problems = section_problems("x", history)
    assert problems and "1615 s" in problems[0] and "12/19" in problems[0]
    assert section_problems("x", "**No record; not a result.** Passive waiting used less CPU.\n") == []


def _bench_module(name: str, monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # bench scripts default it on import
    return importlib.import_module(f"bench.{name}")


def _section(name: str) -> str:
    text = RESULTS.read_text()
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    if begin not in text:
        pytest.skip(f"section {name} not in RESULTS.md")
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


@pytest.mark.parametrize(("section", "record"), [
    ("repair", "repair_results.json"), ("repair-image", "repair_results_image.json"),
    ("repair-sentiment", "repair_results_sentiment.json")])
def test_repair_sections_are_their_records_rendered(section, record, monkeypatch, tmp_path):
    rb = _bench_module("repair_bench", monkeypatch, tmp_path)
    data = json.loads((REPO_ROOT / "bench" / record).read_text())
    assert _section(section) == rb.render(data).strip()


@pytest.mark.parametrize("record", ["repair_results.json", "repair_results_image.json",
                                    "repair_results_sentiment.json"])
def test_repair_records_count_only_full_runs_that_scored(record):
    data = json.loads((REPO_ROOT / "bench" / record).read_text())
    for r in data["rows"]:
        if "full_run_ok" not in r:  # not re-scored (yet): its section says "dry-run based"
            continue
        assert r["fixed"] == bool(r["dry_run_ok"] and r["full_run_ok"]), r["name"]
        if r["fixed"]:
            assert isinstance(r["full_run_metric"], float) and r["full_run_error"] is None, r["name"]
        if not r["dry_run_ok"]:
            assert not r["full_run_ok"], r["name"]  # no full run without a passing dry run


def test_independence_section_is_its_record_rendered(monkeypatch, tmp_path):
    ib = _bench_module("independence_bench", monkeypatch, tmp_path)
    rec = json.loads((REPO_ROOT / "bench" / "records" / "independence.json").read_text())
    labels = {p["id"]: p for p in ib.load_pairs()}
    assert [p["id"] for p in rec["pairs"]] == list(labels)  # one cosine per labelled pair, same order
    assert all(p["duplicate"] == bool(labels[p["id"]]["duplicate"]) for p in rec["pairs"])
    assert _section("independence") == ib.render(rec).strip()


def test_make_bench_renders_a_section_the_records_check_accepts(monkeypatch, tmp_path):
    """`make bench` writes section make-bench from its record; what it writes must pass the
    same checks as the committed sections (a synthetic record: the real one needs the LLM)."""
    rb = _bench_module("run_bench", monkeypatch, tmp_path)
    rec = {"script": "bench/run_bench.py", "date": "2026-11-23", "machine": "2 cores (test), 8 GiB, Python 3.11",
           "topic": "pointcloud_classification", "rounds": 2,
           "baseline": [{"run": i, "wall_s": 30.0 + i, "exit_code": 0, "metric": "accuracy", "value": 0.79,
                         "load": 1.0} for i in (1, 2, 3)],
           "loop": {"model": "m", "wall_s": 100.0, "exit_code": 0, "stop_reason": None,
                    "stages": [{"partition": "r1|pointcloud_classification", "asset": "ideas", "seconds": 5.0,
                                "llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2}]}}
    body = rb.render(rec)
    head, _, rest = body.partition("\n")
    assert head == "## `make bench`: the shipped topic's baseline and a whole loop"
    # the record named does not exist in a test: every other check passes
    assert section_problems(head, rest) == ["record bench/records/make_bench.json does not exist"]
    assert "median 32.0 s over 3 runs" in body and "(the same every run)" in body
    assert "<!-- bench:make-bench:begin -->" in RESULTS.read_text()  # the section make bench rewrites exists


def test_topics_section_is_its_record_rendered(monkeypatch, tmp_path):
    tb = _bench_module("topics_bench", monkeypatch, tmp_path)
    rec = json.loads((REPO_ROOT / "bench" / "records" / "topics.json").read_text())
    assert {r["topic"] for r in rec["rows"]} <= set(tb.TOPICS)
    assert _section("topics") == tb.render(rec).strip()


def test_embed_parallel_section_is_its_record_rendered(monkeypatch, tmp_path):
    eb = _bench_module("embed_parallel_bench", monkeypatch, tmp_path)
    rec = json.loads((REPO_ROOT / "bench" / "records" / "embed_parallel.json").read_text())
    assert [b["workers"] for b in rec["builds"]] == list(eb.WORKERS)
    assert all(len(b["chunk_written_s"]) == b["chunks"] == -(-rec["n"] // rec["chunk"]) for b in rec["builds"])
    assert _section("embed_parallel") == eb.render(rec).strip()


def test_ann_real_section_is_its_record_rendered(monkeypatch, tmp_path):
    ab = _bench_module("ann_real_bench", monkeypatch, tmp_path)
    rec = json.loads((REPO_ROOT / "bench" / "records" / "ann_real.json").read_text())
    sizes = [s["n"] for s in rec["sizes"]]
    assert sizes == sorted(sizes) and sizes[-1] == rec["papers"]
    assert all(0 <= q["recall@10"] <= 1 for s in rec["sizes"] for q in s["queries"].values())
    assert _section("ann_real") == ab.render(rec).strip()
