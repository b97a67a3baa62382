"""Decisions the sensors make, as pure functions over what is stored."""
from __future__ import annotations

from resources.store import Store, round_number
from schemas.topic import TopicSpec


def next_round(spec: TopicSpec, store: Store, finished_round: str | None) -> str | None:
    """The round to start after `finished_round` (None: after the topic's set-up), or None when
    the round budget is spent or that round already has feedback."""
    n = 1 if finished_round is None else round_number(finished_round) + 1
    if n > spec.budget.rounds:
        return None
    rk = f"r{n}"
    if store.path("feedback_summary", spec.name, rk).exists():
        return None
    return rk


def stop_reason(spec: TopicSpec, rounds: list[dict], tokens: float = 0, cost_usd: float = 0.0) -> str | None:
    """Why the topic should not get another round, or None. `rounds`: the finished rounds in
    order (dicts with at least `improvement`), e.g. assets.feedback_summary.feedback.progress_rows."""
    b = spec.budget
    if len(rounds) >= b.rounds:
        return f"round budget spent ({len(rounds)}/{b.rounds})"
    if b.max_tokens is not None and tokens >= b.max_tokens:
        return f"token budget spent ({int(tokens)} >= {b.max_tokens})"
    if b.max_cost_usd is not None and cost_usd >= b.max_cost_usd:
        return f"cost budget spent (${cost_usd:.4f} >= ${b.max_cost_usd:g})"
    if b.patience is not None and len(rounds) >= b.patience and not any(r["improvement"] for r in rounds[-b.patience:]):
        return f"no improvement in the last {b.patience} round(s)"
    return None

