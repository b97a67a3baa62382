"""The Tracker against a real `mlflow server` (SQLite backend store, --artifacts-destination):
8 writers (2 processes x 4 threads) open the same round's run and log one idea run each at the
same moment; read back through the MLflow client, every idea run is there with its params,
metric and artifacts, all under a single round run, and the artifacts sit in the server's
artifact folder, uploaded through it."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import paths

ROOT = paths.REPO
pytestmark = pytest.mark.slow  # a real server: ~20-40 s to start and serve on this VM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` on a free port; yields (url, artifacts folder); stopped afterwards."""
    d = tmp_path_factory.mktemp("mlflow_server")
    port, art = _free_port(), d / "artifacts"
    cmd = [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{d / 'mlflow.db'}",
           "--artifacts-destination", str(art), "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    log = open(d / "server.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(d / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server not up: {(d / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield url, art
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its workers (their own session)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


WRITER = textwrap.dedent("""
    import json, sys, threading, time
    from pathlib import Path
    from resources.tracker import Tracker

    worker, go = sys.argv[1], Path(sys.argv[2])
    tracker = Tracker(settle_s=3.0)           # MLFLOW_TRACKING_URI from the environment; a loaded 2-core VM
    tracker.experiment_id("toy")              # connected before the race starts
    Path(f"{go}.ready-{worker}").touch()
    while not go.exists():
        time.sleep(0.01)
    out = {}

    def idea(i):
        idea_id = f"toy/r1/{worker}-{i}"
        parent = tracker.round_run("toy", "r1")
        out[idea_id] = [parent, tracker.log_run(
            "toy", f"idea {worker}-{i}", {"researchloop.idea_id": idea_id, "researchloop.round": "r1",
                                          "researchloop.kind": "idea"},
            params={"idea_id": idea_id, "title": f"idea number {i}", "seeds": 2},
            metrics={"accuracy": 0.5 + int(i) / 100, "duration_s": 1.5},
            texts={"patch.diff": f"--- a\\n+++ b\\n+{idea_id}\\n", "final_experiment.py": f"print({i})\\n"},
            parent_id=parent)]

    threads = [threading.Thread(target=idea, args=(str(i),)) for i in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps(out))
""")


def test_concurrent_writers_through_a_tracking_server(mlflow_server, tmp_path):
    url, art = mlflow_server
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": url,
           "DAGSTER_HOME": str(tmp_path / "dh"), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, w, str(go)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in ("a", "b")]
    deadline = time.monotonic() + 120
    while not all(Path(f"{go}.ready-{w}").exists() for w in ("a", "b")):
        assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    go.touch()                                # all 8 writers start together
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-3000:] for _, err in outs]
    logged = {k: v for out, _ in outs for k, v in json.loads(out.strip().splitlines()[-1]).items()}
    assert len(logged) == 8 and all(run_id for _, run_id in logged.values())
    parents = {parent for parent, _ in logged.values()}
    assert len(parents) == 1 and None not in parents        # one round run, whoever created it

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp = client.get_experiment_by_name("researchloop/toy")
    assert exp.artifact_location.startswith("mlflow-artifacts:")   # the server's root, not a worker's disk
    rounds = client.search_runs([exp.experiment_id], "tags.`researchloop.kind` = 'round'")
    assert [r.info.run_id for r in rounds] == list(parents)          # the racers' duplicates were removed
    ideas = client.search_runs([exp.experiment_id], "tags.`researchloop.kind` = 'idea'", max_results=100)
    assert sorted(r.data.tags["researchloop.idea_id"] for r in ideas) == sorted(logged)
    for r in ideas:
        idea_id = r.data.tags["researchloop.idea_id"]
        i = idea_id[-1]
        assert r.info.run_id == logged[idea_id][1] and r.info.status == "FINISHED"
        assert r.data.tags["mlflow.parentRunId"] == next(iter(parents))
        assert r.data.params == {"idea_id": idea_id, "title": f"idea number {i}", "seeds": "2"}
        assert r.data.metrics == {"accuracy": 0.5 + int(i) / 100, "duration_s": 1.5}
        assert sorted(a.path for a in client.list_artifacts(r.info.run_id)) == ["final_experiment.py", "patch.diff"]
        got = Path(client.download_artifacts(r.info.run_id, "patch.diff", str(tmp_path / r.info.run_id)))
        assert got.read_text() == f"--- a\n+++ b\n+{idea_id}\n"
    # the bytes are in the server's --artifacts-destination
    stored = sorted(p.read_text() for p in art.rglob("patch.diff"))
    assert stored == sorted(f"--- a\n+++ b\n+{k}\n" for k in logged)


def test_tracker_round_close_and_image_through_the_server(mlflow_server, monkeypatch):
    """The round-level calls (close_round, log_image) and a re-opened run (found by its tags)."""
    url, art = mlflow_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    from resources.tracker import Tracker

    tracker = Tracker()
    assert tracker.is_server() and tracker.artifact_location("other") is None
    run = tracker.round_run("other", "r2")
    assert tracker.round_run("other", "r2") == run                 # found again, not a second run
    tracker.log_image(run, "progress.png", b"\x89PNG fake")
    tracker.close_round(run, {"best_accuracy": 0.93})
    from mlflow.tracking import MlflowClient

    got = MlflowClient(tracking_uri=url).get_run(run)
    assert got.info.status == "FINISHED" and got.data.metrics == {"best_accuracy": 0.93}
    assert [p.read_bytes() for p in art.rglob("progress.png")] == [b"\x89PNG fake"]


def test_concurrent_writers_on_the_local_store(tmp_path):
    """The default SQLite store: 8 threads open the same round's run and log an idea each; the
    host file lock leaves one round run and every idea run under it."""
    from concurrent.futures import ThreadPoolExecutor

    from resources.tracker import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    Tracker(tracking_uri=uri, artifact_root=str(tmp_path / "art")).experiment_id("toy")

    def idea(i: int):
        tracker = Tracker(tracking_uri=uri, artifact_root=str(tmp_path / "art"))  # one client per writer
        parent = tracker.round_run("toy", "r1")
        return parent, tracker.log_run("toy", f"idea {i}", {"researchloop.idea_id": f"toy/r1/{i}",
                                                             "researchloop.kind": "idea"},
                                       params={"i": i}, metrics={"accuracy": i / 10}, texts={"note.txt": str(i)},
                                       parent_id=parent)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(idea, range(8)))
    assert len({p for p, _ in got}) == 1 and all(r for _, r in got)
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("researchloop/toy").experiment_id
    assert len(c.search_runs([exp], "tags.`researchloop.kind` = 'round'")) == 1
    ideas = c.search_runs([exp], "tags.`researchloop.kind` = 'idea'")
    assert sorted(int(r.data.params["i"]) for r in ideas) == list(range(8))
    assert {r.data.tags["mlflow.parentRunId"] for r in ideas} == {got[0][0]}
    assert sorted(p.read_text() for p in (tmp_path / "art").rglob("note.txt")) == [str(i) for i in range(8)]
