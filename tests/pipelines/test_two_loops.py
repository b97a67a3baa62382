"""Two loops on one DAGSTER_HOME: a real `researchloop run` subprocess holds its topic's lock (a
second CLI and the sensors keep off the topic), and when it is killed with SIGKILL the run it
left STARTED is marked failed on the next sensor tick instead of blocking the topic for good."""
import os
import signal
import subprocess
import sys
import time

import dagster as dg

from pipelines.guards import PID_TAG, lock_held, topic_busy
from pipelines.sensors import round_sensor
from resources.paths import REPO_ROOT
from tests.support.rounds import _setup_materialised

TOPIC = "toy_classification"


def _cli(env, **kw):
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "run", "--topic", TOPIC, "--rounds", "1",
                             "--parallel", "1"], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def test_killed_cli_leaves_no_run_blocking_the_topic(home, fake_llm):
    env = {**os.environ, "OPENAI_BASE_URL": fake_llm.base_url, "OPENAI_API_KEY": "sk-test",
           "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole"}
    instance = dg.DagsterInstance.get()  # the conftest's DAGSTER_HOME, shared with the CLI
    first = _cli(env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        started = []
        while time.monotonic() < deadline and first.poll() is None and not started:
            started = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            time.sleep(0.3)
        assert started, "the CLI launched no run before the deadline" + (first.stdout.read() if first.poll() else "")
        (run,) = started
        assert run.job_name == "topic_setup" and run.tags[PID_TAG] == str(first.pid)

        # while it drives the topic: the lock is held, the sensor would wait, a second CLI refuses
        assert lock_held(TOPIC)
        assert "researchloop run" in topic_busy(instance, TOPIC)
        second = _cli(env)
        out, _ = second.communicate(timeout=300)
        assert second.returncode == 3 and "is driven by another `researchloop run`" in out, out
        assert first.poll() is None
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)

    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED  # what the kill left
    assert not lock_held(TOPIC)  # the kernel released the dead process's lock
    assert "has a run in flight" in topic_busy(instance, TOPIC)

    round_sensor(dg.build_sensor_context(instance=instance))  # a tick cleans up before it decides
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    assert topic_busy(instance, TOPIC) is None
    failure = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert failure and f"(pid {first.pid}) is gone" in failure[-1].dagster_event.message


def test_cli_keeps_off_a_topic_with_a_live_run_and_clears_a_dead_one(home, monkeypatch, capsys):
    """In-process CLI over a prepared instance: a running run of the topic that the daemon
    launched keeps the CLI off (exit 3); one left STARTED by a dead CLI is marked failed and the
    CLI goes on (here straight to its stop rule: --rounds 0 rounds left)."""
    from dagster._core.test_utils import create_run_for_test

    from pipelines import cli
    from pipelines.guards import PID_START_TAG, owner_tags
    from resources.store import Store
    from schemas.frames import to_frame
    from schemas.records import Feedback

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never asked
    instance = dg.DagsterInstance.get()
    _setup_materialised(instance)
    daemon_run = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                                     tags={"researchloop/topic": TOPIC})
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 3
    out = capsys.readouterr().out
    assert f"{TOPIC} has a run in flight:" in out and daemon_run.run_id in out
    instance.report_run_canceled(daemon_run)

    dead = {**owner_tags(), PID_START_TAG: "1.00"}  # this pid, another start time: the launcher is gone
    left = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                               tags={"researchloop/topic": TOPIC, **dead})
    fb = Feedback(idea_id=f"{TOPIC}/r1/a", name="a", title="A", summary="s", verdict="maintenance", reason="r",
                  metric_value=0.8, baseline_value=0.8, delta=0.0, effective=False)
    Store().write(to_frame([fb], Feedback), "feedback_summary", TOPIC, "r1")
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert f"run {left.run_id} was left running by a process that is gone: marked failed" in out
    assert "stopped before r2: round budget spent (1/1)" in out
    assert instance.get_run_by_id(left.run_id).status == dg.DagsterRunStatus.FAILURE
    assert not lock_held(TOPIC)  # released on the way out
