"""Traceback-guided debugging (DOLPHIN 3.2): the repair loop in its three modes, the honesty
check inside it, and `researchloop debug` end to end (sandboxed runs are real; the LLM is a
scripted fake object or the scripted OpenAI-compatible server)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from assets.editing.resampling import NO_OP_RESAMPLES, RESAMPLE_TEMPERATURE
from assets.editing.tracebacks import MARK, format_frames, own_frames
from assets.run_results.repair_search import RepairPolicy, default_repair_format, run_with_repair
from resources.runner import Runner
from tests.support.debugging import ANALYSIS, BROKEN, FIX, FakeLLM, _debug, _env, target
from tests.support.fake_llm import FakeLLMServer

# "runs" by no longer computing or writing anything: must be rejected
DISHONEST = '```python\nif __name__ == "__main__":\n    print("total", 12)\n```'


@pytest.fixture
def script(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "calc.py").write_text(BROKEN)
    return folder / "calc.py"


def repair_loop(script, llm, tmp_path, **policy):
    """The repair search on `script`; `policy`: RepairPolicy fields (default: 2 repairs, functions format)."""
    return run_with_repair(target(script), script.read_text(), runner=Runner(), llm=llm, workdir=tmp_path / "work",
                           idea_id="calc", log=lambda s: None,
                           policy=RepairPolicy(**{"max_repairs": 2, "edit_format": "functions", **policy}))


# -- traceback parsing: frames two levels deep, the reduced traceback ---------------------

def test_frames_two_levels_deep_and_reduced_traceback(script, tmp_path):
    p = subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True, text=True)
    frames = own_frames(p.stderr, script.parent)
    assert [(f.function, f.line) for f in frames] == [("<module>", 13), ("total", 9), ("scale", 5)]
    text = format_frames(frames, "NameError: name 'factr' is not defined")
    assert text.splitlines()[-1] == "NameError: name 'factr' is not defined"
    assert '  File "calc.py", line 5, in scale\n    return sum(values) * factr' in text


# -- the repair loop ----------------------------------------------------------------------

def test_structure_mode_analyses_then_fixes(script, tmp_path):
    llm = FakeLLM()
    res = repair_loop(script, llm, tmp_path, mode="structure")
    assert res.status == "success" and res.n_attempts == 2 and res.metric_value is None
    assert llm.stages() == ["debug_analysis", "debug"]
    assert llm.items == ["calc", "calc"]  # both calls accounted to the run's idea
    first = res.attempts[0]
    assert first.error.startswith("NameError: name 'factr' is not defined") and first.fix_status == "ok"
    assert first.analysis == ANALYSIS and "+    return sum(values) * factor" in first.fix_diff
    analysis_prompt, fix_prompt = llm.prompt("debug_analysis"), llm.prompt("debug")
    assert "Do not write code yet" in analysis_prompt
    # the reduced traceback, the marked local code structure and the analysis reach the fix
    assert "the script's own frames" in fix_prompt and "Traceback (most recent call last)" not in fix_prompt
    assert f"\n    return sum(values) * factr{MARK}" in fix_prompt
    assert "def total(values):" in fix_prompt and ANALYSIS in fix_prompt
    assert "complete new version of a function" in fix_prompt  # the functions format
    assert "final_info.json" not in fix_prompt  # a plain script: generic rules
    assert "total 12" in res.attempts[-1].stdout_tail and "* factor" in res.final_code


def test_traceback_mode_one_call_with_the_raw_traceback(script, tmp_path):
    llm = FakeLLM()
    res = repair_loop(script, llm, tmp_path, mode="traceback")
    assert res.status == "success" and llm.stages() == ["debug"]
    prompt = llm.prompt()
    assert "Traceback (most recent call last)" in prompt and "local code structure" not in prompt
    assert res.attempts[0].analysis == ""


def test_error_mode_shows_only_the_error_line(script, tmp_path):
    llm = FakeLLM()
    res = repair_loop(script, llm, tmp_path, mode="error")
    assert res.status == "success" and llm.stages() == ["debug"]
    prompt = llm.prompt()
    assert "NameError: name 'factr' is not defined" in prompt
    assert "File " not in prompt and "local code structure" not in prompt


def test_an_unknown_mode_is_refused(script, tmp_path):
    llm = FakeLLM()
    with pytest.raises(ValueError, match="unknown debugging mode"):
        repair_loop(script, llm, tmp_path, mode="vibes")


def test_dishonest_fix_is_a_failed_repair_and_never_runs(script, tmp_path):
    llm = FakeLLM(fix=DISHONEST)
    res = repair_loop(script, llm, tmp_path, mode="traceback")
    assert res.status == "failed" and res.n_attempts == 1
    a = res.attempts[0]
    assert a.fix_status == "dishonest" and "removes the writing of the results" in a.fix_error
    assert "the repair failed" in res.reason and "dishonest" in res.reason
    # with the check off the same answer "works": that is what the check is for
    res = repair_loop(script, FakeLLM(fix=DISHONEST), tmp_path, mode="traceback", honesty=False)
    assert res.status == "success"


def test_unusable_fix_stops_with_its_status(script, tmp_path):
    res = repair_loop(script, FakeLLM(fix="I am not sure what is wrong."), tmp_path, mode="traceback")
    assert res.status == "failed" and res.attempts[0].fix_status == "not_applied"


def test_budget_bounds_the_repairs(script, tmp_path):
    still_broken = "```python\ndef scale(values, factor):\n    return sum(values) * fctr\n```"
    llm = FakeLLM(fix=still_broken)
    res = repair_loop(script, llm, tmp_path, mode="traceback", max_repairs=1)
    assert res.status == "failed" and res.n_attempts == 2 and llm.stages() == ["debug"]
    assert "fctr" in res.attempts[1].error and res.attempts[1].fix_status is None


def test_no_repairs_needs_no_llm(script, tmp_path):
    res = repair_loop(script, None, tmp_path, max_repairs=0)
    assert res.status == "failed" and res.n_attempts == 1 and "factr" in res.reason


def test_unparsable_file_is_rewritten_whole(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "s.py").write_text("print('a'\n")
    whole = "```python\nprint('a')\n```"
    llm = FakeLLM(fix=whole)
    res = run_with_repair(target(folder / "s.py"), "print('a'\n", runner=Runner(), llm=llm, workdir=tmp_path / "w",
                          idea_id="s", policy=RepairPolicy(max_repairs=1, edit_format="functions", mode="traceback"),
                          log=lambda s: None)
    assert res.status == "success" and "SyntaxError" in res.attempts[0].error
    assert "Return the complete new s.py" in llm.prompt()


def test_env_reaches_the_script_and_attempts_are_reported(tmp_path):
    folder = tmp_path / "e"
    folder.mkdir()
    code = "import os\nprint('value', os.environ['RL_TEST_VALUE'])\n"
    (folder / "e.py").write_text(code)
    seen = []
    res = run_with_repair(target(folder / "e.py"), code, runner=Runner(), workdir=tmp_path / "w", idea_id="e",
                          log=lambda s: None, env={"RL_TEST_VALUE": "42"}, on_attempt=seen.append)
    assert res.status == "success" and "value 42" in res.attempts[0].stdout_tail
    assert seen == res.attempts


def test_default_repair_format():
    assert default_repair_format(FakeLLM(local=True, edit_format="auto"), "whole") == "functions"
    assert default_repair_format(FakeLLM(local=False, edit_format="auto"), "search_replace") == "search_replace"
    assert default_repair_format(FakeLLM(local=True, edit_format="whole"), "whole") == "whole"
    assert default_repair_format(None, "whole") == "whole"


# -- researchloop debug -------------------------------------------------------------------

class DebugScript:
    """Scripted answers for the debugging prompts; counts requests."""

    def __init__(self):
        self.requests: list[str] = []

    @property
    def total(self) -> int:
        return len(self.requests)

    def answer(self, req: dict) -> str:
        user = req["messages"][-1]["content"]
        self.requests.append(user)
        if "Do not write code yet" in user:
            return ANALYSIS
        if "failed with" in user and "factr" in user:
            return FIX
        return "I do not understand."


@pytest.fixture
def debug_server():
    with FakeLLMServer(DebugScript()) as server:
        yield server


def test_debug_cli_repairs_and_writes_a_copy(script, tmp_path, debug_server):
    # --no-suggestions: the message names the fix (Did you mean: 'factor'?), which would go first
    r = _debug(str(script), "--json", "--edit-format", "functions", "--max-attempts", "2", "--no-suggestions",
               env=_env(tmp_path, debug_server))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["fixed"] is True and out["attempts"] == 2 and out["repairs"] == 1
    assert out["exit_code"] == 0 and out["timed_out"] is False
    assert "total 12" in out["stdout_tail"] and isinstance(out["stderr_tail"], str)
    first = out["per_attempt"][0]
    assert first["error"].startswith("NameError: name 'factr' is not defined") and first["fix_status"] == "ok"
    assert first["frames"] == ["calc.py:13 in <module>", "calc.py:9 in total", "calc.py:5 in scale"]
    assert first["analysis"] == ANALYSIS and out["per_attempt"][1]["error"] is None
    assert out["mode"] == "structure" and out["edit_format"] == "functions"
    fixed = script.with_name("calc.fixed.py")
    assert out["output"] == str(fixed) and "* factor" in fixed.read_text()
    assert script.read_text() == BROKEN  # the original is never overwritten by default
    assert debug_server.script.total == 2  # analysis + fix
    assert "attempt 1: NameError" in r.stderr  # progress goes to stderr


def test_debug_cli_zero_attempts_just_runs_once(script, tmp_path):
    r = _debug(str(script), "--max-attempts", "0", "--json", env=_env(tmp_path))
    assert r.returncode == 1, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["fixed"] is False and out["attempts"] == 1 and out["repairs"] == 0
    assert out["exit_code"] == 1 and out["timed_out"] is False
    assert "NameError" in out["stderr_tail"] and out["output"] is None
    assert out["per_attempt"][0]["fix_status"] is None and out["llm"]["llm_calls"] == 0
    assert not script.with_name("calc.fixed.py").exists()


def test_debug_cli_traceback_mode_timeout_and_output(script, tmp_path, debug_server):
    (script.parent / "slow.py").write_text("import time\ntime.sleep(30)\n")
    r = _debug(str(script.parent / "slow.py"), "--max-attempts", "0", "--timeout", "1", "--json", env=_env(tmp_path))
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["timed_out"] is True and out["exit_code"] is None
    dest = tmp_path / "out" / "calc_ok.py"
    r = _debug(str(script), "--mode", "traceback", "--edit-format", "functions", "--output", str(dest), "--json",
               "--no-suggestions", env=_env(tmp_path, debug_server))
    out = json.loads(r.stdout)
    assert out["fixed"] is True and out["mode"] == "traceback" and out["output"] == str(dest)
    assert debug_server.script.total == 1 and "* factor" in dest.read_text()
    assert "Traceback (most recent call last)" in debug_server.script.requests[0]


def test_debug_cli_refuses_without_a_sandbox_unless_opted_out(script, tmp_path):
    no_bwrap = {"PATH": str(tmp_path / "empty-bin")}  # bwrap cannot be found
    r = _debug(str(script), "--max-attempts", "0", env=_env(tmp_path, **no_bwrap))
    assert r.returncode == 2 and "bubblewrap" in r.stderr and "RESEARCHLOOP_UNSANDBOXED=1" in r.stderr
    r = _debug(str(script), "--max-attempts", "0", "--json",
               env=_env(tmp_path, **no_bwrap, RESEARCHLOOP_UNSANDBOXED="1"))
    assert r.returncode == 1 and json.loads(r.stdout)["per_attempt"][0]["error"].startswith("NameError")
    assert "UNSANDBOXED" in r.stderr


def test_debug_cli_bad_input(tmp_path):
    r = _debug(str(tmp_path / "missing.py"), "--json", env=_env(tmp_path))
    assert r.returncode == 2 and "no such file" in json.loads(r.stdout)["error"]


def test_returning_the_faulty_line_unchanged_is_a_no_op_that_says_why(script, tmp_path):
    unchanged = "```python\ndef scale(values, factor):\n    return sum(values) * factr\n```"
    res = repair_loop(script, FakeLLM(fix=unchanged), tmp_path, mode="traceback")
    a = res.attempts[0]
    assert a.fix_status == "no_op" and "fails again with: NameError: name 'factr'" in a.fix_error


def test_a_no_op_fix_is_asked_again_sampled(script, tmp_path):
    """The greedy answer repeats the faulty line; a sampled re-ask of the same question fixes it."""
    unchanged = "```python\ndef scale(values, factor):\n    return sum(values) * factr\n```"
    llm = FakeLLM(fix=[unchanged, FIX])
    res = repair_loop(script, llm, tmp_path, mode="traceback")
    assert res.status == "success" and res.attempts[0].fix_status == "ok" and res.attempts[0].fix_resamples == 1
    assert llm.stages() == ["debug", "debug"] and llm.requests[0][1] == llm.requests[1][1]   # the same question
    assert llm.sampling[0] == (None, None) and llm.sampling[1] == (RESAMPLE_TEMPERATURE, 1)
    # always unchanged: the greedy call and NO_OP_RESAMPLES sampled ones; that repair brought nothing
    # usable, so the second repair of the budget asks again, sampled with new seeds, without re-running
    llm = FakeLLM(fix=unchanged)
    res = repair_loop(script, llm, tmp_path / "again", mode="traceback", max_repairs=2)
    assert res.status == "failed" and res.n_attempts == 1 and res.attempts[0].fix_status == "no_op"
    per_round = 1 + NO_OP_RESAMPLES
    assert llm.stages() == ["debug"] * 2 * per_round and res.attempts[0].fix_rounds == 2
    assert res.attempts[0].fix_resamples == 2 * per_round - 1
    assert [s for _, s in llm.sampling] == [None, *range(1, 2 * per_round)]
    assert {t for t, _ in llm.sampling[1:]} == {RESAMPLE_TEMPERATURE}
    # a budget of one repair: one round only
    llm = FakeLLM(fix=unchanged)
    repair_loop(script, llm, tmp_path / "once", mode="traceback", max_repairs=1)
    assert len(llm.stages()) == per_round
    # an answer that is wrong in another way is not resampled within its repair; the next repair of
    # the budget asks once more, sampled
    llm = FakeLLM(fix=DISHONEST)
    res = repair_loop(script, llm, tmp_path / "dishonest", mode="traceback", max_repairs=2)
    assert llm.stages() == ["debug", "debug"] and llm.sampling[1] == (RESAMPLE_TEMPERATURE, per_round)
    assert res.attempts[0].fix_status == "dishonest" and res.n_attempts == 1


# -- a fix that breaks the script is undone ------------------------------------------------

def test_written_lines_and_broken_by_fix():
    from assets.run_results.repair_search import broken_by_fix, written_lines
    from schemas.records import Attempt, TraceFrame

    old, new = "a = 1\nb = 2\nc = 3\n", "a = 1\nb = two\nextra = 0\nc = 3\n"
    assert written_lines(old, new) == {2, 3}

    def run(error, line, file="x.py"):
        return Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
                       frames=[TraceFrame(file=file, line=line, function="<module>", code="")])

    before = run("ValueError: bad", 3)
    assert broken_by_fix(before, run("NameError: name 'two' is not defined", 2), old, new, "x.py")
    assert not broken_by_fix(before, run("NameError: name 'two' is not defined", 4), old, new, "x.py")  # not its line
    assert not broken_by_fix(before, run("RuntimeError: shapes", 2), old, new, "x.py")  # an error moved on
    assert not broken_by_fix(before, run("NameError: name 'two' is not defined", 2, "y.py"), old, new, "x.py")
    assert not broken_by_fix(before, run("ValueError: bad", 2), old, new, "x.py")  # the same error


def test_a_fix_that_breaks_the_script_is_undone_and_named_in_the_next_prompt(script, tmp_path):
    breaking = "```python\ndef total(values):\n    return scale(valus, 2)\n```"
    llm = FakeLLM(fix=[breaking, FIX])
    res = repair_loop(script, llm, tmp_path, mode="structure", max_repairs=2)
    assert res.status == "success" and res.n_attempts == 3
    first, second = res.attempts[0], res.attempts[1]
    assert not first.reverted and second.reverted
    assert "name 'valus' is not defined" in second.error
    fixes = [m for s, m in llm.requests if s == "debug"]
    shown = fixes[1][0]["content"]  # the code the second fix is asked for: from before the breaking fix
    assert "scale(values, 2)" in shown and "valus" not in shown
    asked = fixes[1][-1]["content"]
    assert "tried already and made things worse" in asked and "scale(valus, 2)" in asked
    assert "name 'factr' is not defined" in asked  # the error of the code it fixes, not the broken fix's
    assert "* factor" in res.final_code and "scale(values, 2)" in res.final_code


def test_a_failure_asked_again_is_analysed_once(script, tmp_path):
    unchanged = "```python\ndef scale(values, factor):\n    return sum(values) * factr\n```"
    llm = FakeLLM(fix=unchanged)
    res = repair_loop(script, llm, tmp_path, mode="structure", max_repairs=2)
    assert res.attempts[0].fix_rounds == 2 and llm.stages().count("debug_analysis") == 1
    assert llm.stages().count("debug") == 2 * (1 + NO_OP_RESAMPLES)
