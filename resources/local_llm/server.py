"""The shared llama.cpp server process: started detached (``python -m resources.local_llm serve``),
recorded in ``<cache>/server.json``, adopted again only after every identity check
(``is_ours``), stopped only when it is ours; ``ensure_server`` / ``release_server`` /
``stop_server`` / ``server_status`` are its API."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from resources.local_llm.leases import lease_path, live_leases, take_lease
from resources.local_llm.models import REPO_ROOT, cache_path, file_lock
from resources.local_llm.weights import assemble_model
from resources.processes import live_process
from resources.safe_io import read_tail
from resources.settings import settings

_STATE = "server.json"
_LOCK = "server.lock"
_LOG = "server.log"
_CHILDREN: dict[int, subprocess.Popen] = {}  # servers this process started (to reap)
# llama.cpp's CPU wheel uses OpenMP. Unbounded spinning burns the cores while the server idles; a
# bounded spin count keeps ACTIVE's speed without that (RESEARCHLOOP_LLM_WAIT_POLICY overrides). What
# keeps decoding fast beside other busy processes is not the wait policy but one decode thread
# (RESEARCHLOOP_LLM_DECODE_THREADS): ggml's threads also meet at spinning barriers of their own
# (bench/results/slots.md, "decode beside busy processes").
_OMP_WAIT_POLICY = "ACTIVE"
_GOMP_SPINCOUNT = "20000000"


def _free_port() -> int:
    """A port nobody listens on now. Another process may take it before the server binds it:
    `_start_locked` then retries on another port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _reap(pid: int) -> None:
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        _CHILDREN.pop(pid, None)


def _process(pid: object, create_time: float | None = None) -> psutil.Process | None:
    """The live (not zombie) process `pid`, and, when `create_time` is given, only if it is the
    same process that was recorded (not a later one that reused the pid); a child of ours that
    exited is reaped first."""
    if isinstance(pid, int) and pid > 0:
        _reap(pid)
    return live_process(pid, create_time)


def _pid_alive(pid: int) -> bool:
    return _process(pid) is not None


def _is_our_server(pid: int, state: dict | None = None) -> bool:
    """The process runs our launcher (`python -m resources.local_llm serve`); with a recorded
    state, also with its model and port, and it is the process that was started (start time)."""
    state = state or {}
    proc = _process(pid, state.get("create_time"))
    if proc is None:
        return False
    try:
        cmd = proc.cmdline()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    if "resources.local_llm" not in cmd or "serve" not in cmd:
        return False
    for flag, key in (("--model", "model_path"), ("--port", "port"), ("--parallel", "slots")):
        if key in state and not _has_arg(cmd, flag, str(state[key])):
            return False
    return True


def _has_arg(cmd: list[str], flag: str, value: str) -> bool:
    return any(a == flag and i + 1 < len(cmd) and cmd[i + 1] == value for i, a in enumerate(cmd))


def _listens_on(pid: int, port: int) -> bool:
    """The process holds a listening TCP socket on `port` (True when the OS will not tell us)."""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


def _get_json(port: int, path: str, timeout: float) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return json.loads(r.read() or b"{}") if r.status == 200 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _healthy(port: int, timeout: float = 2.0) -> bool:
    return (_get_json(port, "/health", timeout) or {}).get("status") == "ok"


def _serves_model(port: int, alias: str, timeout: float = 3.0) -> bool:
    """`/v1/models` on the port names our model (its alias)."""
    body = _get_json(port, "/v1/models", timeout) or {}
    ids = {m.get("id") for m in body.get("data") or [] if isinstance(m, dict)}
    ids |= {m.get("name") for m in body.get("models") or [] if isinstance(m, dict)}
    return alias in ids


def is_ours(state: dict | None) -> bool:
    """A recorded server may be adopted only if every check agrees: the pid is the process we
    started (start time), running our launcher with the recorded model and port, listening on
    that port, and /v1/models there names our model."""
    if not state:
        return False
    pid, port = state.get("pid"), state.get("port")
    if not isinstance(pid, int) or not isinstance(port, int):
        return False
    return (_is_our_server(pid, state) and _listens_on(pid, port)
            and _serves_model(port, state.get("model", "")))


def _read_state(cache: Path) -> dict | None:
    try:
        return json.loads((cache / _STATE).read_text())
    except (OSError, ValueError):
        return None


def _write_state(cache: Path, state: dict) -> None:
    tmp = cache / (_STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, cache / _STATE)


def _log_tail(path: Path, n: int = 40) -> str:
    """The last n lines of the server log (reading only its end: the log may be 20 MB)."""
    return "\n".join(read_tail(path, 8000).splitlines()[-n:]) or "(no log)"


def _kill(pid: int, grace: float = 10.0, state: dict | None = None) -> bool:
    """SIGTERM (whole session group) then SIGKILL; True if a live process was signalled. Only
    our launcher (and, with a recorded state, the very process recorded) is ever signalled."""
    if not _is_our_server(pid, state):
        return False

    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return False

    def live() -> list[psutil.Process]:
        return [p for p in tree if _process(p.pid, p.create_time()) is not None]

    def send(sig: int) -> None:
        for p in live():
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)

    send(signal.SIGTERM)   # the launcher and everything it started
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and live():
        time.sleep(0.1)
    if live():
        send(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and live():
            time.sleep(0.05)
    proc = _CHILDREN.pop(pid, None)
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
    return True


def _stop_locked(cache: Path) -> bool:
    state = _read_state(cache)
    stopped = False
    if state and isinstance(state.get("pid"), int):
        stopped = _kill(state["pid"], state={k: state[k] for k in ("create_time",) if k in state})
    (cache / _STATE).unlink(missing_ok=True)
    return stopped


def server_ctx(ctx_size: int, slots: int) -> int:
    """The server's whole context for `slots` slots of `ctx_size` tokens each: llama.cpp splits its
    context evenly over its slots (the KV cache is not unified), so the whole is the window times
    the slot count."""
    return ctx_size * slots


def slot_count(slots: int | None = None) -> int:
    """The local server's slots: `slots`, else RESEARCHLOOP_LLM_SLOTS."""
    n = slots if slots is not None else settings().llm_slots
    if n < 1:
        raise ValueError(f"the local server needs at least one slot, not {n}")
    return n


def decode_thread_count(threads: int, decode_threads: int | None = None) -> int:
    """Threads the server decodes with: `decode_threads`, else RESEARCHLOOP_LLM_DECODE_THREADS, at
    most `threads` (0: all of them). Prompts are always read with all `threads`."""
    n = decode_threads if decode_threads is not None else settings().llm_decode_threads
    return threads if n <= 0 else min(n, threads)


def _server_cmd(model_path: Path, port: int, ctx_size: int, threads: int, alias: str,
                speculative: str = "none", slots: int = 1, decode_threads: int | None = None) -> list[str]:
    """The launcher's command line; `ctx_size` is one slot's window (the server gets `server_ctx`)."""
    return [
        sys.executable, "-m", "resources.local_llm", "serve",
        "--model", str(model_path), "--port", str(port),
        "--ctx-size", str(server_ctx(ctx_size, slots)), "--threads", str(threads), "--alias", alias,
        "--parallel", str(slots), "--decode-threads", str(decode_thread_count(threads, decode_threads)),
    ] + (["--speculative", speculative] if speculative != "none" else []) + (
        ["--kv-unified"] if settings().llm_kv_unified else [])


# Speculative decoding without a draft model (llama.cpp's n-gram drafts: the next tokens are
# guessed from earlier text of the prompt and answer, then verified in one batch). It pays where an
# answer copies its prompt (a patch rewriting a function it was shown); each kind was measured on
# recorded requests (bench/records/speculative.json). RESEARCHLOOP_LLM_SPECULATIVE picks one.
SPECULATIVE = ("none", "ngram_simple", "ngram_mod", "ngram_map_k")
DEFAULT_SPECULATIVE = "none"


def speculative_kind(kind: str | None = None) -> str:
    """The speculative decoding kind: `kind`, else RESEARCHLOOP_LLM_SPECULATIVE, else the default."""
    k = (kind or settings().llm_speculative or DEFAULT_SPECULATIVE).lower()
    if k not in SPECULATIVE:
        raise ValueError(f"RESEARCHLOOP_LLM_SPECULATIVE={k!r}: one of {', '.join(SPECULATIVE)}")
    return k


PORT_TRIES = 3  # a port taken between picking and binding is replaced this many times


def _start_locked(
    cache: Path, name: str, model_path: Path, ctx_size: int, threads: int, timeout: float,
    speculative: str = "none", slots: int = 1, decode_threads: int | None = None,
) -> dict:
    log_path = cache / _LOG
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    # ACTIVE with a bounded spin count (GOMP_SPINCOUNT): unbounded ACTIVE spins while idle, starving
    # the experiments. RESEARCHLOOP_LLM_WAIT_POLICY overrides the policy.
    env["OMP_WAIT_POLICY"] = settings().llm_wait_policy or _OMP_WAIT_POLICY
    env.setdefault("GOMP_SPINCOUNT", _GOMP_SPINCOUNT)
    with contextlib.suppress(OSError):  # keep the request log bounded
        if log_path.stat().st_size > 20 * 1024 * 1024:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))
    t0 = time.monotonic()
    for port_try in range(1, PORT_TRIES + 1):
        port = _free_port()
        cmd = _server_cmd(model_path, port, ctx_size, threads, name, speculative, slots=slots,
                          decode_threads=decode_threads)
        with open(log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd, cwd=str(REPO_ROOT), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        _CHILDREN[proc.pid] = proc
        lost_port = False
        while True:
            if proc.poll() is not None:
                _CHILDREN.pop(proc.pid, None)
                if _port_taken(port) and port_try < PORT_TRIES:
                    lost_port = True  # someone bound the port between our pick and the server's bind
                    break
                raise RuntimeError(
                    f"local LLM server exited with code {proc.returncode} during startup; "
                    f"log {log_path}:\n{_log_tail(log_path)}"
                )
            # healthy *and* ours: a stranger that took the port may answer /health too
            if _healthy(port, timeout=1.0):
                if _listens_on(proc.pid, port):
                    break
                if port_try < PORT_TRIES:
                    _kill(proc.pid, grace=3)
                    lost_port = True
                    break
            if time.monotonic() - t0 > timeout:
                _kill(proc.pid, grace=3)
                raise TimeoutError(
                    f"local LLM server not healthy after {timeout:.0f}s; log {log_path}:\n"
                    f"{_log_tail(log_path)}"
                )
            time.sleep(0.25)
        if lost_port:
            with open(log_path, "ab") as log:
                log.write(f"=== port {port} was taken by another process; trying another\n".encode())
            continue
        break
    return {
        "pid": proc.pid,
        "create_time": psutil.Process(proc.pid).create_time(),
        "port": port,
        "model": name,
        "model_path": str(model_path),
        "base_url": f"http://127.0.0.1:{port}/v1",
        "ctx_size": ctx_size,  # one slot's window
        "slots": slots,
        "server_ctx": server_ctx(ctx_size, slots),
        "threads": threads,
        "decode_threads": decode_thread_count(threads, decode_threads),
        "speculative": speculative,
        "kv_unified": settings().llm_kv_unified,
        "log": str(log_path),
        "started_at": time.time(),
        "startup_s": round(time.monotonic() - t0, 2),
        "port_tries": port_try,
    }


def ensure_server(
    name: str = "qwen2.5-coder-1.5b",
    cache_dir: str | os.PathLike | None = None,
    ctx_size: int = 8192,
    threads: int = 2,
    timeout: float = 180.0,
    progress: bool = False,
    lease: bool = True,
    speculative: str | None = None,
    slots: int | None = None,
) -> str:
    """Return the base_url (``http://127.0.0.1:PORT/v1``) of a healthy shared server, and (with
    ``lease``) record that this process uses it.

    ``ctx_size`` is each request's window; the server decodes ``slots`` requests at once (default
    RESEARCHLOOP_LLM_SLOTS) with ``ctx_size`` tokens each. Reuses the server recorded in
    ``<cache>/server.json`` only if it serves the same model/ctx/slots/threads/decode threads
    (RESEARCHLOOP_LLM_DECODE_THREADS)/speculative decoding
    and passes every identity check (:func:`is_ours`); otherwise stops it (only if it is our
    launcher) and starts a new one.
    """
    speculative = speculative_kind(speculative)
    slots = slot_count(slots)
    decode_threads = decode_thread_count(threads)
    cache = cache_path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    model_path = assemble_model(name, cache, progress=progress)
    with file_lock(cache / _LOCK):
        state = _read_state(cache)
        url = None
        if state:
            same = (
                state.get("model_path") == str(model_path)
                and state.get("ctx_size") == ctx_size
                and state.get("threads") == threads
                and state.get("decode_threads", state.get("threads")) == decode_threads
                and state.get("slots", 1) == slots  # a state from before slots: one slot
                and state.get("speculative", "none") == speculative
                and state.get("kv_unified", False) == settings().llm_kv_unified
            )
            if same and is_ours(state):
                deadline = time.monotonic() + 15  # tolerate a momentarily busy server
                while time.monotonic() < deadline:
                    if _healthy(state["port"], timeout=3.0):
                        url = state["base_url"]
                        break
                    if not _pid_alive(state["pid"]):
                        break
                    time.sleep(0.5)
            if url is None:
                _stop_locked(cache)
        if url is None:
            state = _start_locked(cache, name, model_path, ctx_size, threads, timeout, speculative, slots,
                                  decode_threads)
            _write_state(cache, state)
            url = state["base_url"]
        if lease:
            live_leases(cache)  # drop the leases of processes that died without releasing
            take_lease(cache)
        return url


def release_server(cache_dir: str | os.PathLike | None = None) -> bool:
    """This process no longer uses the server: drop its lease, and stop the server if no other
    live process holds one. True if the server was stopped."""
    cache = cache_path(cache_dir)
    with file_lock(cache / _LOCK):
        lease_path(cache, os.getpid()).unlink(missing_ok=True)
        if live_leases(cache):
            return False
        return _stop_locked(cache)


def stop_server(cache_dir: str | os.PathLike | None = None) -> bool:
    """Stop the recorded server (SIGTERM, then SIGKILL) whoever uses it; True if one was running."""
    cache = cache_path(cache_dir)
    if not (cache / _STATE).exists():
        return False
    with file_lock(cache / _LOCK):
        return _stop_locked(cache)


def server_status(cache_dir: str | os.PathLike | None = None) -> dict | None:
    """The recorded state plus ``alive``/``healthy`` flags, or None if none recorded."""
    state = _read_state(cache_path(cache_dir))
    if not state:
        return None
    pid = state.get("pid")
    state["alive"] = isinstance(pid, int) and _is_our_server(pid, state)
    state["healthy"] = bool(state["alive"]) and _healthy(int(state.get("port", 0)))
    return state
