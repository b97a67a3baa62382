"""Two loops on one DAGSTER_HOME (a `researchloop run` and the sensors, or two CLIs) must not
drive the same topic at once, and a loop killed with SIGKILL must not block a topic for good.

- A per-topic file lock ($DAGSTER_HOME/locks/<topic>.lock, `filelock`) is held by the CLI while it
  drives the topic's rounds; the kernel drops it when the process dies, however it dies.
- round_sensor starts no round for a topic whose lock is held or which has a run in flight
  (dagster.yaml's run coordinator also runs at most one queued run per researchloop/topic tag).
- Runs the CLI launches carry the launching process (pid, start time, host) in their tags; a
  run still marked STARTED whose launcher is gone is reported failed (`fail_stale_runs`). A run
  the daemon launched records its run worker's pid in its first engine event; on a local
  instance, one whose worker is gone is reported failed too.
- A run waits QUEUED until a dagster-daemon dequeues it. When no daemon serves this DAGSTER_HOME
  any more (the UI that started it was stopped or killed), nothing ever will: `cancel_queued_runs`
  cancels such runs of a topic, so a `researchloop run` is not kept off it for good."""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from filelock import FileLock, Timeout

from assets.shared.partitions import multi_key
from pipelines.loop import ROUND_END
from resources.paths import dagster_home, under_home
from resources.processes import alive, start_time

TOPIC_TAG = "researchloop/topic"
PID_TAG, PID_START_TAG, HOST_TAG = "researchloop/pid", "researchloop/pid_start", "researchloop/host"
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]
# a run in these states has a live process behind it unless its launcher died
RUNNING = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
# a run in these states, made through a code location, waits for a daemon to dequeue and launch it
# (NOT_STARTED: created by a sensor tick, not yet submitted); see waiting_runs
WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]
# a daemon writes a heartbeat every 30 s; one older than this is a daemon that stopped
HEARTBEAT_FRESH_S = 90.0


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
    return {PID_TAG: str(os.getpid()), PID_START_TAG: f"{start_time():.2f}",
            HOST_TAG: socket.gethostname()}


def launcher_alive(tags: dict) -> bool | None:
    """True/False when the run's tags name a launching process on this host, None when they do
    not (a run the daemon launched, or one from another machine: not ours to judge)."""
    if PID_TAG not in tags or tags.get(HOST_TAG) != socket.gethostname():
        return None
    try:
        pid = int(tags[PID_TAG])
    except ValueError:
        return False
    started = start_time(pid)
    return started is not None and f"{started:.2f}" == tags.get(PID_START_TAG) and alive(pid)


def local_instance(instance: dg.DagsterInstance) -> bool:
    """Whether the instance's runs live in storage only this machine uses (SQLite files, memory):
    then every daemon and run worker of it runs here, and pids in its events are this host's."""
    return any(kind in type(instance.run_storage).__name__ for kind in ("Sqlite", "InMemory"))


def run_worker_pid(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """(pid, when it was logged) of the process that executes a run launched through a code server
    (the daemon's or the UI's launches: Dagster logs "Started process for run (pid: N)."), or None."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        meta = entry.dagster_event.engine_event_data.metadata if entry.dagster_event else {}
        pid = meta.get("pid")
        if pid is not None:
            try:
                return int(pid.value), entry.timestamp
            except (TypeError, ValueError):
                return None
    return None


def worker_alive(instance: dg.DagsterInstance, run) -> bool | None:
    """False when the run's recorded worker process is gone (a process of that pid started after
    the run worker logged itself is another one), True when it runs, None when unknown (no worker
    recorded yet, or an instance other machines share)."""
    found = run_worker_pid(instance, run.run_id) if local_instance(instance) else None
    if found is None:
        return None
    pid, logged_at = found
    started = start_time(pid)
    return started is not None and started <= logged_at + 1 and alive(pid)


def fail_stale_runs(instance: dg.DagsterInstance, topic: str | None = None,
                    log: Callable[[str], object] = print) -> list[str]:
    """Report as failed every run (of `topic`, or of any topic) still marked running whose
    launching process (a CLI's run) or run worker (a daemon's or the UI's run) is gone; returns
    their run ids."""
    tags = {TOPIC_TAG: topic} if topic else {}
    stale = []
    for run in instance.get_runs(dg.RunsFilter(statuses=RUNNING, tags=tags)):
        launcher = launcher_alive(run.tags)
        if launcher is False:
            why = f"the process that launched this run (pid {run.tags.get(PID_TAG)}) is gone"
        elif launcher is None and worker_alive(instance, run) is False:
            why = f"its run worker (pid {run_worker_pid(instance, run.run_id)[0]}) is gone"
        else:
            continue
        instance.report_run_failed(run, message=why)
        log(f"run {run.run_id} ({run.job_name} {run.tags.get('dagster/partition', '')}) was left "
            f"{run.status.value} by a process that is gone: marked failed")
        stale.append(run.run_id)
    return stale


@dataclass(frozen=True)
class DaemonState:
    """Whether a dagster-daemon serves this DAGSTER_HOME, and how that was found out."""

    alive: bool
    detail: str


def _same_home(home: str | None) -> bool:
    try:
        return home is not None and Path(home).resolve() == dagster_home()
    except OSError:
        return False


def daemon_processes() -> list[int]:
    """Pids of the dagster-daemon processes on this machine that serve this DAGSTER_HOME: the one
    `dagster dev` (`make ui`) starts (`python -m dagster._daemon run`) and a standalone
    `dagster-daemon run`. One whose environment cannot be read (another user's) counts."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            argv = proc.info["cmdline"] or []
            is_daemon = "run" in argv and any(a == "dagster._daemon" or os.path.basename(a) == "dagster-daemon"
                                              for a in argv[:3])
            if not is_daemon or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            try:
                if not _same_home(proc.environ().get("DAGSTER_HOME")):
                    continue
            except psutil.AccessDenied:
                pass
            found.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def daemon_state(instance: dg.DagsterInstance) -> DaemonState:
    """A daemon process of this DAGSTER_HOME on this machine; else, for an instance other machines
    share (PostgreSQL), a daemon heartbeat from the last HEARTBEAT_FRESH_S seconds. A local
    instance's heartbeats do not count: a daemon killed a moment ago leaves a fresh one."""
    pids = daemon_processes()
    if pids:
        return DaemonState(True, f"a dagster-daemon (pid {', '.join(map(str, pids))}) serves this DAGSTER_HOME")
    beats = [b.timestamp for b in instance.get_daemon_heartbeats().values()]
    age = time.time() - max(beats) if beats else None
    if age is not None and age < HEARTBEAT_FRESH_S and not local_instance(instance):
        return DaemonState(True, f"a dagster-daemon on another machine sent a heartbeat {age:.0f} s ago")
    last = "never ran" if age is None else f"last heartbeat {age / 60:.0f} min ago"
    return DaemonState(False, f"no dagster-daemon serves this DAGSTER_HOME ({last})")


def waiting_runs(instance: dg.DagsterInstance, topic: str) -> list:
    """The topic's runs that wait for a daemon to launch them: queued, or created by a sensor tick
    and not yet submitted. Such a run was made through a code location (it has a remote origin); a
    run a CLI or an in-process materialisation creates is not one of them."""
    return [r for r in instance.get_runs(dg.RunsFilter(statuses=WAITING, tags={TOPIC_TAG: topic}))
            if r.remote_job_origin is not None and launcher_alive(r.tags) is None]


def cancel_queued_runs(instance: dg.DagsterInstance, topic: str, why: str,
                       log: Callable[[str], object] = print) -> list[str]:
    """Cancel the topic's runs that wait for a daemon (`waiting_runs`), saying `why` in the run's
    event log and through `log`; returns their run ids."""
    done = []
    for run in waiting_runs(instance, topic):
        run = instance.get_run_by_id(run.run_id)  # a daemon may have dequeued it meanwhile
        if run is None or run.status not in WAITING:
            continue
        instance.report_run_canceled(run, message=f"canceled by `researchloop run`: {why}")
        log(f"run {run.run_id} ({run.job_name} {run.tags.get('dagster/partition', '')}) was {run.status.value}: "
            f"canceled, {why}")
        done.append(run.run_id)
    return done


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
