"""Who embeds the missing chunks of an index (`embed_chunks`): this process, one chunk after
another; RESEARCHLOOP_EMBED_WORKERS spawned worker processes (the local backend); or as many Ray
tasks at once (the ray backend: the cluster is reached through resources/ray_backend.py `connect`,
the one connection of this process that the attempts use too). Every worker rebuilds the embedder
from its `rebuild_spec()` and returns the vectors; the step writes every chunk file (embedding.py),
so the files are the same whoever embedded them."""
from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl

from resources.ray_backend import connect
from resources.settings import settings
from resources.sources.base import doc_text

log = logging.getLogger("researchloop.literature")


def chunk_texts(lf: pl.LazyFrame, start: int, stop: int) -> list[str]:
    """The texts of rows [start, stop) as the embedder reads them."""
    return [doc_text(t, a) for t, a in lf.slice(start, stop - start).collect().iter_rows()]


def encode_chunk(embedder, texts: Sequence[str], batch: int) -> np.ndarray:
    """A chunk's texts embedded `batch` at a time, float32, in row order: the one encoding of a
    chunk, whether it runs in the step, in a worker process or in a Ray task."""
    return np.concatenate([np.asarray(embedder.encode(list(texts[s:s + batch])), dtype=np.float32)
                           for s in range(0, len(texts), batch)])


_REBUILT: dict[str, object] = {}   # in a worker process: the embedders rebuilt there, by spec


def encode_elsewhere(spec: tuple, texts: Sequence[str], batch: int, threads: int) -> np.ndarray:
    """`encode_chunk` in a worker process (a local pool's or a Ray worker's): the embedder is
    rebuilt from its `rebuild_spec()` once per process and kept; torch gets `threads` threads
    (the variables before torch is first imported, set_num_threads once it is)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    key = repr(spec)
    if key not in _REBUILT:
        factory, kwargs = spec
        _REBUILT[key] = factory(**kwargs)
    return encode_chunk(_REBUILT[key], texts, batch)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _as_finished(todo: Sequence[tuple[int, int]], submit, next_done, limit: int) -> Iterator[tuple]:
    """Submit the chunks in order, at most `limit` in flight (each holds its texts, then its
    vectors, in memory); yield ((start, stop), vectors) as each finishes."""
    queue, in_flight = list(todo), 0
    while queue or in_flight:
        while queue and in_flight < limit:
            submit(queue.pop(0))
            in_flight += 1
        done = next_done()
        in_flight -= 1
        yield done


def _on_pool(todo, texts_of, spec: tuple, workers: int, batch: int) -> Iterator[tuple]:
    """The chunks embedded by `workers` spawned processes, each with max(1, cores // workers)
    torch threads."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    threads = max(1, _cores() // workers)
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
    pending: dict = {}

    def submit(ab):
        pending[pool.submit(encode_elsewhere, spec, texts_of(*ab), batch, threads)] = ab

    def next_done():
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        f = min(done, key=pending.__getitem__)
        return pending.pop(f), f.result()

    finished = False
    try:
        yield from _as_finished(todo, submit, next_done, 2 * workers)
        finished = True
    finally:
        if not finished:   # an error or an interrupt: stop the workers (their chunks would be dropped)
            for proc in list((pool._processes or {}).values()):  # 3.11 has no public way (3.14: terminate_workers)
                proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _on_ray(todo, texts_of, spec: tuple, workers: int, batch: int) -> Iterator[tuple]:
    """Each chunk a Ray task asking for RESEARCHLOOP_EMBED_RAY_CPUS CPUs (its torch threads), at
    most `workers` at once; its texts go to the task and its vectors come back (no shared disk
    needed), retried on a lost worker like an attempt (RESEARCHLOOP_RAY_RETRIES)."""
    import ray

    s = settings()
    task = ray.remote(encode_elsewhere).options(num_cpus=s.embed_ray_cpus, max_retries=s.ray_retries,
                                                retry_exceptions=False, name="researchloop-embed")
    pending: dict = {}

    def submit(ab):
        pending[task.remote(spec, texts_of(*ab), batch, max(1, int(s.embed_ray_cpus)))] = ab

    def next_done():
        [ref], _ = ray.wait(list(pending), num_returns=1)
        return pending.pop(ref), ray.get(ref)

    try:
        yield from _as_finished(todo, submit, next_done, workers)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


def embed_chunks(lf: pl.LazyFrame, todo: Sequence[tuple[int, int]], embedder, workers: int,
                 batch: int) -> Iterator[tuple]:
    """((start, stop), vectors) of each chunk of `todo`, in the order they finish. One worker
    (or one chunk to do): in this process, one chunk after another. More: by worker processes
    (RESEARCHLOOP_BACKEND=local) or Ray tasks (ray), each rebuilding the embedder from its
    `rebuild_spec()`; an embedder without one (a test's fake), or a step that is itself a daemonic
    process (which may not start processes), embeds in this process, and says so in the log."""
    import multiprocessing as mp

    texts_of = functools.partial(chunk_texts, lf)
    workers = min(workers, len(todo))
    spec = getattr(embedder, "rebuild_spec", None)
    ray_backend = settings().backend == "ray"
    if workers > 1 and spec is None:
        log.info("embedder %s cannot be rebuilt in another process (no rebuild_spec): embedding %d chunks in "
                 "this process instead of %d workers", type(embedder).__name__, len(todo), workers)
    elif workers > 1 and not ray_backend and mp.current_process().daemon:
        log.info("a daemonic process cannot start workers: embedding %d chunks in this process", len(todo))
    elif workers > 1 and spec is not None:  # spec None: the first branch
        if ray_backend:
            try:
                connect()
            except Exception as e:  # noqa: BLE001 (no cluster, or no ray: the index is still built)
                log.warning("embedding on Ray: cannot reach the cluster (%s: %s); using %d local processes",
                            type(e).__name__, e, workers)
            else:
                log.info("embedding %d chunks as Ray tasks, %d at once", len(todo), workers)
                yield from _on_ray(todo, texts_of, spec(), workers, batch)
                return
        log.info("embedding %d chunks in %d worker processes", len(todo), workers)
        yield from _on_pool(todo, texts_of, spec(), workers, batch)
        return
    for a, b in todo:
        yield (a, b), encode_chunk(embedder, texts_of(a, b), batch)
