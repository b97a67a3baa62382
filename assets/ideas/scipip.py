"""SciPIP retrieval as an idea source (seed paper 001, its 3.1-3.2; topic.yaml `ideation.sources:
[scipip]`, settings in `ideation.scipip`).

What it does, on the round's papers (the `papers` asset) rather than a whole database:
- entities: the LLM names up to 5 key entities (methods, tasks, datasets) of the topic and of the
  `entity_papers` papers most similar to it; each answer is memoised per paper text and model
  (one file per paper under DAGSTER_HOME/scipip/entities), so a resumed run, a later round or another
  topic over the same papers asks nothing again. An answer that stays malformed after the LLM
  resource's retries is recorded as failed for that paper (the paper then has no entities) and
  the step goes on; an unreachable endpoint fails the step as everywhere else.
- retrieval, the union of three retrievals (SciPIP's N1, N2, N3), ordered by the sum of three scores:
  semantic = cosine of the paper's (title + abstract) and the topic's embeddings (N1: the best
  `semantic_k`); entity = the share of the paper's entities that match the topic's entities (1 each)
  or an expanded entity (0.5 each) (N2: any match), where the expansion adds entities that occur
  together with a topic entity in at least 2 papers, the 5 rarest of them (SciPIP's m = 2, n = 5);
  citation = how often the paper is cited together with a paper of N1 or N2, scaled to [0, 1] (N3:
  the 2 most co-cited with each). Citation data is read from the papers' `references` (the ids a
  paper cites) when the papers carry them; without it the signal is 0 and the retrieval says so.
  No link is ever guessed.
- clustering: in score order, a paper whose embedding has cosine >= `duplicate_threshold` with a
  paper already kept is a near-duplicate of it and dropped; the first `papers` kept are shown to
  the ideas prompt (assets/ideas/prompts.py `scipip`).
The same retrieval for a query (`query_retrieval`, the novelty check's search with topic.yaml
`ideation.novelty_retrieval: scipip`): the query takes the topic's place over a pool of the plain
literature search's candidates for it; its entities are the pool papers' (memoised) entities that
occur in its text, so the query itself costs no LLM call.
What it does not do (SciPIP does): synonym expansion of entities by the LLM, entities from full
texts, a database-wide entity graph, the brainstorm-into-retrieval variant (SciPIP-C).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from assets.ideas import prompts
from assets.shared.text import title_key
from resources.llm import REQUEST_FAILED, RejectedAnswer
from resources.paths import under_home
from resources.safe_io import atomic_write_text, read_memo
from resources.sources import doc_text
from schemas.llm_outputs import Entities
from schemas.records import Paper, PaperEntities, RetrievedPaper
from schemas.topic import ScipipSpec

ENTITY_PROMPT_VERSION = "1"  # part of every memo key: a new entity prompt asks again
EXPANSION_MIN_PAPERS = 2     # SciPIP's m: an entity joins the expansion if it co-occurs with a topic entity this often
EXPANSION_KEEP = 5           # SciPIP's n: the rarest this many of those
EXPANDED_WEIGHT = 0.5        # a match with an expanded entity counts half a match with the topic's own
COCITED_PER_PAPER = 2        # SciPIP: the 2 papers most often co-cited with each retrieved paper
NO_CITATIONS = "no citation data on these papers: the citation score is 0"

Encode = Callable[[list[str]], np.ndarray]


# -- entities -------------------------------------------------------------------------------

def entity_key(entity: str) -> frozenset[str]:
    """An entity's words without filler words and plurals (as idea titles are compared)."""
    return title_key(entity)


def same_entity(a: frozenset[str], b: frozenset[str]) -> bool:
    """Equal keys, or one multi-word key inside the other ("point cloud" in "point cloud
    classification"); a single word only matches itself, so "classification" does not match every
    "... classification"."""
    if not a or not b:
        return False
    if a == b:
        return True
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return len(small) >= 2 and small <= big


def parse_entities(text: str) -> list[str]:
    """The entities of an answer, cleaned (spaces, repeats); an answer without one is rejected."""
    out, seen = [], set()
    for e in Entities.model_validate_json(text).entities:
        e = " ".join(e.split()).strip(" .,;:")
        k = entity_key(e)
        if k and k not in seen:
            seen.add(k)
            out.append(e)
    if not out:
        raise RejectedAnswer("no_entities", "the answer names no entity")
    return out


def memo_dir() -> Path:
    return under_home("scipip", "entities")


def _memo_path(folder: Path, paper_id: str, key: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", paper_id)[:60].strip("._") or "paper"
    return folder / f"{slug}-{key[:24]}.json"


def extract_entities(llm, items: Sequence[tuple[str, str, str]], folder: Path | None = None,
                     log: Callable[[str], None] | None = None, stage: str = "ideas") -> dict[str, PaperEntities]:
    """{id: PaperEntities} for items (id, title, text): from the memo when this text was asked
    before with this prompt and model, else from the LLM (one call per item, `llm.map`, accounted
    to `stage`), memoised either way unless the request itself failed (a transport error is asked
    again next time)."""
    folder = folder or memo_dir()
    model = llm.model_name()
    out: dict[str, PaperEntities] = {}
    todo = []
    for pid, title, text in items:
        key = hashlib.sha256(json.dumps([ENTITY_PROMPT_VERSION, model, pid, title, text]).encode()).hexdigest()
        path = _memo_path(folder, pid, key)
        rec = read_memo(path, PaperEntities.model_validate_json, log=log)
        if rec is not None and rec.key == key:
            out[pid] = rec
        else:
            todo.append((pid, title, text, key, path))

    def ask(item) -> PaperEntities:
        pid, title, text, key, path = item
        res = llm.complete(prompts.entities(title, text), stage=stage, schema=Entities, parse=parse_entities,
                           max_tokens=120)
        rec = PaperEntities(paper_id=pid, key=key, model=model, entities=res.value if res.ok else [],
                            error=None if res.ok else res.error)
        if res.ok or res.error_kind != REQUEST_FAILED:
            atomic_write_text(path, rec.model_dump_json())
        return rec

    for rec in llm.map(ask, todo):
        out[rec.paper_id] = rec
    return {pid: out[pid] for pid, _, _ in items}


def expand_entities(topic_entities: Sequence[str], paper_entities: Mapping[str, Sequence[str]],
                    min_papers: int = EXPANSION_MIN_PAPERS, keep: int = EXPANSION_KEEP) -> list[str]:
    """SciPIP's neighbourhood expansion: the entities that occur in at least `min_papers` papers
    together with a topic entity, the `keep` rarest of them over all the papers (a frequent term
    says little about a paper); ties by name. Entities matching a topic entity are not added."""
    topic = [k for k in map(entity_key, topic_entities) if k]
    freq: Counter[frozenset[str]] = Counter()
    together: Counter[frozenset[str]] = Counter()
    name: dict[frozenset[str], str] = {}
    for ents in paper_entities.values():
        keys = {}
        for e in ents:
            if (k := entity_key(e)) and k not in keys:
                keys[k] = e
        freq.update(list(keys))
        for k, e in keys.items():
            name.setdefault(k, e)
        if any(same_entity(k, t) for k in keys for t in topic):
            together.update(k for k in keys if not any(same_entity(k, t) for t in topic))
    chosen = sorted((k for k, c in together.items() if c >= min_papers), key=lambda k: (freq[k], name[k]))
    return [name[k] for k in chosen[:keep]]


def entity_score(entities: Sequence[str], topic_entities: Sequence[str],
                 expanded: Sequence[str]) -> tuple[float, list[str], list[str]]:
    """(score, matched, expanded matches): each of the paper's entities that matches a topic entity
    counts 1, one that matches an expanded entity EXPANDED_WEIGHT; divided by its entity count."""
    topic = [k for k in map(entity_key, topic_entities) if k]
    more = [k for k in map(entity_key, expanded) if k]
    matched, via_expansion = [], []
    for e in entities:
        k = entity_key(e)
        if any(same_entity(k, t) for t in topic):
            matched.append(e)
        elif any(same_entity(k, x) for x in more):
            via_expansion.append(e)
    if not entities:
        return 0.0, [], []
    return (len(matched) + EXPANDED_WEIGHT * len(via_expansion)) / len(entities), matched, via_expansion


# -- citations ------------------------------------------------------------------------------

def cocitation_counts(references: Mapping[str, Sequence[str]]) -> Counter[tuple[str, str]]:
    """{(a, b): how many papers cite both a and b} (a < b), over every paper's reference list."""
    counts: Counter[tuple[str, str]] = Counter()
    for refs in references.values():
        counts.update(combinations(sorted(set(refs)), 2))
    return counts


def citation_scores(references: Mapping[str, Sequence[str]], candidates: Sequence[str],
                    seeds: Sequence[str], per_seed: int = COCITED_PER_PAPER) -> tuple[dict[str, float], set[str]]:
    """(score per candidate, the co-cited retrieval N3). A candidate's score is its largest
    co-citation count with a seed (another paper), divided by the largest over the candidates;
    N3 holds the `per_seed` candidates most co-cited with each seed (at least once). All 0 and
    empty without citation data."""
    counts = cocitation_counts(references)

    def together(a: str, b: str) -> int:
        return counts.get((a, b) if a < b else (b, a), 0)

    raw = {c: max((together(c, s) for s in seeds if s != c), default=0) for c in candidates}
    top = max(raw.values(), default=0)
    scores = {c: (v / top if top else 0.0) for c, v in raw.items()}
    found: set[str] = set()
    for s in seeds:
        ranked = sorted((c for c in candidates if c != s and together(c, s) > 0),
                        key=lambda c: (-together(c, s), c))
        found.update(ranked[:per_seed])
    return scores, found


# -- retrieval and clustering ----------------------------------------------------------------

def cluster(order: Sequence[str], vecs: Mapping[str, np.ndarray], threshold: float) -> dict[str, tuple[str, float]]:
    """Greedy clustering in `order` (best first): a paper whose cosine with a paper kept before
    it is >= threshold joins the most similar such paper's cluster. Returns {dropped id:
    (the kept paper, cosine)}; every other paper is the best of its own cluster."""
    kept: list[str] = []
    dropped: dict[str, tuple[str, float]] = {}
    for pid in order:
        sims = [(float(vecs[k] @ vecs[pid]), k) for k in kept]
        best = max(sims, default=(-1.0, ""))
        if kept and best[0] >= threshold:
            dropped[pid] = (best[1], round(best[0], 4))
        else:
            kept.append(pid)
    return dropped


@dataclass
class Retrieval:
    """What the SciPIP retrieval found: the retrieved papers in score order (`shown` ones go to
    the prompt), the topic's entities and their expansion, and notes for the metadata."""
    papers: list[RetrievedPaper] = field(default_factory=list)
    topic_entities: list[str] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)
    candidates: int = 0
    with_entities: int = 0
    entity_failures: dict[str, str] = field(default_factory=dict)
    citations: str = NO_CITATIONS

    @property
    def shown(self) -> list[RetrievedPaper]:
        return [p for p in self.papers if p.shown]


def retrieve(ids: Sequence[str], titles: Sequence[str], vecs: np.ndarray, topic_vec: np.ndarray,
             entities: Mapping[str, Sequence[str]], topic_entities: Sequence[str],
             references: Mapping[str, Sequence[str]], cfg: ScipipSpec,
             entity_errors: Mapping[str, str] | None = None) -> Retrieval:
    """The three-way retrieval and the clustering over candidate papers (pure). `vecs` are the
    papers' L2-normalised embeddings (rows in `ids` order), `topic_vec` the topic's."""
    entity_errors = entity_errors or {}
    sims = {pid: float(v @ topic_vec) for pid, v in zip(ids, vecs)}
    by_id = dict(zip(ids, vecs))
    n1 = set(sorted(ids, key=lambda p: (-sims[p], p))[:cfg.semantic_k])
    expanded = expand_entities(topic_entities, {p: entities.get(p, []) for p in ids})
    ent = {p: entity_score(entities.get(p, []), topic_entities, expanded) for p in ids}
    n2 = {p for p in ids if ent[p][0] > 0}
    cited = {p: list(r) for p, r in references.items() if r}
    cit, n3 = citation_scores(cited, ids, sorted(n1 | n2))
    found = n1 | n2 | n3
    rows = []
    for pid, title in zip(ids, titles):
        if pid not in found:
            continue
        score, matched, more = ent[pid]
        rows.append(RetrievedPaper(
            paper_id=pid, title=title, semantic=round(sims[pid], 4), entity=round(score, 4),
            citation=round(cit[pid], 4), score=round(sims[pid] + score + cit[pid], 4),
            via=[name for name, s in (("semantic", n1), ("entity", n2), ("citation", n3)) if pid in s],
            entities=list(entities.get(pid, [])), matched_entities=matched, expanded_matches=more,
            entity_error=entity_errors.get(pid)))
    rows.sort(key=lambda r: (-r.score, r.paper_id))
    dropped = cluster([r.paper_id for r in rows], by_id, cfg.duplicate_threshold)
    shown = 0
    for r in rows:
        if r.paper_id in dropped:
            r.duplicate_of, r.duplicate_similarity = dropped[r.paper_id]
        elif shown < cfg.papers:
            r.shown, shown = True, shown + 1
    return Retrieval(papers=rows, topic_entities=list(topic_entities), expanded=expanded, candidates=len(ids),
                     with_entities=sum(1 for p in ids if entities.get(p)),
                     citations=(f"{len(cited)} papers carry references" if cited else NO_CITATIONS))


def papers_references(papers_frame) -> dict[str, list[str]]:
    """The citation data the round's papers carry: a `references` column (the ids each paper
    cites; the shipped corpus fills it from corpus/citations.jsonl); {} when the frame has none."""
    if "references" not in papers_frame.columns:
        return {}
    return {pid: [str(r) for r in (refs or [])]
            for pid, refs in zip(papers_frame["paper_id"].to_list(), papers_frame["references"].to_list())}


def _embed(encode: Encode, text: str, papers: Sequence[Paper]) -> tuple[np.ndarray, np.ndarray]:
    """(the text's embedding, the papers' (title + abstract) embeddings, rows in order)."""
    vecs = np.asarray(encode([text] + [doc_text(p.title, p.abstract) for p in papers]), dtype=np.float32)
    return vecs[0], vecs[1:]


def _closest_entities(llm, papers: Sequence[Paper], sims: np.ndarray, cfg: ScipipSpec, folder: Path | None,
                      log: Callable[[str], None] | None, stage: str, against: str = "topic",
                      extra: Sequence[tuple[str, str, str]] = ()) -> tuple[dict[str, PaperEntities], dict[str, str],
                                                                           dict[str, str]]:
    """Entities of the `extra` items and of the `entity_papers` papers most similar (`sims`) to
    the topic or query: (extraction by id, failures, per-paper notes for the retrieval: failures
    and the papers not asked)."""
    closest = [papers[i] for i in sorted(range(len(papers)), key=lambda i: (-float(sims[i]), papers[i].paper_id))]
    got = extract_entities(llm, [*extra, *((p.paper_id, p.title, p.abstract) for p in closest[:cfg.entity_papers])],
                           folder, log=log, stage=stage)
    failed = {pid: f"entity extraction failed: {r.error}" for pid, r in got.items() if r.error}
    notes = {**failed, **{p.paper_id: f"not asked: outside the {cfg.entity_papers} papers most similar to the "
                                      f"{against}" for p in closest[cfg.entity_papers:]}}
    return got, failed, notes


def scipip_retrieval(llm, encode: Encode, topic: str, background: str, papers: Sequence[Paper],
                     references: Mapping[str, Sequence[str]], cfg: ScipipSpec, folder: Path | None = None,
                     log: Callable[[str], None] | None = None) -> Retrieval:
    """The whole retrieval for one topic: embeddings of the topic (`background`: its title and
    description) and of the papers; entities of the topic and of the `entity_papers` papers most
    similar to it (memoised); then `retrieve`."""
    if not papers:
        return Retrieval()
    topic_vec, paper_vecs = _embed(encode, background, papers)
    topic_id = f"topic:{topic}"
    got, failed, errors = _closest_entities(llm, papers, paper_vecs @ topic_vec, cfg, folder, log, "ideas",
                                            extra=[(topic_id, "", background)])
    if topic_id in failed and log:
        log(f"scipip: the topic's entities: {failed[topic_id]}; the entity retrieval finds nothing")
    out = retrieve([p.paper_id for p in papers], [p.title for p in papers], paper_vecs, topic_vec,
                   {pid: r.entities for pid, r in got.items() if pid != topic_id}, got[topic_id].entities,
                   references, cfg, entity_errors=errors)
    out.entity_failures = failed
    return out


# -- the same retrieval for a query (the novelty check's search) -------------------------------

def query_entities(query: str, entities: Mapping[str, Sequence[str]]) -> list[str]:
    """The papers' entities that occur in the query: every word of the entity (without filler
    words and plurals, as `entity_key`) is a word of the query; first seen first, each once."""
    words = entity_key(query)
    out, seen = [], set()
    for ents in entities.values():
        for e in ents:
            k = entity_key(e)
            if k and k <= words and k not in seen:
                seen.add(k)
                out.append(e)
    return out


def rank_for_query(query: str, query_vec: np.ndarray, ids: Sequence[str], titles: Sequence[str], vecs: np.ndarray,
                   entities: Mapping[str, Sequence[str]], references: Mapping[str, Sequence[str]], k: int,
                   cfg: ScipipSpec, entity_errors: Mapping[str, str] | None = None) -> Retrieval:
    """`retrieve` with a query in the topic's place (pure): the query's entities are the
    candidates' entities that occur in it (`query_entities`, then the usual expansion), N1 is the
    2k candidates most similar to it (room for near-duplicates), and the best k after the
    clustering are shown."""
    return retrieve(ids, titles, vecs, query_vec, entities,
                    query_entities(query, {p: entities.get(p, []) for p in ids}), references,
                    cfg.model_copy(update={"semantic_k": 2 * k, "papers": k}), entity_errors=entity_errors)


def query_retrieval(llm, encode: Encode, query: str, pool: Sequence[Paper], references: Mapping[str, Sequence[str]],
                    k: int, cfg: ScipipSpec, folder: Path | None = None, log: Callable[[str], None] | None = None,
                    stage: str = "novelty") -> Retrieval:
    """The SciPIP retrieval of k papers for a query from `pool` (the plain search's candidates):
    embeddings of the query and the pool, the memoised entities of the `entity_papers` pool papers
    most similar to the query (no LLM call for the query; a failed extraction leaves that paper
    without entities), then `rank_for_query`."""
    if not pool:
        return Retrieval()
    query_vec, paper_vecs = _embed(encode, query, pool)
    got, failed, errors = _closest_entities(llm, pool, paper_vecs @ query_vec, cfg, folder, log, stage, "query")
    out = rank_for_query(query, query_vec, [p.paper_id for p in pool], [p.title for p in pool], paper_vecs,
                         {pid: r.entities for pid, r in got.items()}, references, k, cfg, entity_errors=errors)
    out.entity_failures = failed
    return out


def prompt_papers(retrieval: Retrieval, papers: Sequence[Paper],
                  chars: int = 300) -> list[tuple[int, str, str, list[str]]]:
    """The numbered references the scipip ideas prompt shows: (number, title, start of the
    abstract, entities) of the shown papers, best scored first."""
    abstracts = {p.paper_id: p.abstract for p in papers}
    return [(i, r.title, abstracts.get(r.paper_id, "")[:chars], r.entities) for i, r in enumerate(retrieval.shown, 1)]
