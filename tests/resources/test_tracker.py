"""The tracker against a really locked MLflow database: a lock held for a moment is waited out
(the run is recorded), a lock that never goes away is logged and skipped (no exception reaches
the idea's step), and only lock/busy errors are retried."""
from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time

import pytest

from resources.tracker import (
    Tracker,
    TrackingUnavailable,
    _RetryingClient,
    is_transient,
)


@pytest.fixture(scope="module")
def template_db(tmp_path_factory):
    """An initialised MLflow store, made once (creating the schema takes a while)."""
    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    Tracker(tracking_uri=f"sqlite:///{path}", artifact_root=str(path.parent / "art")).experiment_id("toy")
    return path


@pytest.fixture
def db(template_db, tmp_path, monkeypatch):
    """A real MLflow SQLite store, already initialised, whose sessions wait 0.2 s for a lock
    instead of MLflow's 20 s (PRAGMA busy_timeout), so a held lock fails a call within seconds."""
    from mlflow.store.db import utils

    text = utils.sql.text
    monkeypatch.setattr(utils.sql, "text", lambda q, *a, **k: text(q.replace("busy_timeout = 20000",
                                                                          "busy_timeout = 200"), *a, **k))
    path = tmp_path / "mlflow.db"
    shutil.copy(template_db, path)
    return path, f"sqlite:///{path}"


def _hold_lock(path, seconds: float, started: threading.Event, release: threading.Event | None = None):
    """Hold an exclusive lock for `seconds`, or, given `release`, until the test sets it (a
    slow machine must not see the lock go away while the calls under test are still trying)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")          # nobody else can read or write
    started.set()
    if release is not None:
        release.wait(120)
    else:
        time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def _tracker(uri, tmp_path, attempts):
    return Tracker(tracking_uri=uri, artifact_root=str(tmp_path / "art"), retry_attempts=attempts,
                   retry_first_wait_s=0.2, retry_max_wait_s=1.0)


def test_a_briefly_locked_database_is_waited_out(db, tmp_path):
    path, uri = db
    tracker = _tracker(uri, tmp_path, attempts=8)
    tracker.experiment_id("toy")                     # the store is open before the lock is taken
    started = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(path, 1.5, started))
    holder.start()
    started.wait(5)
    t0 = time.monotonic()
    calls = []
    real = tracker._client._retrying.before_sleep
    tracker._client._retrying.before_sleep = lambda rs: (calls.append(rs.attempt_number), real(rs))
    run_id = tracker.log_run("toy", "idea-1", {"researchloop.idea": "i1"},
                                                         {"p": 1}, {"accuracy": 0.9}, {})
    holder.join()
    assert time.monotonic() - t0 >= 1.0            # it did wait for the lock ...
    assert run_id is not None and calls              # ... retried on "database is locked" ...
    # ... and the run is recorded
    run = Tracker(tracking_uri=uri).client().get_run(run_id)
    assert run.data.metrics["accuracy"] == 0.9 and run.info.status == "FINISHED"


def test_a_database_that_stays_locked_is_logged_and_skipped(db, tmp_path, caplog):
    path, uri = db
    tracker = _tracker(uri, tmp_path, attempts=2)
    tracker.experiment_id("toy")
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(path, 0.0, started, release))
    holder.start()
    started.wait(5)
    try:
        with caplog.at_level(logging.WARNING, logger="researchloop.tracker"):
            assert tracker.log_run("toy", "idea-2", {"researchloop.idea": "i2"}, {}, {"accuracy": 0.5}, {}) is None
            assert tracker.round_run("toy", "r1") is None
            tracker.close_round("some-run", {"best": 1.0})      # no exception either
        assert "not recorded, the work goes on" in caplog.text and "locked" in caplog.text
    finally:
        release.set()
        holder.join()


def test_only_lock_errors_are_retried():
    calls = []

    class Flaky:
        def locked_twice(self):
            calls.append("l")
            if len(calls) < 3:
                raise RuntimeError("(sqlite3.OperationalError) database is locked")
            return "ok"

        def broken(self):
            calls.append("b")
            raise ValueError("no such experiment")

    c = _RetryingClient(Flaky(), attempts=4, max_wait_s=0.01, first_wait_s=0.001)
    assert c.locked_twice() == "ok" and calls == ["l", "l", "l"]
    calls.clear()
    with pytest.raises(ValueError, match="no such experiment"):
        c.broken()
    assert calls == ["b"]                            # a real error is not retried, nor swallowed
    assert is_transient(TrackingUnavailable("x").with_traceback(None)) is False
    wrapped = RuntimeError("MLflow call failed")
    wrapped.__cause__ = RuntimeError("database is locked")
    assert is_transient(wrapped)


class _RacingServer:
    """A tracking server's runs in memory; `blind` searches (a racer's first look, made before
    the other racer's create landed) find nothing."""

    def __init__(self):
        self.runs, self.blind, self.deleted = {}, 0, []

    def get_experiment_by_name(self, name):
        return type("E", (), {"experiment_id": "1"})()

    def search_runs(self, exps, filter_string="", max_results=50, order_by=None):
        if self.blind:
            self.blind -= 1
            return []
        return [type("R", (), {"info": type("I", (), {"run_id": k, "start_time": t})(),
                               "data": type("D", (), {"tags": dict(tags)})()})()
                for k, (t, tags) in self.runs.items() if k not in self.deleted]

    def create_run(self, exp, tags, run_name, start_time=None):
        run_id = f"run{len(self.runs)}"
        self.runs[run_id] = (start_time, dict(tags))
        return type("C", (), {"info": type("I", (), {"run_id": run_id})()})()

    def set_tag(self, run_id, k, v):
        self.runs[run_id][1][k] = v

    def delete_run(self, run_id):
        self.deleted.append(run_id)


def test_a_late_landing_racer_with_an_older_clock_adopts_the_settled_round_run(monkeypatch):
    """Against a server, racer B looked before racer A's create landed but its own create landed
    after A's second look; B's start time (its clock) is older. B keeps A's run, already handed
    out, and deletes its own, instead of winning by start time (two round runs, seen in CI)."""
    server = _RacingServer()
    monkeypatch.setattr("resources.tracker.time.sleep", lambda s: None)
    a = Tracker(tracking_uri="http://tracking:5000", settle_s=0)
    a._client = type("A", (), {"create_run": lambda self, e, tags, run_name: server.create_run(e, tags, run_name, 200),
                               "__getattr__": lambda self, k: getattr(server, k)})()
    b = Tracker(tracking_uri="http://tracking:5000", settle_s=0)
    b._client = type("B", (), {"create_run": lambda self, e, tags, run_name: server.create_run(e, tags, run_name, 100),
                               "__getattr__": lambda self, k: getattr(server, k)})()
    kept_a = a.round_run("toy", "r1")                      # A: nothing there, creates run0, settles on it
    server.blind = 1                                       # B's first look was before run0 landed
    kept_b = b.round_run("toy", "r1")                      # B creates run1 (start 100 < 200), looks again
    assert kept_a == kept_b == "run0"
    assert server.deleted == ["run1"]
    assert server.runs["run0"][1]["researchloop.settled"] == "yes"


def test_a_young_round_run_found_on_the_first_look_is_not_handed_out_before_it_settles(monkeypatch):
    """Racer C's first look finds B's run, not yet settled; A's create (older start time) lands
    while C waits. C hands out A's run, which every racer settles on, not B's it saw first."""
    server = _RacingServer()
    server.runs["runB"] = (200, {"researchloop.topic": "toy", "researchloop.round": "r1", "researchloop.kind": "round"})
    landed = []
    monkeypatch.setattr("resources.tracker.time.sleep", lambda s: landed.append(server.runs.setdefault(
        "runA", (100, dict(server.runs["runB"][1])))))
    c = Tracker(tracking_uri="http://tracking:5000", settle_s=0)
    c._client = server
    assert c.round_run("toy", "r1") == "runA" and landed            # waited, then looked again
    assert server.deleted == [] and server.runs["runA"][1]["researchloop.settled"] == "yes"
    monkeypatch.setattr("resources.tracker.time.sleep", lambda s: pytest.fail("a settled run needs no wait"))
    assert c.round_run("toy", "r1") == "runA"
