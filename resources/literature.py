"""`literature`: papers to read. Default: the corpus shipped in the repo (corpus/papers.jsonl),
searched hybrid (BM25 + embeddings, fused by reciprocal rank). The embedding index is built
once per (corpus, model) and memory-mapped afterwards."""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Sequence

import dagster as dg
import numpy as np
from pydantic import Field

from resources.embedder import Embedder
from resources.paths import REPO_ROOT, under_home
from schemas.records import Paper

DEFAULT_CORPUS = REPO_ROOT / "corpus" / "papers.jsonl"


@functools.lru_cache(maxsize=4)
def _corpus_index(path: str, mtime_ns: int):
    """Papers and their BM25 index, built once per corpus file version and process (novelty
    checks search once per idea)."""
    import bm25s

    papers = load_corpus(Path(path))
    retriever = bm25s.BM25()
    if papers:
        retriever.index(bm25s.tokenize([_doc_text(p) for p in papers], stopwords="en", show_progress=False),
                        show_progress=False)
    return papers, retriever


def load_corpus(path: Path) -> list[Paper]:
    papers = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON: {e}") from e
        papers.append(Paper(
            paper_id=d["paper_id"], title=d["title"],
            abstract=d.get("summary") or d.get("abstract") or "",
            year=d.get("year"), venue=d.get("venue"), authors=d.get("authors") or [],
            arxiv_id=d.get("arxiv_id"), source="corpus",
        ))
    return papers


def rrf_fuse(rankings: Sequence[Sequence[int]], k: int = 60) -> dict[int, float]:
    """Reciprocal rank fusion of several rankings (lists of doc indices, best first)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank + 1)
    return scores


def _doc_text(p: Paper) -> str:
    return f"{p.title}. {p.abstract}"


class Literature(dg.ConfigurableResource):
    corpus: str = Field("", description="JSON lines with paper_id, title, summary/abstract; empty: shipped corpus")
    index_dir: str = Field("", description="empty: $DAGSTER_HOME/index")

    def corpus_path(self) -> Path:
        return Path(self.corpus) if self.corpus else DEFAULT_CORPUS

    def _index(self):
        p = self.corpus_path()
        return _corpus_index(str(p), p.stat().st_mtime_ns)

    def papers(self) -> list[Paper]:
        return list(self._index()[0])

    def _embeddings(self, papers: list[Paper], embedder: Embedder) -> np.ndarray:
        h = hashlib.sha256()
        h.update(embedder.model_id().encode())
        for p in papers:
            h.update(_doc_text(p).encode())
        root = Path(self.index_dir) if self.index_dir else under_home("index")
        f = root / f"emb-{h.hexdigest()[:16]}.npy"
        if not f.exists():
            vecs = embedder.encode([_doc_text(p) for p in papers])
            tmp = f.with_suffix(".tmp.npy")
            np.save(tmp, vecs)
            tmp.replace(f)
        return np.load(f, mmap_mode="r")

    def search(self, query: str, k: int, embedder: Embedder) -> list[Paper]:
        import bm25s

        papers, retriever = self._index()
        if not papers:
            return []
        res, _ = retriever.retrieve(bm25s.tokenize([query], stopwords="en", show_progress=False),
                                    k=len(papers), show_progress=False)
        bm25_rank = [int(i) for i in res[0]]
        emb = self._embeddings(papers, embedder)
        q = embedder.encode([query])[0]
        sims = np.asarray(emb @ q)
        emb_rank = [int(i) for i in np.argsort(-sims)]
        fused = rrf_fuse([bm25_rank, emb_rank])
        best = sorted(fused, key=lambda i: -fused[i])[:k]
        return [papers[i].model_copy(update={"query": query, "retrieval_score": round(fused[i], 6)})
                for i in best]
