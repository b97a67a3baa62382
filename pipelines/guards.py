"""Two loops on one DAGSTER_HOME (a `researchloop run` and the sensors, or two CLIs) must not
drive the same topic at once, and a loop killed with SIGKILL must not block a topic for good.

- A per-topic file lock ($DAGSTER_HOME/locks/<topic>.lock, `filelock`) is held by the CLI while it
  drives the topic's rounds; the kernel drops it when the process dies, however it dies.
- round_sensor starts no round for a topic whose lock is held or which has a run in flight
  (dagster.yaml's run coordinator also runs at most one queued run per researchloop/topic tag).
- Runs the CLI launches carry the launching process (pid, start time, host) in their tags; a
  run still marked STARTED whose launcher is gone is reported failed (`fail_stale_runs`)."""
from __future__ import annotations

import os
import socket
from collections.abc import Callable

import dagster as dg
from filelock import FileLock, Timeout

from resources.paths import under_home

TOPIC_TAG = "researchloop/topic"
PID_TAG, PID_START_TAG, HOST_TAG = "researchloop/pid", "researchloop/pid_start", "researchloop/host"
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]
# a run in these states has a live process behind it unless its launcher died
RUNNING = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def topic_lock(topic: str) -> FileLock:
    """The lock a loop driver holds while it drives `topic`'s rounds."""
    return FileLock(str(under_home("locks") / f"{topic}.lock"))


def lock_held(topic: str) -> bool:
    """Whether some process (this one included, through another lock object) holds the topic's lock."""
    lock = topic_lock(topic)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def owner_tags() -> dict[str, str]:
    """Tags naming this process, so a later loop can tell whether a run's launcher is alive."""
    import psutil

    return {PID_TAG: str(os.getpid()), PID_START_TAG: f"{psutil.Process().create_time():.2f}",
            HOST_TAG: socket.gethostname()}


def launcher_alive(tags: dict) -> bool | None:
    """True/False when the run's tags name a launching process on this host, None when they do
    not (a run the daemon launched, or one from another machine: not ours to judge)."""
    import psutil

    if PID_TAG not in tags or tags.get(HOST_TAG) != socket.gethostname():
        return None
    try:
        proc = psutil.Process(int(tags[PID_TAG]))
        return f"{proc.create_time():.2f}" == tags.get(PID_START_TAG) and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, ValueError):
        return False


def fail_stale_runs(instance: dg.DagsterInstance, topic: str | None = None,
                    log: Callable[[str], object] = print) -> list[str]:
    """Report as failed every run (of `topic`, or of any topic) still marked running whose
    launching process is gone; returns their run ids."""
    tags = {TOPIC_TAG: topic} if topic else {}
    stale = []
    for run in instance.get_runs(dg.RunsFilter(statuses=RUNNING, tags=tags)):
        if launcher_alive(run.tags) is False:
            instance.report_run_failed(run, message=f"the process that launched this run "
                                                    f"(pid {run.tags.get(PID_TAG)}) is gone")
            log(f"run {run.run_id} ({run.job_name} {run.tags.get('dagster/partition', '')}) was left "
                f"{run.status.value} by a process that is gone: marked failed")
            stale.append(run.run_id)
    return stale


def runs_in_flight(instance: dg.DagsterInstance, topic: str, exclude: set[str] = frozenset()) -> list:
    """The topic's queued or running runs (a run id in `exclude` does not count)."""
    return [r for r in instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT, tags={TOPIC_TAG: topic}))
            if r.run_id not in exclude]


def topic_busy(instance: dg.DagsterInstance, topic: str, exclude: set[str] = frozenset()) -> str | None:
    """Why no other loop should start a round of `topic` now, or None."""
    if lock_held(topic):
        return f"{topic} is driven by a `researchloop run` (lock {topic_lock(topic).lock_file})"
    runs = runs_in_flight(instance, topic, exclude)
    if runs:
        return f"{topic} has a run in flight ({runs[0].job_name}, {runs[0].status.value}, {runs[0].run_id})"
    return None


def set_aside_unrecorded_rounds(instance: dg.DagsterInstance, store, topic: str,
                                log: Callable[[str], object] = print) -> list[str]:
    """Rounds of `topic` with an end-of-round record (feedback_summary, best_code) on disk whose
    materialisation Dagster never recorded, because the run that wrote it died in between (the IO
    manager renames the record into place, then the event is written; a SIGKILL can fall between
    the two): the CLI took such a round for finished while the catalogue, the sensors and the stop
    rules' usage never saw it. The record is moved aside (`.<round>.parquet.unrecorded`, kept for
    inspection), so the round runs again and records itself; its LLM answers come from the cache
    and its experiments from their memos. Only rounds whose latest run failed count (a record with
    no run at all, e.g. one a test or tool wrote, is left alone). Call it holding the topic's lock,
    with no run of the topic in flight. Returns the rounds set aside."""
    from assets.shared.partitions import multi_key
    from pipelines.loop import ROUND_END

    moved: list[str] = []
    for asset in ("feedback_summary", ROUND_END):
        recorded = instance.get_materialized_partitions(dg.AssetKey(asset))
        for rk in store.rounds(asset, topic):
            pk = str(multi_key(topic, rk))
            if pk in recorded:
                continue
            last = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": pk}), limit=1)
            if not last or last[0].status != dg.DagsterRunStatus.FAILURE:
                continue
            p = store.path(asset, topic, rk)
            p.replace(p.with_name(f".{p.name}.unrecorded"))
            log(f"{topic} {rk}: its {asset} record was stored by run {last[0].run_id}, which died before Dagster "
                "recorded it: set aside, the round runs again")
            if rk not in moved:
                moved.append(rk)
    return moved
