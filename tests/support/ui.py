"""The Dagster UI served by make ui's entry point, and queries against it."""
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

from resources.paths import REPO_ROOT

ASSETS_QUERY = "{ assetNodes { assetKey { path } } }"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


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
