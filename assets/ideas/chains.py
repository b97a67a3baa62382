"""Chains of papers as an idea source (Chain-of-Ideas, seed paper 002, its 2.2-2.3; topic.yaml
`ideation.sources: [chains]`, settings in `ideation.chains`).

What it does, on the round's papers (the `papers` asset) and, for the shipped corpus, the papers
they cite and the papers citing them:
- anchors: the papers paper_rankings kept (best score first), then the round's other papers most
  similar to the topic; each chain starts from a different anchor, and an anchor already inside an
  earlier chain is skipped (its chain would repeat part of that one).
- forward, up to `newer` papers (Chain-of-Ideas extends a chain both ways from its anchor): the
  next paper is one that cites the current paper (the reverse of `Paper.references`), known to the
  round, not already in the chain and not earlier than the chain so far, the most similar to the
  topic (ties: the older, the smaller step); where none is known, the round's paper of the same
  year or later (known year) most similar to the current one, and the link says `similar_later`.
- backward, up to `length` papers in all: the next paper is one the current paper cites
  (`Paper.references`; the shipped corpus fills them from corpus/citations.jsonl), known to the
  round (its papers, or the corpus they came from), not already in the chain and not later than the
  chain so far, the most similar to the topic (ties: the newest). Where the current paper has no
  such reference, the next paper is the round's paper of the same year or earlier (known year,
  another id, not in the chain) most similar to the current one (ties: the newest, the smaller
  step back), and the link says `similarity`. A similarity link is never shown or recorded as a
  citation. A direction ends when it finds no paper; a chain of one paper is no chain (it shows no
  step) and its anchor is passed over. Chains may share papers other than their anchors.
- the request: one per chain (assets/ideas/prompts.py `chain`): the papers oldest first, each with
  how it relates to the one before; the model answers the trend, the predicted next step and ideas
  that apply that step to the topic's code (schemas/llm_outputs.py `ChainIdeas`).
What it does not do (Chain-of-Ideas does): fetch citing papers from an online source (the shipped
corpus knows few, so the forward direction mostly rests on similarity), the LLM choosing among
references from the full text, queries per perspective, the novelty-check loop inside the source
(the loop's own novelty check runs after it), and the experiment design with review (the loop's
experiment_plans stage plans every kept idea).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import ceil

import numpy as np

from resources.sources import doc_text
from schemas.records import ChainLink, Paper, PaperChain, PaperScore

Encode = Callable[[list[str]], np.ndarray]
MIN_PAPERS = 2  # a chain shows at least one step
FORWARD = ("cites_earlier", "similar_later")  # the link kinds of papers reached forward from the anchor


def anchors(papers: Sequence[Paper], scores: Sequence[PaperScore], topic_sim: Mapping[str, float]
            ) -> list[tuple[str, str]]:
    """(paper id, why) of the round's papers in anchor order: the papers paper_rankings kept, best
    score first (then the most similar to the topic), then the others by similarity to the topic."""
    ids = {p.paper_id for p in papers}
    kept = sorted((s for s in scores if s.kept and s.paper_id in ids),
                  key=lambda s: (-s.score, -topic_sim.get(s.paper_id, 0.0), s.paper_id))
    out = [(s.paper_id, f"kept by paper_rankings (score {s.score})") for s in kept]
    taken = {pid for pid, _ in out}
    rest = sorted((p.paper_id for p in papers if p.paper_id not in taken),
                  key=lambda pid: (-topic_sim.get(pid, 0.0), pid))
    return out + [(pid, f"similar to the topic (cosine {topic_sim.get(pid, 0.0):.3f})") for pid in rest]


def _not_later(year: int | None, floor: int | None) -> bool:
    return year is None or floor is None or year <= floor


def build_chain(anchor: str, library: Mapping[str, Paper], candidates: Sequence[str],
                topic_sim: Mapping[str, float], vecs: Mapping[str, np.ndarray], length: int) -> list[ChainLink]:
    """One chain from `anchor`, newest first (see the module's docstring for the rules).
    `library`: every paper known by id (the round's and the corpus's), whose `references` are
    followed; `candidates`: the round's papers, the pool of the similarity fallback; `vecs`:
    L2-normalised embeddings of the papers that may be reached."""
    a = library[anchor]
    chain = [ChainLink(paper_id=a.paper_id, title=a.title, year=a.year, link="anchor",
                       topic_similarity=round(topic_sim.get(anchor, 0.0), 4))]
    used = {anchor}
    floor = a.year  # the earliest known year so far: no later paper may follow
    while len(chain) < length:
        cur = library[chain[-1].paper_id]
        cited = [library[r] for r in dict.fromkeys(cur.references)
                 if r in library and r not in used and _not_later(library[r].year, floor)]
        if cited:
            nxt = max(cited, key=lambda p: (topic_sim.get(p.paper_id, 0.0), p.year or 0, p.paper_id))
            link, sim = "cites", None
        else:
            v = vecs.get(cur.paper_id)
            pool = [library[c] for c in candidates
                    if c in library and c not in used and c != cur.paper_id and c in vecs
                    and library[c].year is not None and floor is not None and library[c].year <= floor]
            if v is None or not pool:
                break
            sims = {p.paper_id: float(vecs[p.paper_id] @ v) for p in pool}
            nxt = max(pool, key=lambda p: (sims[p.paper_id], p.year, p.paper_id))  # ties: the smaller step back
            link, sim = "similarity", round(sims[nxt.paper_id], 4)
        chain.append(ChainLink(paper_id=nxt.paper_id, title=nxt.title, year=nxt.year, link=link,
                               topic_similarity=round(topic_sim.get(nxt.paper_id, 0.0), 4), link_similarity=sim))
        used.add(nxt.paper_id)
        floor = nxt.year if nxt.year is not None else floor
    return chain


def _not_earlier(year: int | None, ceiling: int | None) -> bool:
    return year is None or ceiling is None or year >= ceiling


def citing_index(library: Mapping[str, Paper]) -> dict[str, list[str]]:
    """Paper id -> the known papers that cite it (the reverse of `Paper.references`)."""
    out: dict[str, list[str]] = {}
    for p in library.values():
        for r in dict.fromkeys(p.references):
            if r in library and r != p.paper_id:
                out.setdefault(r, []).append(p.paper_id)
    return out


def build_forward(anchor: str, library: Mapping[str, Paper], candidates: Sequence[str],
                  topic_sim: Mapping[str, float], vecs: Mapping[str, np.ndarray], newer: int,
                  cited_by: Mapping[str, Sequence[str]]) -> list[ChainLink]:
    """Up to `newer` papers after `anchor`, oldest first: each cites the one before it (known
    citation data) or, where no such paper is known, is the round's paper of the same year or
    later most similar to it (see the module's docstring)."""
    out: list[ChainLink] = []
    used = {anchor}
    cur = library[anchor]
    ceiling = cur.year  # the latest known year so far: no earlier paper may follow
    while len(out) < newer:
        citing = [library[c] for c in cited_by.get(cur.paper_id, ())
                  if c not in used and _not_earlier(library[c].year, ceiling)]
        if citing:
            nxt = max(citing, key=lambda p: (topic_sim.get(p.paper_id, 0.0), -(p.year or 0), p.paper_id))
            link, sim = "cites_earlier", None
        else:
            v = vecs.get(cur.paper_id)
            pool = [library[c] for c in candidates
                    if c in library and c not in used and c in vecs
                    and library[c].year is not None and ceiling is not None and library[c].year >= ceiling]
            if v is None or not pool:
                break
            sims = {p.paper_id: float(vecs[p.paper_id] @ v) for p in pool}
            nxt = max(pool, key=lambda p: (sims[p.paper_id], -p.year, p.paper_id))  # ties: the smaller step
            link, sim = "similar_later", round(sims[nxt.paper_id], 4)
        out.append(ChainLink(paper_id=nxt.paper_id, title=nxt.title, year=nxt.year, link=link,
                             topic_similarity=round(topic_sim.get(nxt.paper_id, 0.0), 4), link_similarity=sim))
        used.add(nxt.paper_id)
        cur = nxt
        ceiling = nxt.year if nxt.year is not None else ceiling
    return out


def build_chains(ordered_anchors: Sequence[tuple[str, str]], library: Mapping[str, Paper],
                 candidates: Sequence[str], topic_sim: Mapping[str, float], vecs: Mapping[str, np.ndarray],
                 count: int, length: int, newer: int = 0, cited_by: Mapping[str, Sequence[str]] | None = None
                 ) -> tuple[list[PaperChain], list[str]]:
    """Up to `count` chains from distinct anchors, in anchor order; each chain's links oldest first:
    the backward part, the anchor, then up to `newer` papers forward (`length` papers in all).
    Returns (chains, notes on the anchors passed over)."""
    chains: list[PaperChain] = []
    notes: list[str] = []
    seen: set[str] = set()
    for pid, why in ordered_anchors:
        if len(chains) >= count:
            break
        if pid not in library:
            continue
        if pid in seen:
            notes.append(f"{pid}: already in an earlier chain")
            continue
        ahead = build_forward(pid, library, candidates, topic_sim, vecs, min(newer, length - 1), cited_by or {})
        taken = {a.paper_id for a in ahead}  # the backward part may not reuse them
        back = build_chain(pid, {k: v for k, v in library.items() if k not in taken} if taken else library,
                           [c for c in candidates if c not in taken], topic_sim, vecs, length - len(ahead))
        links = back[::-1] + ahead
        if len(links) < MIN_PAPERS:
            notes.append(f"{pid}: no earlier {'or later ' if newer else ''}paper to link to")
            continue
        seen.update(link.paper_id for link in links)
        chains.append(PaperChain(index=len(chains) + 1, anchor=pid, anchor_reason=why, links=links))
    return chains, notes


def reachable(papers: Sequence[Paper], library: Mapping[str, Paper], depth: int, newer: int = 0,
              cited_by: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The ids a chain can reach: the round's papers, what they cite (transitively, `depth` steps
    at most) and the papers citing them (`newer` steps), among the known papers (these are the
    papers whose embeddings are needed)."""
    out = dict.fromkeys(p.paper_id for p in papers)

    def walk(steps: int, nexts: Callable[[str], Sequence[str]], start: list[str]) -> None:
        frontier = start
        for _ in range(steps):
            nxt = []
            for pid in frontier:
                for r in nexts(pid):
                    if r in library and r not in out:
                        out[r] = None
                        nxt.append(r)
            frontier = nxt

    start = list(out)
    walk(newer, lambda pid: (cited_by or {}).get(pid, ()), start)
    walk(depth, lambda pid: library[pid].references if pid in library else [], list(out))
    return list(out)


def paper_chains(encode: Encode, background: str, papers: Sequence[Paper], scores: Sequence[PaperScore],
                 corpus: Sequence[Paper], count: int, length: int, newer: int = 0
                 ) -> tuple[list[PaperChain], list[str], int]:
    """The round's chains: the papers known by id (the round's, then the `corpus` ones they may
    cite or be cited by), embeddings of the topic (`background`) and of the papers a chain can
    reach, then `anchors` and `build_chains`. Returns (chains, notes, how many papers were known)."""
    if not papers:
        return [], ["the round has no papers"], 0
    library = {p.paper_id: p for p in corpus}
    library.update({p.paper_id: p for p in papers})  # the round's copy wins (same id, same source)
    cited_by = citing_index(library)
    ids = reachable(papers, library, length - 1, min(newer, length - 1), cited_by)
    vecs = np.asarray(encode([background] + [doc_text(library[i].title, library[i].abstract) for i in ids]),
                      dtype=np.float32)
    by_id = dict(zip(ids, vecs[1:]))
    topic_sim = {pid: float(v @ vecs[0]) for pid, v in by_id.items()}
    chains, notes = build_chains(anchors(papers, scores, topic_sim), library, [p.paper_id for p in papers],
                                 topic_sim, by_id, count, length, newer, cited_by)
    return chains, notes, len(library)


def per_chain(n: int, chains: int) -> int:
    """Ideas asked of each chain so that the chains together give the round's n (rounded up)."""
    return max(1, ceil(n / max(chains, 1)))


def prompt_chain(chain: PaperChain, library: Mapping[str, Paper], chars: int = 200
                 ) -> list[tuple[int, int | None, str, str, str]]:
    """What the chain prompt shows, oldest first: (number, year, title, start of the abstract,
    how the paper relates to the one before it: '', 'cites [k]' or 'similar to [k]')."""
    out = []
    for i, link in enumerate(chain.links, 1):
        before = chain.links[i - 2] if i > 1 else None  # the older paper
        if before is None:
            how = ""
        elif link.link in FORWARD:  # reached forward: its own link says how it relates to the one before
            how = ("cites" if link.link == "cites_earlier" else "similar to") + f" [{i - 1}]"
        else:  # reached backward: the older paper's link says how it was reached from this one
            how = ("cites" if before.link == "cites" else "similar to") + f" [{i - 1}]"
        p = library.get(link.paper_id)
        out.append((i, link.year, link.title, (p.abstract if p else "")[:chars], how))
    return out
