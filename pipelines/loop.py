"""When the loop starts another round: one decision, asked by both loop drivers (round_sensor in
pipelines/sensors.py and `researchloop run` in pipelines/cli/run.py), over what is stored."""
from __future__ import annotations

from assets import ROUND_ASSETS
from assets.feedback_summary.feedback import progress_rows
from assets.shared.metadata import round_usage
from assets.shared.partitions import multi_key
from resources.store import Store, round_number
from schemas.topic import TopicSpec

ROUND_END = "best_code"  # the last asset of a round (assets.ROUND_ASSETS): a round is finished when it is stored


def round_finished(store: Store, topic: str, round_key: str) -> bool:
    """Whether a round is finished: its last asset, best_code, is stored. A run killed (or failed)
    between feedback_summary and best_code leaves a round with feedback but no best_code; it is
    not finished and runs again (from its LLM cache and experiment memos), or the next round's
    round_reference would find the chain of best code broken. A round stored before stacking
    existed (feedback but no round_reference) counts as finished by its feedback."""
    if store.path(ROUND_END, topic, round_key).exists():
        return True
    return (store.path("feedback_summary", topic, round_key).exists()
            and not round_started(store, topic, round_key))


def round_started(store: Store, topic: str, round_key: str) -> bool:
    """Whether a round's first asset, round_reference, is stored."""
    return store.path("round_reference", topic, round_key).exists()


def round_unfinished(store: Store, topic: str, round_key: str) -> bool:
    """Started (round_reference stored) and not finished (no best_code): a round a run left
    midway, which must run again before the next round can start."""
    return round_started(store, topic, round_key) and not round_finished(store, topic, round_key)


def next_round(spec: TopicSpec, store: Store, finished_round: str | None) -> str | None:
    """The round to start after `finished_round` (None: after the topic's set-up), or None when
    the round budget is spent, `finished_round` is not finished, or the next round is."""
    n = 1 if finished_round is None else round_number(finished_round) + 1
    if n > spec.budget.rounds:
        return None
    if finished_round is not None and round_unfinished(store, spec.name, finished_round):
        return None  # it runs again before the next one
    rk = f"r{n}"
    if round_finished(store, spec.name, rk):
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
        if finished_round is not None and round_unfinished(store, spec.name, finished_round):
            return None, f"{finished_round} is not finished (no {ROUND_END} stored): it runs again first"
        return None, f"r{n} is already finished"
    why = topic_stop_reason(instance, spec, store)
    if why is not None:
        return None, why
    return rk, "no stop rule holds"
