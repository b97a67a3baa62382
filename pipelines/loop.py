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
