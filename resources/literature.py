"""`literature`: papers to read, from one of four sources behind one interface
(resources/sources/ `PaperSource`):

- `corpus` (default): the corpus shipped in the repo (corpus/papers.jsonl) or another file;
- `dump`: a user's own file: JSON lines or Parquet with title + abstract, or the arXiv
  metadata snapshot (streamed with polars, optionally filtered by category);
- `semantic_scholar`, `openalex`: the online services (resources/scholarly.py), rate-limited,
  retried and cached on disk.

Local sources are searched hybrid (BM25 + embeddings, fused by reciprocal rank) over an
index built once per file version and embedding model under $DAGSTER_HOME/index. Online
sources keep the service's own relevance order. The global choice comes from the resource
config (set from RESEARCHLOOP_LITERATURE, RESEARCHLOOP_CORPUS, RESEARCHLOOP_CATEGORIES by the code
location); a topic's `literature:` section in topic.yaml overrides it for that topic. The
services' key and contact address are never config values baked into a run: empty fields are
read from the environment (SEMANTIC_SCHOLAR_API_KEY, OPENALEX_MAILTO) when a client is made."""
from __future__ import annotations

from pathlib import Path
from typing import cast

import dagster as dg
from pydantic import Field

from resources.citations import corpus_with_references
from resources.embedder import Embedder
from resources.llm import ResponseCache
from resources.paths import REPO_ROOT, under_home
from resources.scholarly import (
    OPENALEX_URL,
    S2_URL,
    HttpPolicy,
    OpenAlex,
    SemanticScholar,
    expire_cache,
)
from resources.settings import settings
from resources.sources import DumpFormat, LocalSource, PaperSource, load_papers, rrf_fuse  # noqa: F401 (re-exported)
from schemas.records import Paper
from schemas.topic import TopicSpec

DEFAULT_CORPUS = REPO_ROOT / "corpus" / "papers.jsonl"
SOURCES = ("corpus", "dump", "semantic_scholar", "openalex")
ONLINE_OVERFETCH = 2   # online results lacking an abstract are skipped; fetch this many times k


def load_corpus(path: Path) -> list[Paper]:
    """A corpus/paper file read whole (JSON lines or Parquet with title + abstract/summary), each
    paper with the ids it cites from citations.jsonl beside the file (resources/citations.py)."""
    return corpus_with_references(load_papers(path, source="corpus"), path)


class Literature(dg.ConfigurableResource):
    source: str = Field("corpus", description="corpus | dump | semantic_scholar | openalex "
                        "(RESEARCHLOOP_LITERATURE); a topic.yaml `literature:` section overrides it")
    corpus: str = Field("", description="the corpus file; empty: the shipped corpus. Also the dump "
                        "file when dump_path is empty (RESEARCHLOOP_CORPUS)")
    dump_path: str = Field("", description="the dump: JSON lines / Parquet with title and abstract, or "
                           "the arXiv metadata snapshot (arxiv-metadata-oai-snapshot.json)")
    dump_format: str = Field("auto", description="auto | jsonl | parquet | arxiv")
    categories: str = Field("", description="arXiv categories to keep, comma-separated, e.g. 'cs.CV,cs.LG' "
                            "(RESEARCHLOOP_CATEGORIES; arXiv snapshot only)")
    index_dir: str = Field("", description="empty: RESEARCHLOOP_INDEX_DIR, else $DAGSTER_HOME/index")
    semantic_scholar_url: str = S2_URL
    semantic_scholar_api_key: str = Field("", description="empty: $SEMANTIC_SCHOLAR_API_KEY (optional)")
    semantic_scholar_rate: float = Field(1.0, gt=0, description="requests per second, one pool per process")
    openalex_url: str = OPENALEX_URL
    openalex_mailto: str = Field("", description="empty: $OPENALEX_MAILTO (optional, OpenAlex's polite pool)")
    openalex_rate: float = Field(10.0, gt=0, description="requests per second, one pool per process")
    http_cache_dir: str = Field("", description="empty: $DAGSTER_HOME/http_cache")
    timeout_s: float = Field(30.0, gt=0)
    max_tries: int = Field(5, ge=1)

    def corpus_path(self) -> Path:
        return Path(self.corpus) if self.corpus else DEFAULT_CORPUS

    def _index_root(self) -> Path:
        shared = self.index_dir or settings().index_dir
        return Path(shared) if shared else under_home("index")

    def http_cache_root(self) -> Path:
        return Path(self.http_cache_dir) if self.http_cache_dir else under_home("http_cache")

    def expire_http_cache(self, max_age_s: float) -> int:
        """Drop cached online answers older than max_age_s (the weekly refresh); returns how
        many. Also prunes the one-file-per-answer folders an older version wrote."""
        root = self.http_cache_root()
        legacy = sum(ResponseCache(d).prune(max_age_s) for d in sorted(root.iterdir()) if d.is_dir())
        return expire_cache(root, max_age_s) + legacy

    def open(self, embedder: Embedder, topic: TopicSpec | None = None) -> PaperSource:
        """The source for a topic: its topic.yaml `literature:` section, else the global choice.
        Local sources need the embedder (hybrid search); online ones ignore it."""
        spec = topic.literature if topic is not None else None
        name: str
        if spec and spec.source:
            name = spec.source
        elif spec and spec.path:
            name = "dump"
        else:
            name = self.source or "corpus"
        if name not in SOURCES:
            raise ValueError(f"unknown literature source {name!r}: choose one of {', '.join(SOURCES)}")
        policy = HttpPolicy(timeout_s=self.timeout_s, max_tries=self.max_tries)
        if name == "semantic_scholar":
            key = self.semantic_scholar_api_key or settings().semantic_scholar_api_key.get_secret_value()
            return SemanticScholar(self.semantic_scholar_url, key, self.http_cache_root(),
                                   self.semantic_scholar_rate, policy)
        if name == "openalex":
            return OpenAlex(self.openalex_url, self.openalex_mailto or settings().openalex_mailto,
                            self.http_cache_root(), self.openalex_rate, policy)
        if spec and spec.path:
            path = Path(spec.path) if Path(spec.path).is_absolute() or topic is None else topic.path / spec.path
            fmt: DumpFormat = spec.format
            cats = spec.categories
        else:
            path = self.corpus_path() if name == "corpus" else Path(self.dump_path or self.corpus)
            if name == "dump" and not (self.dump_path or self.corpus):
                raise ValueError("literature source 'dump' needs a file: set RESEARCHLOOP_CORPUS (or the "
                                 "resource's dump_path) or `literature: {path: ...}` in topic.yaml")
            # the resource setting is a plain string (dump_format), passed on unchecked as it always was
            fmt = cast(DumpFormat, self.dump_format) if name == "dump" else "auto"
            cats = [c.strip() for c in self.categories.split(",") if c.strip()] if name == "dump" else []
            if spec and spec.categories:
                cats = spec.categories
        return LocalSource(path, embedder, self._index_root(), fmt, cats, name=name)

    def search(self, query: str, k: int, embedder: Embedder, topic: TopicSpec | None = None) -> list[Paper]:
        """Up to k papers for the query from the topic's (or the global) source. Online results
        without an abstract are skipped (ranking reads the abstract), so online sources are asked
        for ONLINE_OVERFETCH x k."""
        src = self.open(embedder, topic)
        if isinstance(src, LocalSource):
            return src.search(query, k)
        return [p for p in src.search(query, ONLINE_OVERFETCH * k) if p.abstract][:k]

    def papers(self) -> list[Paper]:
        """Every paper of the global local source (corpus or dump)."""
        src = self.open(Embedder())
        if not isinstance(src, LocalSource):
            raise ValueError(f"papers() lists a local source; {self.source} is online: use search()")  # noqa: TRY004 (a setting, not a type)
        return src.papers()
