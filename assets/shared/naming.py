"""Idea names and ids."""

from __future__ import annotations

import re


def snake(name: str, fallback: str = "idea") -> str:
    s = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return (s or fallback)[:48].strip("_") or fallback


def unique_name(name: str, taken: set[str]) -> str:
    base = snake(name)
    out, k = base, 2
    while out in taken:
        out = f"{base}_{k}"
        k += 1
    taken.add(out)
    return out


def idea_id(topic: str, round_key: str, name: str) -> str:
    return f"{topic}/{round_key}/{name}"
