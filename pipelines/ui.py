"""`make ui`: `dagster dev` (webserver + daemon) on 127.0.0.1 with DAGSTER_HOME=dagster_home.

  python -m pipelines.ui              the UI; the sensors stay off (nothing starts by itself)
  python -m pipelines.ui --sensors    the UI with the topic and round sensors on
                                      (= RESEARCHLOOP_SENSORS=1; a state set in the UI wins)

Started from a background shell, SIGINT may be ignored; handlers are reset to their defaults
so Ctrl-C and SIGTERM stop the webserver and daemon, and the embedded LLM server (if a step
started one) is stopped afterwards.

Dagster's telemetry is off in dagster.yaml, but the daemon's upload thread does not read that
setting: on start it renames $DAGSTER_HOME/logs/ and sends the files in it to Dagster's server.
DAGSTER_DISABLE_TELEMETRY, which it does read, is set for the processes started here."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from resources.local_llm import release_server, server_status
from resources.paths import REPO_ROOT
from resources.settings import settings


def ui_env(sensors: bool = False, base: dict | None = None) -> dict:
    """The environment `dagster dev` (webserver, daemon, code server) runs in."""
    env = dict(os.environ if base is None else base)
    env.setdefault("DAGSTER_HOME", str(REPO_ROOT / "dagster_home"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    if sensors:
        env["RESEARCHLOOP_SENSORS"] = "1"
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipelines.ui", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sensors", action="store_true",
                    help="start the topic and round sensors: they set up every topic folder and run its rounds "
                         "(LLM calls, experiments) without being asked")
    args = ap.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    env = ui_env(args.sensors)
    port = str(settings().ui_port)
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
           "-h", "127.0.0.1", "-p", port]
    print(f"Dagster UI: http://127.0.0.1:{port}  (DAGSTER_HOME={env['DAGSTER_HOME']}; Ctrl-C to stop)", flush=True)
    on = env.get("RESEARCHLOOP_SENSORS", "").strip() == "1"
    print("sensors: " + ("on unless stopped in the UI: every topic folder is set up and its rounds run on their "
                         "own" if on else "off unless started in the UI (Automation): nothing runs until you launch "
                         "it; --sensors or RESEARCHLOOP_SENSORS=1 starts them"), flush=True)
    before = (server_status() or {}).get("pid") if (server_status() or {}).get("alive") else None  # stays up
    child = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env)

    def forward(signum, _frame):
        child.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    try:
        code = child.wait()
    finally:
        now = (server_status() or {}).get("pid")
        if now is not None and now != before:  # started by a step of this UI session
            release_server()  # unless another loop holds a lease on it
    return code


if __name__ == "__main__":
    sys.exit(main())
