"""Resume: `researchloop run` killed with SIGKILL in the middle of a round's experiments, then
run again, finishes the round without asking the LLM anything it had already answered and
without re-running the experiments that had finished (everything real but the LLM, which is
the scripted fake server, so the calls can be counted)."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from resources.llm import request_key
from resources.paths import REPO_ROOT

TOPIC = "toy_classification"


def _start_cli(env):
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "run", "--topic", TOPIC, "--rounds", "1",
                             "--parallel", "1"], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _logs(dir_) -> int:
    """Experiment runs made in a workspace folder (the runner writes one stdout log per run)."""
    return len(list((dir_ / "logs").glob("*.stdout.log"))) if (dir_ / "logs").exists() else 0


@pytest.mark.slow
def test_killed_round_resumes_without_repeating_work(home, fake_llm):
    dh = home / "dagster_home"
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole", "DAGSTER_HOME": str(dh)}
    asked: list[str] = []  # cache key of every request the server answered, in order
    lock = threading.Lock()
    answer = fake_llm.script.answer

    def recording(req):
        with lock:
            asked.append(request_key(req))
        return answer(req)

    fake_llm.script.answer = recording

    proc = _start_cli(env)
    ws = dh / "workspaces" / TOPIC / "r1"
    deadline = time.monotonic() + 600
    finished_idea = None
    while time.monotonic() < deadline and proc.poll() is None:
        done = sorted(ws.glob("*/result-*.json")) if ws.exists() else []
        if done:  # one idea's experiment has finished, the round has not
            finished_idea = done[0].parent
            break
        time.sleep(0.2)
    assert finished_idea is not None, "no experiment finished before the deadline (or the run ended early)"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert not (dh / "records" / "feedback_summary").exists(), "killed too late: the round had finished"

    cached_at_kill = {p.stem for p in (dh / "llm_cache").glob("*/*.json")}
    asked_before = len(asked)
    runs_before = {d.name: _logs(d) for d in ws.iterdir() if d.is_dir()}
    baseline_runs = _logs(dh / "workspaces" / TOPIC / "baseline")
    assert asked_before > 0 and cached_at_kill and baseline_runs == 1

    proc = _start_cli(env)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    assert "verdicts against the baseline" in out

    repeated = [k for k in asked[asked_before:] if k in cached_at_kill]
    assert not repeated, f"{len(repeated)} answered requests were asked again"
    assert _logs(dh / "workspaces" / TOPIC / "baseline") == baseline_runs  # the baseline is not re-run
    assert _logs(finished_idea) == runs_before[finished_idea.name]  # nor the finished idea's experiment
    assert (dh / "records" / "feedback_summary" / TOPIC / "r1.parquet").exists()
