"""Method papers the ranking keeps for what they let an experiment do, not for sharing the topic's
words.

Every ranking mode scores how close a paper is to the topic's task. A paper whose method would
improve the experiment (gradient boosting for a tabular regression, a learning-rate schedule for
any network) often shares none of the topic's words and falls below the cut, and the ideas then
come only from same-task papers. Each corpus paper with a method card (corpus/method_cards.jsonl)
gets an applicability signal instead: how well the card's data and task kinds meet the topic's
(resources/method_cards.py `fit`). Up to `method_papers` places of the kept set (topic.yaml
`ideation.method_papers`) go to the best applicable method papers of the round: a paper kept on
its score counts toward them, and the others are kept with the score KEEP_AT and a reason that
says why. Deterministic: the order is fit, then a card with an installed library call, then the
ranking's own score, then the papers' order."""
from __future__ import annotations

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


def keep_method_papers(scores: Sequence[PaperScore], fits: Mapping[str, int], places: int,
                       cards: Mapping[str, MethodCard] | None = None) -> list[PaperScore]:
    """`scores` with up to `places` applicable method papers kept: `fits` maps a paper id to its
    card's fit with the topic (resources/method_cards.py `applicable`; absent: no card or it does not
    apply). Kept papers with an applicable card count toward `places`; the remaining places go to the
    best of the others that were judged (a paper the ranking failed on stays out). The rest are
    returned unchanged, in the same order."""
    cards = load_cards() if cards is None else cards
    kept_already = sum(1 for s in scores if s.kept and s.paper_id in fits)
    free = max(0, places - kept_already)
    if not free:
        return list(scores)

    def order(item: tuple[int, PaperScore]) -> tuple:
        i, s = item
        card = cards.get(s.paper_id)
        return -fits[s.paper_id], card is None or card.library is None, -s.score, i

    candidates = sorted(((i, s) for i, s in enumerate(scores)
                         if not s.kept and s.error is None and s.paper_id in fits), key=order)
    chosen = {i for i, _ in candidates[:free]}
    out = []
    for i, s in enumerate(scores):
        if i in chosen:
            s = s.model_copy(update={
                "kept": True, "score": max(s.score, KEEP_AT),
                "reason": (f"kept as an applicable method paper (its method card fits the topic {fits[s.paper_id]}/4; "
                           f"{places} places reserved); ranked {s.score}: {s.reason}")})
        out.append(s)
    return out


def with_method_papers(brief: TopicBrief, scores: Sequence[PaperScore], places: int,
                       cards: Mapping[str, MethodCard] | None = None) -> tuple[list[PaperScore], TopicKinds, int]:
    """keep_method_papers for a topic brief: (the scores, the topic's kinds, how many method papers
    it added). A topic whose words name no kind of data or output gets none."""
    cards = load_cards() if cards is None else cards
    kinds = brief_kinds(brief)
    fits = applicable([s.paper_id for s in scores], kinds, dict(cards))
    out = keep_method_papers(scores, fits, places, cards)
    return out, kinds, sum(1 for a, b in zip(scores, out) if b.kept and not a.kept)
