"""The embedding side of a search: the rows most like the query (`nearest`), by exact dot
products over the memory-mapped chunks below ANN_MIN papers, from ANN_MIN by a faiss HNSW index
built once next to the chunks (`emb-<model>.faiss`). faiss is imported only on that path."""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from resources.sources.embedding import mapped_chunks
from resources.sources.index import private_path

log = logging.getLogger("researchloop.literature")

# from this many papers the embedding side searches a faiss index, below it exactly: on real paper
# embeddings (bench/records/ann_real.json) the HNSW's top 10 at depth 1000 equals the exact top 10
# at 10k-49k papers, and below 50k the exact search costs only tens of ms and builds nothing
ANN_MIN = 50_000
ANN_M = 32                 # HNSW links per paper (faiss's usual choice for high recall)
ANN_EF_BUILD = 40          # HNSW build breadth (faiss's default)
ANN_EF_SEARCH = 128        # HNSW search breadth, raised to the search's depth (>= 1000 candidates) when larger


def nearest(chunks: Sequence[Path], n: int, q: np.ndarray, depth: int) -> np.ndarray:
    """The `depth` rows of the `n` papers whose embeddings are most like the query's, best first:
    exactly below ANN_MIN papers, by the ANN index from ANN_MIN."""
    return ann_top(ann_index(chunks, n), q, depth) if n >= ANN_MIN else _top(exact_scores(chunks, q), depth)


def exact_scores(chunks: Sequence[Path], q: np.ndarray) -> np.ndarray:
    """Dot products of the query with every paper, chunk by memory-mapped chunk (the matrix is
    never assembled in memory)."""
    return np.concatenate([np.asarray(c @ q) for c in mapped_chunks(tuple(chunks))])


def build_ann(chunks: Sequence[Path], path: Path) -> None:
    """An HNSW index (inner product, i.e. cosine on the embedder's normalised vectors) over the
    chunks, added chunk by chunk, written under a private name and renamed into place.

    HNSW rather than IVF-Flat: at the same query budget HNSW recalls far more of the exact top
    hits, for a slower build and query that stay small next to embedding the papers and next to
    the hybrid search's BM25 and query embedding; IVF also needs k-means training and a probe count
    tuned per size (the comparison: bench/records/index.json). HNSW's graph adds ~ANN_M * 8 bytes a
    paper to the vectors."""
    import faiss

    first = mapped_chunks(tuple(chunks))[0]
    index = faiss.IndexHNSWFlat(first.shape[1], ANN_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ANN_EF_BUILD
    for c in mapped_chunks(tuple(chunks)):
        index.add(np.ascontiguousarray(c, dtype=np.float32))
    tmp = private_path(path)
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
