"""The researchloop CLI end to end in a subprocess (fake LLM endpoint, everything else real)."""
import os
import subprocess
import sys

from resources.paths import REPO_ROOT


def _cli(*args, env):
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_run_status_lineage(home, fake_llm):
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole"}
    r = _cli("run", "--topic", "toy_classification", "--rounds", "1", "--timings", str(home / "t.json"), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "feedback_summary" in out and "verdicts against the baseline" in out
    assert "decline" in out and "failed" in out  # the table names each idea's verdict
    assert (home / "t.json").exists()

    r = _cli("status", env=env)
    assert r.returncode == 0 and "toy_classification" in r.stdout
    assert "cost USD" in r.stdout and "running or queued runs: 0" in r.stdout
    row = next(l for l in r.stdout.splitlines() if "toy_classification" in l)
    assert int(row.split("│")[7].strip()) > 0  # LLM tokens summed over the round's stages

    r = _cli("lineage", "toy_classification/r1/longer_training_r1", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    for part in ("## filter", "## plan", "## patch", "## attempts", "NameError", "## verdict"):
        assert part in r.stdout, part

    bad = _cli("run", "--topic", "no_such_topic", env=env)
    assert bad.returncode == 2 and "no topic.yaml" in bad.stdout
