"""Paper sources behind one interface, and the local ones: the shipped corpus and a user's
own dump (JSON lines or Parquet with title/abstract, or the arXiv metadata snapshot); the online
sources are resources/scholarly.py.

A local file is normalised and filtered lazily with polars (the arXiv snapshot is streamed,
never read whole), written once to Parquet next to its BM25 index and its embeddings; the
folder is keyed by the file's identity (path, size, mtime), its format and category filter,
the embeddings by the embedding model. Later searches load the BM25 index memory-mapped,
memory-map the embeddings and read only the rows they return: nothing is re-embedded.

One module per job, all writing into (and keyed by) the same index folder:

- base.py: the `PaperSource` / `OnlineSource` interface, `rrf_fuse`, `doc_text`;
- dumps.py: reading a paper file (format detection, normalisation, `load_papers`);
- index.py: the index folder (papers.parquet, BM25, meta.json), built once, and the detection of
  a dump that grew by appending (its first papers verified by digest);
- embedding.py: the embedding chunk files (EMBED_CHUNK papers each, renamed into place when
  complete: a killed build resumes with the missing chunks; a grown dump reuses the old ones);
- embed_workers.py: who embeds the missing chunks (this process, worker processes, or Ray tasks
  on the ray backend);
- ann.py: the embedding side's search, exact below ANN_MIN papers, a faiss HNSW index from it;
- local.py: `LocalSource`, the hybrid search over all of it."""
from __future__ import annotations

from resources.sources.ann import ann_index, ann_top, build_ann, exact_scores, nearest
from resources.sources.base import OnlineSource, PaperSource, doc_text, rrf_fuse
from resources.sources.dumps import DumpFormat, detect_format, load_papers, scan_dump
from resources.sources.embed_workers import encode_chunk, encode_elsewhere
from resources.sources.embedding import chunk_plan, embedding_chunks, save_chunk
from resources.sources.index import index_folder, rows_digest
from resources.sources.local import LocalSource

__all__ = [
    "DumpFormat", "LocalSource", "OnlineSource", "PaperSource", "ann_index", "ann_top", "build_ann", "chunk_plan",
    "detect_format", "doc_text", "embedding_chunks", "encode_chunk", "encode_elsewhere", "exact_scores",
    "index_folder", "load_papers", "nearest", "rows_digest", "rrf_fuse", "save_chunk", "scan_dump",
]
