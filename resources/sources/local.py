"""`LocalSource`: the shipped corpus or a user's dump as a paper source, searched hybrid: the BM25
index (index.py) and the embeddings (embedding.py, searched by ann.py), their rankings fused by
reciprocal rank fusion."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from resources.citations import corpus_with_references
from resources.sources.ann import nearest
from resources.sources.base import PaperSource, rrf_fuse
from resources.sources.dumps import DumpFormat, detect_format, to_papers
from resources.sources.embedding import embedding_chunks
from resources.sources.index import bm25_top, ensure_index
from schemas.records import Paper

EXACT_DEPTH = 1000         # up to this many papers, fuse full rankings (exact RRF)


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
        return ensure_index(self.path, fmt, self.categories, self.index_root)

    def size(self) -> int:
        return json.loads((self.folder() / "meta.json").read_text())["papers"]

    def describe(self) -> str:
        cats = f" [{', '.join(self.categories)}]" if self.categories else ""
        return f"{self.name}: {self.path}{cats}"

    def _with_references(self, papers: list[Paper]) -> list[Paper]:
        """The `corpus` source's papers carry the ids they cite (citations.jsonl beside the file)."""
        if self.name != "corpus":
            return papers
        return corpus_with_references(papers, self.path)

    def papers(self) -> list[Paper]:
        return self._with_references(
            to_papers(pl.read_parquet(self.folder() / "papers.parquet").iter_rows(named=True), self.name))

    def search(self, query: str, k: int) -> list[Paper]:
        folder = self.folder()
        n = self.size()
        if n == 0 or k <= 0:
            return []
        depth = n if n <= EXACT_DEPTH else min(n, max(EXACT_DEPTH, 10 * k))
        bm25_rank = bm25_top(folder, query, depth)
        chunks = embedding_chunks(folder, n, self.embedder)
        q = np.asarray(self.embedder.encode([query])[0], dtype=np.float32)
        emb_rank = [int(i) for i in nearest(chunks, n, q, depth)]
        fused = rrf_fuse([bm25_rank, emb_rank])
        best = sorted(fused, key=lambda i: -fused[i])[:k]
        rows = (pl.scan_parquet(folder / "papers.parquet").with_row_index("_row")
                .filter(pl.col("_row").is_in(best)).collect())
        by_row = {r.pop("_row"): r for r in rows.iter_rows(named=True)}
        papers = self._with_references(to_papers((by_row[i] for i in best), self.name))
        return [p.model_copy(update={"query": query, "retrieval_score": round(fused[i], 6)})
                for p, i in zip(papers, best)]
