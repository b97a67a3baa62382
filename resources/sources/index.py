"""The on-disk index of a paper file: one folder per file identity (path, size, mtime), format
and category filter, holding the normalised papers (papers.parquet, streamed from the file), their
BM25 index and meta.json; built in a private folder and renamed into place, so a killed build is
never used. meta.json says when the file is an earlier version's that grew by appending (`extends`,
`prefix`: its first papers verified by digest), whose embedding chunks are then reused
(resources/sources/embedding.py)."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from resources.sources.base import doc_text
from resources.sources.dumps import DumpFormat, naming_bad_line, scan_dump

log = logging.getLogger("researchloop.literature")

INDEX_VERSION = 1          # bump when the normalisation or the index layout changes
DIGEST_SLICE = 200_000     # rows hashed per read when checking that a grown dump starts with the old one

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


def grown_from(meta: dict, root: Path, parquet: Path) -> tuple[str, int] | None:
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


def build_index(path: Path, fmt: DumpFormat, categories: Sequence[str], folder: Path) -> None:
    """papers.parquet (streamed from the dump), the BM25 index and meta.json, built in a
    private folder and renamed into place, so a killed build is never used."""
    import bm25s

    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        log.info("indexing %s (%s%s) into %s", path, fmt, f", categories {list(categories)}" if categories else "",
                 folder)
        naming_bad_line(path, lambda: scan_dump(path, fmt, categories).sink_parquet(tmp / "papers.parquet"))
        texts = [doc_text(t, a) for t, a in pl.read_parquet(tmp / "papers.parquet", columns=["title", "abstract"])
                 .iter_rows()]
        if texts:
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            retriever.save(tmp / "bm25", show_progress=False)
        meta = {"path": str(path), "format": fmt, "categories": list(categories), "papers": len(texts),
                "version": INDEX_VERSION}
        grown = grown_from(meta, folder.parent, tmp / "papers.parquet")
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


def ensure_index(path: Path, fmt: DumpFormat, categories: Sequence[str], root: Path) -> Path:
    """The index folder of the file as it is now under `root`, built if missing (once per process
    at a time; another process building the same folder concurrently is harmless, see build_index)."""
    folder = index_folder(path, fmt, categories, root)
    if not (folder / "meta.json").exists():
        with _BUILD_LOCK:
            if not (folder / "meta.json").exists():
                root.mkdir(parents=True, exist_ok=True)
                build_index(path, fmt, categories, folder)
    return folder


@functools.lru_cache(maxsize=8)
def _bm25(folder: str):
    import bm25s

    return bm25s.BM25.load(Path(folder) / "bm25", mmap=True, show_progress=False)


def bm25_top(folder: Path, query: str, depth: int) -> list[int]:
    """The `depth` best rows for the query by the folder's BM25 index (memory-mapped), best first."""
    import bm25s

    res, _ = _bm25(str(folder)).retrieve(bm25s.tokenize([query], stopwords="en", show_progress=False),
                                         k=depth, show_progress=False)
    return [int(i) for i in res[0]]


def private_path(path: Path) -> Path:
    """A temporary name next to `path` that no other thread or process writes."""
    return path.with_name(f"{path.stem}.tmp{os.getpid()}-{threading.get_ident()}{path.suffix}")
