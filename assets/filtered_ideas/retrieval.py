"""The novelty check's search (topic.yaml `ideation.novelty_retrieval`): the literature source's
search as it is (`search`, the default), or SciPIP's retrieval for the query over that search's
candidates (`scipip`, assets/ideas/scipip.py `query_retrieval`), which remembers how each paper it
returned was found (semantic / entity / citation) for the asset's metadata. No Dagster here."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from assets.filtered_ideas.novelty import Search
from assets.ideas.scipip import Encode, query_retrieval
from schemas.records import Paper
from schemas.topic import ScipipSpec

POOL_FACTOR = 4  # the scipip retrieval chooses a novelty search's k papers from the plain search's 4 x k


class NoveltySearch:
    """One per filtered_ideas run: `for_idea(idea_id)` is the search the novelty check of that idea
    uses. With `search` it is `plain` itself, unchanged."""

    def __init__(self, mode: str, plain: Search, llm=None, encode: Encode | None = None,
                 cfg: ScipipSpec | None = None, references: Mapping[str, Sequence[str]] | None = None,
                 folder: Path | None = None, log: Callable[[str], None] | None = None):
        self.mode, self.plain, self.llm, self.encode = mode, plain, llm, encode
        self.cfg, self.references = cfg or ScipipSpec(), dict(references or {})
        self.folder, self.log = folder, log
        self.via: dict[str, dict[str, list[str]]] = {}   # idea -> paper -> the signals that found it
        self.entity_failures: dict[str, str] = {}         # paper -> why its entities are missing

    def for_idea(self, idea_id: str) -> Search:
        if self.mode == "search":
            return self.plain

        def search(query: str, k: int) -> list[Paper]:
            pool = self.plain(query, POOL_FACTOR * k)
            # the pool's own reference lists join the round's papers' (the citation data there is)
            refs = {**self.references, **{p.paper_id: list(p.references) for p in pool if p.references}}
            r = query_retrieval(self.llm, self.encode, query, pool, refs, k, self.cfg, self.folder, self.log)
            self.entity_failures.update(r.entity_failures)
            found = self.via.setdefault(idea_id, {})
            for p in r.shown:
                found[p.paper_id] = sorted(set(found.get(p.paper_id, [])) | set(p.via))
            by_id = {p.paper_id: p for p in pool}
            return [by_id[p.paper_id] for p in r.shown]

        return search

    def metadata(self) -> dict:
        """The retrieval used and, with scipip, how the compared papers were found: per signal, how
        many (idea, compared paper) pairs it found, and per idea each paper's signals."""
        if self.mode == "search":
            return {"novelty_retrieval": self.mode}
        pairs = [via for papers in self.via.values() for via in papers.values()]
        return {"novelty_retrieval": self.mode,
                **{f"novelty_via_{s}": sum(s in v for v in pairs) for s in ("semantic", "entity", "citation")},
                "novelty_papers_via": self.via, "novelty_entity_failures": self.entity_failures}
