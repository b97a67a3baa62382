"""The researchloop CLI end to end in a subprocess (fake LLM endpoint, everything else real)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from resources.paths import REPO_ROOT


def _cli(*args, env):
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], check=False, cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_run_status_lineage(home, fake_llm):
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole"}
    r = _cli("run", "--topic", "toy_classification", "--rounds", "1", "--parallel", "2",
             "--timings", str(home / "t.json"), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "feedback_summary" in out and "verdicts against the baseline" in out
    assert "decline" in out and "failed" in out  # the table names each idea's verdict
    assert "stopped before r2: round budget spent (1/1)" in out

    # the same jobs the sensors launch: one set-up run, then one run per round (here with the
    # multiprocess executor: --parallel 2; a second round is test_resume's and the stacking tests')
    import dagster as dg

    instance = dg.DagsterInstance.get()  # the conftest's DAGSTER_HOME, which the CLI used
    runs = sorted(instance.get_runs(), key=lambda run: run.tags["dagster/partition"])
    assert [(run.job_name, run.tags["dagster/partition"], run.status) for run in runs] == [
        ("research_round", "r1|toy_classification", dg.DagsterRunStatus.SUCCESS),
        ("topic_setup", "toy_classification", dg.DagsterRunStatus.SUCCESS)]
    assert all(run.tags["researchloop/topic"] == "toy_classification" for run in runs)
    assert "r1|toy_classification" in out and "r1 ok in" in out
    timings = json.loads((home / "t.json").read_text())
    assert [t["run_id"] for t in timings["rounds"]] == [runs[0].run_id]
    assert [(s["partition"], s["asset"]) for s in timings["stages"]][:3] == [
        ("toy_classification", "topic_brief"), ("toy_classification", "baseline_results"),
        ("r1|toy_classification", "round_reference")]
    assert len(timings["stages"]) == 2 + 10 and all(s["ok"] and s["seconds"] > 0 for s in timings["stages"])

    # clean output: Python warnings and Dagster's event lines went to the log file, not the terminal
    log = Path(re.search(r"log \(warnings, Dagster events\): (\S+)", out).group(1))
    for stream in (r.stdout, r.stderr):
        assert "Warning" not in stream and " - DEBUG - " not in stream and " - INFO - " not in stream
    logged = log.read_text()
    assert " - DEBUG - " in logged and "STEP_SUCCESS" in logged and log.parent == home / "dagster_home" / "cli_logs"

    # run again: the round is done, the set-up too: nothing is launched
    again = _cli("run", "--topic", "toy_classification", "--rounds", "1", env=env)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "r1 already finished" in again.stdout
    assert len(instance.get_runs()) == 2

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


def test_failed_run_stops_the_loop_and_names_it(home, fake_llm):
    """The reference code crashes: the set-up run fails on the baseline's blocking check, the CLI
    starts no round, exits 1 and names the run, the failing step and the failed check."""
    import dagster as dg

    code = home / "experiments" / "toy_classification" / "experiment.py"
    code.write_text('raise SystemExit("reference code broken on purpose")\n' + code.read_text())
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole"}
    r = _cli("run", "--topic", "toy_classification", "--rounds", "2", "--parallel", "1", env=env)
    assert r.returncode == 1, r.stdout[-3000:]
    (run,) = dg.DagsterInstance.get().get_runs()
    assert run.job_name == "topic_setup" and run.status == dg.DagsterRunStatus.FAILURE
    assert f"stopped: set-up failed (run {run.run_id}" in r.stdout
    assert "baseline_results" in r.stdout and "failed checks: baseline_results.baseline_has_metric" in r.stdout
    assert "r1|toy_classification" not in r.stdout  # no round was started


def test_a_topic_folder_outside_experiments_runs_by_its_path(home, fake_llm):
    """`researchloop run --topic PATH` with a folder outside experiments/ (a task brought from
    elsewhere): the CLI registers the folder under the topic's name in DAGSTER_HOME, so the set-up's
    topic_brief step, which knows the topic only by its partition name, reads the same folder."""
    import shutil

    from resources.paths import TOPIC_DIRS

    elsewhere = home / "brought" / "toy_classification"  # topic.yaml requires the folder to bear its name
    shutil.copytree(home / "experiments" / "toy_classification", elsewhere)
    shutil.rmtree(home / "experiments" / "toy_classification")  # nothing of that name under experiments/
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole"}
    r = _cli("run", "--topic", str(elsewhere), "--rounds", "1", "--parallel", "1", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "set-up ok" in r.stdout and "r1 ok in" in r.stdout
    registered = json.loads((home / "dagster_home" / TOPIC_DIRS).read_text())
    assert registered == {"toy_classification": str(elsewhere.resolve())}


def test_topic_names_resolve_to_experiments_first_then_the_registered_folder(home):
    from resources.paths import register_topic_dir, resolve_topic_dir

    ex = home / "experiments"
    assert resolve_topic_dir("toy_classification") == ex / "toy_classification"
    register_topic_dir("toy_classification", ex / "toy_classification")  # its own place: nothing to remember
    assert not (home / "dagster_home" / "topic_dirs.json").exists()
    other = home / "other" / "x"
    other.mkdir(parents=True)
    (other / "topic.yaml").write_text("name: x\n")
    register_topic_dir("x", other)
    assert resolve_topic_dir("x") == other.resolve() and resolve_topic_dir(str(other)) == other.resolve()
    assert resolve_topic_dir("toy_classification") == ex / "toy_classification"
    (other / "topic.yaml").unlink()  # moved away since: the name is unknown again (load_topic then says so)
    assert resolve_topic_dir("x") == ex / "x"
