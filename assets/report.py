"""Metadata helpers: Markdown tables and LLM usage, so the UI tells the story."""
from __future__ import annotations

from typing import Iterable, Sequence

import dagster as dg

from resources.llm import LLMCall, usage_totals


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


def usage_metadata(calls: Sequence[LLMCall]) -> dict:
    t = usage_totals(calls)
    return {
        "llm_calls": t["llm_calls"], "llm_cached_calls": t["llm_cached_calls"],
        "llm_failed_calls": t["llm_failed_calls"], "prompt_tokens": t["prompt_tokens"],
        "completion_tokens": t["completion_tokens"], "cost_usd": dg.MetadataValue.float(float(t["cost_usd"])),
    }


USAGE_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "cost_usd")


def round_usage(instance, partition_key: str, asset_names: Sequence[str]) -> dict[str, float]:
    """LLM calls, tokens and cost of one partition, summed over the latest materialisation of
    each named asset (as recorded in its metadata)."""
    total = {k: 0.0 for k in USAGE_KEYS}
    for name in asset_names:
        res = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), asset_partitions=[str(partition_key)]), limit=1)
        if not res.records:
            continue
        meta = res.records[0].asset_materialization.metadata
        for k in USAGE_KEYS:
            if k in meta and isinstance(meta[k].value, (int, float)):
                total[k] += float(meta[k].value)
    return total
