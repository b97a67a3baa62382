"""Metadata helpers: Markdown tables and LLM usage, so the UI tells the story."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import dagster as dg

from resources.llm import LLMCall, LLMUsage, usage_totals


def _cell(v) -> str:
    s = "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
    return s.replace("|", "\\|").replace("\n", " ")[:160]


def md_table(rows: Iterable[dict], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(_cell(r.get(c)) for c in columns) + " |")
    if len(lines) == 2:
        lines.append("| " + " | ".join("" for _ in columns) + " |")
    return "\n".join(lines)


USAGE_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "cost_usd")


Usage = dict[str, float]  # USAGE_KEYS -> number


def usage_by_item(calls: Sequence[LLMCall]) -> dict[str | None, Usage]:
    """LLM calls, tokens and cost summed per item (the idea a call was made for; None: calls
    that serve the whole round), items in the order first seen."""
    groups: dict[str | None, list[LLMCall]] = {}
    for c in calls:
        groups.setdefault(c.item, []).append(c)
    totals = {item: usage_totals(cs) for item, cs in groups.items()}
    return {item: {k: t[k] for k in USAGE_KEYS} for item, t in totals.items()}


def usage_metadata(usage: LLMUsage | Sequence[LLMCall], by_idea: bool = False) -> dict:
    """The usage entries of an asset's metadata, from the calls a `with llm.track(stage)` block
    collected (or a list of calls); with `by_idea` (the per-idea stages) also `usage_by_idea`:
    {idea_id: {llm_calls, prompt_tokens, completion_tokens, cost_usd}} of the calls made for one
    idea (the rest of the totals served the whole round)."""
    calls = usage.calls if isinstance(usage, LLMUsage) else usage
    t = usage_totals(calls)
    meta = {
        "llm_calls": t["llm_calls"], "llm_cached_calls": t["llm_cached_calls"],
        "llm_failed_calls": t["llm_failed_calls"], "prompt_tokens": t["prompt_tokens"],
        "completion_tokens": t["completion_tokens"], "cost_usd": dg.MetadataValue.float(float(t["cost_usd"])),
    }
    if by_idea:
        meta["usage_by_idea"] = dg.MetadataValue.json(
            {item: u for item, u in usage_by_item(calls).items() if item is not None})
    return meta


def topic_metadata(topic) -> dict:
    """Which capture of the topic a stage used (a CapturedTopic from its topic_brief input)."""
    return {"topic_code_sha256": topic.code_sha256, "topic_spec_sha256": topic.spec_sha256}


def add_usage(total: Usage, u: dict) -> Usage:
    """Adds the USAGE_KEYS numbers of `u` (missing ones count 0) into `total`; returns it."""
    for k in USAGE_KEYS:
        v = u.get(k, 0)
        total[k] = total.get(k, 0.0) + (float(v) if isinstance(v, (int, float)) else 0.0)
    return total


def _latest_metadata(instance, partition_key: str, asset_names: Sequence[str]):
    """The metadata of the latest materialisation of each named asset for one partition."""
    for name in asset_names:
        res = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), asset_partitions=[str(partition_key)]), limit=1)
        if res.records:
            yield res.records[0].asset_materialization.metadata


def round_usage(instance, partition_key: str, asset_names: Sequence[str]) -> Usage:
    """LLM calls, tokens and cost of one partition, summed over the latest materialisation of
    each named asset (as recorded in its metadata)."""
    total = {k: 0.0 for k in USAGE_KEYS}
    for meta in _latest_metadata(instance, partition_key, asset_names):
        add_usage(total, {k: v.value for k, v in meta.items() if k in USAGE_KEYS})
    return total


def round_usage_by_idea(instance, partition_key: str, asset_names: Sequence[str]) -> dict[str, Usage]:
    """Per idea: its LLM calls, tokens and cost in one partition, summed over the `usage_by_idea`
    entries of the latest materialisation of each named asset."""
    out: dict[str, Usage] = {}
    for meta in _latest_metadata(instance, partition_key, asset_names):
        entry = meta.get("usage_by_idea")
        for item, u in (entry.value if entry is not None and isinstance(entry.value, dict) else {}).items():
            add_usage(out.setdefault(item, {k: 0.0 for k in USAGE_KEYS}), u)
    return out


def round_llm_use(instance, partition_key: str, stages: Sequence[str],
                  calls: Sequence[LLMCall] = ()) -> tuple[Usage, dict[str, Usage]]:
    """(total, per idea) LLM use of one round: the latest materialisations of `stages` plus `calls`
    (those of the step running now, not yet in any materialisation)."""
    total = add_usage(round_usage(instance, partition_key, stages), usage_totals(calls))
    by_idea = round_usage_by_idea(instance, partition_key, stages)
    for item, u in usage_by_item(calls).items():
        if item is not None:
            add_usage(by_idea.setdefault(item, {}), u)
    return total, by_idea


def share_usage(total: Usage, by_idea: dict[str, Usage], ideas: Sequence[str]) -> dict[str, tuple[Usage, Usage]]:
    """Per idea of `ideas`: (its own usage, its even share of the rest of `total`). The rest is
    what served the round as a whole (papers, ranking, generation, analysis) plus what was
    spent on ideas not in `ideas` (e.g. the novelty check of dropped ideas), so the own usages
    and shares of all ideas add up to `total`."""
    if not ideas:
        return {}
    own = {i: {k: float(by_idea.get(i, {}).get(k, 0.0)) for k in USAGE_KEYS} for i in ideas}
    rest = {k: float(total.get(k, 0.0)) - sum(o[k] for o in own.values()) for k in USAGE_KEYS}
    share = {k: v / len(own) for k, v in rest.items()}
    return {i: (own[i], dict(share)) for i in own}
