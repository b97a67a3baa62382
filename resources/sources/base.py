"""The interface every paper source implements (`PaperSource`, and `OnlineSource` for the
scholarly web APIs of resources/scholarly.py), and what every source's search shares: the text a
paper is searched and embedded by, and reciprocal rank fusion of several rankings."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from schemas.records import Paper


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
