"""Operating the loop: what `researchloop run` does with runs a stopped UI left behind, where its
log lives while the UI comes and goes, what it prints when a run fails, how wide its verdict
table is, and that opening the UI starts no work by itself."""
from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines import cli
from pipelines.cli import common, verdicts
from resources.paths import REPO_ROOT
from resources.store import Store
from schemas.frames import to_frame
from schemas.records import Feedback
from tests.support.rounds import _setup_materialised

TOPIC = "toy_classification"


@pytest.fixture
def queued_home(home):
    """conftest's `home` with the shipped dagster.yaml (its QueuedRunCoordinator), the topic's
    set-up recorded and its round r1 stored: a `researchloop run --rounds 1` that gets past its
    pre-flight goes straight to its stop rule and starts no run."""
    (home / "dagster_home" / "dagster.yaml").write_text((REPO_ROOT / "dagster_home" / "dagster.yaml").read_text())
    instance = dg.DagsterInstance.get()
    _setup_materialised(instance)
    fb = Feedback(idea_id=f"{TOPIC}/r1/a", name="a", title="A", summary="s", verdict="maintenance", reason="r",
                  metric_value=0.8, baseline_value=0.8, delta=0.0, effective=False)
    Store().write(to_frame([fb], Feedback), "feedback_summary", TOPIC, "r1")
    return home


def queue_run(instance, job_name: str = "topic_setup", topic: str = TOPIC):
    """A run submitted the way a sensor tick submits one: created with the code location's origin
    and handed to the instance's run coordinator, which queues it for a daemon."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.test_utils import create_run_for_test
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    origin = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="pipelines.definitions",
                                                              working_directory=str(REPO_ROOT)))
    with origin.create_location(instance) as location:
        job = location.get_repository("__repository__").get_full_job(job_name)
        remote, python = job.get_remote_origin(), job.get_python_origin()
    run = create_run_for_test(instance, job_name=job_name, status=dg.DagsterRunStatus.NOT_STARTED,
                              remote_job_origin=remote, job_code_origin=python,
                              tags={"researchloop/topic": topic, "dagster/partition": topic})
    run = instance.submit_run(run.run_id, workspace=None)
    assert run.status == dg.DagsterRunStatus.QUEUED
    return run


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- runs a stopped UI left behind ----------------------------------------------------------------

def test_runs_a_dead_daemon_left_are_cleaned_and_the_cli_goes_on(queued_home, monkeypatch, capsys):
    """The UI queued a set-up run and launched a round whose run worker then died; the UI was
    stopped. No daemon serves DAGSTER_HOME any more (its last heartbeat, seconds old, does not
    count: a daemon killed a moment ago leaves one). The CLI cancels the queued run, marks the
    started one failed, names both and why, and goes on."""
    from dagster._core.events import EngineEventData
    from dagster._core.test_utils import create_run_for_test
    from dagster._daemon.types import DaemonHeartbeat

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never asked
    instance = dg.DagsterInstance.get()
    queued = queue_run(instance)
    started = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                                  tags={"researchloop/topic": TOPIC})
    gone = dead_pid()
    instance.report_engine_event(f"Started process for run (pid: {gone}).", started,
                                 EngineEventData.in_process(gone))
    instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - 5, "QUEUED_RUN_COORDINATOR", "killed", None))

    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert instance.get_run_by_id(queued.run_id).status == dg.DagsterRunStatus.CANCELED
    assert instance.get_run_by_id(started.run_id).status == dg.DagsterRunStatus.FAILURE
    line = next(x for x in out.splitlines() if queued.run_id in x)
    assert "was QUEUED: canceled" in line and "no dagster-daemon serves this DAGSTER_HOME" in line
    assert f"run {started.run_id} was left running by a process that is gone: marked failed" in out
    assert "stopped before r2: round budget spent (1/1)" in out
    failure = instance.all_logs(started.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert f"its run worker (pid {gone}) is gone" in failure[-1].dagster_event.message


def test_a_live_daemons_queued_run_keeps_the_cli_off_and_says_how_to_go_on(queued_home, monkeypatch, capsys):
    """A daemon serves DAGSTER_HOME (seen here as a process of this machine; the slow test below
    starts a real one): its queued run is left to it, and the refusal names the flag that cancels it."""
    from pipelines import guards

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setattr(guards, "daemon_processes", lambda: [os.getpid()])
    instance = dg.DagsterInstance.get()
    queued = queue_run(instance)
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 3
    out = capsys.readouterr().out
    assert f"{TOPIC} has a run in flight:" in out and queued.run_id in out
    assert f"a dagster-daemon (pid {os.getpid()}) serves this DAGSTER_HOME" in out
    assert f"researchloop run --topic {TOPIC} --cancel-queued" in out
    assert instance.get_run_by_id(queued.run_id).status == dg.DagsterRunStatus.QUEUED

    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1", "--cancel-queued"]) == 0
    out = capsys.readouterr().out
    assert instance.get_run_by_id(queued.run_id).status == dg.DagsterRunStatus.CANCELED
    assert "was QUEUED: canceled, as --cancel-queued asked" in out


def _start_daemon(home: Path) -> subprocess.Popen:
    """The daemon `dagster dev` starts (`python -m dagster._daemon run`), on the workspace."""
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster_home")}
    env.pop("DAGSTER_DISABLE_TELEMETRY", None)  # as a user's own `dagster dev` / `dagster-daemon run` runs
    log = open(home / "daemon.log", "wb")  # noqa: SIM115  closed with the process
    return subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(REPO_ROOT / "workspace.yaml")],
                            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.slow
def test_a_real_daemon_killed_leaves_nothing_that_blocks_the_cli(queued_home, monkeypatch, capsys):
    """A real dagster-daemon on DAGSTER_HOME whose queue is full (max_concurrent_runs 0), so the
    sensor's run waits QUEUED: the CLI keeps off it and names --cancel-queued; a CLI log written
    before the daemon started is where it was (the daemon moves Dagster's logs/ folder on start).
    The daemon is then SIGKILLed: the next `researchloop run` cancels the run it left queued."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    yaml = queued_home / "dagster_home" / "dagster.yaml"
    yaml.write_text(yaml.read_text().replace("max_concurrent_runs: 2", "max_concurrent_runs: 0"))
    instance = dg.DagsterInstance.get()
    queued = queue_run(instance)
    log = common.new_log_path()
    log.write_text("a running CLI's log\n")
    daemon = _start_daemon(queued_home)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and "QUEUED_RUN_COORDINATOR" not in instance.get_daemon_heartbeats():
            assert daemon.poll() is None, (queued_home / "daemon.log").read_text()[-3000:]
            time.sleep(1)
        assert "QUEUED_RUN_COORDINATOR" in instance.get_daemon_heartbeats(), "the daemon did not start"
        time.sleep(3)  # its log upload thread has run
        assert log.read_text() == "a running CLI's log\n"
        assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 3
        out = capsys.readouterr().out
        assert f"a dagster-daemon (pid {daemon.pid}) serves this DAGSTER_HOME" in out and "--cancel-queued" in out
        assert instance.get_run_by_id(queued.run_id).status == dg.DagsterRunStatus.QUEUED
    finally:
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait(30)
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert instance.get_run_by_id(queued.run_id).status == dg.DagsterRunStatus.CANCELED
    assert "no dagster-daemon serves this DAGSTER_HOME" in out and "stopped before r2" in out
    assert log.exists()


# -- the CLI's log while the UI comes and goes -----------------------------------------------------

def test_dagsters_log_upload_leaves_a_running_clis_log_alone(home, monkeypatch):
    """Every dagster-daemon (the UI's too) starts Dagster's telemetry upload thread, which renames
    $DAGSTER_HOME/logs/ and uploads what is in it, whatever dagster.yaml says. The CLI's log, open
    for writing, stays where the CLI printed it is; and the UI turns that thread off."""
    from dagster._core.telemetry_upload import upload_logs

    for var in ("DAGSTER_DISABLE_TELEMETRY", "BUILDKITE", "TF_BUILD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DAGSTER_TELEMETRY_URL", "http://127.0.0.1:9/actions")  # nothing leaves this machine
    path = common.new_log_path()
    with common.stderr_to(path):
        os.write(2, b"written before the daemon started\n")  # fd 2, as the step processes write
        stop = threading.Event()
        uploader = threading.Thread(target=upload_logs, args=(stop,), daemon=True)
        uploader.start()
        uploader.join(10)  # it returns at once when it finds nothing to upload
        stop.set()
        uploader.join(10)
        assert not uploader.is_alive()
        os.write(2, b"written after\n")
    assert path.read_text().splitlines() == ["written before the daemon started", "written after"]
    from pipelines.ui import ui_env

    assert ui_env(base={})["DAGSTER_DISABLE_TELEMETRY"] == "1"


# -- what a failed run prints ---------------------------------------------------------------------

def test_a_crashed_step_prints_its_own_error(home, monkeypatch, capsys):
    """A stage raises inside its own code: the terminal shows that exception's message and where it
    was raised, not only Dagster's "Error occurred while executing op", and where the full log is."""
    import importlib

    brief_defs = importlib.import_module("assets.topic_brief.defs")  # `assets.topic_brief` is also the asset

    def boom(spec, llm):
        return [][1]

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setattr(brief_defs, "build_brief", boom)
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1", "--parallel", "1"]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("topic_brief:"))
    assert "IndexError: list index out of range" in line and "test_operations.py" in line and "in boom" in line
    log = Path(re.search(r"full log: (\S+)", out).group(1))
    assert log.parent == home / "dagster_home" / common.LOG_DIR and log.exists()


def test_a_failed_blocking_check_prints_its_description_and_the_reason(home, fake_llm, monkeypatch, capsys):
    """The reference code never reports the topic's metric: the baseline's blocking check fails, and
    the terminal says what the check requires, which expectation failed, and the reason the
    baseline reported (not only "1 blocking asset check failed")."""
    code = home / "experiments" / TOPIC / "experiment.py"
    code.write_text(code.read_text().replace('json.dump({"accuracy": acc}, f)', 'json.dump({"acc": acc}, f)'))
    for k, v in {"OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test", "RESEARCHLOOP_MODEL": "fake-model",
                 "RESEARCHLOOP_EDIT_FORMAT": "whole"}.items():
        monkeypatch.setenv(k, v)
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1", "--parallel", "1"]) == 1
    out = capsys.readouterr().out
    assert ("check baseline_results.baseline_has_metric failed: the unmodified code ran and reported the topic's "
            "metric") in out
    assert "failing: ExpectColumnValuesToNotBeNull on metric_value: 1 unexpected" in out
    (mat,) = dg.DagsterInstance.get().fetch_materializations(dg.AssetKey("baseline_results"), limit=1).records
    reason = mat.asset_materialization.metadata["reason"].value
    assert "accuracy" in reason and f"reason: {reason}" in out
    assert "DagsterAssetCheckFailedError" not in out


# -- the verdict table ----------------------------------------------------------------------------

def test_the_verdict_table_fits_a_120_column_terminal(home):
    long_reason = ("vs baseline: the idea's seeds are within the tolerance of the baseline's seeds, and the "
                   "one-sided Welch test finds no improvement at the 5% level over six seeds on each side")
    rows = []
    for i, (verdict, value) in enumerate([("improvement", 0.91), ("maintenance", 0.8), ("decline", 0.7),
                                          ("failed", None)]):
        rows.append(Feedback(
            idea_id=f"{TOPIC}/r1/idea_{i}", name=f"idea_{i}_with_a_long_descriptive_name_from_the_model",
            title="t", summary="s", verdict=verdict, reason=long_reason, metric_value=value, baseline_value=0.8,
            delta=None if value is None else value - 0.8, effective=verdict == "improvement", n_seeds=6,
            n_baseline_seeds=6, ci_low=None if value is None else value - 0.81,
            ci_high=None if value is None else value - 0.79, reference="baseline", reference_value=0.8,
            baseline_verdict=verdict, baseline_delta=None if value is None else value - 0.8,
            best_verdict=verdict, best_source="baseline"))
    st = Store()
    st.write(to_frame(rows, Feedback), "feedback_summary", TOPIC, "r1")
    st.write(pl.DataFrame({"idea_id": [r.idea_id for r in rows],
                           "source": ["literature", "scipip", "brainstorm", "chains"]}), "filtered_ideas", TOPIC, "r1")
    from rich.console import Console

    console = Console(width=120, record=True, file=io.StringIO())
    verdicts.print_verdicts(console, TOPIC, ["r1", "r2"])
    lines = console.export_text().splitlines()
    assert lines and max(len(x) for x in lines) <= 120, "\n".join(lines)
    for i, r in enumerate(rows):
        (row,) = [x for x in lines if f"idea_{i}_" in x]  # one line per idea
        assert row.split().count(r.verdict) == 1  # the verdict once
        assert ["literature", "scipip", "brainstorm", "chains"][i] in row
        assert "vs baseline: the idea" in row  # the reason's start, cut to the width left
    assert "0.9100 vs 0.8000 [+0.1000, +0.1200]" in next(x for x in lines if "idea_0_" in x)
    assert "verdicts against the baseline" in "\n".join(lines)


# -- opening the UI starts nothing ----------------------------------------------------------------

def test_sensors_are_off_unless_asked_for(monkeypatch):
    from pipelines.definitions import defs
    from pipelines.sensors import default_status
    from pipelines.ui import ui_env

    monkeypatch.delenv("RESEARCHLOOP_SENSORS", raising=False)
    assert default_status() == dg.DefaultSensorStatus.STOPPED
    assert "RESEARCHLOOP_SENSORS" not in ui_env(base={})
    for name in ("topic_sensor", "round_sensor"):  # as loaded here, without the variable
        assert defs.resolve_sensor_def(name).default_status == dg.DefaultSensorStatus.STOPPED
    monkeypatch.setenv("RESEARCHLOOP_SENSORS", "yes")  # only "1" turns them on
    assert default_status() == dg.DefaultSensorStatus.STOPPED
    assert ui_env(sensors=True, base={})["RESEARCHLOOP_SENSORS"] == "1"
    monkeypatch.setenv("RESEARCHLOOP_SENSORS", "1")
    assert default_status() == dg.DefaultSensorStatus.RUNNING
