"""The broken variants the repair benchmark uses.

bench/broken/<suite>/manifest.jsonl holds one variant per line: its name, the kind of bug, what
the bug is, and the bug itself as one edit of the topic's reference experiment (`old` text ->
`new` text). Variants are built from the current reference, so they follow it; a reference
change that removes an edit's `old` text is reported by name (tests/bench/test_broken_suite.py)."""
from __future__ import annotations

import json
from pathlib import Path

from schemas.topic import load_topic

ROOT = Path(__file__).resolve().parents[1]
SUITES = {"pointcloud": "pointcloud_classification", "image": "image_classification",
          "sentiment": "sentiment_classification"}
# suites of standalone scripts (bench/broken/<suite>/bases/*.py), for `researchloop debug` (bench/debug_bench.py)
SCRIPT_SUITES = ("scripts_dev", "scripts_heldout", "scripts_heldout2", "scripts_heldout3")


class SuiteError(ValueError):
    pass


def reference(suite: str = "pointcloud") -> str:
    return load_topic(ROOT / "experiments" / SUITES[suite]).code_path.read_text()


def load_suite(suite: str = "pointcloud", ref: str | None = None) -> list[dict]:
    """The variants, each with `code`: the reference (default: the topic's current file; `ref`:
    another text of it, e.g. the one a record was made with) with its bug applied."""
    ref = reference(suite) if ref is None else ref
    rows = [json.loads(l) for l in (ROOT / "bench" / "broken" / suite / "manifest.jsonl").read_text().splitlines()
            if l.strip()]
    for r in rows:
        if ref.count(r["old"]) != 1:
            raise SuiteError(f"variant {r['name']}: its `old` text occurs {ref.count(r['old'])} times in the "
                             f"reference experiment of {SUITES[suite]} (must be once): update the manifest")
        r["code"] = ref.replace(r["old"], r["new"], 1)
    return rows


def variant_code(name: str, suite: str = "pointcloud") -> str:
    return next(r["code"] for r in load_suite(suite) if r["name"] == name)


def load_script_suite(suite: str) -> list[dict]:
    """The variants of a suite of standalone scripts: each manifest row with `base_code` (the
    bug-free script bench/broken/<suite>/bases/<base>) and `code` (it with the bug applied)."""
    folder = ROOT / "bench" / "broken" / suite
    rows = [json.loads(l) for l in (folder / "manifest.jsonl").read_text().splitlines() if l.strip()]
    for r in rows:
        base = (folder / "bases" / r["base"]).read_text()
        if base.count(r["old"]) != 1:
            raise SuiteError(f"variant {r['name']}: its `old` text occurs {base.count(r['old'])} times in "
                             f"{suite}/bases/{r['base']} (must be once): update the manifest")
        r["base_code"], r["code"] = base, base.replace(r["old"], r["new"], 1)
    return rows
