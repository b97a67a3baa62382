"""Host-wide limits on the requests sent to one OpenAI-compatible endpoint, shared by every
thread and every process on this machine that talks to it (several Dagster step processes, each
with its own `llm.map` threads, against one vLLM-like server or a rate-limited API).

- a bound on requests in flight: a semaphore made of N lock files (`filelock`); a request holds
  one slot file's lock while it is on the wire, so at most N are in flight across processes;
- requests per minute: starts are spaced 60/rpm seconds apart through a small state file
  ("the next start may be at t"), read and written under its own lock;
- a 429 or 503 answer that carries Retry-After pushes that next start back for every process,
  so the whole host pauses instead of each caller finding out on its own.

The retries themselves, and honouring Retry-After for the retried request, are the `openai`
client's (it retries 408/409/429/5xx with backoff and waits the server's Retry-After up to two
minutes). The limits sit in the HTTP transport below it, so a retry goes through them too, and
the client's backoff sleeps hold no slot. Nothing is limited unless RESEARCHLOOP_LLM_MAX_CONCURRENCY
or RESEARCHLOOP_LLM_RPM is set (resources/settings.py). The state lives in
$RESEARCHLOOP_CACHE/llm_limits/<endpoint hash>/, one folder per endpoint URL.
"""
from __future__ import annotations

import contextlib
import email.utils
import hashlib
import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from resources.settings import settings

BACKOFF_STATUSES = (429, 503)
MAX_PAUSE_S = 120.0  # the longest Retry-After that pauses the host (the openai client's own ceiling)


@dataclass(frozen=True)
class EndpointLimits:
    """The limits for one endpoint on this host. `max_in_flight` None: unbounded; `rpm` None: no
    rate limit."""
    folder: Path
    max_in_flight: int | None = None
    rpm: float | None = None
    poll_s: float = 0.02

    @property
    def active(self) -> bool:
        return bool(self.max_in_flight) or bool(self.rpm)

    # -- requests in flight ------------------------------------------------------------------
    @contextlib.contextmanager
    def slot(self) -> Iterator[int | None]:
        """Hold one of the host's `max_in_flight` slots (waits until one is free); yields its number."""
        if not self.max_in_flight:
            yield None
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        n = self.max_in_flight
        while True:
            start = random.randrange(n)  # spread the first tries, so waiters do not all poll slot 0
            for i in range(n):
                k = (start + i) % n
                lock = FileLock(self.folder / f"slot-{k}.lock", thread_local=False)
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    continue
                try:
                    yield k
                finally:
                    lock.release()
                return
            time.sleep(self.poll_s * (0.5 + random.random()))

    # -- requests per minute -----------------------------------------------------------------
    def _update_next(self, change) -> float:
        """Read the next allowed start, let `change(now, next)` return (new next, start time),
        write the new next; all under the state file's lock. Returns the start time."""
        self.folder.mkdir(parents=True, exist_ok=True)
        state = self.folder / "rate.json"
        with FileLock(self.folder / "rate.lock", thread_local=False):
            try:
                nxt = float(json.loads(state.read_text())["next"])
            except (OSError, ValueError, KeyError, TypeError):
                nxt = 0.0
            now = time.time()
            new_next, start = change(now, nxt)
            if new_next != nxt:
                tmp = state.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps({"next": new_next}))
                tmp.replace(state)
        return start

    def wait_turn(self) -> float:
        """Reserve the next start allowed by the rate limit (and any host-wide pause) and sleep
        until it; returns the seconds waited."""
        interval = 60.0 / self.rpm if self.rpm else 0.0

        def reserve(now: float, nxt: float) -> tuple[float, float]:
            start = max(now, nxt)
            return (start + interval if interval else nxt), start

        start = self._update_next(reserve)
        waited = max(0.0, start - time.time())
        if waited:
            time.sleep(waited)
        return waited

    def pause(self, seconds: float) -> None:
        """Nobody on this host starts a request to the endpoint for `seconds` (a Retry-After)."""
        seconds = min(max(0.0, seconds), MAX_PAUSE_S)
        self._update_next(lambda now, nxt: (max(nxt, now + seconds), now))

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """One HTTP request: a slot first, then its turn under the rate limit (in that order, so
        starts stay spaced even when slots free up together)."""
        with self.slot():
            self.wait_turn()
            yield


def retry_after_s(headers) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header: a number or an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            return float(ms) / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return None if when is None else when.timestamp() - time.time()


def limits_for(base_url: str) -> EndpointLimits:
    """The environment's limits for an endpoint URL (settings: llm_max_concurrency, llm_rpm)."""
    s = settings()
    key = hashlib.sha256(base_url.rstrip("/").encode()).hexdigest()[:16]
    return EndpointLimits(folder=s.cache_dir() / "llm_limits" / key, max_in_flight=s.llm_max_concurrency,
                          rpm=s.llm_rpm)


def limited_http_client(limits: EndpointLimits):
    """An HTTP client for the `openai` client whose every request goes through `limits`."""
    import httpx2  # the openai client's HTTP library (comes with it; imported on first use)
    from openai import DefaultHttpxClient

    class LimitedTransport(httpx2.BaseTransport):
        def __init__(self):
            self.inner = httpx2.HTTPTransport()

        def handle_request(self, request):
            with limits.request():
                response = self.inner.handle_request(request)
                try:
                    response.read()  # the answer is complete before the slot is given back
                except BaseException:
                    response.close()
                    raise
            if response.status_code in BACKOFF_STATUSES and (wait := retry_after_s(response.headers)):
                limits.pause(wait)
            return response

        def close(self):
            self.inner.close()

    return DefaultHttpxClient(transport=LimitedTransport())
