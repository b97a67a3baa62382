"""Host-wide LLM limits (resources/llm_limits.py) against a local fake OpenAI-compatible server
that records how many requests it was serving at once and when each one arrived."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from resources.llm_limits import EndpointLimits, limited_http_client, limits_for, retry_after_s
from tests.support import paths

ROOT = paths.REPO


class CountingServer:
    """/v1/chat/completions answering "ok" after `delay_s`; records the peak of requests in
    flight and each request's arrival time. `reject` holds (status, Retry-After) answers to give
    to the next requests instead."""

    def __init__(self, delay_s: float = 0.25):
        self.delay_s = delay_s
        self.in_flight = self.peak = 0
        self.arrivals: list[tuple[float, int]] = []  # (time.time(), status answered)
        self.reject: list[tuple[int, str]] = []
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with srv.lock:
                    srv.in_flight += 1
                    srv.peak = max(srv.peak, srv.in_flight)
                    status, retry_after = srv.reject.pop(0) if srv.reject else (200, "")
                    srv.arrivals.append((time.time(), status))
                try:
                    if status == 200:
                        time.sleep(srv.delay_s)
                        body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": "ok"}}],
                                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
                    else:
                        body = {"error": {"message": "slow down", "type": "rate_limit"}}
                    raw = json.dumps(body).encode()
                finally:
                    with srv.lock:  # counted until its answer is ready to go
                        srv.in_flight -= 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if retry_after:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def ok_starts(self) -> list[float]:
        return sorted(t for t, status in self.arrivals if status == 200)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = CountingServer()
    yield s
    s.close()


@pytest.fixture
def limits_env(tmp_path, monkeypatch):
    """A private RESEARCHLOOP_CACHE (where the slot and rate files live), no limits set yet."""
    monkeypatch.setenv("RESEARCHLOOP_CACHE", str(tmp_path / "cache"))
    for var in ("RESEARCHLOOP_LLM_MAX_CONCURRENCY", "RESEARCHLOOP_LLM_RPM", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _openai(base_url: str, limited: bool):
    from openai import OpenAI

    extra = {"http_client": limited_http_client(limits_for(base_url))} if limited else {}
    return OpenAI(base_url=base_url, api_key="x", max_retries=3, **extra)


def _ask(client) -> str:
    resp = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    return resp.choices[0].message.content


def test_without_limits_eight_callers_overlap(server, limits_env):
    """The control: the fake server does see the 8 callers at once when nothing bounds them."""
    client = _openai(server.base_url, limited=False)
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda _: _ask(client), range(8))) == ["ok"] * 8
    assert server.peak > 2


CHILD = textwrap.dedent("""
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from openai import OpenAI
    from resources.llm_limits import limited_http_client, limits_for
    url = sys.argv[1]
    client = OpenAI(base_url=url, api_key="x", max_retries=3, http_client=limited_http_client(limits_for(url)))
    ask = lambda _: client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    with ThreadPoolExecutor(4) as pool:
        answers = [r.choices[0].message.content for r in pool.map(ask, range(4))]
    print(",".join(answers))
""")


@pytest.mark.slow  # two fresh interpreters importing openai: ~14 s on this VM
def test_limit_two_holds_across_processes_and_threads(server, limits_env):
    """Limit 2, 8 concurrent callers (2 processes x 4 threads): the server never serves more than 2."""
    limits_env.setenv("RESEARCHLOOP_LLM_MAX_CONCURRENCY", "2")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, server.base_url], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["ok,ok,ok,ok"] * 2
    assert len(server.arrivals) == 8
    assert server.peak == 2  # bounded, and the bound was used (both slots were busy at some point)


def test_llm_resource_goes_through_the_host_limit(server, limits_env, tmp_path):
    """The LLM resource's own 8 threads (llm.map) are held to the host-wide 2."""
    from resources.llm import LLM

    limits_env.setenv("RESEARCHLOOP_LLM_MAX_CONCURRENCY", "2")
    llm = LLM(base_url=server.base_url, api_key="x", model="m", max_concurrency=8, use_cache=False,
              cache_dir=str(tmp_path / "c"))
    assert llm.concurrency() == 8
    results = llm.map(lambda i: llm.complete([{"role": "user", "content": f"q{i}"}], stage="t"), list(range(8)))
    assert [r.text for r in results] == ["ok"] * 8 and all(r.ok for r in results)
    assert len(server.arrivals) == 8 and server.peak <= 2


def test_requests_per_minute_spaces_the_starts(server, limits_env):
    """RPM 300: starts 0.2 s apart, even with 6 callers and no concurrency bound (without the
    limit they arrive within a few ms; the margin is for a loaded machine's scheduling jitter)."""
    limits_env.setenv("RESEARCHLOOP_LLM_RPM", "300")
    server.delay_s = 0.0
    client = _openai(server.base_url, limited=True)
    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(lambda _: _ask(client), range(6))) == ["ok"] * 6
    starts = server.ok_starts()
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(starts) == 6 and min(gaps) >= 0.12, gaps
    assert starts[-1] - starts[0] >= 0.9


def test_retry_after_pauses_every_caller_on_the_host(server, limits_env):
    """A 429 with Retry-After: 1 makes the client retry after 1 s, and no other caller on the
    host starts a request during that second."""
    limits_env.setenv("RESEARCHLOOP_LLM_MAX_CONCURRENCY", "4")
    server.delay_s = 0.05
    server.reject = [(429, "1")]
    client = _openai(server.base_url, limited=True)
    first = threading.Thread(target=_ask, args=(client,))
    first.start()
    while not server.arrivals:
        time.sleep(0.005)
    time.sleep(0.1)  # the 429 has been answered and the pause written
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: _ask(client), range(3)))
    first.join(timeout=30)
    assert answers == ["ok"] * 3
    rejected_at = next(t for t, status in server.arrivals if status == 429)
    assert len(server.ok_starts()) == 4
    assert min(server.ok_starts()) - rejected_at >= 0.9


def test_retry_after_parsing():
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({}) is None
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 < retry_after_s({"retry-after": later}) <= 31


def test_slot_file_semaphore_in_one_process(tmp_path):
    """The semaphore on its own: 6 threads, 3 slots, never more than 3 holders at once."""
    limits = EndpointLimits(folder=tmp_path / "l", max_in_flight=3)
    holders, peak, lock = 0, 0, threading.Lock()

    def hold(_):
        nonlocal holders, peak
        with limits.slot() as k:
            with lock:
                holders += 1
                peak = max(peak, holders)
            time.sleep(0.05)
            with lock:
                holders -= 1
            return k

    with ThreadPoolExecutor(6) as pool:
        used = list(pool.map(hold, range(6)))
    assert peak == 3 and set(used) <= {0, 1, 2}


def test_limits_come_from_the_environment_per_endpoint(limits_env):
    assert not limits_for("http://a:8000/v1").active          # nothing set: the client is left alone
    limits_env.setenv("RESEARCHLOOP_LLM_MAX_CONCURRENCY", "3")
    limits_env.setenv("RESEARCHLOOP_LLM_RPM", "90")
    a, b = limits_for("http://a:8000/v1"), limits_for("http://b:8000/v1/")
    assert a.active and (a.max_in_flight, a.rpm) == (3, 90.0)
    assert a.folder != b.folder and a.folder == limits_for("http://a:8000/v1/").folder
    limits_env.setenv("RESEARCHLOOP_LLM_MAX_CONCURRENCY", "0")
    with pytest.raises(ValueError):
        limits_for("http://a:8000/v1")
