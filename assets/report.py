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
