"""The independence filter (Algorithm 1) and the novelty check over a round's ideas, and the
refill: when the filters leave the round short of its budget, more ideas are asked for (told
what was dropped and why) and filtered the same way, a bounded number of times."""
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from assets.filtered_ideas.novelty import NoveltyOutcome
from assets.filtered_ideas.similarity import independence_filter
from assets.shared.text import title_key
from schemas.records import Feedback, FilteredIdea, Idea

OVER_BUDGET = "over the round's budget"
REPEATS = "repeats"


def repeated(title: str, tried: Sequence[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    """The first (idea_id, title, verdict) of `tried` whose title names the same idea, or None."""
    key = title_key(title)
    return next((t for t in tried if key and title_key(t[1]) == key), None)


def filter_ideas(items: list[Idea], bank: list[Feedback], embed: Callable[[list[str]], np.ndarray],
                 novelty: Callable[[Idea], NoveltyOutcome], threshold: float = 0.8,
                 keep_at_most: int | None = None, log: Callable[[str], None] = lambda _: None,
                 earlier: Sequence[FilteredIdea] = (), proposal: int = 0,
                 tried: Sequence[tuple[str, str, str]] = ()) -> list[FilteredIdea]:
    """Independence (Algorithm 1 over summary embeddings, bank = `bank`), then the repeat rule,
    then the novelty check for the independent ideas, in order, until `keep_at_most` are kept (the
    round's budget when the brainstorm path doubled the candidates); every idea is recorded with
    its reason. The repeat rule drops an idea whose title names the same idea (title_key) as one
    earlier rounds already ran (`tried`: (idea_id, title, verdict), any verdict) or as one this
    round kept: a small model re-proposes "Feature Selection" with a vaguer summary that the
    embeddings no longer match, and running it again spends a round's budget on a known answer.
    `earlier`: this round's ideas already decided (a refill continues Algorithm 1 after them:
    their independent ones are in the bank, their kept ones count against `keep_at_most`);
    `proposal`: recorded on each idea (0: the ideas asset's proposals, k: the k-th refill)."""
    if not items:
        return []
    vecs = embed([i.summary for i in items])
    before = [e for e in earlier if e.independent]  # Algorithm 1 adds every independent idea to the bank
    entries = [(b.idea_id, b.summary) for b in bank] + [(e.idea_id, e.summary) for e in before]
    bank_vecs = embed([s for _, s in entries]) if entries else None
    decisions = independence_filter(vecs, [i.idea_id for i in items], bank_vecs, [i for i, _ in entries], threshold)
    out: list[FilteredIdea] = []
    kept = sum(e.kept for e in earlier)
    this_round = [(e.idea_id, e.title, "kept this round") for e in earlier if e.kept]
    for item, d in zip(items, decisions):
        nov, drop = NoveltyOutcome(novel=None), None
        if not d.independent:
            drop = f"too similar to {d.nearest} (cosine {d.max_similarity:.2f} >= {threshold})"
        elif rep := repeated(item.title, [*tried, *this_round]):
            drop = f"{REPEATS} {rep[0]} ({rep[1]!r}, {rep[2]})"
        elif keep_at_most is not None and kept >= keep_at_most:
            drop = f"{OVER_BUDGET} of {keep_at_most} ideas"
            nov.reason = "not checked: budget reached"
        else:
            nov = novelty(item)
            if nov.novel is False:
                drop = f"not novel: {nov.reason}" + (f" (closest: {nov.closest.paper_id})" if nov.closest else "")
            elif nov.error and not nov.decided:
                log(f"{item.name}: novelty undecided, kept: {nov.error}")
        kept += drop is None
        if drop is None:
            this_round.append((item.idea_id, item.title, "kept this round"))
        out.append(FilteredIdea(
            **item.model_dump(), max_similarity=d.max_similarity, nearest_bank_idea=d.nearest,
            independent=d.independent, novel=nov.novel, novelty_reason=nov.reason,
            novelty_queries=nov.queries, novelty_evidence=[p.paper_id for p in nov.papers],
            novelty_evidence_titles=[p.title for p in nov.papers],
            novelty_closest_paper=nov.closest.paper_id if nov.closest else None, novelty_error=nov.error,
            kept=drop is None, drop_reason=drop, proposal=proposal))
        log(f"{item.name}: {'kept' if drop is None else drop}")
    return out


@dataclass
class Filled:
    """A round's filtered ideas after its refills: every idea proposed, in order, with its decision."""
    ideas: list[FilteredIdea]
    proposals: int = 1          # generation calls whose ideas were filtered (1 = the ideas asset alone)
    refill_errors: list[str] = field(default_factory=list)

    @property
    def kept(self) -> int:
        return sum(i.kept for i in self.ideas)


def dropped_by_filters(decided: Sequence[FilteredIdea]) -> list[FilteredIdea]:
    """The ideas the filters dropped (near-duplicates, not novel); not those left over the budget."""
    return [i for i in decided if not i.kept and not (i.drop_reason or "").startswith(OVER_BUDGET)]


def fill_round(items: list[Idea], bank: list[Feedback], embed: Callable[[list[str]], np.ndarray],
               novelty: Callable[[Idea], NoveltyOutcome], threshold: float, budget: int, refills: int,
               propose: Callable[[int, int, list[FilteredIdea]], tuple[list[Idea], str | None]],
               log: Callable[[str], None] = lambda _: None, tried: Sequence[tuple[str, str, str]] = ()) -> Filled:
    """filter_ideas on the ideas asset's proposals; then, while fewer than `budget` are kept and
    fewer than `refills` extra calls were made, `propose(missing, k, decided)` (k = 1, 2, ...; it
    returns new ideas and an error or None) asks for `missing` more ideas, told what `decided` holds,
    and its ideas are filtered after the earlier ones (the same filters, continuing Algorithm 1).
    A refill that brings no idea ends the refills."""
    out = filter_ideas(items, bank, embed, novelty, threshold, keep_at_most=budget, log=log, tried=tried)
    filled = Filled(out)
    for k in range(1, refills + 1):
        missing = budget - filled.kept
        if missing <= 0:
            break
        log(f"{filled.kept} of {budget} ideas kept after {filled.proposals} proposal(s): asking for {missing} more "
            f"(refill {k} of at most {refills})")
        new, error = propose(missing, k, list(filled.ideas))
        filled.proposals += 1
        if error:
            filled.refill_errors.append(f"refill {k}: {error}")
        if not new:
            break
        filled.ideas += filter_ideas(new, bank, embed, novelty, threshold, keep_at_most=budget, log=log,
                                     earlier=filled.ideas, proposal=k, tried=tried)
    return filled


TUNING_KEPT = ("a hyper-parameter move or a carried-over win (tuning source, no LLM): not a literature idea, "
               "so neither filter applies")


def keep_tuning(items: Sequence[Idea], budget: int) -> tuple[list[FilteredIdea], list[Idea]]:
    """The tuning source's moves decided without the filters (the move rule of
    assets/ideas/tuning/ already never repeats a value; similarity and novelty are about
    ideas from papers), kept while within `budget`; and the other ideas, for the filters."""
    out = []
    for i in (i for i in items if i.source == "tuning"):
        keep = len(out) < budget
        out.append(FilteredIdea(**i.model_dump(), max_similarity=0.0, independent=True, novel=None,
                                novelty_reason=TUNING_KEPT, kept=keep,
                                drop_reason=None if keep else f"{OVER_BUDGET} of {budget} ideas"))
    return out, [i for i in items if i.source != "tuning"]


RESERVE_KEPT = "a reserve hyper-parameter move: the filters and refills left the round short of its budget"
RESERVE_UNUSED = "a reserve move, not needed: the filters and refills filled the round's budget"


def split_reserve(items: Sequence[Idea], first: int) -> tuple[list[Idea], list[Idea]]:
    """(the ideas with the tuning source's first `first` moves, the moves after them: the
    reserve that `fill_with_moves` spends on places the filters and refills left empty)."""
    moves = [i.idea_id for i in items if i.source == "tuning"]
    spare = set(moves[first:])
    return [i for i in items if i.idea_id not in spare], [i for i in items if i.idea_id in spare]


def fill_with_moves(reserve: Sequence[Idea], places: int) -> list[FilteredIdea]:
    """The reserve moves decided: the first `places` kept (the round would otherwise test fewer
    ideas than its budget), the others recorded as not needed."""
    return [FilteredIdea(**i.model_dump(), max_similarity=0.0, independent=True, novel=None,
                         novelty_reason=RESERVE_KEPT if k < places else TUNING_KEPT, kept=k < places,
                         drop_reason=None if k < places else RESERVE_UNUSED) for k, i in enumerate(reserve)]
