"""The Ray experiment backend: each attempt runs as one Ray task, under the same sandbox, on a
worker of a Ray cluster (RESEARCHLOOP_BACKEND=ray, or a topic's `execution: {backend: ray}`; the
cluster is RAY_ADDRESS, read by Ray).

What happens to one `Runner.run(command, ws, ...)`:

1. the step packs the prepared workspace (every file, link and folder under `ws`) and submits
   `_attempt_on_worker` with the resources the attempt declares (`attempt_request`): the topic's
   `execution:` cpus / gpus / resources, each one it leaves empty from RESEARCHLOOP_RAY_CPUS /
   _GPUS / _RESOURCES (custom resources, e.g. a `gpu_slot` a cluster defines), and the attempt's
   `memory_mb` (the topic's budget) as Ray's `memory`; `max_retries` = RESEARCHLOOP_RAY_RETRIES
   re-runs it from scratch when its worker dies (Ray retries system failures only, never an
   exception of ours);
2. the worker unpacks it into a fresh folder under its scratch dir, runs `run_sandboxed` there
   (bubblewrap, rlimits, memory watchdog, timeout: `resources/sandbox/`; the GPUs Ray gave the
   task become its CUDA_VISIBLE_DEVICES, its CPUs its thread counts), and sends back the result,
   the tails of both logs and what the run changed in the workspace (changed and new files up to
   RESEARCHLOOP_RAY_RETURN_MB, deleted paths), then removes its folder;
3. the step writes that back into `ws` (never through a link, never outside `ws`) and the logs
   into `ws/../logs/`, with the worker's paths rewritten to the step's, so the host sees exactly
   what a local run would leave (final_info.json, out/ files, a changed topic file, tracebacks
   naming the step's paths) and everything downstream (integrity checks, repairs, MLflow) is
   unchanged.

A worker that is lost for good (retries spent), a task no node can take within
RESEARCHLOOP_RAY_WAIT_S, or a cluster that cannot be reached gives a result with no exit code,
`killed_reason="worker_lost"` and the reason as its stderr: the attempt is recorded as failed
with that reason, never dropped.

Ray is imported only here and only when this backend is used. The pure parts (packing, applying,
path mapping, task options, results) take no Ray and are tested on their own.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from resources.safe_io import read_tail
from resources.sandbox import TAIL_CHARS, ProcessResult, default_hidden_paths, run_sandboxed
from resources.settings import Settings, settings
from resources.workspace_walk import WorkspaceLimitError, remove_tree

if TYPE_CHECKING:
    from schemas.topic import ExecutionSpec

log = logging.getLogger(__name__)

LOG_RETURN_BYTES = 4 << 20  # of each log, its last bytes come back
SCRATCH_DIR = "researchloop-ray"
LOST = "worker_lost"
_counter = itertools.count()
_connect_lock = threading.Lock()

# an entry of a packed tree: (relative path, kind, payload, mode); kind is "dir", "file" (payload:
# bytes), "link" (payload: target), "special" (payload: the file mode as text) or "omitted" (a file
# over the cap; payload: its size as text)
Entry = tuple[str, str, object, int]


# --------------------------------------------------------------------------- packing (pure)

def _walk(root: Path) -> Iterable[tuple[str, os.stat_result]]:
    """(relative path, lstat) of everything under root, parents first, links not followed."""
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(root / rel if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            yield r, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(r)


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file, never following a link (None when it is not one any more)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(limit + 1)


def snapshot(root: Path) -> dict[str, str]:
    """What each path under root is: 'dir', 'link:<target>', 'special:<mode>' or its sha256."""
    out: dict[str, str] = {}
    for rel, st in _walk(root):
        if stat.S_ISDIR(st.st_mode):
            out[rel] = "dir"
        elif stat.S_ISLNK(st.st_mode):
            out[rel] = "link:" + os.readlink(root / rel)
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            try:
                fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as f:
                    for chunk in iter(functools.partial(f.read, 1 << 20), b""):
                        h.update(chunk)
                out[rel] = h.hexdigest()
            except OSError as e:
                out[rel] = f"unreadable:{e.errno}"
        else:
            out[rel] = f"special:{stat.filemode(st.st_mode)}"
    return out


def pack(root: Path, only: set[str] | None = None, max_bytes: int | None = None) -> list[Entry]:
    """The entries under root (all, or the paths in `only`), parents before children; file contents
    until max_bytes in all are spent, later files as 'omitted' with their size."""
    out: list[Entry] = []
    budget = max_bytes
    for rel, st in _walk(root):
        if only is not None and rel not in only:
            continue
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            out.append((rel, "dir", None, mode))
        elif stat.S_ISLNK(st.st_mode):
            out.append((rel, "link", os.readlink(root / rel), 0))
        elif stat.S_ISREG(st.st_mode):
            if budget is not None and st.st_size > budget:
                out.append((rel, "omitted", str(st.st_size), mode))
                continue
            data = _read_regular(root / rel, budget if budget is not None else st.st_size + (1 << 30))
            if data is None or (budget is not None and len(data) > budget):
                out.append((rel, "omitted", str(st.st_size), mode))
                continue
            if budget is not None:
                budget -= len(data)
            out.append((rel, "file", data, mode))
        else:
            out.append((rel, "special", stat.filemode(st.st_mode), 0))
    return out


def delta(before: dict[str, str], root: Path, max_bytes: int) -> tuple[list[Entry], list[str]]:
    """What a run changed under root since `before` (a snapshot): the entries new or different
    (file contents capped at max_bytes in all) and the paths that are gone."""
    after = snapshot(root)
    changed = {p for p, v in after.items() if before.get(p) != v}
    gone = sorted(p for p in before if p not in after)
    return pack(root, only=changed, max_bytes=max_bytes), gone


def _safe_rel(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\0" not in rel


def _real_parent(root: Path, rel: str) -> Path | None:
    """root/rel's parent when every folder between root and it is a real folder (no link)."""
    cur = root
    for part in rel.split("/")[:-1]:
        cur = cur / part
        try:
            if not stat.S_ISDIR(os.lstat(cur).st_mode):
                return None
        except OSError:
            return None
    return cur


def _remove(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        remove_tree(path)
    else:
        path.unlink()


def apply(root: Path, entries: Sequence[Entry], gone: Sequence[str] = ()) -> list[str]:
    """Write packed entries into root and delete the `gone` paths, never through a link and never
    outside root. A file sent as 'omitted' (over the cap) or 'special' (FIFO, device, socket)
    becomes a short note in its place, so the host sees that the path changed. Returns the paths
    it could not write (unsafe names, a parent that is not a real folder)."""
    root = Path(root)
    refused: list[str] = []
    for rel in gone:
        parent = _real_parent(root, rel) if _safe_rel(rel) else None
        if parent is None:
            refused.append(rel)
            continue
        _remove(root / rel)
    for rel, kind, payload, mode in entries:
        parent = _real_parent(root, rel) if _safe_rel(rel) else None
        if parent is None:
            refused.append(rel)
            continue
        path = root / rel
        if kind == "dir":
            try:
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    continue
            except FileNotFoundError:
                pass
            _remove(path)
            path.mkdir(mode=mode & 0o755 or 0o755)
            continue
        _remove(path)
        if kind == "link":
            os.symlink(str(payload), path)
            continue
        if kind == "file":
            data = payload
        elif kind == "omitted":
            data = f"researchloop: not sent back by the Ray worker ({payload} bytes, over the cap)\n".encode()
        else:
            data = f"researchloop: a special file ({payload}) on the Ray worker\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, (mode & 0o755) or 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)  # type: ignore[arg-type]
    return refused


def map_paths(text: str, remote: str, local: str) -> str:
    """The worker's workspace path in a log or traceback replaced by the step's."""
    return text.replace(remote, local) if remote and remote != local else text


# --------------------------------------------------------------------------- task options (pure)

def parse_resources(text: str) -> dict[str, float]:
    """'gpu_slot=1, a100=0.5' -> {'gpu_slot': 1.0, 'a100': 0.5}."""
    out: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, amount = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"RESEARCHLOOP_RAY_RESOURCES: expected name=amount, got {part.strip()!r}")
        out[name.strip()] = float(amount)
    return out


def attempt_request(execution: ExecutionSpec | None = None,
                    env: Settings | None = None) -> tuple[float, float, dict[str, float]]:
    """(cpus, gpus, custom resources) one attempt asks Ray for: the topic's `execution:` block
    field by field, each field it leaves empty (or no block) from the environment
    (RESEARCHLOOP_RAY_CPUS / _GPUS / _RESOURCES)."""
    env = env or settings()
    ex = execution
    cpus = env.ray_cpus if ex is None or ex.cpus is None else float(ex.cpus)
    gpus = env.ray_gpus if ex is None or ex.gpus is None else float(ex.gpus)
    resources = (parse_resources(env.ray_resources) if ex is None or ex.resources is None
                 else {k: float(v) for k, v in ex.resources.items()})
    return cpus, gpus, resources


def task_options(memory_mb: int, cpus: float, gpus: float, resources: str | Mapping[str, float], retries: int) -> dict:
    """Ray's .options() for one attempt: what it declares, and retries on a lost worker only.
    `resources`: a mapping, or the environment's 'name=amount,...' text."""
    custom = parse_resources(resources) if isinstance(resources, str) else dict(resources)
    return {"num_cpus": cpus, "num_gpus": gpus, "resources": custom,
            "memory": int(memory_mb) << 20, "max_retries": retries, "retry_exceptions": False,
            "name": "researchloop-attempt"}


def worker_env(env: dict[str, str], gpu_ids: Sequence[object], cpus: float) -> dict[str, str]:
    """The sandbox's extra environment on the worker: the GPUs Ray gave the task (none: no CUDA
    device), thread counts from the CPUs it asked for; the step's own device choice is dropped."""
    out = dict(env)
    out["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpu_ids)
    threads = str(max(1, int(cpus)))
    out["OMP_NUM_THREADS"] = out["MKL_NUM_THREADS"] = threads
    return out


def _log_paths(workdir: Path) -> tuple[Path, Path]:
    logs = workdir.parent / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stem = (f"{workdir.name}-{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
            f"-{os.getpid()}-ray{next(_counter)}")
    return logs / f"{stem}.stdout.log", logs / f"{stem}.stderr.log"


def lost_result(command: Sequence[str], workdir: Path, reason: str, duration_s: float = 0.0,
                killed_reason: str = LOST) -> ProcessResult:
    """The record of an attempt whose worker never gave a result: no exit code, the reason as
    its stderr (where the repair loop and the verdict table read errors)."""
    out, err = _log_paths(workdir)
    out.write_text("")
    err.write_text(f"RayWorkerLost: {reason}\n")
    return ProcessResult(command=[str(c) for c in command], workdir=str(workdir), exit_code=None, timed_out=False,
                         killed_reason=killed_reason, duration_s=round(duration_s, 3), stdout_path=str(out),
                         stderr_path=str(err), stdout_tail="", stderr_tail=read_tail(err, TAIL_CHARS),
                         sandboxed=True)


def result_from_worker(reply: dict, workdir: Path) -> ProcessResult:
    """Map the worker's reply onto the step's workspace: apply its changes to `workdir`, write its
    log tails under workdir/../logs with the worker's paths rewritten, and return the
    ProcessResult a local run would have given (paths on this machine)."""
    workdir = Path(workdir)
    remote = reply["remote_ws"]
    refused = apply(workdir, reply["files"], reply["gone"])
    if refused:
        log.warning("ray backend: %d paths the run made were not written back: %s", len(refused), refused[:5])
    out, err = _log_paths(workdir)
    for path, key in ((out, "stdout"), (err, "stderr")):
        text = reply["logs"][key].decode("utf-8", errors="replace")
        path.write_text(map_paths(text, remote, str(workdir)))
    r = dict(reply["result"])
    r.update(workdir=str(workdir), stdout_path=str(out), stderr_path=str(err),
             stdout_tail=read_tail(out, TAIL_CHARS), stderr_tail=read_tail(err, TAIL_CHARS),
             command=[map_paths(c, remote, str(workdir)) for c in r["command"]])
    return ProcessResult(**r)


# --------------------------------------------------------------------------- on the worker

def _tail_bytes(path: str, limit: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            return f.read(limit)
    except OSError:
        return b""


def _attempt_on_worker(job: dict) -> dict:
    """Runs on a Ray worker: unpack, run sandboxed, send back result, log tails and changes."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    scratch = Path(settings().ray_scratch or tempfile.gettempdir()) / SCRATCH_DIR / node[:16]
    scratch.mkdir(parents=True, exist_ok=True)
    task_dir = Path(tempfile.mkdtemp(prefix="attempt-", dir=scratch))
    try:
        ws = task_dir / job["name"]
        ws.mkdir()
        apply(ws, job["files"])
        before = snapshot(ws)
        env = worker_env(job["env"], ray.get_gpu_ids(), job["cpus"])
        hide = [*default_hidden_paths(), *job["hide"]] if job["hide"] else None
        res = run_sandboxed(job["command"], ws, timeout_s=job["timeout_s"], env=env, hide=hide,
                            logs_dir=task_dir / "logs",
                            limit_address_space=job["limit_address_space"] and not ray.get_gpu_ids(),
                            **job["limits"])
        files, gone = delta(before, ws, job["return_bytes"])
        return {"result": res.model_dump(), "files": files, "gone": gone, "remote_ws": str(ws), "node": node,
                "host": socket.gethostname(),
                "logs": {"stdout": _tail_bytes(res.stdout_path, LOG_RETURN_BYTES),
                         "stderr": _tail_bytes(res.stderr_path, LOG_RETURN_BYTES)}}
    finally:
        try:
            remove_tree(task_dir)
        except (OSError, WorkspaceLimitError) as e:  # the worker's scratch dir: a later clean-up of it may succeed
            log.warning("ray worker: could not remove %s: %s", task_dir, e)


# --------------------------------------------------------------------------- in the step

def connect() -> None:
    """Connect this process to the cluster once: RAY_ADDRESS (a `ray://` client address too), else
    the cluster `ray start` made on this machine. A connection already made in this process (a
    dagster-ray resource such as KubeRayCluster, which calls ray.init) is used as it is."""
    import ray

    with _connect_lock:  # steps run in threads too (in-process executor, tests): ray.init once
        if ray.is_initialized():
            return
        address = os.environ.get("RAY_ADDRESS") or "auto"
        ray.init(address=address, namespace="researchloop", log_to_driver=False, ignore_reinit_error=True,
                 logging_level=logging.WARNING)


def run_on_ray(command: list[str], workdir: Path, *, timeout_s: float, memory_mb: int, env: dict[str, str] | None,
               hide: Sequence[Path | str], limit_address_space: bool, limits: dict,
               execution: ExecutionSpec | None = None) -> ProcessResult:
    """One attempt as a Ray task (see the module docstring); `hide`: dirs to hide besides the
    worker's defaults; `limits`: run_sandboxed's other limits (max_procs, max_file_mb, disk_mb,
    sandbox: the Dagster side's choice, applied on the worker); `execution`: the topic's block
    (what the attempt asks for, see `attempt_request`; None: the environment's)."""
    import ray
    from ray import exceptions as rx

    s = settings()
    workdir = Path(workdir).absolute()
    start = time.monotonic()
    try:
        connect()
    except Exception as e:  # no cluster: the attempt fails with the reason, the round goes on
        return lost_result(command, workdir, f"cannot reach the Ray cluster: {type(e).__name__}: {e}")
    cpus, gpus, resources = attempt_request(execution, s)
    job = {"name": workdir.name, "files": pack(workdir), "command": [str(c) for c in command],
           "timeout_s": float(timeout_s), "env": dict(env or {}), "hide": [str(h) for h in hide],
           "cpus": cpus, "limit_address_space": limit_address_space,
           "limits": {"memory_mb": int(memory_mb), **limits}, "return_bytes": s.ray_return_mb << 20}
    opts = task_options(memory_mb, cpus, gpus, resources, s.ray_retries)
    ref = ray.remote(_attempt_on_worker).options(**opts).remote(job)
    wait_s = s.ray_wait_s + (s.ray_retries + 1) * (float(timeout_s) + 60)
    try:
        reply = ray.get(ref, timeout=wait_s)
    except rx.GetTimeoutError:
        ray.cancel(ref, force=True)
        wanted = f"{opts['resources'] or ''} {cpus:g} CPU / {gpus:g} GPU".strip()
        return lost_result(command, workdir, f"no result within {wait_s:.0f} s (no node with {wanted} free, "
                           "or a hung worker)", time.monotonic() - start)
    except rx.RayTaskError:
        raise  # our own code failed on the worker (e.g. no bubblewrap there): as a local run would raise
    except rx.RayError as e:  # the worker or its node died and the retries are spent
        first = (str(e).strip().splitlines() or [""])[0][:300]
        return lost_result(command, workdir, f"the Ray worker running this attempt was lost after "
                           f"{s.ray_retries + 1} tries ({type(e).__name__}: {first})", time.monotonic() - start)
    return result_from_worker(reply, workdir)

