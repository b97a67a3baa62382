"""Paper sources behind one interface, and the local ones: the shipped corpus and a user's
own dump (JSON lines or Parquet with title/abstract, or the arXiv metadata snapshot).

A local file is normalised and filtered lazily with polars (the arXiv snapshot is streamed,
never read whole), written once to Parquet next to its BM25 index and its embeddings; the
folder is keyed by the file's identity (path, size, mtime), its format and category filter,
the embeddings by the embedding model. Later searches load the BM25 index memory-mapped,
memory-map the embeddings and read only the rows they return: nothing is re-embedded."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from schemas.records import Paper

log = logging.getLogger("researchloop.literature")

DumpFormat = Literal["auto", "jsonl", "parquet", "arxiv"]
INDEX_VERSION = 1          # bump when the normalisation or the index layout changes
EXACT_DEPTH = 1000         # up to this many papers, fuse full rankings (exact RRF)
EMBED_BATCH = 2048         # papers embedded per encode call while building


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

def detect_format(path: Path) -> str:
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
    schema = {"id": pl.String, "title": pl.String, "abstract": pl.String, "categories": pl.String,
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


def _build_index(path: Path, fmt: str, categories: Sequence[str], folder: Path) -> None:
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
        (tmp / "meta.json").write_text(json.dumps({"path": str(path), "format": fmt, "categories": list(categories),
                                                   "papers": len(texts), "version": INDEX_VERSION}))
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


def _embeddings(folder: Path, n: int, embedder) -> np.ndarray:
    """Embeddings of every paper for this embedder model, built once in batches into a .npy
    file and memory-mapped afterwards."""
    f = folder / f"emb-{hashlib.sha256(embedder.model_id().encode()).hexdigest()[:12]}.npy"
    if not f.exists():
        tmp = f.with_name(f"{f.stem}.tmp{os.getpid()}-{threading.get_ident()}.npy")
        out = None
        lf = pl.scan_parquet(folder / "papers.parquet").select("title", "abstract")
        for start in range(0, n, EMBED_BATCH):
            rows = lf.slice(start, EMBED_BATCH).collect().iter_rows()
            vecs = embedder.encode([doc_text(t, a) for t, a in rows])
            if out is None:
                out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, vecs.shape[1]))
            out[start:start + len(vecs)] = vecs
            if n > EMBED_BATCH:
                log.info("embedded %d/%d papers", min(start + EMBED_BATCH, n), n)
        out.flush()
        del out
        tmp.replace(f)
    return np.load(f, mmap_mode="r")


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

    def papers(self) -> list[Paper]:
        return _to_papers(pl.read_parquet(self.folder() / "papers.parquet").iter_rows(named=True), self.name)

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
        emb = _embeddings(folder, n, self.embedder)
        q = self.embedder.encode([query])[0]
        emb_rank = [int(i) for i in _top(np.asarray(emb @ q), depth)]
        fused = rrf_fuse([bm25_rank, emb_rank])
        best = sorted(fused, key=lambda i: -fused[i])[:k]
        rows = (pl.scan_parquet(folder / "papers.parquet").with_row_index("_row")
                .filter(pl.col("_row").is_in(best)).collect())
        by_row = {r.pop("_row"): r for r in rows.iter_rows(named=True)}
        papers = _to_papers((by_row[i] for i in best), self.name)
        return [p.model_copy(update={"query": query, "retrieval_score": round(fused[i], 6)})
                for p, i in zip(papers, best)]
