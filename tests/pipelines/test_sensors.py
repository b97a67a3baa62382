"""pipelines/sensors.py (topic_sensor, round_sensor) on an ephemeral instance, and
pipelines/loop.py:next_round on a Store in a temporary folder."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines.loop import next_round
from pipelines.sensors import round_sensor, topic_sensor
from resources.store import Store
from schemas.topic import load_topic
from tests.support.briefs import store_brief

TOPIC = "toy_classification"


@pytest.fixture
def exp(home) -> Path:
    """The experiments folder (from conftest's `home`): the toy topic plus a broken one."""
    ex = home / "experiments"
    (ex / "broken").mkdir()
    (ex / "broken" / "topic.yaml").write_text(
        "name: broken\ntitle: t\ndescription: d\nrun: python x.py --out_dir {out_dir}\n"
        "metric: {name: accuracy, goal: upward}\n")
    (ex / "broken" / "experiment.py").write_text("print(1)\n")
    (ex / "notes").mkdir()  # no topic.yaml: not a topic at all
    return ex


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


class Recorder(logging.Handler):
    """Records what the sensor logs through context.log (a logging.Logger of its own)."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def spec(home):
    return load_topic(home / "experiments" / TOPIC)


def store(home) -> Store:
    return Store()  # its default root under $DAGSTER_HOME, where round_sensor looks too


def write_feedback(st: Store, round_key: str) -> None:
    p = st.path("feedback_summary", TOPIC, round_key)
    p.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"idea_id": [f"{TOPIC}/{round_key}/a"], "effective": [True]}).write_parquet(p)


def feedback_event(round_key: str, topic: str = TOPIC) -> dg.AssetMaterialization:
    return dg.AssetMaterialization(asset_key="feedback_summary",
                                   partition=str(dg.MultiPartitionKey({"topic": topic, "round": round_key})))


# -- next_round -------------------------------------------------------------------------

def test_next_round_budget(home):
    s, st = spec(home), store(home)
    assert s.budget.rounds == 2
    assert next_round(s, st, None) == "r1"
    assert next_round(s, st, "r1") == "r2"
    assert next_round(s, st, "r2") is None
    assert next_round(s, st, "r7") is None


def test_next_round_none_when_feedback_exists(home):
    s, st = spec(home), store(home)
    write_feedback(st, "r2")
    assert st.path("feedback_summary", TOPIC, "r2").exists()
    assert next_round(s, st, "r1") is None
    assert next_round(s, st, None) == "r1"  # only that round is done
    write_feedback(st, "r1")
    assert next_round(s, st, None) is None


def test_next_round_bigger_budget(home):
    s = spec(home).model_copy(update={"budget": spec(home).budget.model_copy(update={"rounds": 5})})
    assert next_round(s, store(home), "r4") == "r5"
    assert next_round(s, store(home), "r5") is None


def test_next_round_bad_round_key(home):
    with pytest.raises(ValueError, match="round keys look like"):
        next_round(spec(home), store(home), "round1")


def test_store_default_root_is_under_dagster_home(home):
    p = Store().path("feedback_summary", TOPIC, "r2")
    rel = p.relative_to((home / "dagster_home").resolve())
    assert rel.parts[1:] == ("feedback_summary", TOPIC, "r2.parquet")
    assert Store().path("baseline_results", TOPIC).name == f"{TOPIC}.parquet"


# -- topic_sensor -----------------------------------------------------------------------

def test_topic_sensor_registers_valid_topic_only(exp, instance):
    ctx = dg.build_sensor_context(instance=instance)
    rec = Recorder()
    ctx.log.addHandler(rec)
    r = topic_sensor(ctx)
    assert [rr.partition_key for rr in r.run_requests] == [TOPIC]
    assert r.run_requests[0].run_key == f"setup:{TOPIC}"
    assert r.run_requests[0].tags == {"researchloop/topic": TOPIC}
    (add,) = r.dynamic_partitions_requests
    assert isinstance(add, dg.AddDynamicPartitionsRequest)
    assert add.partitions_def_name == "topics" and list(add.partition_keys) == [TOPIC]
    assert r.skip_reason is None  # something new: no skip
    bad = [x.getMessage() for x in rec.records if "not registered" in x.getMessage()]
    assert all(x.levelno == logging.WARNING for x in rec.records)
    assert len(bad) == 1 and "broken" in bad[0] and "field 'metric.goal'" in bad[0]


def test_topic_sensor_second_evaluation_requests_nothing(exp, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    r = topic_sensor(dg.build_sensor_context(instance=instance))
    assert r.run_requests == [] and r.dynamic_partitions_requests == []
    assert r.skip_reason is not None
    msg = r.skip_reason.skip_message
    assert msg.startswith("no new or changed topic folders")
    assert "broken" in msg and "field 'metric.goal'" in msg


def test_topic_sensor_picks_up_a_new_folder(exp, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    import shutil

    shutil.copytree(exp / TOPIC, exp / "toy2")
    y = exp / "toy2" / "topic.yaml"
    y.write_text(y.read_text().replace(f"name: {TOPIC}", "name: toy2"))
    r = topic_sensor(dg.build_sensor_context(instance=instance))
    assert [rr.partition_key for rr in r.run_requests] == ["toy2"]
    assert list(r.dynamic_partitions_requests[0].partition_keys) == ["toy2"]


def test_topic_sensor_no_errors_skip_message(home, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    r = topic_sensor(dg.build_sensor_context(instance=instance))
    assert r.skip_reason.skip_message == "no new or changed topic folders"


# -- round_sensor -----------------------------------------------------------------------

def test_round_sensor_after_feedback_requests_next_round(exp, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1"))
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert [rr.partition_key for rr in r.run_requests] == [f"r2|{TOPIC}"]
    assert r.run_requests[0].run_key == f"{TOPIC}|r2"
    (add,) = r.dynamic_partitions_requests
    assert add.partitions_def_name == "rounds" and list(add.partition_keys) == ["r2"]
    assert r.skip_reason is None
    assert set(json.loads(r.cursor)) == {"baseline_results", "feedback_summary", "best_code"}

    again = round_sensor(dg.build_sensor_context(instance=instance, cursor=r.cursor))
    assert again.run_requests == [] and again.dynamic_partitions_requests == []
    assert again.skip_reason.skip_message == "no round to start"

    # without the cursor the same materialisation would be acted on again
    fresh = round_sensor(dg.build_sensor_context(instance=instance))
    assert [rr.partition_key for rr in fresh.run_requests] == [f"r2|{TOPIC}"]


def test_round_sensor_after_baseline_requests_round_one(exp, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    first = round_sensor(dg.build_sensor_context(instance=instance))  # nothing materialised yet
    assert first.run_requests == [] and first.skip_reason.skip_message == "no round to start"
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="baseline_results", partition=TOPIC))
    r = round_sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert [rr.partition_key for rr in r.run_requests] == [f"r1|{TOPIC}"]
    assert list(r.dynamic_partitions_requests[0].partition_keys) == ["r1"]


def test_round_sensor_known_round_not_added_again(exp, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1", "r2"])  # r2 already exists for another topic
    instance.report_runless_asset_event(feedback_event("r1"))
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert [rr.partition_key for rr in r.run_requests] == [f"r2|{TOPIC}"]
    assert r.dynamic_partitions_requests == []


def test_round_sensor_stops_at_budget_and_existing_feedback(exp, instance, home):
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1", "r2"])
    instance.report_runless_asset_event(feedback_event("r2"))  # budget is 2 rounds
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert r.run_requests == [] and r.skip_reason.skip_message == "no round to start"

    write_feedback(Store(), "r2")  # r2 already done: a re-materialised r1 starts nothing
    instance.report_runless_asset_event(feedback_event("r1"))
    r2 = round_sensor(dg.build_sensor_context(instance=instance, cursor=r.cursor))
    assert r2.run_requests == []


def test_round_sensor_ignores_invalid_or_missing_topics(exp, instance):
    instance.add_dynamic_partitions("topics", ["broken", "gone"])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1", "broken"))
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="baseline_results", partition="gone"))
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="feedback_summary"))  # unpartitioned
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert r.run_requests == []


def test_round_sensor_dedupes_within_one_tick(exp, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1"))
    instance.report_runless_asset_event(feedback_event("r1"))  # materialised twice
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert [rr.partition_key for rr in r.run_requests] == [f"r2|{TOPIC}"]


# -- two loops on one DAGSTER_HOME ---------------------------------------------------------

def test_round_sensor_waits_while_a_cli_holds_the_topic(exp, instance):
    """A `researchloop run` holds the topic's lock: the sensor starts nothing, keeps the finished
    round in its cursor and starts the next round on the first tick after the lock is gone."""
    from pipelines.guards import topic_lock

    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1"))
    lock = topic_lock(TOPIC)
    with lock:
        r = round_sensor(dg.build_sensor_context(instance=instance))
        assert r.run_requests == [] and r.skip_reason.skip_message == "no round to start"
        assert json.loads(r.cursor)["deferred"] == [[TOPIC, "r1", ""]]
        again = round_sensor(dg.build_sensor_context(instance=instance, cursor=r.cursor))
        assert again.run_requests == [] and json.loads(again.cursor)["deferred"] == [[TOPIC, "r1", ""]]
    after = round_sensor(dg.build_sensor_context(instance=instance, cursor=again.cursor))
    assert [rr.partition_key for rr in after.run_requests] == [f"r2|{TOPIC}"]
    assert "deferred" not in json.loads(after.cursor)


def test_round_sensor_waits_for_a_run_in_flight(exp, instance):
    """Another run of the topic is running (launched by the daemon): no second round beside it."""
    from dagster._core.test_utils import create_run_for_test

    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1"))
    run = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                              tags={"researchloop/topic": TOPIC})
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert r.run_requests == [] and json.loads(r.cursor)["deferred"]
    instance.report_run_canceled(run)
    r2 = round_sensor(dg.build_sensor_context(instance=instance, cursor=r.cursor))
    assert [rr.partition_key for rr in r2.run_requests] == [f"r2|{TOPIC}"]


def test_topic_sensor_leaves_a_locked_topic_to_its_cli(home, instance):
    from pipelines.guards import topic_lock

    with topic_lock(TOPIC):
        r = topic_sensor(dg.build_sensor_context(instance=instance))
    assert r.run_requests == [] and r.dynamic_partitions_requests == []


def test_round_sensor_skips_a_corrupt_record_and_serves_the_other_topics(exp, instance):
    """One topic's stored feedback is not Parquet: the sensor warns about that topic on this tick
    and still starts the other topic's next round; it never raises."""
    import shutil

    shutil.copytree(exp / TOPIC, exp / "toy2")
    y = exp / "toy2" / "topic.yaml"
    y.write_text(y.read_text().replace(f"name: {TOPIC}", "name: toy2"))
    st = Store()
    bad = st.path("feedback_summary", TOPIC, "r1")
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"PAR1 this is not a parquet file")
    instance.add_dynamic_partitions("topics", [TOPIC, "toy2"])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1", TOPIC))
    instance.report_runless_asset_event(feedback_event("r1", "toy2"))
    ctx = dg.build_sensor_context(instance=instance)
    rec = Recorder()
    ctx.log.addHandler(rec)
    r = round_sensor(ctx)
    assert [rr.partition_key for rr in r.run_requests] == ["r2|toy2"]
    warned = [x.getMessage() for x in rec.records]
    assert any(m.startswith(f"{TOPIC}: skipped (") for m in warned), warned


def test_stale_run_of_a_dead_launcher_is_marked_failed(instance):
    """Runs carry their launcher's pid and start time: a run whose launcher is alive is left
    alone; one whose launcher is gone (or whose pid now names another process) is failed."""
    import subprocess
    import sys

    from dagster._core.test_utils import create_run_for_test

    from pipelines.guards import (
        PID_START_TAG,
        PID_TAG,
        fail_stale_runs,
        launcher_alive,
        owner_tags,
    )

    mine = owner_tags()
    assert launcher_alive(mine) is True
    assert launcher_alive({}) is None  # launched by the daemon: not ours to judge
    assert launcher_alive({**mine, PID_START_TAG: "1.00"}) is False  # the pid was reused
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True,
                          text=True)
    gone = {**mine, PID_TAG: dead.stdout.strip()}
    assert launcher_alive(gone) is False

    live = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                               tags={"researchloop/topic": TOPIC, **mine})
    stale = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                                tags={"researchloop/topic": TOPIC, **gone})
    daemon = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.STARTED,
                                 tags={"researchloop/topic": TOPIC})
    assert fail_stale_runs(instance, TOPIC, log=lambda m: None) == [stale.run_id]
    status = {r.run_id: r.status for r in instance.get_runs()}
    assert status[stale.run_id] == dg.DagsterRunStatus.FAILURE
    assert status[live.run_id] == status[daemon.run_id] == dg.DagsterRunStatus.STARTED


def test_topic_sensor_sets_up_a_changed_topic_again_once_per_change(home, instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    store_brief(spec(home))
    assert topic_sensor(dg.build_sensor_context(instance=instance)).run_requests == []  # unchanged
    y = home / "experiments" / TOPIC / "topic.yaml"
    y.write_text(y.read_text().replace("tolerance: 0.005", "tolerance: 0.01"))
    first = topic_sensor(dg.build_sensor_context(instance=instance)).run_requests
    code = spec(home).code_path
    code.write_text(code.read_text() + "\n# edited\n")
    second = topic_sensor(dg.build_sensor_context(instance=instance)).run_requests
    assert [r.partition_key for r in second] == [TOPIC]
    assert second[0].run_key.startswith(f"setup:{TOPIC}:")
    assert [r.partition_key for r in first] == [TOPIC]
    assert first[0].run_key != second[0].run_key  # each change has its own run key


def test_a_round_with_feedback_but_no_best_code_is_not_finished(home, instance):
    """A run killed between feedback_summary and best_code: the round runs again (the CLI and the
    sensor both), and the next round is not started on top of a broken chain of best code."""
    from pipelines.loop import decide_next_round, round_finished
    from schemas.frames import to_frame
    from schemas.records import Feedback

    s, st = spec(home), store(home)
    st.write(to_frame([], Feedback), "feedback_summary", TOPIC, "r1")
    st.write(pl.DataFrame({"x": [1]}), "round_reference", TOPIC, "r1")  # only its presence counts
    assert not round_finished(st, TOPIC, "r1")
    assert next_round(s, st, None) == "r1"  # the CLI runs r1 again
    assert next_round(s, st, "r1") is None
    rk, why = decide_next_round(instance, s, st, "r1")
    assert rk is None and "r1 is not finished (no best_code stored)" in why

    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    instance.report_runless_asset_event(feedback_event("r1"))
    r = round_sensor(dg.build_sensor_context(instance=instance))
    assert r.run_requests == []  # feedback alone does not start r2

    st.write(pl.DataFrame({"x": [1]}), "best_code", TOPIC, "r1")
    assert round_finished(st, TOPIC, "r1")
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key="best_code", partition=str(dg.MultiPartitionKey({"topic": TOPIC, "round": "r1"}))))
    r = round_sensor(dg.build_sensor_context(instance=instance, cursor=r.cursor))
    assert [rr.partition_key for rr in r.run_requests] == [f"r2|{TOPIC}"]


def test_an_uncatalogued_best_code_is_set_aside_so_the_round_runs_again(home, instance):
    """A SIGKILL between best_code's rename and its event: the store says r1 is finished, Dagster
    never recorded it. The record is set aside (kept), so the round runs again and records itself."""
    from dagster._core.test_utils import create_run_for_test

    from pipelines.guards import set_aside_unrecorded_rounds
    from pipelines.loop import round_finished

    st = store(home)
    pk = str(dg.MultiPartitionKey({"topic": TOPIC, "round": "r1"}))
    for asset in ("round_reference", "best_code"):
        st.write(pl.DataFrame({"x": [1]}), asset, TOPIC, "r1")
    assert round_finished(st, TOPIC, "r1")
    ok = create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.SUCCESS,
                             tags={"dagster/partition": pk})
    assert set_aside_unrecorded_rounds(instance, st, TOPIC, log=lambda m: None) == []  # its last run did not die
    create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.FAILURE,
                        tags={"dagster/partition": pk})
    said: list[str] = []
    assert set_aside_unrecorded_rounds(instance, st, TOPIC, log=said.append) == ["r1"]
    assert "best_code record" in said[0] and ok.run_id not in said[0]
    assert not round_finished(st, TOPIC, "r1")
    assert (st.path("best_code", TOPIC, "r1").parent / ".r1.parquet.unrecorded").exists()

    st.write(pl.DataFrame({"x": [1]}), "best_code", TOPIC, "r1")  # the re-run, recorded this time
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="best_code", partition=pk))
    assert set_aside_unrecorded_rounds(instance, st, TOPIC, log=lambda m: None) == []
