"""`make ui`'s entry point: dagster dev serves the code location on 127.0.0.1 and stops
cleanly on SIGTERM, leaving no webserver or daemon behind."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from resources.paths import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _descendants(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.split("\n"):
        if line.strip():
            p, pp = map(int, line.split())
            children.setdefault(pp, []).append(p)
    found, stack = set(), [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            found.add(c)
            stack.append(c)
    return found


ASSETS_QUERY = "{ assetNodes { assetKey { path } } }"


@contextmanager
def running_ui(dagster_home: Path, experiments: Path, query: str = ASSETS_QUERY, timeout_s: float = 180,
               env: dict | None = None):
    """`python -m pipelines.ui` (what `make ui` runs) on a free port serving `dagster_home`; yields
    (process, port, GraphQL answer to `query`) once the asset graph is served. Leaves nothing running:
    SIGTERM, then SIGKILL for the process group and anything it left behind."""
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "RESEARCHLOOP_UI_PORT": str(port),
           "RESEARCHLOOP_EXPERIMENTS": str(experiments), **(env or {})}
    log_path = Path(dagster_home) / "ui.log"
    with open(log_path, "wb") as log:  # a file, not a pipe: dagster dev writes a lot
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.ui"], cwd=REPO_ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    kids: set[int] = set()
    try:
        deadline = time.time() + timeout_s
        data = None
        while time.time() < deadline:
            try:
                data = _graphql(port, query)
                if (data.get("data") or {}).get("assetNodes"):
                    break
            except OSError:
                pass
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(2)
        assert data and data["data"]["assetNodes"], f"the UI did not come up in {timeout_s:.0f} s"
        kids = _descendants(proc.pid)
        yield proc, port, data
    finally:
        if proc.poll() is None:
            kids |= _descendants(proc.pid)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        for p in kids:
            if os.path.exists(f"/proc/{p}"):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.mark.slow
def test_ui_serves_the_asset_graph_and_stops_on_sigterm(tmp_path):
    (tmp_path / "dagster.yaml").write_text((REPO_ROOT / "dagster_home" / "dagster.yaml").read_text())
    query = ("{ assetNodes { assetKey { path } } repositoriesOrError { "
             "... on RepositoryConnection { nodes { sensors { name sensorState { status } } } } } }")
    with running_ui(tmp_path, tmp_path / "no_topics", query) as (proc, port, data):
        keys = {n["assetKey"]["path"][-1] for n in data["data"]["assetNodes"]}
        assert {"topic_brief", "papers", "feedback_summary"} <= keys
        sensors = {s["name"]: s["sensorState"]["status"]
                   for repo in data["data"]["repositoriesOrError"]["nodes"] for s in repo["sensors"]}
        assert sensors == {"topic_sensor": "STOPPED", "round_sensor": "STOPPED"}  # opening the UI starts nothing
        kids = _descendants(proc.pid)
        assert kids, "dagster dev should have child processes (webserver, daemon)"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        time.sleep(1)
        alive = [p for p in kids if os.path.exists(f"/proc/{p}") and
                 "zombie" not in open(f"/proc/{p}/status").read().lower()]
        assert not alive, f"left behind: {alive}"
