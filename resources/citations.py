"""Citation edges among the papers of a corpus file: `citations.jsonl` beside it (for the shipped
corpus, corpus/citations.jsonl; see corpus/README.md). One JSON object per edge, {"citing": id,
"cited": id, "source", "path", "commit", "evidence"}; only the two ids are read here.

The `corpus` source gives each of its papers the ids it cites as `Paper.references` (empty when
it has none), which the scipip idea source reads as its citation data (assets/ideas/scipip.py
`papers_references`)."""
from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

from schemas.records import Paper

CITATIONS_FILE = "citations.jsonl"


def citations_path(corpus: str | Path) -> Path:
    """Where a corpus file's citation edges live: citations.jsonl in the same folder."""
    return Path(corpus).parent / CITATIONS_FILE


@functools.lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, size: int) -> dict[str, tuple[str, ...]]:
    refs: dict[str, list[str]] = {}
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
            citing, cited = str(e["citing"]), str(e["cited"])
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{i}: not a citation edge ({err})") from err
        if cited not in refs.setdefault(citing, []):
            refs[citing].append(cited)
    return {k: tuple(v) for k, v in refs.items()}


def load_citations(path: str | Path) -> dict[str, list[str]]:
    """{citing paper id: [cited paper ids, in file order]}; {} when the file does not exist."""
    p = Path(path)
    if not p.is_file():
        return {}
    st = p.stat()
    return {k: list(v) for k, v in _read(str(p.resolve()), st.st_mtime_ns, st.st_size).items()}


def with_references(papers: Sequence[Paper], references: dict[str, list[str]]) -> list[Paper]:
    """The papers with `references` set from the edges (an empty list for a paper that cites none)."""
    return [p.model_copy(update={"references": list(references.get(p.paper_id, []))}) for p in papers]


def corpus_with_references(papers: Sequence[Paper], corpus: str | Path) -> list[Paper]:
    """A corpus file's papers with the references its citations.jsonl gives them."""
    return with_references(papers, load_citations(citations_path(corpus)))
