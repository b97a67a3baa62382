"""The independence filter (Algorithm 1) and the novelty check over a round's ideas."""
from collections.abc import Callable

import numpy as np

from assets.filtered_ideas.novelty import NoveltyOutcome
from assets.filtered_ideas.similarity import independence_filter
from schemas.records import Feedback, FilteredIdea, Idea


def filter_ideas(items: list[Idea], bank: list[Feedback], embed: Callable[[list[str]], np.ndarray],
                 novelty: Callable[[Idea], NoveltyOutcome], threshold: float = 0.8,
                 keep_at_most: int | None = None, log: Callable[[str], None] = lambda _: None) -> list[FilteredIdea]:
    """Independence (Algorithm 1 over summary embeddings, bank = `bank`), then the novelty check
    for the independent ideas, in order, until `keep_at_most` are kept (the round's budget when
    the brainstorm path doubled the candidates); every idea is recorded with its reason."""
    if not items:
        return []
    vecs = embed([i.summary for i in items])
    bank_vecs = embed([b.summary for b in bank]) if bank else None
    decisions = independence_filter(vecs, [i.idea_id for i in items], bank_vecs, [b.idea_id for b in bank], threshold)
    out: list[FilteredIdea] = []
    kept = 0
    for item, d in zip(items, decisions):
        nov, drop = NoveltyOutcome(novel=None), None
        if not d.independent:
            drop = f"too similar to {d.nearest} (cosine {d.max_similarity:.2f} >= {threshold})"
        elif keep_at_most is not None and kept >= keep_at_most:
            drop = f"over the round's budget of {keep_at_most} ideas"
            nov.reason = "not checked: budget reached"
        else:
            nov = novelty(item)
            if nov.novel is False:
                drop = f"not novel: {nov.reason}" + (f" (closest: {nov.closest.paper_id})" if nov.closest else "")
            elif nov.error and not nov.decided:
                log(f"{item.name}: novelty undecided, kept: {nov.error}")
        kept += drop is None
        out.append(FilteredIdea(
            **item.model_dump(), max_similarity=d.max_similarity, nearest_bank_idea=d.nearest,
            independent=d.independent, novel=nov.novel, novelty_reason=nov.reason,
            novelty_queries=nov.queries, novelty_evidence=[p.paper_id for p in nov.papers],
            novelty_evidence_titles=[p.title for p in nov.papers],
            novelty_closest_paper=nov.closest.paper_id if nov.closest else None, novelty_error=nov.error,
            kept=drop is None, drop_reason=drop))
        log(f"{item.name}: {'kept' if drop is None else drop}")
    return out
