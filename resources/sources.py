"""Paper sources behind one interface, and the local ones: the shipped corpus and a user's
own dump (JSON lines or Parquet with title/abstract, or the arXiv metadata snapshot).

A local file is normalised and filtered lazily with polars (the arXiv snapshot is streamed,
never read whole), written once to Parquet next to its BM25 index and its embeddings; the
folder is keyed by the file's identity (path, size, mtime), its format and category filter,
the embeddings by the embedding model. Later searches load the BM25 index memory-mapped,
memory-map the embeddings and read only the rows they return: nothing is re-embedded.

Embeddings are written in chunk files of EMBED_CHUNK papers, each renamed into place when
complete: a killed build resumes with the missing chunks, and the index of a dump that grew
by appending (its first papers verified by digest) reuses the old index's chunks. Missing chunks
are embedded RESEARCHLOOP_EMBED_WORKERS at a time (worker processes, or Ray tasks on the ray
backend; `_embedded`); this process writes every chunk file. From ANN_MIN
papers the embedding side searches a faiss HNSW index built once next to the chunks.

Why one module: it is one responsibility, a local paper source from its file to its search
results, and every part (format detection, the normalised Parquet, the BM25 index, the embedding
chunks and the workers that fill them, the ANN index) writes into, and is keyed by, the same index
folder; the online sources are resources/scholarly.py."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from resources.settings import settings
from schemas.records import Paper

log = logging.getLogger("researchloop.literature")

DumpFormat = Literal["auto", "jsonl", "parquet", "arxiv"]
INDEX_VERSION = 1          # bump when the normalisation or the index layout changes
EXACT_DEPTH = 1000         # up to this many papers, fuse full rankings (exact RRF)
EMBED_BATCH = 2048         # papers embedded per encode call while building
EMBED_CHUNK = 8192         # papers per embedding chunk file: what a killed build loses at most
# from this many papers the embedding side searches a faiss index, below it exactly: on real paper
# embeddings (bench/records/ann_real.json) the HNSW's top 10 at depth 1000 equals the exact top 10
# at 10k-49k papers, and below 50k the exact search costs only tens of ms and builds nothing
ANN_MIN = 50_000
ANN_M = 32                 # HNSW links per paper (faiss's usual choice for high recall)
ANN_EF_BUILD = 40          # HNSW build breadth (faiss's default)
ANN_EF_SEARCH = 128        # HNSW search breadth, raised to the search's depth (>= 1000 candidates) when larger
DIGEST_SLICE = 200_000     # rows hashed per read when checking that a grown dump starts with the old one


class PaperSource(ABC):
    """Where papers come from. Every source searches; online ones also follow the citation graph."""

    name: str = "source"

    @abstractmethod
    def search(self, query: str, k: int) -> list[Paper]:
        """Up to k papers for the query, best first, with `query` and `retrieval_score` set."""

    @abstractmethod
    def describe(self) -> str:
        """One line for logs and asset metadata."""


class OnlineSource(PaperSource):
    """A scholarly web API: besides search, a paper's details and its citation neighbourhood."""

    @abstractmethod
    def details(self, paper_id: str) -> Paper: ...

    @abstractmethod
    def references(self, paper_id: str, k: int = 100) -> list[Paper]:
        """Papers the given paper cites."""

    @abstractmethod
    def citations(self, paper_id: str, k: int = 100) -> list[Paper]:
        """Papers citing the given paper."""


def rrf_fuse(rankings: Sequence[Sequence[int]], k: int = 60) -> dict[int, float]:
    """Reciprocal rank fusion of several rankings (lists of doc indices, best first)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank + 1)
    return scores


def doc_text(title: str, abstract: str) -> str:
    return f"{title}. {abstract}"


# ---------------------------------------------------------------- reading dumps

def detect_format(path: Path) -> DumpFormat:
    """parquet by extension; JSON lines whose first record has arXiv's `id` + `categories`
    (and no `paper_id`) are the arXiv snapshot; other JSON lines are a plain dump."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    with path.open("rb") as f:
        first = b""
        for line in f:
            if line.strip():
                first = line
                break
    try:
        rec = json.loads(first) if first else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:1: not JSON: {e}") from e
    if isinstance(rec, dict) and {"id", "categories", "abstract"} <= rec.keys() and "paper_id" not in rec:
        return "arxiv"
    return "jsonl"


def _clean(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.String).str.replace_all(r"\s+", " ").str.strip_chars()


def _title_id(title: str) -> str:
    """A stable id for a paper that has none: a hash of its normalised title."""
    return "t-" + hashlib.sha1(" ".join(title.lower().split()).encode()).hexdigest()[:12]


def _category_filter(categories: Sequence[str]) -> pl.Expr:
    """arXiv `categories` is space-separated ("cs.CV cs.LG"); "cs.CV" matches exactly and an
    archive name ("cs") matches all of its categories."""
    alts = "|".join(re.escape(c) + (r"(\.\S+)?" if "." not in c else "") for c in categories)
    return pl.col("categories").str.contains(rf"(^|\s)({alts})(\s|$)")


def _scan_arxiv(path: Path, categories: Sequence[str]) -> pl.LazyFrame:
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "id": pl.String, "title": pl.String, "abstract": pl.String, "categories": pl.String,
        "update_date": pl.String, "journal-ref": pl.String, "authors": pl.String,
        "authors_parsed": pl.List(pl.List(pl.String))}
    lf = pl.scan_ndjson(path, schema=schema)
    if categories:
        lf = lf.filter(_category_filter(categories))
    # new-style ids (YYMM.NNNNN) and old-style ones (archive/YYMMNNN) carry the first version's date
    yy = pl.coalesce(pl.col("id").str.extract(r"^(\d{2})\d{2}\.", 1),
                     pl.col("id").str.extract(r"/(\d{2})\d{2}", 1)).cast(pl.Int64, strict=False)
    parsed = pl.col("authors_parsed").list.eval(pl.concat_str(
        [pl.element().list.get(1, null_on_oob=True), pl.element().list.get(0, null_on_oob=True)],
        separator=" ", ignore_nulls=True).str.strip_chars())
    split = pl.col("authors").str.replace_all(r"\s+and\s+", ", ").str.split(", ")
    return lf.select(
        paper_id=pl.col("id"), title=_clean("title"), abstract=_clean("abstract"),
        year=pl.coalesce(pl.when(yy >= 91).then(1900 + yy).otherwise(2000 + yy),
                         pl.col("update_date").str.slice(0, 4).cast(pl.Int64, strict=False)),
        venue=pl.coalesce(_clean("journal-ref"), pl.lit("arXiv")),
        authors=pl.coalesce(parsed, split),
        arxiv_id=pl.col("id"),
    )


def _scan_plain(path: Path, fmt: str) -> pl.LazyFrame:
    lf = pl.scan_parquet(path) if fmt == "parquet" else pl.scan_ndjson(path, infer_schema_length=10_000)
    schema = lf.collect_schema()
    cols = set(schema.names())
    text_cols = [c for c in ("abstract", "summary") if c in cols]
    if "title" not in cols or not text_cols:
        raise ValueError(f"{path}: a dump needs 'title' and 'abstract' (or 'summary') fields; "
                         f"found {sorted(cols)}")

    def opt(name: str, dtype) -> pl.Expr:
        return pl.col(name).cast(dtype, strict=False) if name in cols else pl.lit(None, dtype=dtype)

    ids = [pl.col(c).cast(pl.String) for c in ("paper_id", "id", "arxiv_id", "doi") if c in cols]
    title_id = pl.col("title").cast(pl.String).map_elements(_title_id, return_dtype=pl.String)
    if "authors" not in cols:
        authors = pl.lit([], dtype=pl.List(pl.String))
    elif schema["authors"] == pl.String:
        authors = pl.col("authors").str.replace_all(r"\s+and\s+", ", ").str.split(", ")
    else:
        authors = pl.col("authors").cast(pl.List(pl.String), strict=False)
    return lf.select(
        paper_id=pl.coalesce(*ids, title_id), title=_clean("title"),
        abstract=pl.coalesce(*[_clean(c) for c in text_cols]),
        year=opt("year", pl.Int64), venue=opt("venue", pl.String), authors=authors,
        arxiv_id=opt("arxiv_id", pl.String),
    )


def scan_dump(path: str | Path, fmt: DumpFormat = "auto", categories: Sequence[str] = ()) -> pl.LazyFrame:
    """A lazy frame of normalised papers (paper_id, title, abstract, year, venue, authors,
    arxiv_id): papers without title or abstract dropped, the first of duplicate ids kept."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"literature dump not found: {path}")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "arxiv":
        lf = _scan_arxiv(path, categories)
    elif categories:
        raise ValueError(f"{path}: a category filter needs the arXiv snapshot format (got {fmt})")
    else:
        lf = _scan_plain(path, fmt)
    return (lf.filter(pl.col("title").str.len_chars() > 0, pl.col("abstract").str.len_chars() > 0)
            .unique(subset="paper_id", keep="first", maintain_order=True))


def _first_bad_line(path: Path) -> str:
    """Polars names no line when JSON is broken: find it, streaming, for the error message."""
    with path.open("rb") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except json.JSONDecodeError as e:
                return f"{path}:{i}: not JSON: {e}"
    return str(path)


def _run(path: Path, action):
    try:
        return action()
    except pl.exceptions.PolarsError as e:
        raise ValueError(f"{_first_bad_line(path)} ({type(e).__name__}: {e})") from e


def _to_papers(rows, source: str) -> list[Paper]:
    """Papers from normalised rows (dicts, e.g. a frame's `iter_rows(named=True)`)."""
    return [Paper(**{**r, "authors": [a for a in (r["authors"] or []) if a]}, source=source) for r in rows]


def load_papers(path: str | Path, fmt: DumpFormat = "auto", categories: Sequence[str] = (),
                source: str = "dump") -> list[Paper]:
    """A (small) paper file read whole, e.g. a paper list to rank."""
    path = Path(path)
    return _to_papers(_run(path, lambda: scan_dump(path, fmt, categories).collect()).iter_rows(named=True), source)


# ---------------------------------------------------------------- the on-disk index

_BUILD_LOCK = threading.Lock()


def index_folder(path: Path, fmt: str, categories: Sequence[str], root: Path) -> Path:
    st = path.stat()
    ident = json.dumps([str(path.resolve()), st.st_size, st.st_mtime_ns, fmt, sorted(categories), INDEX_VERSION])
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)[:40]
    return root / f"{stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def rows_digest(parquet: Path, n: int) -> str:
    """sha256 of the ids and titles of the first n papers, read DIGEST_SLICE rows at a time."""
    h = hashlib.sha256()
    lf = pl.scan_parquet(parquet).select("paper_id", "title")
    for start in range(0, n, DIGEST_SLICE):
        for pid, title in lf.slice(start, min(DIGEST_SLICE, n - start)).collect().iter_rows():
            h.update(f"{pid}\x1f{title}\x1e".encode())
    return h.hexdigest()


def _grown_from(meta: dict, root: Path, parquet: Path) -> tuple[str, int] | None:
    """The largest finished index of an earlier version of the same dump (path, format,
    filter) whose papers are, verified by digest, the first papers of this one: a dump that
    grew by appending. None when there is none (then everything is embedded anew)."""
    same = ("format", "categories", "version")
    found = []
    for f in root.glob("*/meta.json"):
        if ".tmp" in f.parent.name:
            continue
        old = json.loads(f.read_text())
        if (all(old.get(k) == meta[k] for k in same) and 0 < old["papers"] <= meta["papers"]
                and Path(old["path"]).resolve() == Path(meta["path"]).resolve()):
            found.append((old["papers"], f.parent))
    for papers, folder in sorted(found, key=lambda x: -x[0]):
        if rows_digest(folder / "papers.parquet", papers) == rows_digest(parquet, papers):
            return folder.name, papers
    return None


def _build_index(path: Path, fmt: DumpFormat, categories: Sequence[str], folder: Path) -> None:
    """papers.parquet (streamed from the dump), the BM25 index and meta.json, built in a
    private folder and renamed into place, so a killed build is never used."""
    import bm25s

    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        log.info("indexing %s (%s%s) into %s", path, fmt, f", categories {list(categories)}" if categories else "",
                 folder)
        _run(path, lambda: scan_dump(path, fmt, categories).sink_parquet(tmp / "papers.parquet"))
        texts = [doc_text(t, a) for t, a in pl.read_parquet(tmp / "papers.parquet", columns=["title", "abstract"])
                 .iter_rows()]
        if texts:
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            retriever.save(tmp / "bm25", show_progress=False)
        meta = {"path": str(path), "format": fmt, "categories": list(categories), "papers": len(texts),
                "version": INDEX_VERSION}
        grown = _grown_from(meta, folder.parent, tmp / "papers.parquet")
        if grown:
            log.info("%s starts with the %d papers of %s: their embeddings are reused", path, grown[1], grown[0])
            meta |= {"extends": grown[0], "prefix": grown[1]}
        (tmp / "meta.json").write_text(json.dumps(meta))
        try:
            tmp.rename(folder)
        except OSError:
            if not (folder / "meta.json").exists():   # lost a race to another process: theirs is as good
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@functools.lru_cache(maxsize=8)
def _bm25(folder: str):
    import bm25s

    return bm25s.BM25.load(Path(folder) / "bm25", mmap=True, show_progress=False)


def _model_key(embedder) -> str:
    return hashlib.sha256(embedder.model_id().encode()).hexdigest()[:12]


def _private(path: Path) -> Path:
    """A temporary name next to `path` that no other thread or process writes."""
    return path.with_name(f"{path.stem}.tmp{os.getpid()}-{threading.get_ident()}{path.suffix}")


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
        tmp = _private(dst)
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


def chunk_texts(lf: pl.LazyFrame, start: int, stop: int) -> list[str]:
    """The texts of rows [start, stop) as the embedder reads them."""
    return [doc_text(t, a) for t, a in lf.slice(start, stop - start).collect().iter_rows()]


def encode_chunk(embedder, texts: Sequence[str], batch: int) -> np.ndarray:
    """A chunk's texts embedded `batch` at a time, float32, in row order: the one encoding of a
    chunk, whether it runs in the step, in a worker process or in a Ray task."""
    return np.concatenate([np.asarray(embedder.encode(list(texts[s:s + batch])), dtype=np.float32)
                           for s in range(0, len(texts), batch)])


def save_chunk(path: Path, vecs: np.ndarray) -> None:
    """Write a chunk under a private name and rename it into place (a killed build leaves none)."""
    tmp = _private(path)
    np.save(tmp, vecs)
    tmp.replace(path)


# ---- embedding chunks elsewhere: worker processes (local backend) or Ray tasks

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


def _embedded(lf: pl.LazyFrame, todo: Sequence[tuple[int, int]], embedder, workers: int) -> Iterator[tuple]:
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
                from resources.ray_backend import connect

                connect()
            except Exception as e:  # noqa: BLE001 (no cluster, or no ray: the index is still built)
                log.warning("embedding on Ray: cannot reach the cluster (%s: %s); using %d local processes",
                            type(e).__name__, e, workers)
            else:
                log.info("embedding %d chunks as Ray tasks, %d at once", len(todo), workers)
                yield from _on_ray(todo, texts_of, spec(), workers, EMBED_BATCH)
                return
        log.info("embedding %d chunks in %d worker processes", len(todo), workers)
        yield from _on_pool(todo, texts_of, spec(), workers, EMBED_BATCH)
        return
    for a, b in todo:
        yield (a, b), encode_chunk(embedder, texts_of(a, b), EMBED_BATCH)


def embedding_chunks(folder: Path, n: int, embedder, workers: int | None = None) -> list[Path]:
    """The embedding chunk files of every paper for this embedder model, in row order, built
    once: each chunk of EMBED_CHUNK papers is written under a private name and renamed into
    place when complete, so a killed build resumes with the missing chunks, and chunks of the
    index of a shorter version of the same dump are reused (`_reuse_chunks`). `workers` chunks
    are embedded at once (None: RESEARCHLOOP_EMBED_WORKERS, see `_embedded`); whoever embeds a
    chunk, this process writes it, so the files are the same as one worker's."""
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
        for (a, b), vecs in _embedded(lf, todo, embedder, settings().embed_workers if workers is None else workers):
            save_chunk(chunk_dir / _chunk_name(a, b), vecs)
            embedded += b - a
            log.info("embedded papers %d-%d: %d/%d papers (%d to go, %.1f papers/s)", a, b, n - total + embedded,
                     n, total - embedded, embedded / max(time.monotonic() - t0, 1e-9))
    return [chunk_dir / _chunk_name(a, b) for a, b in plan]


@functools.lru_cache(maxsize=8)
def _mapped(paths: tuple[Path, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.load(p, mmap_mode="r") for p in paths)


def exact_scores(chunks: Sequence[Path], q: np.ndarray) -> np.ndarray:
    """Dot products of the query with every paper, chunk by memory-mapped chunk (the matrix is
    never assembled in memory)."""
    return np.concatenate([np.asarray(c @ q) for c in _mapped(tuple(chunks))])


# ---------------------------------------------------------------- ANN (faiss)

def build_ann(chunks: Sequence[Path], path: Path) -> None:
    """An HNSW index (inner product, i.e. cosine on the embedder's normalised vectors) over the
    chunks, added chunk by chunk, written under a private name and renamed into place.

    HNSW rather than IVF-Flat: at the same query budget HNSW recalls far more of the exact top
    hits, for a slower build and query that stay small next to embedding the papers and next to
    the hybrid search's BM25 and query embedding; IVF also needs k-means training and a probe count
    tuned per size (the comparison: bench/records/index.json). HNSW's graph adds ~ANN_M * 8 bytes a
    paper to the vectors."""
    import faiss

    first = _mapped(tuple(chunks))[0]
    index = faiss.IndexHNSWFlat(first.shape[1], ANN_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ANN_EF_BUILD
    for c in _mapped(tuple(chunks)):
        index.add(np.ascontiguousarray(c, dtype=np.float32))
    tmp = _private(path)
    faiss.write_index(index, str(tmp))
    tmp.replace(path)


@functools.lru_cache(maxsize=4)
def _ann(path: str):
    import faiss

    return faiss.read_index(path)


def ann_index(chunks: Sequence[Path], n: int):
    """The faiss index over the chunks, built once next to them (`emb-<model>.faiss`)."""
    path = chunks[0].parent.with_suffix(".faiss")
    if not path.exists():
        log.info("building the ANN index of %d papers (HNSW, M=%d)", n, ANN_M)
        t0 = time.monotonic()
        build_ann(chunks, path)
        log.info("ANN index built in %.0f s", time.monotonic() - t0)
    return _ann(str(path))


def ann_top(index, q: np.ndarray, depth: int) -> np.ndarray:
    """The `depth` best rows for the query by the ANN index, best first. The search breadth
    (efSearch) is at least `depth` and set per call: the index is shared by threads."""
    import faiss

    # faiss-cpu's __init__.pyi lists no SearchParametersHNSW, which the module has (SWIG wrapper)
    params = faiss.SearchParametersHNSW(efSearch=max(ANN_EF_SEARCH, depth))  # type: ignore[attr-defined]
    _, ids = index.search(np.ascontiguousarray(q[None, :], dtype=np.float32), depth, params=params)
    return ids[0][ids[0] >= 0]


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    if depth >= len(scores):
        return np.argsort(-scores)
    part = np.argpartition(-scores, depth)[:depth]
    return part[np.argsort(-scores[part])]


class LocalSource(PaperSource):
    """The shipped corpus or a user's dump, searched hybrid (BM25 + embeddings, RRF-fused)."""

    def __init__(self, path: str | Path, embedder, index_root: str | Path, fmt: DumpFormat = "auto",
                 categories: Sequence[str] = (), name: str = "dump"):
        self.path = Path(path)
        self.embedder = embedder
        self.index_root = Path(index_root)
        self.fmt = fmt
        self.categories = tuple(categories)
        self.name = name

    def folder(self) -> Path:
        """The index folder for the file as it is now, built if missing."""
        if not self.path.is_file():
            raise FileNotFoundError(f"literature {self.name} file not found: {self.path}")
        fmt = detect_format(self.path) if self.fmt == "auto" else self.fmt
        folder = index_folder(self.path, fmt, self.categories, self.index_root)
        if not (folder / "meta.json").exists():
            with _BUILD_LOCK:
                if not (folder / "meta.json").exists():
                    self.index_root.mkdir(parents=True, exist_ok=True)
                    _build_index(self.path, fmt, self.categories, folder)
        return folder

    def size(self) -> int:
        return json.loads((self.folder() / "meta.json").read_text())["papers"]

    def describe(self) -> str:
        cats = f" [{', '.join(self.categories)}]" if self.categories else ""
        return f"{self.name}: {self.path}{cats}"

    def _with_references(self, papers: list[Paper]) -> list[Paper]:
        """The `corpus` source's papers carry the ids they cite (citations.jsonl beside the file)."""
        if self.name != "corpus":
            return papers
        from resources.citations import corpus_with_references

        return corpus_with_references(papers, self.path)

    def papers(self) -> list[Paper]:
        return self._with_references(
            _to_papers(pl.read_parquet(self.folder() / "papers.parquet").iter_rows(named=True), self.name))

    def search(self, query: str, k: int) -> list[Paper]:
        import bm25s

        folder = self.folder()
        n = self.size()
        if n == 0 or k <= 0:
            return []
        depth = n if n <= EXACT_DEPTH else min(n, max(EXACT_DEPTH, 10 * k))
        res, _ = _bm25(str(folder)).retrieve(bm25s.tokenize([query], stopwords="en", show_progress=False),
                                             k=depth, show_progress=False)
        bm25_rank = [int(i) for i in res[0]]
        chunks = embedding_chunks(folder, n, self.embedder)
        q = np.asarray(self.embedder.encode([query])[0], dtype=np.float32)
        top = ann_top(ann_index(chunks, n), q, depth) if n >= ANN_MIN else _top(exact_scores(chunks, q), depth)
        emb_rank = [int(i) for i in top]
        fused = rrf_fuse([bm25_rank, emb_rank])
        best = sorted(fused, key=lambda i: -fused[i])[:k]
        rows = (pl.scan_parquet(folder / "papers.parquet").with_row_index("_row")
                .filter(pl.col("_row").is_in(best)).collect())
        by_row = {r.pop("_row"): r for r in rows.iter_rows(named=True)}
        papers = self._with_references(_to_papers((by_row[i] for i in best), self.name))
        return [p.model_copy(update={"query": query, "retrieval_score": round(fused[i], 6)})
                for p, i in zip(papers, best)]
