"""bench/debug_bench.py's pure parts: the RESULT line, the tolerance, and how a variant is judged."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.debug_bench import close_enough, judge, parse_result, render


def test_the_last_result_line_is_the_result():
    assert parse_result("epoch 1\nRESULT accuracy=0.5\nRESULT accuracy=0.9473\n") == ("accuracy", 0.9473)
    assert parse_result("RESULT mse=2.1e-2") == ("mse", 0.021)
    assert parse_result("accuracy 0.9\n") is None


def test_a_result_counts_within_five_percent_or_two_hundredths():
    assert close_enough(0.95, 0.96) and not close_enough(0.80, 0.96)
    assert close_enough(0.030, 0.021) and not close_enough(0.050, 0.021)


def _variant():
    return {"name": "v", "base": "a.py", "kind": "dtype error"}


def test_a_variant_the_debugger_did_not_fix_is_not_run_again():
    out = {"fixed": False, "repairs": 5, "per_attempt": [{"error": "RuntimeError: x", "fix_status": "no_op"}]}
    row = judge(_variant(), {"out": out, "wall_s": 3.0, "final": None}, ("accuracy", 0.9), 60)
    assert not row["repaired"] and row["full_run"] is None and row["last_error"] == "RuntimeError: x"


def test_a_fix_that_changes_the_result_is_not_a_repair(tmp_path: Path, monkeypatch):
    import bench.debug_bench as db

    final = tmp_path / "final.py"
    final.write_text("print('RESULT accuracy=0.5')\n")
    monkeypatch.setattr(db, "run_script", lambda folder, script, timeout_s: {
        "exit_code": 0, "timed_out": False, "result": ("accuracy", 0.5), "seconds": 1.0, "stderr_tail": ""})
    out = {"fixed": True, "repairs": 1, "per_attempt": [{"error": "E"}, {"error": None}]}
    row = judge(_variant(), {"out": out, "wall_s": 3.0, "final": final}, ("accuracy", 0.9), 60)
    assert row["debug_says_fixed"] and not row["repaired"]
    assert "| v | dtype error | no (accuracy 0.5) | - |" in render({
        "suite": "scripts_dev", "held_out": False, "date": "d", "machine": "m", "attempts": 5, "repaired": 0,
        "total": 1, "rows": [row], "bases": {"a.py": {"result": ["accuracy", 0.9]}}})


def test_a_run_cut_off_midway_resumes_after_the_last_variant_it_recorded(tmp_path: Path, monkeypatch):
    import json

    import bench.debug_bench as db

    variants = [{"name": n, "base": "a.py", "kind": "k", "base_code": "print('RESULT r=1')\n", "code": "x"}
                for n in ("one", "two", "three")]
    monkeypatch.setattr(db, "load_script_suite", lambda suite: variants)
    monkeypatch.setattr(db, "run_script", lambda folder, script, timeout_s: {"result": ("r", 1.0), "seconds": 1})
    monkeypatch.setenv("RESEARCHLOOP_DEBUG_BENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # no local server to stop
    ran = []

    def debug(v, work, attempts, timeout_s, env):
        if v["name"] == "three" and not ran.count("three"):
            ran.append("three")
            raise KeyboardInterrupt  # the run is cut off at the third variant
        ran.append(v["name"])
        return {"out": {"fixed": False}, "wall_s": 1.0, "final": None}

    monkeypatch.setattr(db, "debug_variant", debug)
    out = tmp_path / "rec.json"
    with pytest.raises(KeyboardInterrupt):
        db.measure("s", 5, set(), 60, partial=out)
    saved = json.loads(out.read_text())
    assert [r["name"] for r in saved["rows"]] == ["one", "two"] and saved["complete"] is False
    rec = db.measure("s", 5, set(), 60, partial=out)
    assert ran == ["one", "two", "three", "three"]  # one and two were not run again
    assert [r["name"] for r in rec["rows"]] == ["one", "two", "three"] and rec["complete"] and rec["total"] == 3
