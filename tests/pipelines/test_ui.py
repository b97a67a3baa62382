"""`make ui`'s entry point: dagster dev serves the code location on 127.0.0.1 and stops
cleanly on SIGTERM, leaving no webserver or daemon behind."""
import os
import signal
import time

import pytest

from resources.paths import REPO_ROOT
from tests.support.ui import _descendants, running_ui


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
