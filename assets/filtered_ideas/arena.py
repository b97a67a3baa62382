"""The Idea Arena (Chain-of-Ideas, sec. 3.4) as a selection step: when a round has more candidate
ideas than its budget (`budget.ideas_per_round`), every pair of ideas is judged by the LLM on four
criteria (arena_prompts.CRITERIA: novelty, feasibility on this code, expected effect on the
metric, clarity), each pair asked twice with the order swapped, and ELO ratings pick the ideas to
run. Pure logic: the judge is a callable, the LLM one is built by `llm_judge`.

Position bias: the two orders of a pair are combined into one match per criterion before any
rating is computed: an idea scores 1 for a win, 0.5 for a tie and 0 for a loss in each order and
the match result is the mean of the two. A judge that always prefers whichever idea it sees first
thus produces ties only, and all ratings stay at the initial rating.

ELO: every idea starts at INITIAL_RATING = 1000 and a match moves both ratings by
K_FACTOR * (score - expected), K_FACTOR = 32, expected = 1 / (1 + 10 ** ((R_other - R_own) / 400)).
ELO updates depend on the order matches are played in; the tournament has no natural order, so
the ratings are the mean over ORDERS seeded random orders of the same matches (deterministic).
One rating per criterion; an idea's arena rating is the mean of its criterion ratings.

A judgement the judge could not give in the required form is asked again once, sampled; if that
fails too, the pair counts as a tie in that order on every criterion and the reason is recorded
on the judgement (`error`) and shown in the table."""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from assets.filtered_ideas import arena_prompts as prompts
from assets.filtered_ideas.arena_prompts import CRITERIA, ArenaJudgement
from assets.shared.metadata import md_table
from schemas.records import Idea

K_FACTOR = 32.0         # the classic chess / Chatbot-Arena-online value
INITIAL_RATING = 1000.0
ORDERS = 64             # random match orders the ratings are averaged over
SEED = 0
RESAMPLE_TEMPERATURE = 0.8

POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


class Completes(Protocol):
    """What the judge needs from resources.llm.LLM (a scripted fake in tests)."""

    def complete(self, messages: list[dict], *, stage: str, schema=None, max_tokens: int = 512,
                 item: str | None = None, temperature: float | None = None, seed: int | None = None): ...


@dataclass
class Judgement:
    """One pair asked in one order: `first` was shown as idea A. `choices` maps each criterion to
    "first", "second" or "tie"."""
    first: str
    second: str
    choices: dict[str, str]
    reason: str = ""
    error: str | None = None   # why it counted as a tie on every criterion
    asks: int = 1

    def points(self, idea_id: str, criterion: str) -> float:
        c = self.choices.get(criterion, "tie")
        if c == "tie":
            return POINTS["tie"]
        mine = "first" if idea_id == self.first else "second"
        return POINTS["win"] if c == mine else POINTS["loss"]


Judge = Callable[[Idea, Idea], Judgement]   # (shown as A, shown as B)


@dataclass
class ArenaOutcome:
    ratings: dict[str, float]                       # idea id -> mean over criteria
    by_criterion: dict[str, dict[str, float]]       # criterion -> idea id -> rating
    judgements: list[Judgement]
    order: list[str] = field(default_factory=list)  # idea ids, best rating first (ties: input order)

    def top(self, k: int) -> list[str]:
        return self.order[:k]

    def record(self, idea_id: str) -> tuple[int, int, int]:
        """Wins, losses, ties of one idea over every (order, criterion) game it played."""
        w = l_ = t = 0
        for j in self.judgements:
            if idea_id not in (j.first, j.second):
                continue
            for c in CRITERIA:
                p = j.points(idea_id, c)
                w, l_, t = w + (p == 1.0), l_ + (p == 0.0), t + (p == 0.5)
        return w, l_, t

    def rank(self, idea_id: str) -> int:
        return self.order.index(idea_id) + 1

    def rows(self, names: dict[str, str] | None = None) -> list[dict]:
        """One row per idea, best first, for md_table (columns: ROW_COLUMNS)."""
        names = names or {}
        out = []
        for i in self.order:
            w, l_, t = self.record(i)
            out.append({"rank": self.rank(i), "name": names.get(i, i), "rating": round(self.ratings[i], 1),
                        **{c: round(self.by_criterion[c][i], 1) for c in CRITERIA},
                        "won-lost-tied": f"{w}-{l_}-{t}",
                        "malformed": sum(j.error is not None for j in self.judgements if i in (j.first, j.second))})
        return out


ROW_COLUMNS = ["rank", "name", "rating", *CRITERIA, "won-lost-tied", "malformed"]


def elo(ids: Sequence[str], matches: Sequence[tuple[str, str, float]], k: float = K_FACTOR,
        initial: float = INITIAL_RATING, orders: int = ORDERS, seed: int = SEED) -> dict[str, float]:
    """ELO ratings from matches (a, b, score of a in [0, 1]), averaged over `orders` seeded random
    orders of the matches (order 0 is the given order)."""
    total = {i: 0.0 for i in ids}
    rng = random.Random(seed)
    seq = list(matches)
    for n in range(max(1, orders)):
        if n:
            rng.shuffle(seq)
        r = {i: initial for i in ids}
        for a, b, s in seq:
            expected = 1.0 / (1.0 + 10 ** ((r[b] - r[a]) / 400.0))
            r[a] += k * (s - expected)
            r[b] -= k * (s - expected)
        for i in ids:
            total[i] += r[i]
    return {i: total[i] / max(1, orders) for i in ids}


def matches_of(judgements: Sequence[Judgement], criterion: str) -> list[tuple[str, str, float]]:
    """One match per unordered pair: the mean of its judgements' points (both orders)."""
    by_pair: dict[tuple[str, str], list[float]] = {}
    for j in judgements:
        a, b = sorted((j.first, j.second))
        by_pair.setdefault((a, b), []).append(j.points(a, criterion))
    return [(a, b, sum(ps) / len(ps)) for (a, b), ps in by_pair.items()]


def tournament(items: Sequence[Idea], judge: Judge, k: float = K_FACTOR, initial: float = INITIAL_RATING,
               orders: int = ORDERS, log: Callable[[str], None] = lambda _: None) -> ArenaOutcome:
    """Round robin: every pair judged in both orders (2 * n * (n - 1) / 2 judge calls)."""
    ids = [i.idea_id for i in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"idea ids must be unique, got {ids}")
    judgements: list[Judgement] = []
    for x in range(len(items)):
        for y in range(x + 1, len(items)):
            for a, b in ((items[x], items[y]), (items[y], items[x])):
                j = judge(a, b)
                judgements.append(j)
                said = ", ".join(f"{c}={v}" for c, v in j.choices.items())
                log(f"arena {a.name} vs {b.name}: " + (f"tie (malformed: {j.error})" if j.error else said))
    by_criterion = {c: elo(ids, matches_of(judgements, c), k, initial, orders) for c in CRITERIA}
    ratings = {i: sum(by_criterion[c][i] for c in CRITERIA) / len(CRITERIA) for i in ids}
    order = sorted(ids, key=lambda i: (-round(ratings[i], 9), ids.index(i)))
    return ArenaOutcome(ratings=ratings, by_criterion=by_criterion, judgements=judgements, order=order)


def needed(n_candidates: int, budget: int, enabled: bool) -> bool:
    """The arena runs only when switched on and there is something to choose."""
    return enabled and n_candidates > budget


def arena_order(items: Sequence[Idea], outcome: ArenaOutcome | None) -> list[Idea]:
    """The ideas, best rating first: the filter then spends the round's budget on the top ones
    (and an idea it drops is replaced by the next best). No outcome: the ideas as they are."""
    if outcome is None:
        return list(items)
    by_id = {i.idea_id: i for i in items}
    return [by_id[i] for i in outcome.order]


def _choices(v: ArenaJudgement) -> dict[str, str]:
    label = {"A": "first", "B": "second", "tie": "tie"}
    return {c: label[getattr(v, c)] for c in CRITERIA}


def llm_judge(llm: Completes, title: str, description: str, metric: str, goal: str, code: str,
              max_tokens: int = 160) -> Judge:
    """A judge asking the LLM (stage "arena"): greedy first, one sampled re-ask after a malformed
    answer (the resource has already retried it), then a tie with the error recorded."""
    def judge(a: Idea, b: Idea) -> Judgement:
        msgs = prompts.judge(title, description, metric, goal, code,
                             (a.title, a.summary, a.experiment), (b.title, b.summary, b.experiment))
        errors = []
        for ask in range(2):
            extra = {} if ask == 0 else {"temperature": RESAMPLE_TEMPERATURE, "seed": 1}
            res = llm.complete(msgs, stage="arena", schema=ArenaJudgement, max_tokens=max_tokens, **extra)
            if res.ok:
                return Judgement(a.idea_id, b.idea_id, _choices(res.value), reason=res.value.reason.strip(),
                                 asks=ask + 1)
            errors.append(str(res.error))
        return Judgement(a.idea_id, b.idea_id, {c: "tie" for c in CRITERIA}, asks=2,
                         error=f"malformed judgement after 2 asks, counted as a tie: {errors[-1][:200]}")
    return judge


def spearman(xs: Sequence[float | None], ys: Sequence[float | None]) -> float | None:
    """Spearman's rank correlation of paired values (ties get their mean rank), e.g. arena ratings
    against measured gains; pairs with a missing value are left out. None when fewer than 3 pairs
    remain or one side is constant (no ranking to compare)."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} values against {len(ys)}")
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    from scipy.stats import rankdata

    rx = rankdata([p[0] for p in pairs])
    ry = rankdata([p[1] for p in pairs])
    mx, my = rx.mean(), ry.mean()
    sx, sy = ((rx - mx) ** 2).sum(), ((ry - my) ** 2).sum()
    if sx == 0 or sy == 0:
        return None
    return float(((rx - mx) * (ry - my)).sum() / (sx * sy) ** 0.5)


def with_ratings(filtered: Sequence, outcome: ArenaOutcome | None) -> list:
    """FilteredIdea records with their arena rating, rank and record filled in (unchanged when the
    arena did not run)."""
    if outcome is None:
        return list(filtered)
    out = []
    for f in filtered:
        if f.idea_id not in outcome.ratings:
            out.append(f)
            continue
        w, l_, t = outcome.record(f.idea_id)
        out.append(f.model_copy(update={"arena_rating": round(outcome.ratings[f.idea_id], 2),
                                        "arena_rank": outcome.rank(f.idea_id), "arena_record": f"{w}-{l_}-{t}"}))
    return out


def arena_for(items: Sequence[Idea], spec, code: str, llm: Completes,
              log: Callable[[str], None] = lambda _: None) -> ArenaOutcome | None:
    """The stage's entry point: the tournament over `items` when the topic switches the arena on
    (`ideation.arena`) and there are more candidates than `budget.ideas_per_round`; else None.
    `spec` is the round's TopicSpec, `code` the code the ideas would change."""
    if not needed(len(items), spec.budget.ideas_per_round, spec.ideation.arena):
        return None
    log(f"arena: {len(items)} candidates for {spec.budget.ideas_per_round} places, "
        f"{len(items) * (len(items) - 1)} judgements")
    judge = llm_judge(llm, spec.title, spec.description, spec.metric.name, spec.metric.goal, code)
    return tournament(items, judge, log=log)


def arena_metadata(outcome: ArenaOutcome | None, items: Sequence[Idea]) -> dict:
    """The asset's metadata entries: the ratings table (Markdown) and the constants, or nothing."""
    if outcome is None:
        return {}
    import dagster as dg

    names = {i.idea_id: i.name for i in items}
    return {
        "arena": dg.MetadataValue.md(md_table(outcome.rows(names), ROW_COLUMNS)),
        "arena_judgements": len(outcome.judgements),
        "arena_malformed": sum(j.error is not None for j in outcome.judgements),
        "arena_elo": f"K={K_FACTOR:g}, initial {INITIAL_RATING:g}, mean over {ORDERS} match orders",
    }
