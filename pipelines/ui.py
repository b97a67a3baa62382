"""`make ui`: `dagster dev` (webserver + daemon) on 127.0.0.1 with DAGSTER_HOME=dagster_home.

Started from a background shell, SIGINT may be ignored; handlers are reset to their defaults
so Ctrl-C and SIGTERM stop the webserver and daemon, and the embedded LLM server (if a step
started one) is stopped afterwards."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from resources.paths import REPO_ROOT
from resources.settings import settings


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    env = dict(os.environ)
    env.setdefault("DAGSTER_HOME", str(REPO_ROOT / "dagster_home"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    port = str(settings().ui_port)
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
           "-h", "127.0.0.1", "-p", port]
    print(f"Dagster UI: http://127.0.0.1:{port}  (DAGSTER_HOME={env['DAGSTER_HOME']}; Ctrl-C to stop)", flush=True)
    from resources.local_llm import release_server, server_status

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
