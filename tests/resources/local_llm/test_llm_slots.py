"""The local server's slots (RESEARCHLOOP_LLM_SLOTS), the LLM spans' per-call figures and stage, and
the two benchmarks built on them (bench/slots_bench.py, bench/round_bench.py)."""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from pydantic import BaseModel

import resources.local_llm as ll
import resources.local_llm.server as llserver
from resources.llm import LLM
from resources.timing_log import ENV, EXPERIMENT, log_span, read_spans, server_timings, stage_scope
from resources.timing_log import LLM as SPAN_LLM
from tests.support import paths

REPO = paths.REPO
FAKE = paths.TESTS / "support" / "fake_llama_server.py"

# a llama.cpp chat completion as its server sends it (prompt 41 tokens, 40 of them from the cache)
LLAMA_RESPONSE = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "{\"ok\": true}"}}],
    "usage": {"completion_tokens": 15, "prompt_tokens": 41, "total_tokens": 56,
              "prompt_tokens_details": {"cached_tokens": 40}},
    "timings": {"cache_n": 40, "prompt_n": 1, "prompt_ms": 62.5, "prompt_per_token_ms": 62.5,
                "prompt_per_second": 16.0, "predicted_n": 15, "predicted_ms": 3000.0,
                "predicted_per_token_ms": 200.0, "predicted_per_second": 5.0},
}


# -- the slot count in the server's command and state ----------------------------------------------

def test_server_command_carries_the_slots_and_the_scaled_context():
    cmd = llserver._server_cmd(Path("/m/x.gguf"), 4321, 4096, 2, "x", slots=3)
    assert llserver._has_arg(cmd, "--parallel", "3")
    assert llserver._has_arg(cmd, "--ctx-size", str(3 * 4096))   # each slot keeps its 4096-token window
    assert llserver._has_arg(cmd, "--threads", "2")
    one = llserver._server_cmd(Path("/m/x.gguf"), 4321, 4096, 2, "x")
    assert llserver._has_arg(one, "--parallel", "1") and llserver._has_arg(one, "--ctx-size", "4096")


def test_slot_count_comes_from_the_setting(monkeypatch):
    monkeypatch.delenv("RESEARCHLOOP_LLM_SLOTS", raising=False)
    assert ll.slot_count() == 2
    monkeypatch.setenv("RESEARCHLOOP_LLM_SLOTS", "4")
    assert ll.slot_count() == 4 and ll.slot_count(1) == 1
    with pytest.raises(ValueError):
        ll.slot_count(0)


def test_answers_are_decoded_with_the_decode_threads_prompts_read_with_all(monkeypatch):
    monkeypatch.delenv("RESEARCHLOOP_LLM_DECODE_THREADS", raising=False)  # the default: one decode thread
    cmd = llserver._server_cmd(Path("/m/x.gguf"), 4321, 4096, 2, "x")
    assert llserver._has_arg(cmd, "--threads", "2") and llserver._has_arg(cmd, "--decode-threads", "1")
    monkeypatch.setenv("RESEARCHLOOP_LLM_DECODE_THREADS", "0")  # all of them
    assert llserver._has_arg(llserver._server_cmd(Path("/m/x.gguf"), 4321, 4096, 2, "x"), "--decode-threads", "2")
    assert llserver.decode_thread_count(4, 8) == 4 and llserver.decode_thread_count(4, 0) == 4


def test_slots_share_one_kv_cache_only_when_asked(monkeypatch):
    monkeypatch.delenv("RESEARCHLOOP_LLM_KV_UNIFIED", raising=False)
    assert "--kv-unified" not in llserver._server_cmd(Path("/m/x.gguf"), 4321, 4096, 2, "x", slots=2)
    monkeypatch.setenv("RESEARCHLOOP_LLM_KV_UNIFIED", "1")
    assert "--kv-unified" in llserver._server_cmd(Path("/m/x.gguf"), 4321, 4096, 2, "x", slots=2)


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    """ensure_server runs tests/support/fake_llama_server.py with the real launcher's own arguments
    (`_server_cmd`'s, so the flags under test are the real ones)."""
    model = tmp_path / "cache" / "models" / "fake.gguf"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"GGUF")
    real = llserver._server_cmd

    def cmd(*args, **kw):
        full = real(*args, **kw)
        assert full[:3] == [sys.executable, "-m", "resources.local_llm"]
        return [sys.executable, str(FAKE), *full[2:]]

    monkeypatch.setattr(llserver, "_server_cmd", cmd)
    monkeypatch.setattr(llserver, "assemble_model", lambda name, cache, progress=False: model)
    cache = tmp_path / "cache"
    yield cache
    ll.stop_server(cache)


def _cmdline(pid: int) -> list[str]:
    return psutil.Process(pid).cmdline()


def test_a_server_with_another_slot_count_is_restarted(fake_server, monkeypatch):
    monkeypatch.setenv("RESEARCHLOOP_LLM_SLOTS", "3")
    url = ll.ensure_server("fake", fake_server, ctx_size=256, threads=1, timeout=60, lease=False)
    state = json.loads((fake_server / "server.json").read_text())
    assert (state["slots"], state["ctx_size"], state["server_ctx"]) == (3, 256, 768)
    assert llserver._has_arg(_cmdline(state["pid"]), "--parallel", "3")
    assert llserver._has_arg(_cmdline(state["pid"]), "--ctx-size", "768")
    # the same slot count: the running server is adopted
    assert ll.ensure_server("fake", fake_server, ctx_size=256, threads=1, timeout=60, lease=False, slots=3) == url
    assert json.loads((fake_server / "server.json").read_text())["pid"] == state["pid"]
    # a state that claims another slot count than the process runs with is not ours
    assert ll.is_ours(state) and not ll.is_ours({**state, "slots": 2})
    # another slot count: stopped and started again
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=1, timeout=60, lease=False, slots=1)
    new = json.loads((fake_server / "server.json").read_text())
    assert new["slots"] == 1 and new["server_ctx"] == 256 and new["pid"] != state["pid"]
    assert not llserver._pid_alive(state["pid"])


def test_a_server_with_other_decode_threads_is_restarted(fake_server, monkeypatch):
    monkeypatch.setenv("RESEARCHLOOP_LLM_DECODE_THREADS", "1")
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=2, timeout=60, lease=False, slots=1)
    state = json.loads((fake_server / "server.json").read_text())
    assert state["decode_threads"] == 1 and llserver._has_arg(_cmdline(state["pid"]), "--decode-threads", "1")
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=2, timeout=60, lease=False, slots=1)
    assert json.loads((fake_server / "server.json").read_text())["pid"] == state["pid"]
    monkeypatch.setenv("RESEARCHLOOP_LLM_DECODE_THREADS", "2")
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=2, timeout=60, lease=False, slots=1)
    new = json.loads((fake_server / "server.json").read_text())
    assert new["decode_threads"] == 2 and new["pid"] != state["pid"]


def test_a_state_from_before_slots_reads_as_one_slot(fake_server):
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=1, timeout=60, lease=False, slots=1)
    path = fake_server / "server.json"
    state = json.loads(path.read_text())
    old = {k: v for k, v in state.items() if k not in ("slots", "server_ctx")}
    path.write_text(json.dumps(old))
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=1, timeout=60, lease=False, slots=1)
    assert json.loads(path.read_text())["pid"] == state["pid"]        # one slot: the same server
    ll.ensure_server("fake", fake_server, ctx_size=256, threads=1, timeout=60, lease=False, slots=2)
    assert json.loads(path.read_text())["pid"] != state["pid"]        # two: a new one


# -- the server's figures in the LLM span --------------------------------------------------------------

def test_server_timings_from_a_llama_cpp_response():
    from openai.types.chat import ChatCompletion

    want = {"prompt_tokens": 41, "answer_tokens": 15, "prompt_s": 0.0625, "decode_s": 3.0, "cached_tokens": 40}
    assert server_timings(LLAMA_RESPONSE) == want
    # as the openai client hands it over: `timings` is an unknown field, kept in model_extra
    assert server_timings(ChatCompletion.model_validate(LLAMA_RESPONSE)) == want


def test_server_timings_of_other_endpoints():
    usage_only = {"usage": {"prompt_tokens": 10, "completion_tokens": 3,
                            "prompt_tokens_details": {"cached_tokens": 8}}}
    assert server_timings(usage_only) == {"prompt_tokens": 10, "answer_tokens": 3, "cached_tokens": 8}
    # timings without usage: the prompt is the tokens evaluated plus those from the cache
    assert server_timings({"timings": {"prompt_n": 2, "cache_n": 5, "predicted_n": 4, "predicted_ms": 400}}) == {
        "prompt_tokens": 7, "answer_tokens": 4, "decode_s": 0.4, "cached_tokens": 5}
    assert server_timings({}) == {} and server_timings(None) == {}
    assert server_timings({"usage": {"prompt_tokens": -1, "completion_tokens": True}}) == {}


class _Scripted:
    """An OpenAI-compatible endpoint that answers the bodies it is given, one per request."""

    def __init__(self, bodies: list[dict]):
        bodies = list(bodies)

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                raw = json.dumps(bodies.pop(0)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Ok(BaseModel):
    ok: bool


def test_the_llm_span_carries_the_server_figures_the_stage_and_the_re_ask(tmp_path, monkeypatch):
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv(ENV, str(log))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bad = json.loads(json.dumps(LLAMA_RESPONSE))
    bad["choices"][0]["message"]["content"] = "not json"
    server = _Scripted([bad, LLAMA_RESPONSE, LLAMA_RESPONSE])
    try:
        llm = LLM(base_url=server.base_url, api_key="x", model="m", cache_dir=str(tmp_path / "c"))
        with llm.track("ideas"):
            first = llm.complete([{"role": "user", "content": "a"}], stage="novelty", schema=Ok)
        second = llm.complete([{"role": "user", "content": "b"}], stage="novelty", schema=Ok)
        again = llm.complete([{"role": "user", "content": "b"}], stage="novelty", schema=Ok)   # from the cache
    finally:
        server.close()
    assert first.ok and second.ok and again.call.cached
    spans = read_spans(log)
    assert [s["kind"] for s in spans] == [SPAN_LLM] * 3
    s1, s2, s3 = spans
    # the invalid answer was asked again: both requests' figures are summed
    assert s1["asset"] == "ideas" and s1["stage"] == "novelty"
    assert (s1["tries"], s1["retried"]) == (2, True)
    assert (s1["prompt_tokens"], s1["answer_tokens"], s1["cached_tokens"]) == (82, 30, 80)
    assert s1["prompt_s"] == pytest.approx(0.125) and s1["decode_s"] == pytest.approx(6.0)
    # outside a track block no stage is known; one request, no re-ask
    assert "asset" not in s2 and (s2["tries"], s2["retried"], s2["answer_tokens"]) == (1, False, 15)
    # a cached call: no request, so no server figures
    assert s3["cached"] and "decode_s" not in s3 and s3["tries"] == 0


def test_stage_scope_names_the_outermost_stage_and_the_environment_a_default(tmp_path, monkeypatch):
    log = tmp_path / "t.jsonl"
    monkeypatch.setenv(ENV, str(log))
    monkeypatch.setenv("RESEARCHLOOP_TIMING_STAGE", "run_results")
    with stage_scope("patched_code"), stage_scope("inner"):
        log_span(EXPERIMENT, 1.0)
    log_span(EXPERIMENT, 1.0)
    log_span(EXPERIMENT, 1.0, asset="given")
    assert [s["asset"] for s in read_spans(log)] == ["patched_code", "run_results", "given"]


# -- the round bench's per-stage table -------------------------------------------------------------------

def test_round_table_from_a_recorded_span_file(tmp_path):
    from bench.round_bench import OUTSIDE, render, stage_table, totals

    rows = [
        {"kind": "llm", "start": 100.0, "seconds": 10.0, "asset": "ideas", "stage": "ideas", "tries": 1,
         "retried": False, "prompt_tokens": 500, "answer_tokens": 100, "prompt_s": 2.0, "decode_s": 7.5,
         "cached_tokens": 0},
        {"kind": "llm", "start": 111.0, "seconds": 12.0, "asset": "ideas", "stage": "novelty", "tries": 2,
         "retried": True, "prompt_tokens": 900, "answer_tokens": 60, "prompt_s": 1.0, "decode_s": 10.0,
         "cached_tokens": 800},
        {"kind": "llm", "start": 124.0, "seconds": 0.01, "asset": "ideas", "cached": True, "tries": 0},
        # an experiment in a process that did not know its stage: the step it overlaps most
        {"kind": "experiment", "start": 205.0, "seconds": 40.0, "workdir": "/w", "exit_code": 0},
        {"kind": "experiment", "start": 250.0, "seconds": 30.0, "asset": "run_results"},
        {"kind": "experiment", "start": 900.0, "seconds": 5.0},   # in no step
    ]
    log = tmp_path / "timing.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n" + '{"kind": "llm", "sta')  # a line cut by a kill
    steps = [{"asset": "ideas", "start": 99.0, "end": 130.0},
             {"asset": "patched_code", "start": 130.0, "end": 210.0},
             {"asset": "run_results", "start": 210.0, "end": 300.0}]
    table = stage_table(read_spans(log), steps)
    by = {r["asset"]: r for r in table}
    assert [r["asset"] for r in table] == ["ideas", "patched_code", "run_results", OUTSIDE]
    ideas = by["ideas"]
    assert (ideas["llm_calls"], ideas["llm_cached_calls"], ideas["retried_calls"]) == (3, 1, 1)
    assert (ideas["prompt_tokens"], ideas["answer_tokens"], ideas["cached_tokens"]) == (1400, 160, 800)
    assert (ideas["prompt_s"], ideas["decode_s"], ideas["llm_s"], ideas["wall_s"]) == (3.0, 17.5, 22.01, 31.0)
    assert by["patched_code"]["experiment_runs"] == 0 and by["patched_code"]["wall_s"] == 80.0
    assert (by["run_results"]["experiment_runs"], by["run_results"]["experiment_s"]) == (2, 70.0)
    assert (by[OUTSIDE]["experiment_runs"], by[OUTSIDE]["steps"], by[OUTSIDE]["wall_s"]) == (1, 0, 0.0)
    assert totals(table)["llm_calls"] == 3 and totals(table)["experiment_s"] == 75.0

    loop = {"stages": table, "rounds": [{"round": "r1", "wall_s": 201.0, "llm_s": 22.0, "experiment_s": 70.0,
                                          "overhead_s": 109.0, "overhead_share": 0.54}], "run": {"exit_code": 0}}
    page = render({"date": "2026-01-01", "machine": "2 cores", "topic": "diabetes_regression", "held_out": False,
                   "model": "m", "slots": 2, "complete": True, "one": loop, "one_wall_s": 250.0,
                   "two": [loop, loop], "two_wall_s": 300.0, "two_over_one": 1.2})
    assert "| ideas | 31 | 3 (1) | 1 | 1400 (800) | 160 | 3 | 18 | 22 | 0 (0) |" in page
    assert "1.20x the one loop's wall time" in page and "overhead 109 s (54%)" in page


# -- the slots bench against the real small model ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.extended  # two more real servers; make test meets the real server in test_local_llm.py and the rounds
def test_slots_bench_quick_on_the_small_model(tmp_path):
    from bench.slots_bench import main
    from tests.support.resources import SMALL_MODEL

    out = tmp_path / "slots.json"
    assert main(["--quick", "--model", SMALL_MODEL, "--out", str(out), "--work", str(tmp_path / "w")]) == 0
    rec = json.loads(out.read_text())
    by = {(r["slots"], r["concurrency"]): r for r in rec["rows"]}
    assert set(by) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    for slots in (1, 2):
        assert all(by[(slots, n)]["aggregate_tok_s"] > 0 for n in (1, 2))
        assert all(by[(slots, n)]["answer_tokens"] == 8 * n for n in (1, 2))   # every answer ran to max_tokens
    assert rec["raw"][-1]["server_ctx"] == 2 * 512
    assert not (tmp_path / "w" / "llm_cache" / "server.json").exists()       # the private server was stopped


def test_the_prefix_section_renders_each_case_from_its_record():
    from bench.slots_bench import render_prefix

    rows = [{"requests": 2, "sent": how, "wall_s": w, "prompt_tokens": 1348, "cached_tokens": c, "prompt_s": p}
            for how, w, c, p in (("at once", 38.4, 0, 36.4), ("one after another", 21.6, 649, 20.1))]
    page = render_prefix({"date": "2026-01-01", "machine": "2 cores", "load_avg": 1.0, "model": "m", "slots": 2,
                          "threads": 2, "max_tokens": 32, "prefix": "experiments/x/experiment.py", "rows": rows})
    assert "| 2 | at once | 38.4 | 1348 | 0 | 36.4 |" in page
    assert "| 2 | one after another | 21.6 | 1348 | 649 | 20.1 |" in page
    assert "bench/records/slots_prefix.json" in page and "2 slots" in page
