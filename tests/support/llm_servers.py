"""An OpenAI-compatible server that answers from a queue."""
from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.fake_llm import completion, send_json


class QueueServer:
    """Answers POST /v1/chat/completions with queued texts (or `respond(body)` when the queue is
    empty); records every request body. With `chars_per_token` set, an answer longer than the
    request's max_tokens allows is cut there and ends with finish_reason "length", as a server's
    does at its answer limit."""

    def __init__(self):
        self.answers: deque = deque()
        self.requests: list[dict] = []
        self.respond = lambda body: "default answer"
        self.status = 200
        self.chars_per_token: float | None = None
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv.lock:
                    srv.requests.append(body)
                    text = srv.answers.popleft() if srv.answers else None
                if text is None:
                    text = srv.respond(body)
                if srv.status != 200:
                    out = {"error": {"message": "bad request", "type": "invalid_request_error"}}
                else:
                    out = completion(body["model"], text)
                    limit = int(body.get("max_tokens", 0) * (srv.chars_per_token or 0))
                    if srv.chars_per_token and len(text) > limit:
                        out["choices"][0]["message"]["content"] = text[:limit]
                        out["choices"][0]["finish_reason"] = "length"
                send_json(self, srv.status, out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    @property
    def n(self) -> int:
        return len(self.requests)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
