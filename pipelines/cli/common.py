"""What every `researchloop` subcommand uses: the environment it runs in, the console it prints
to, its log file, and making script output safe to print with rich."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import time

from rich.console import Console
from rich.markup import escape

from resources.paths import REPO_ROOT, under_home

# The CLI's log folder under DAGSTER_HOME. Not `logs/`: Dagster owns that one (its telemetry
# log), and every dagster-daemon, the one `make ui` starts included, renames `logs/` to
# `.logs_queue/` on start to upload its files, whatever dagster.yaml says about telemetry.
LOG_DIR = "cli_logs"

_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def ensure_home() -> None:
    """DAGSTER_HOME (default: the repository's dagster_home/) exists; Hugging Face stays offline."""
    os.environ.setdefault("DAGSTER_HOME", str(REPO_ROOT / "dagster_home"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.makedirs(os.environ["DAGSTER_HOME"], exist_ok=True)


def make_console() -> Console:
    """A rich console; wide when the output is a file or a pipe, so tables do not wrap."""
    return Console(width=None if Console().is_terminal else 160)


def new_log_path():
    """A fresh log file for one CLI run under $DAGSTER_HOME/cli_logs/."""
    return under_home(LOG_DIR) / f"cli-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


@contextlib.contextmanager
def stderr_to(path):
    """Send this process's stderr, and that of every process it starts (Dagster's step
    processes, the forkserver), to `path`: Python warnings and Dagster's event lines land in
    the log file; what the CLI prints itself goes to stdout."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "a", buffering=1) as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def plain(text: str) -> str:
    """Text a script printed, made safe to show with rich: terminal escape sequences and control
    characters removed, and rich markup escaped (a "[/red]" in a script's stderr would otherwise
    raise MarkupError in the middle of a table). Use it wherever script output (stderr tails,
    error lines, failure reasons) goes into console.print or a rich Table."""
    return escape(_CONTROL.sub("", text or ""))
