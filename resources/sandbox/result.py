"""What one sandboxed run gives back (``ProcessResult``), and the run's log files."""
from __future__ import annotations

import os
from pathlib import Path

import pydantic

from resources.safe_io import read_tail

TAIL_CHARS = 4000
# how a process reports a full filesystem (ENOSPC, EDQUOT) on stderr: Python's OSError and libc's strerror
_OUT_OF_SPACE = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]")


class ProcessResult(pydantic.BaseModel):
    command: list[str]
    workdir: str
    exit_code: int | None  # None when the runner killed it (see killed_reason)
    timed_out: bool
    killed_reason: str | None  # "timeout" | "memory" | "disk" | "file_size" (SIGXFSZ) | None
    duration_s: float
    stdout_path: str
    stderr_path: str
    stdout_tail: str  # last ~4000 chars, read from the end of the file
    stderr_tail: str
    sandboxed: bool
    peak_memory_mb: float = 0.0  # highest anonymous RSS of the tree the watchdog saw

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed_reason is None


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o644)


def append_note(path: Path, text: str) -> None:
    """Append the runner's own line to a log: the last line, which the attempt records as its error."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "a") as f:
        f.write(f"\nrunner: {text}\n")


def out_of_space(stderr_path: Path) -> bool:
    tail = read_tail(stderr_path)
    return any(m in tail for m in _OUT_OF_SPACE)
