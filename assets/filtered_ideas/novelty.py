"""The novelty check as a pure loop (no Dagster): the LLM derives a query from the idea, the
literature is searched, the LLM reads the results and either decides (novel / not_novel) or
asks for another query, for at most `rounds` searches. Every query and every compared paper
is kept as evidence.

Malformed answers (after the LLM resource's own retries): a failed query step falls back to
searching the idea's title; a failed decision leaves `novel = None` with the error recorded,
and the caller keeps the idea (a judge that could not answer is no evidence against it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from assets.filtered_ideas import prompts
from schemas.llm_outputs import NoveltyJudgement, NoveltyQuery, NoveltyStep
from schemas.records import Paper

Search = Callable[[str, int], list[Paper]]


SUMMARY_CHARS = 220  # of each paper's abstract shown: ~60 tokens, 5 papers ~ 300 prompt tokens


class Completes(Protocol):
    """What the loop needs from resources.llm.LLM (a fake in tests)."""

    def complete(self, messages: list[dict], *, stage: str, schema=None, max_tokens: int = 512,
                 item: str | None = None): ...


@dataclass
class NoveltyOutcome:
    novel: bool | None            # None: switched off or not decided (see error)
    reason: str = ""
    queries: list[str] = field(default_factory=list)
    papers: list[Paper] = field(default_factory=list)   # every compared paper, first seen first
    closest: Paper | None = None
    error: str | None = None      # malformed answers met on the way, even if it still decided

    @property
    def decided(self) -> bool:
        return self.novel is not None


def _same(q: str, used: list[str]) -> bool:
    norm = " ".join(q.lower().split())
    return not norm or norm in {" ".join(u.lower().split()) for u in used}


def novelty_check(task: str, idea_title: str, idea_summary: str, search: Search, llm: Completes,
                  rounds: int = 2, k: int = 5, item: str | None = None) -> NoveltyOutcome:
    """At most 1 + rounds LLM calls and `rounds` searches for one idea (`item`: its id, for
    the LLM's per-idea accounting)."""
    out = NoveltyOutcome(novel=None)
    if rounds <= 0:
        out.reason = "novelty check switched off (novelty_rounds: 0)"
        return out
    problems: list[str] = []
    msgs = prompts.start(task, idea_title, idea_summary)
    res = llm.complete(msgs, stage="novelty", schema=NoveltyQuery, max_tokens=60, item=item)
    if res.ok:
        query, said = res.value.query.strip(), res.text
    else:
        query = idea_title.strip() or idea_summary[:80]
        said = json.dumps({"query": query})
        problems.append(f"query step failed, searched the idea title instead: {res.error}")
    msgs.append(prompts.assistant(said))
    number: dict[str, int] = {}  # paper_id -> number shown to the model
    by_number: dict[int, Paper] = {}
    for r in range(1, rounds + 1):
        found = search(query, k)
        out.queries.append(query)
        shown = []
        for p in found:
            seen = p.paper_id in number
            if not seen:
                number[p.paper_id] = len(number) + 1
                by_number[number[p.paper_id]] = p
                out.papers.append(p)
            shown.append((number[p.paper_id], p.title, "" if seen else p.abstract[:SUMMARY_CHARS].strip()))
        final = r == rounds
        msgs.append(prompts.results(query, shown, final))
        schema = NoveltyJudgement if final else NoveltyStep
        res = llm.complete(msgs, stage="novelty", schema=schema, max_tokens=110 if final else 140,
                           item=item)
        if not res.ok:
            problems.append(f"decision step {r} failed: {res.error}")
            break
        v = res.value
        if v.decision == "search_again":
            nxt = v.query.strip()
            if not _same(nxt, out.queries):
                query = nxt
                msgs.append(prompts.assistant(res.text))
                continue
            # an empty or repeated query would show the same papers again: ask for the decision
            msgs += [prompts.assistant(res.text), prompts.repeated_query(nxt)]
            res = llm.complete(msgs, stage="novelty", schema=NoveltyJudgement, max_tokens=110, item=item)
            if not res.ok:
                problems.append(f"forced decision failed: {res.error}")
                break
            v = res.value
        out.novel = v.decision == "novel"
        out.closest = by_number.get(v.closest_paper)
        out.reason = v.reason.strip()
        break
    if not out.decided:
        out.reason = "novelty not judged: " + (problems[-1] if problems else "no decision")
    out.error = "; ".join(problems) or None
    return out


CARD_APPLIED = ("applies method card {card}: a published method applied to this task by design, so the literature "
                "novelty check does not apply (ideation.novelty_cards checks it all the same)")


def unless_card(check: Callable[[object], NoveltyOutcome], cards_checked: bool = False
                ) -> Callable[[object], NoveltyOutcome]:
    """`check` for ideas without a method card (and, with `cards_checked`, for all); an idea that
    applies a card gets an undecided outcome saying so, without a search or an LLM call."""
    def outcome(item) -> NoveltyOutcome:
        card = getattr(item, "method_card", None)
        if card and not cards_checked:
            return NoveltyOutcome(novel=None, reason=CARD_APPLIED.format(card=card))
        return check(item)
    return outcome

