"""When the loop starts another round: one decision, asked by both loop drivers (round_sensor in
pipelines/sensors.py and `researchloop run` in pipelines/cli.py), over what is stored."""
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


def topic_stop_reason(instance, spec: TopicSpec, store: Store) -> str | None:
    """The stop rules over the topic's stored rounds and the LLM usage its rounds' stages
    recorded in their materialisation metadata."""
    from assets import ROUND_ASSETS
    from assets.feedback_summary.feedback import progress_rows
    from assets.shared.metadata import round_usage
    from assets.shared.partitions import multi_key

    rows = progress_rows(store, spec.name)
    stages = [a.key.to_user_string() for a in ROUND_ASSETS]
    usage = [round_usage(instance, str(multi_key(spec.name, r["round"])), stages) for r in rows]
    return stop_reason(spec, rows, sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage),
                       sum(u["cost_usd"] for u in usage))


def decide_next_round(instance, spec: TopicSpec, store: Store, finished_round: str | None) -> tuple[str | None, str]:
    """(the round to start after `finished_round`, why) or (None, why not). The one place that
    decides whether a topic gets another round: the round budget, a round already done, then
    the stop rules (token and cost budgets, patience) over the stored rounds and usage."""
    n = 1 if finished_round is None else round_number(finished_round) + 1
    rk = next_round(spec, store, finished_round)
    if rk is None:
        if n > spec.budget.rounds:
            return None, f"round budget spent ({n - 1}/{spec.budget.rounds})"
        return None, f"r{n} already has feedback"
    why = topic_stop_reason(instance, spec, store)
    if why is not None:
        return None, why
    return rk, "no stop rule holds"
