"""The embeddings of an index's papers, per embedder model (folder `emb-<model>/` in the index
folder): chunk files of EMBED_CHUNK papers in row order, each written under a private name and
renamed into place when complete. A killed build resumes with the missing chunks; the index of a
dump that grew by appending (meta.json `extends`) and the single .npy of an index built before
chunks existed lend theirs by hard link. Searches memory-map the chunks (`mapped_chunks`):
nothing is re-embedded and the matrix is never assembled in memory."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import polars as pl

from resources.settings import settings
from resources.sources.embed_workers import embed_chunks
from resources.sources.index import private_path

log = logging.getLogger("researchloop.literature")

EMBED_BATCH = 2048         # papers embedded per encode call while building
EMBED_CHUNK = 8192         # papers per embedding chunk file: what a killed build loses at most


def _model_key(embedder) -> str:
    return hashlib.sha256(embedder.model_id().encode()).hexdigest()[:12]


def _chunk_name(start: int, stop: int) -> str:
    return f"chunk-{start:09d}-{stop:09d}.npy"


def _chunk_ranges(chunk_dir: Path) -> dict[int, int]:
    """start -> stop of the finished chunk files (temporary ones are not matched)."""
    found = (re.fullmatch(r"chunk-(\d{9})-(\d{9})\.npy", p.name) for p in chunk_dir.glob("chunk-*.npy"))
    return {int(m[1]): int(m[2]) for m in found if m}


def chunk_plan(done: dict[int, int], n: int, size: int) -> list[tuple[int, int]]:
    """The row ranges covering [0, n): a finished chunk where one starts at the position (kept
    from a killed build or reused from the index of a shorter dump), else `size` rows. Every
    builder, killed or concurrent, derives the same ranges from the same files."""
    plan, pos = [], 0
    while pos < n:
        stop = done[pos] if pos in done and done[pos] <= n else min(pos + size, n)
        plan.append((pos, stop))
        pos = stop
    return plan


def _link_or_copy(src: Path, dst: Path) -> None:
    """Put a finished chunk of another index at `dst` (a hard link costs no disk; a copy is
    renamed into place like any chunk)."""
    try:
        os.link(src, dst)
    except FileExistsError:
        pass
    except OSError:
        tmp = private_path(dst)
        shutil.copyfile(src, tmp)
        tmp.replace(dst)


def _reuse_chunks(folder: Path, key: str, chunk_dir: Path) -> int:
    """Link what is already embedded into a new chunk folder: the single .npy of an index built
    before chunks existed, or the chunks of the index this one extends (meta.json `extends`:
    the same dump, grown append-only) inside the verified common prefix; returns the rows."""
    legacy = folder / f"emb-{key}.npy"        # an index built before chunks: one chunk of every row
    if legacy.exists():
        rows = len(np.load(legacy, mmap_mode="r"))
        _link_or_copy(legacy, chunk_dir / _chunk_name(0, rows))
        return rows
    meta = json.loads((folder / "meta.json").read_text())
    if not meta.get("extends"):
        return 0
    old = folder.parent / meta["extends"] / f"emb-{key}"
    reused = 0
    for start, stop in _chunk_ranges(old).items() if old.is_dir() else ():
        if stop <= meta["prefix"]:
            _link_or_copy(old / _chunk_name(start, stop), chunk_dir / _chunk_name(start, stop))
            reused += stop - start
    return reused


def save_chunk(path: Path, vecs: np.ndarray) -> None:
    """Write a chunk under a private name and rename it into place (a killed build leaves none)."""
    tmp = private_path(path)
    np.save(tmp, vecs)
    tmp.replace(path)


def embedding_chunks(folder: Path, n: int, embedder, workers: int | None = None) -> list[Path]:
    """The embedding chunk files of every paper for this embedder model, in row order, built
    once: each chunk of EMBED_CHUNK papers is written under a private name and renamed into
    place when complete, so a killed build resumes with the missing chunks, and chunks of the
    index of a shorter version of the same dump are reused (`_reuse_chunks`). `workers` chunks
    are embedded at once (None: RESEARCHLOOP_EMBED_WORKERS, see embed_workers.py `embed_chunks`);
    whoever embeds a chunk, this process writes it, so the files are the same as one worker's."""
    key = _model_key(embedder)
    chunk_dir = folder / f"emb-{key}"
    done = _chunk_ranges(chunk_dir) if chunk_dir.is_dir() else {}
    plan = chunk_plan(done, n, EMBED_CHUNK)
    if any(done.get(a) != b for a, b in plan):
        chunk_dir.mkdir(exist_ok=True)
        reused = _reuse_chunks(folder, key, chunk_dir)   # idempotent: a killed build may have linked some
        if reused:
            log.info("%d papers of %s already embedded: reused", reused, folder.name)
            done = _chunk_ranges(chunk_dir)
            plan = chunk_plan(done, n, EMBED_CHUNK)
        todo = [(a, b) for a, b in plan if done.get(a) != b]
        lf = pl.scan_parquet(folder / "papers.parquet").select("title", "abstract")
        total = sum(b - a for a, b in todo)
        t0, embedded = time.monotonic(), 0
        workers = settings().embed_workers if workers is None else workers
        for (a, b), vecs in embed_chunks(lf, todo, embedder, workers, EMBED_BATCH):
            save_chunk(chunk_dir / _chunk_name(a, b), vecs)
            embedded += b - a
            log.info("embedded papers %d-%d: %d/%d papers (%d to go, %.1f papers/s)", a, b, n - total + embedded,
                     n, total - embedded, embedded / max(time.monotonic() - t0, 1e-9))
    return [chunk_dir / _chunk_name(a, b) for a, b in plan]


@functools.lru_cache(maxsize=8)
def mapped_chunks(paths: tuple[Path, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.load(p, mmap_mode="r") for p in paths)
