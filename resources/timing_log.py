"""An opt-in log of where a run's time goes: with RESEARCHLOOP_TIMING_LOG=<file> in the
environment, every LLM call (resources/llm.py) and every sandboxed run (resources/runner.py)
appends one JSON line {kind, start, seconds, pid, ...} to that file, from whichever process made
it (Dagster's step processes inherit the variable). bench/effectiveness_bench.py reads it to split
a round's wall time into time inside LLM calls, time inside experiments and the rest (the
orchestration overhead). Unset (the default): nothing is written.

Lines are appended with one write() on a file opened O_APPEND, so processes writing side by side
do not interleave within a line.

A span carries the Dagster stage (the asset) it was made in, as `asset`, when the process knows
it: `stage_scope(name)` names the stage while a block runs (resources/llm.py's `LLM.track`, which
every asset that asks the LLM opens, sets it), else RESEARCHLOOP_TIMING_STAGE in the environment
(a worker process started for a stage). The scope is per process, not per thread: a step's
threads (the LLM resource's `map`, experiments side by side) belong to its stage, and steps that
share a process run one after the other.

An LLM span also carries what the server said about the call, where it said it (llama.cpp's
`timings`, the OpenAI usage's cached tokens): `server_timings` reads them from a response."""
from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ENV = "RESEARCHLOOP_TIMING_LOG"
STAGE_ENV = "RESEARCHLOOP_TIMING_STAGE"
LLM, EXPERIMENT = "llm", "experiment"
# the per-call fields an LLM span adds from the server's response (`server_timings`), summed over
# the requests of one logical call (its re-asks)
TIMING_FIELDS = ("prompt_tokens", "answer_tokens", "prompt_s", "decode_s", "cached_tokens")

_STAGES: list[str] = []  # the open stage scopes of this process, outermost first


@contextlib.contextmanager
def stage_scope(name: str) -> Iterator[None]:
    """Spans logged while the block runs (from any thread of this process) carry `asset=name`;
    in nested scopes the outermost names the stage."""
    _STAGES.append(name)
    try:
        yield
    finally:
        _STAGES.remove(name)


def current_stage() -> str | None:
    """The stage spans are logged for now: the outermost open scope, else RESEARCHLOOP_TIMING_STAGE."""
    return _STAGES[0] if _STAGES else (os.environ.get(STAGE_ENV) or None)


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _ms(v: Any) -> float | None:
    return float(v) / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def _field(obj: Any, name: str) -> Any:
    """`name` of a dict, of an attribute, or of a pydantic model's extra fields (the openai client
    keeps a body's unknown keys, such as llama.cpp's `timings`, in `model_extra`)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    v = getattr(obj, name, None)
    if v is None:
        v = (getattr(obj, "model_extra", None) or {}).get(name)
    return v


def server_timings(resp: Any) -> dict[str, float | int]:
    """What one chat completion response says about its cost (a response object or its JSON body):
    prompt_tokens and answer_tokens (the usage), prompt_s and decode_s (llama.cpp's `timings`:
    prompt_ms, predicted_ms), cached_tokens (prompt tokens reused from the server's cache:
    `timings.cache_n`, else the usage's `prompt_tokens_details.cached_tokens`). Only the fields the
    response reports; {} for a response without any."""
    usage, timings = _field(resp, "usage"), _field(resp, "timings")
    out: dict[str, float | int] = {}
    for key, v in (("prompt_tokens", _count(_field(usage, "prompt_tokens"))),
                   ("answer_tokens", _count(_field(usage, "completion_tokens"))),
                   ("prompt_s", _ms(_field(timings, "prompt_ms"))),
                   ("decode_s", _ms(_field(timings, "predicted_ms"))),
                   ("cached_tokens", _count(_field(timings, "cache_n")))):
        if v is not None:
            out[key] = v
    if "prompt_tokens" not in out and (n := _count(_field(timings, "prompt_n"))) is not None:
        out["prompt_tokens"] = n + int(out.get("cached_tokens", 0))  # prompt_n counts the tokens evaluated
    if "answer_tokens" not in out and (n := _count(_field(timings, "predicted_n"))) is not None:
        out["answer_tokens"] = n
    if "cached_tokens" not in out:
        n = _count(_field(_field(usage, "prompt_tokens_details"), "cached_tokens"))
        if n is not None:
            out["cached_tokens"] = n
    return out


def add_timings(total: dict[str, float | int], more: dict[str, float | int]) -> dict[str, float | int]:
    """`total` with `more` added field by field (the requests of one call: its re-asks)."""
    for k, v in more.items():
        total[k] = total.get(k, 0) + v
    return total


def log_span(kind: str, seconds: float, end: float | None = None, **fields) -> None:
    """Append one span (it ended at `end`, default now; epoch seconds) when the log is on.
    Never raises: timing must not break the work it measures."""
    path = os.environ.get(ENV)
    if not path:
        return
    end = time.time() if end is None else end
    row = {"kind": kind, "start": round(end - seconds, 4), "seconds": round(seconds, 4), "pid": os.getpid(), **fields}
    if row.get("asset") is None and (stage := current_stage()) is not None:
        row["asset"] = stage
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
