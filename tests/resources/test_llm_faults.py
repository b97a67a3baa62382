"""resources/llm.py against a real HTTP fake of an OpenAI-compatible server on 127.0.0.1 that
answers with faults: answers of the wrong shape (no choices, no message, no content), server
errors, a 429 with Retry-After, a body that is not JSON, a server that never answers. Each fault
ends as a retried call or a recorded failure that names its cause, never as a crashed round or
a step blocked for an hour."""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from resources.llm import INVALID_ANSWER, LLM, REQUEST_FAILED
from schemas.llm_outputs import NoveltyJudgement
from tests.support.fake_llm import completion, send_json
from tests.support.replay_server import Fault

GOOD = json.dumps({"decision": "novel", "closest_paper": 2, "reason": "nobody did it"})
MSGS = [{"role": "user", "content": "Is idea X novel?"}]


def shaped(change) -> dict:
    """A chat.completion answering GOOD, changed by `change(body)` (which edits it in place)."""
    body = completion("m", GOOD)
    change(body)
    return body


def _drop_message(body: dict) -> None:
    del body["choices"][0]["message"]


SHAPES = {
    "empty choices": lambda b: b.update(choices=[]),
    "choices null": lambda b: b.update(choices=None),
    "missing choices": lambda b: b.pop("choices"),
    "missing message": _drop_message,
    "message null": lambda b: b["choices"][0].update(message=None),
    "null content": lambda b: b["choices"][0]["message"].update(content=None),
}


class FaultServer:
    """POST /v1/chat/completions: each request takes the next queued reply (a body dict sent with
    status 200, or a tests/support/replay_server.py Fault: a status with its Retry-After, a stall of
    `sleep_s`, a malformed body), else answers GOOD. A stall ends early when the server closes."""

    def __init__(self):
        self.replies: deque = deque()
        self.times: list[float] = []
        self.closing = threading.Event()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                srv.times.append(time.monotonic())
                reply = srv.replies.popleft() if srv.replies else completion("m", GOOD)
                try:
                    srv.answer(self, reply)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def answer(self, handler: BaseHTTPRequestHandler, reply) -> None:
        if isinstance(reply, dict):
            return send_json(handler, 200, reply)
        if reply.sleep_s and self.closing.wait(reply.sleep_s):
            return
        if reply.status != 200:
            raw = json.dumps({"error": {"message": "injected", "type": "server_error"}}).encode()
        else:
            raw = json.dumps(completion("m", GOOD)).encode()
            raw = raw[: len(raw) // 2] if reply.malformed else raw
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        if reply.retry_after is not None:
            handler.send_header("Retry-After", reply.retry_after)
        handler.end_headers()
        handler.wfile.write(raw)

    @property
    def n(self) -> int:
        return len(self.times)

    def close(self):
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


@pytest.fixture
def make_llm(server, tmp_path, monkeypatch):
    for var in ("RESEARCHLOOP_LLM_TIMEOUT_S", "RESEARCHLOOP_LLM_TRANSPORT_RETRIES", "OPENAI_BASE_URL",
                "OPENAI_API_KEY", "RESEARCHLOOP_LLM_MAX_CONCURRENCY", "RESEARCHLOOP_LLM_RPM"):
        monkeypatch.delenv(var, raising=False)

    def make(**kw) -> LLM:
        args = dict(base_url=server.base_url, api_key="x", model="m", cache_dir=str(tmp_path / "c"), max_retries=1)
        return LLM(**{**args, **kw})
    return make


def ask(llm: LLM):
    return llm.complete(MSGS, stage="novelty", schema=NoveltyJudgement)


# --------------------------------------------------------------------------- answers of the wrong shape

@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_wrong_shape_then_a_good_answer_succeeds_on_the_retry(server, make_llm, shape):
    server.replies.append(shaped(SHAPES[shape]))
    r = ask(make_llm())
    assert r.ok and r.value.closest_paper == 2
    assert server.n == 2 and r.call.tries == 2


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_wrong_shape_every_time_is_a_recorded_invalid_answer(server, make_llm, shape):
    server.replies.extend([shaped(SHAPES[shape])] * 2)
    llm = make_llm()
    r = ask(llm)
    assert not r.ok and r.error_kind == INVALID_ANSWER and r.call.error_kind == INVALID_ANSWER
    assert r.error.startswith("invalid answer (try 2): the response"), r.error
    assert any(part in r.error for part in ("choices", "message", "content")), r.error
    assert server.n == 2 and llm.calls() == [r.call]
    # remembered like an answer that stayed invalid: the same call again asks nothing
    again = ask(make_llm())
    assert not again.ok and again.call.cached and again.error == r.error and server.n == 2


def test_free_text_with_null_content_is_not_an_empty_success(server, make_llm):
    """Without a schema any text is accepted, so a null content must not pass as the answer ""."""
    server.replies.extend([shaped(SHAPES["null content"])] * 2)
    r = make_llm().complete(MSGS, stage="text")
    assert not r.ok and "content" in r.error
    again = make_llm().complete(MSGS, stage="text")
    assert not again.ok and again.call.cached and server.n == 2


def test_a_body_that_is_not_json_is_an_invalid_answer_retried(server, make_llm):
    server.replies.append(Fault(malformed=True))
    r = ask(make_llm())
    assert r.ok and server.n == 2 and r.call.tries == 2
    server.replies.extend([Fault(malformed=True)] * 2)
    r = make_llm().complete([{"role": "user", "content": "And idea Y?"}], stage="novelty", schema=NoveltyJudgement)
    assert not r.ok and r.error_kind == INVALID_ANSWER and "not a chat completion" in r.error, r.error


# --------------------------------------------------------------------------- transport faults

def test_a_server_error_then_an_answer_succeeds(server, make_llm):
    server.replies.append(Fault(status=500))
    r = ask(make_llm())
    assert r.ok and server.n == 2 and r.call.tries == 1  # the client's transport retry, not an answer retry


def test_a_429_waits_its_retry_after(server, make_llm):
    server.replies.append(Fault(status=429, retry_after="1"))
    t0 = time.monotonic()
    r = ask(make_llm())
    assert r.ok and server.n == 2
    assert server.times[1] - server.times[0] >= 0.9 and time.monotonic() - t0 < 10


def test_transport_retries_are_configurable(server, make_llm, monkeypatch):
    server.replies.extend([Fault(status=500)] * 5)
    r = ask(make_llm(transport_retries=0))
    assert not r.ok and r.error_kind == REQUEST_FAILED and server.n == 1
    assert "500" in r.error and "InternalServerError" in r.error
    monkeypatch.setenv("RESEARCHLOOP_LLM_TRANSPORT_RETRIES", "1")
    r = make_llm().complete([{"role": "user", "content": "And idea Y?"}], stage="novelty", schema=NoveltyJudgement)
    assert not r.ok and server.n == 3


def test_a_silent_server_fails_within_the_configured_timeout(server, make_llm, monkeypatch):
    monkeypatch.setenv("RESEARCHLOOP_LLM_TIMEOUT_S", "1")
    monkeypatch.setenv("RESEARCHLOOP_LLM_TRANSPORT_RETRIES", "0")
    server.replies.extend([Fault(sleep_s=60)] * 4)
    t0 = time.monotonic()
    r = ask(make_llm())
    assert time.monotonic() - t0 < 5
    assert not r.ok and r.error_kind == REQUEST_FAILED and server.n == 1
    assert "no answer within 1 s" in r.error, r.error


def test_the_timeout_field_wins_over_the_environment(server, make_llm, monkeypatch):
    monkeypatch.setenv("RESEARCHLOOP_LLM_TIMEOUT_S", "600")
    server.replies.extend([Fault(sleep_s=60)] * 4)
    t0 = time.monotonic()
    r = ask(make_llm(timeout_s=1, transport_retries=1))
    assert time.monotonic() - t0 < 8
    assert not r.ok and server.n == 2 and "no answer within 1 s (2 requests)" in r.error, r.error


def test_the_defaults_suit_a_local_server(make_llm):
    llm = make_llm()
    client = llm.client()
    assert 60 <= client.timeout <= 600 and client.max_retries <= 2


def test_a_parser_error_without_words_still_names_its_cause(server, make_llm):
    def parse(text: str):
        raise ValueError()

    r = make_llm().complete(MSGS, stage="p", parse=parse)
    assert not r.ok and r.error.strip().endswith("ValueError"), r.error
