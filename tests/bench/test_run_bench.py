"""`make bench` (bench/run_bench.py) writes its raw record, bench/records/make_bench.json, and the
section make-bench rendered from it: after the baseline already (a loop that never ends leaves the
baseline recorded), after a failed loop (its exit code and the end of its output), and after a whole
loop; and the section passes the checks of tests/bench/test_bench_records.py. The real loop needs
the local model for an hour: here the baseline and the loop are stand-ins, then (slow) the real
driver on the toy topic with the scripted fake LLM."""
from __future__ import annotations

import json

import pytest

from bench import run_bench as rb
from bench.common import find_section
from tests.support.bench_records import section_problems

BASELINE = [{"run": i, "wall_s": 30.0 + i, "exit_code": 0, "metric": "accuracy", "value": 0.79, "load": 1.0}
            for i in (1, 2, 3)]
LOOP = {"topic": "pointcloud_classification", "model": "m", "wall_s": 100.0, "exit_code": 0, "stop_reason": "",
        "rounds": [{"round": "r1", "seconds": 90.0}],
        "stages": [{"partition": "r1|pointcloud_classification", "asset": "ideas", "seconds": 5.0, "llm_calls": 1,
                    "prompt_tokens": 10, "completion_tokens": 2}]}


def _run(monkeypatch, tmp_path, loop):
    monkeypatch.delenv("FROM_RECORD", raising=False)
    monkeypatch.setattr(rb, "bench_baseline", lambda topic, runs: BASELINE[:runs])
    monkeypatch.setattr(rb, "bench_loop", loop)
    page = tmp_path / "run.md"
    rc = rb.main(["--topic", "pointcloud_classification", "--rounds", "2"], records=tmp_path, page=page)
    rec = json.loads((tmp_path / "make_bench.json").read_text())
    return rc, rec, page.read_text()


def test_make_bench_writes_its_record_and_the_section_rendered_from_it(monkeypatch, tmp_path):
    rc, rec, page = _run(monkeypatch, tmp_path, lambda topic, rounds: dict(LOOP))
    assert rc == 0 and rec["complete"] and rec["baseline"] == BASELINE and rec["loop"]["stages"] == LOOP["stages"]
    assert rec["script"] == "bench/run_bench.py" and rec["topic"] == "pointcloud_classification" and rec["rounds"] == 2
    body = rb.render(rec)
    assert f"<!-- bench:make-bench:begin -->\n{body}\n<!-- bench:make-bench:end -->" in page
    head, _, rest = body.partition("\n")
    assert head == "## `make bench`: the shipped topic's baseline and a whole loop"
    # the record the section names is the committed one, which a test does not write
    assert [p for p in section_problems(head, rest) if "make_bench.json" not in p] == []
    assert "median 32.0 s over 3 runs" in body and "(the same every run)" in body
    assert "| r1\\|pointcloud_classification | ideas | 5.0 | 1 | 10 | 2 |" in body
    assert find_section("make-bench") is not None  # the committed page holds the section make bench rewrites


def test_a_failed_loop_is_recorded_with_its_output(monkeypatch, tmp_path):
    failed = {"model": "", "stages": [], "rounds": [], "error": "researchloop run exited 1 without writing its timings",
              "output_tail": "Traceback ...\nValueError: boom\n", "wall_s": 3.0, "exit_code": 1}
    rc, rec, page = _run(monkeypatch, tmp_path, lambda topic, rounds: dict(failed))
    assert rc == 1 and not rec["complete"] and rec["loop"]["output_tail"].endswith("boom\n")
    assert "exit code 1" in page and "without writing its timings; the end of its output is in the record" in page


def test_the_baseline_is_recorded_before_the_loop_starts(monkeypatch, tmp_path):
    def interrupted(topic, rounds):
        rec = json.loads((tmp_path / "make_bench.json").read_text())
        assert rec["baseline"] == BASELINE and rec["loop"] is None and not rec["complete"]
        assert "not run" in rb.render(rec)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(monkeypatch, tmp_path, interrupted)
    assert json.loads((tmp_path / "make_bench.json").read_text())["loop"] is None


def test_from_record_re_renders_without_measuring(monkeypatch, tmp_path):
    _run(monkeypatch, tmp_path, lambda topic, rounds: dict(LOOP))
    monkeypatch.setenv("FROM_RECORD", "1")
    monkeypatch.setattr(rb, "bench_baseline", None)   # measuring would fail
    (tmp_path / "run.md").write_text("# run\n")
    assert rb.main([], records=tmp_path, page=tmp_path / "run.md") == 0
    assert "median 32.0 s over 3 runs" in (tmp_path / "run.md").read_text()


@pytest.mark.extended
@pytest.mark.slow
def test_the_real_driver_on_the_toy_topic(home, fake_llm, monkeypatch, tmp_path):
    """The baseline through the Runner and `researchloop run --timings` in a subprocess, one round of
    the toy topic with the fake LLM: the record holds both, and the section its stage table."""
    for k, v in {"OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test", "RESEARCHLOOP_MODEL": "fake-model",
                 "RESEARCHLOOP_EDIT_FORMAT": "whole"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("FROM_RECORD", raising=False)
    page = tmp_path / "run.md"
    rc = rb.main(["--topic", "toy_classification", "--rounds", "1", "--runs", "2"], records=tmp_path, page=page)
    rec = json.loads((tmp_path / "make_bench.json").read_text())
    assert rc == 0 and rec["complete"], rec["loop"].get("output_tail")
    assert [b["exit_code"] for b in rec["baseline"]] == [0, 0] and rec["baseline"][0]["value"] is not None
    loop = rec["loop"]
    assert loop["model"] == "fake-model" and [r["round"] for r in loop["rounds"]] == ["r1"]
    assert {s["asset"] for s in loop["stages"]} >= {"ideas", "feedback_summary"}
    assert rb.render(rec) in page.read_text() and "| r1\\|toy_classification | ideas |" in page.read_text()
