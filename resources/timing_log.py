"""An opt-in log of where a run's time goes: with RESEARCHLOOP_TIMING_LOG=<file> in the
environment, every LLM call (resources/llm.py) and every sandboxed run (resources/runner.py)
appends one JSON line {kind, start, seconds, pid, ...} to that file, from whichever process made
it (Dagster's step processes inherit the variable). bench/effectiveness_bench.py reads it to split
a round's wall time into time inside LLM calls, time inside experiments and the rest (the
orchestration overhead). Unset (the default): nothing is written.

Lines are appended with one write() on a file opened O_APPEND, so processes writing side by side
do not interleave within a line."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

ENV = "RESEARCHLOOP_TIMING_LOG"
LLM, EXPERIMENT = "llm", "experiment"


def log_span(kind: str, seconds: float, end: float | None = None, **fields) -> None:
    """Append one span (it ended at `end`, default now; epoch seconds) when the log is on.
    Never raises: timing must not break the work it measures."""
    path = os.environ.get(ENV)
    if not path:
        return
    end = time.time() if end is None else end
    row = {"kind": kind, "start": round(end - seconds, 4), "seconds": round(seconds, 4), "pid": os.getpid(), **fields}
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(row, default=str) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def read_spans(path: str | Path) -> list[dict]:
    """Every complete span in the log (a line cut short by a kill is skipped)."""
    p = Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and {"kind", "start", "seconds"} <= row.keys():
            out.append(row)
    return out


def covered_seconds(spans: Iterable[dict], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by at least one span (overlapping spans, e.g. ideas run side
    by side or an LLM call during an experiment, count once)."""
    parts = sorted((max(lo, s["start"]), min(hi, s["start"] + s["seconds"])) for s in spans)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in parts:
        if b <= a:
            continue
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total
