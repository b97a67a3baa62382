"""Method papers the ranking keeps for what they let an experiment do, not for sharing the topic's
words.

Every ranking mode scores how close a paper is to the topic's task. A paper whose method would
improve the experiment (gradient boosting for a tabular regression, a learning-rate schedule for
any network) often shares none of the topic's words and falls below the cut, and the ideas then
come only from same-task papers. Each corpus paper with a method card (corpus/method_cards.jsonl)
gets an applicability signal instead: how well the card's data and task kinds meet the topic's
(resources/method_cards.py `fit`). Up to `method_papers` of the round's applicable method papers
that the score did not keep are kept too (topic.yaml `ideation.method_papers`), with the score
KEEP_AT and a reason that says why; papers kept on their score are shown to the ideas anyway, so
they take none of these places. Chosen one at a time, the best first: the closest fit, then a card
whose library call no kept paper's card, earlier choice or the topic's code already makes (three
boosting papers do not take all the places), then a call from a package the code imports (a
scikit-learn script gets scikit-learn methods first, a torch script torch ones), then any card with a
library call, then the ranking's own score, then the papers' order. Deterministic."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from assets.paper_rankings.scoring import KEEP_AT
from resources.method_cards import TopicKinds, applicable, load_cards, topic_kinds
from schemas.method_card import MethodCard
from schemas.records import PaperScore, TopicBrief


def brief_kinds(brief: TopicBrief) -> TopicKinds:
    """The kinds of data and output the topic names: its title and description, the task
    attributes read from them, and the metric's name."""
    return topic_kinds(brief.title, brief.description, brief.task, brief.input, brief.output,
                       brief.evaluation, brief.metric_name)


def _calls(library: str, code: str) -> bool:
    """Whether the code already names the library's callable (its last dotted name)."""
    return bool(code) and re.search(rf"\b{re.escape(library.rsplit('.', 1)[-1])}\b", code) is not None


_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.M)


def _packages(code: str) -> set[str]:
    """The top-level packages the code imports."""
    return set(_IMPORT.findall(code))


def keep_method_papers(scores: Sequence[PaperScore], fits: Mapping[str, int], places: int,
                       cards: Mapping[str, MethodCard] | None = None, code: str = "") -> list[PaperScore]:
    """`scores` with up to `places` more papers kept: applicable method papers that the score did not
    keep and the ranking judged (a paper it failed on stays out). `fits` maps a paper id to its card's
    fit with the topic (resources/method_cards.py `applicable`; absent: no card, or it does not apply);
    `code`: the topic's reference code (a card whose call it already makes comes after the others, one
    from a package it imports before them).
    The other papers are returned unchanged, in the same order."""
    cards = load_cards() if cards is None else cards
    pool = [(i, s) for i, s in enumerate(scores) if not s.kept and s.error is None and s.paper_id in fits]
    chosen: dict[int, str] = {}
    packages = _packages(code)
    libraries = {c.library for s in scores if s.kept and (c := cards.get(s.paper_id)) is not None and c.library}
    while pool and len(chosen) < places:
        def order(item: tuple[int, PaperScore]) -> tuple:
            i, s = item
            c = cards.get(s.paper_id)
            lib = c.library if c is not None else None
            repeated = lib is not None and (lib in libraries or _calls(lib, code))
            foreign = lib is None or lib.split(".", 1)[0] not in packages
            return -fits[s.paper_id], repeated, foreign, lib is None, -s.score, i

        i, s = min(pool, key=order)
        pool.remove((i, s))
        c = cards.get(s.paper_id)
        if c is not None and c.library:
            libraries.add(c.library)
        chosen[i] = f"{len(chosen) + 1} of {places}"
    out = []
    for i, s in enumerate(scores):
        if i in chosen:
            s = s.model_copy(update={
                "kept": True, "score": max(s.score, KEEP_AT),
                "reason": (f"kept as an applicable method paper ({chosen[i]}; its method card fits the topic "
                           f"{fits[s.paper_id]}/4); ranked {s.score}: {s.reason}")})
        out.append(s)
    return out


def with_method_papers(brief: TopicBrief, scores: Sequence[PaperScore], places: int,
                       cards: Mapping[str, MethodCard] | None = None) -> tuple[list[PaperScore], TopicKinds, int]:
    """keep_method_papers for a topic brief: (the scores, the topic's kinds, how many method papers
    it added). A topic whose words name no kind of data or output gets none."""
    cards = load_cards() if cards is None else cards
    kinds = brief_kinds(brief)
    fits = applicable([s.paper_id for s in scores], kinds, dict(cards))
    out = keep_method_papers(scores, fits, places, cards, brief.code)
    return out, kinds, sum(1 for a, b in zip(scores, out) if b.kept and not a.kept)
