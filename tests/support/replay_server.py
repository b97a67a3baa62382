"""A local HTTP server on 127.0.0.1 that replays recorded-shape Semantic Scholar and OpenAlex
responses (tests/fixtures/literature/*.json) and injects faults on request: 429 (with or
without Retry-After), 5xx, a stall longer than the client's timeout, malformed JSON. It
counts and records every request. No network is ever touched."""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support import paths

FIXTURES = paths.FIXTURES / "literature"

# path pattern -> fixture file (first match wins)
ROUTES: list[tuple[str, str]] = [
    (r"^/graph/v1/paper/search$", "s2_search.json"),
    (r"^/graph/v1/paper/[^/]+/references$", "s2_references.json"),
    (r"^/graph/v1/paper/[^/]+/citations$", "s2_citations.json"),
    (r"^/graph/v1/paper/[^/]+$", "s2_paper.json"),
    (r"^/recommendations/v1/papers/forpaper/[^/]+$", "s2_recommendations.json"),
    (r"^/works$", "openalex_works.json"),
    (r"^/works/.+$", "openalex_work.json"),
]


@dataclass
class Fault:
    """What to do instead of answering: status 429/5xx (optionally with Retry-After), a stall of
    `sleep_s` before answering normally, or a malformed body."""
    status: int = 200
    retry_after: str | None = None
    sleep_s: float = 0.0
    malformed: bool = False


@dataclass
class Request:
    path: str
    query: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)
    at: float = 0.0


class ReplayServer:
    def __init__(self):
        self.faults: deque[Fault] = deque()
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                with srv.lock:
                    srv.requests.append(Request(url.path, query, {k.lower(): v for k, v in self.headers.items()},
                                                time.monotonic()))
                    fault = srv.faults.popleft() if srv.faults else Fault()
                if fault.sleep_s:
                    time.sleep(fault.sleep_s)
                if fault.status != 200:
                    return self._send(fault.status, b'{"message": "injected"}', fault.retry_after)
                payload = srv.answer(url.path, query)
                if payload is None:
                    return self._send(404, b'{"error": "Paper not found"}')
                body = json.dumps(payload).encode()
                self._send(200, body[: len(body) // 2] if fault.malformed else body)

            def _send(self, status: int, body: bytes, retry_after: str | None = None):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):   # the client gave up (timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    @staticmethod
    def answer(path: str, query: dict[str, str]):
        """The fixture for the path, paged like the real API (S2: offset/limit over `data`;
        OpenAlex: page/per-page over `results`); None for an unknown path or id 'missing'."""
        if path.endswith("/missing"):
            return None
        for pattern, name in ROUTES:
            if re.match(pattern, path):
                payload = json.loads((FIXTURES / name).read_text())
                if "data" in payload and "limit" in query:
                    off, lim = int(query.get("offset", 0)), int(query["limit"])
                    payload["data"] = payload["data"][off:off + lim]
                if "results" in payload and "per-page" in query:
                    per, page = int(query["per-page"]), int(query.get("page", 1))
                    payload["results"] = payload["results"][(page - 1) * per: page * per]
                return payload
        return None

    def inject(self, *faults: Fault) -> None:
        with self.lock:
            self.faults.extend(faults)

    @property
    def n(self) -> int:
        return len(self.requests)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
