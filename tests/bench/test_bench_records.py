"""No benchmark figure without a committed record.

bench/RESULTS.md is the headline table and the index; the sections live on one page per registered
benchmark (bench/results/NAME.md) and in the archive (bench/results/archive.md). Every `## `
section of a page either names the script that measured it and an existing raw record (JSON or
Parquet), says when and on what machine, and whether its figures are in-sample or held-out; or is
history marked "no record; not a result" with no figures left in it. A script since removed from
the tree is named with a commit where git still has it. Sections whose script renders them from the
record are checked to be exactly that rendering, so a figure typed in by hand, or a record changed
without re-rendering, fails; so is bench/RESULTS.md, computed from the records and pages. The repair
records' rule: a variant counts as repaired only when its full run scored."""
from __future__ import annotations

import importlib
import importlib.util
import json
import re

import pytest

from bench import REGISTRY
from bench.common import PAGES, RESULTS, find_section
from resources.paths import REPO_ROOT
from tests.support.bench_records import (
    FIGURE,
    _git,
    section_problems,
    tracked,
)

SECTION_MARK = re.compile(r"<!-- bench:([\w-]+):(begin|end) -->")
PAGE_FILES = sorted(PAGES.glob("*.md"))


def sections(text: str) -> dict[str, str]:
    """`## ` heading -> its text up to the next heading (the page's own introduction excluded)."""
    parts = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    out = {}
    for p in parts:
        head, _, body = p.partition("\n")
        out[head.strip()] = SECTION_MARK.sub("", body)
    return out


SECTIONS = {(page.name, head): body for page in PAGE_FILES for head, body in sections(page.read_text()).items()}


@pytest.mark.parametrize("key", list(SECTIONS), ids=[f"{p}: {h[:60]}" for p, h in SECTIONS])
def test_section_names_its_script_and_record(key):
    assert section_problems(key[1], SECTIONS[key]) == []


def test_every_benchmark_has_its_page_and_every_page_a_benchmark():
    assert {p.stem for p in PAGE_FILES} == {*REGISTRY, "archive"}
    for name, b in REGISTRY.items():
        assert importlib.util.find_spec(b.module) is not None, b.module
        text = (PAGES / f"{name}.md").read_text()
        assert text.startswith(f"# {b.title}\n") and f"`python -m bench {name}`" in text
        assert SECTION_MARK.search(text), f"{name}: no section yet"


def test_pages_have_balanced_markers_and_each_section_once():
    names = []
    for page in PAGE_FILES:
        marks = SECTION_MARK.findall(page.read_text())
        begins = [n for n, k in marks if k == "begin"]
        assert begins == [n for n, k in marks if k == "end"], page.name  # each section closed, in order
        names += begins
    assert len(names) == len(set(names)) and len(names) >= 30
    assert not [h for _, h in SECTIONS if re.search(r"\(issue \d+", h)]   # headings say what, not which ticket


def test_results_md_is_the_headline_and_index_of_the_records_and_pages():
    from bench.results import HEADLINE, NOT_RECORDED, render_index

    assert RESULTS.read_text() == render_index()  # re-make it with `python -m bench --index`
    for figure in (fn() for fn in HEADLINE):
        assert figure.records and figure.sections, figure.question
        for s in figure.sections:
            assert find_section(s) is not None, s
        if figure.answer.startswith(NOT_RECORDED):
            assert not FIGURE.findall(figure.answer), figure.answer
            continue
        for r in figure.records:
            assert (REPO_ROOT / r).is_file() and tracked(r) is not False, r
    # every link of RESULTS.md leads to a page and a heading on it
    from bench.results import page_sections, slug

    for page, anchor in re.findall(r"\]\(results/([\w-]+\.md)#([^)]+)\)", RESULTS.read_text()):
        assert anchor in {slug(h) for _, h in page_sections(PAGES / page)}, (page, anchor)


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


def test_a_removed_script_is_named_with_a_commit_that_has_it():
    if tracked("bench/repair_bench.py") is None:
        pytest.skip("not a git checkout")
    head = _git("rev-parse", "HEAD").stdout.decode().strip()
    prose = ("- Script: `bench/gone_probe.py` (removed from the tree; at commit `{c}`)\n"
             "- Record: `bench/repair_results.json`\n- Measured: 2026-11-23 on 2 cores\n- Sample: held-out\n")
    assert section_problems("x", prose.format(c=head)) == [
        f"script bench/gone_probe.py is at none of the commits named ({head})"]
    ok = prose.replace("bench/gone_probe.py", "bench/repair_bench.py").format(c=head)
    assert section_problems("x", ok) == []
    assert section_problems("x", prose.replace("at commit `{c}`", "").format(c=head)) == [
        "script bench/gone_probe.py does not exist"]


def _bench_module(name: str, monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # bench scripts default it on import
    return importlib.import_module(f"bench.{name}")


def _section(name: str) -> str:
    found = find_section(name)
    if found is None:
        pytest.skip(f"section {name} is on no page")
    return found[1]


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


def test_topics_section_is_its_record_rendered(monkeypatch, tmp_path):
    tb = _bench_module("topics_bench", monkeypatch, tmp_path)
    rec = json.loads((REPO_ROOT / "bench" / "records" / "topics.json").read_text())
    assert {r["topic"] for r in rec["rows"]} <= set(tb.TOPICS)
    assert _section("topics") == tb.render(rec).strip()


def test_verdicts_section_is_its_record_rendered(monkeypatch, tmp_path):
    nb = _bench_module("null_bench", monkeypatch, tmp_path)
    assert _section("verdicts") == nb.report(json.loads((REPO_ROOT / "bench" / "null_results.json").read_text()))


def test_sandbox_section_is_its_record_rendered(monkeypatch, tmp_path):
    sb = _bench_module("sandbox_bench", monkeypatch, tmp_path)
    assert _section("sandbox") == sb.render(json.loads(sb.RECORD.read_text())).strip()


def test_hostile_outcomes_are_read_from_pytests_report():
    from bench.sandbox_bench import junit_outcomes, render_hostile

    xml = ('<testsuites><testsuite name="pytest">'
           '<testcase classname="tests.resources.sandbox.test_hostile" name="test_a"/>'
           '<testcase classname="tests.resources.sandbox.test_hostile" name="test_b">'
           '<failure message="assert CONNECTED">x'
           '</failure></testcase>'
           '<testcase classname="tests.resources.sandbox.test_hostile" name="test_c">'
           '<skipped message="needs root"/></testcase>'
           '</testsuite></testsuites>')
    tests = junit_outcomes(xml)
    assert [(t["name"], t["outcome"], t["message"]) for t in tests] == [
        ("test_a", "passed", ""), ("test_b", "failed", "assert CONNECTED"), ("test_c", "skipped", "needs root")]
    h = {"suite": "tests/resources/sandbox/test_hostile.py", "date": "2026-11-28", "machine": "2 cores (test)",
         "wall_s": 3.0, "ran": 2, "passed": 1, "failed": 1, "skipped": 1, "tests": tests}
    text = "\n".join(render_hostile(h))
    assert "**1/2 contained**, 1 not, 1 skipped" in text and "| test_b | failed: assert CONNECTED |" in text


def test_scaleout_section_is_its_record_rendered():
    """The section "scale-out" is bench/records/scaleout.json rendered, and its model adds up."""
    from bench.scaleout_bench import model_round, render

    rec = json.loads((REPO_ROOT / "bench" / "records" / "scaleout.json").read_text())
    assert _section("scale-out") == render(rec).strip()
    assert all(a["ok"] for c in rec["configs"].values() for a in c["attempts"])
    assert model_round(40.0, 1.0, gpus=8, ideas=8, chain=3) == 123.0      # one wave of chains
    assert model_round(40.0, 1.0, gpus=8, ideas=9, chain=3) == 246.0      # a ninth idea waits for a free GPU


@pytest.mark.parametrize(("module", "record", "section"), [
    ("effectiveness_bench", "effectiveness", "effectiveness"),
    ("effectiveness_bench", "effectiveness_heldout", "effectiveness_heldout"),
    ("effectiveness_bench", "effectiveness_probes", "effectiveness_probes"),
    ("effectiveness_bench", "effectiveness_carry", "effectiveness_carry"),
    ("effectiveness_bench", "effectiveness_mixed", "effectiveness_mixed"),
    ("sources_bench", "sources", "sources"),
    ("implementation_bench", "implementation", "implementation"),
    ("ranking_bench", "ranking_loto", "ranking")])
def test_rendered_sections_are_their_records_rendered(module, record, section, monkeypatch, tmp_path):
    from bench.common import read_record

    mod = _bench_module(module, monkeypatch, tmp_path)
    assert _section(section) == mod.render(read_record(record)).strip()
