"""How often would a win's change merge onto another win's code? (issue 14, stacked wins)

The carry-over of a win that changed more than knob values (assets/ideas/generation.py
`carried_ideas`) replays its change on the next round's reference by a three-way merge of lines
(assets/ideas/merge.py `merge3`), and a clash gives no idea. This bench asks, on the code real
loops produced: for every pair of ideas of one round that ran to a metric (their code as it ran,
after repairs, different from the round's reference), does the one's change merge cleanly onto the
other's code, does the merged program compile, and does it hold both changes (it differs from
each side)? Pairs are counted by kind: both knob-only changes (assets/ideas/tuning.py
`knob_changes`; those are carried as moves, not merged), one of each, both structural.

No LLM and no run: the record store folders of earlier loops are read (`--stores`), and the raw
record keeps every round's reference code and every idea's code, so the section can be rendered
again from the record alone.

    .venv/bin/python -m bench.merge_bench --stores DIR[,DIR...]    # folders holding records/ or the records
    FROM_RECORD=1 .venv/bin/python -m bench.merge_bench            # re-render from bench/records/merge.json
"""
from __future__ import annotations

import itertools
import sys
from collections import Counter
from pathlib import Path

from bench.common import machine, provenance, publish, stores_cli, today

RECORD, SECTION = "merge", "merge"


def collect(folder: Path) -> list[dict]:
    """Every round of every topic in a record store: its reference code and its ideas that ran."""
    from resources.store import Store

    root = folder / "records" if (folder / "records").is_dir() else folder
    if not (root / "run_results").is_dir():  # a work folder: the store is under its dagster_home
        root = next((p.parent for p in folder.rglob("run_results") if p.parent.name == "records"), root)
    store, out = Store(root), []
    for topic in store.topics():
        for rk in store.rounds("run_results", topic):
            ref, runs = store.read("round_reference", topic, rk), store.read("run_results", topic, rk)
            if ref is None or ref.is_empty() or runs is None:
                continue
            code = ref["code"][0]
            ideas = [{"idea_id": r["idea_id"], "status": r["status"], "metric_value": r["metric_value"],
                      "code": r["final_code"]}
                     for r in runs.iter_rows(named=True)
                     if r["status"] == "success" and (r["final_code"] or "").strip() and r["final_code"] != code]
            out.append({"store": str(folder), "topic": topic, "round": rk, "reference": code, "ideas": ideas})
    return out


def judge(rounds: list[dict]) -> list[dict]:
    """Every unordered pair of a round's ideas: its kind and what the merge gives."""
    from assets.ideas.merge import merge3
    from assets.ideas.tuning import knob_changes

    pairs = []
    for r in rounds:
        knob = {i["idea_id"]: bool(knob_changes(r["reference"], i["code"])) for i in r["ideas"]}
        for a, b in itertools.combinations(r["ideas"], 2):
            kinds = sorted("knob" if knob[x["idea_id"]] else "structural" for x in (a, b))
            merged = merge3(r["reference"], a["code"], b["code"])
            if merged is None:
                outcome = "clash"
            elif merged in (a["code"], b["code"]):
                outcome = "one contains the other"
            else:
                try:
                    compile(merged, "merged", "exec")
                    outcome = "clean, compiles"
                except SyntaxError:
                    outcome = "clean, does not compile"
            pairs.append({"topic": r["topic"], "round": r["round"], "a": a["idea_id"], "b": b["idea_id"],
                          "kinds": "+".join(kinds), "outcome": outcome})
    return pairs


NOTES = [
    "In-sample for one choice: the first pass over these stores used diff3's rule (hunks that only meet clash) and "
    "merged 4 of 11 pairs; merge3 was then changed to merge hunks that only meet (a line changed right above "
    "another side's changed line) and merges 7 of 11. The 4 clashes left are real: both sides set one knob to "
    "different values (2, e.g. learning_rate_init 0.01 -> 0.03 and -> 0.005), both add a keyword to the same "
    "call, or both rewrite the same model line (Ridge -> a random forest, and Ridge on interaction features).",
    "A clean merge is only a candidate: the carry-over runs it on its seeds and the verdict decides. Whether the "
    "merged pairs also improve was not measured here (no run).",
]

OUTCOMES = ("clean, compiles", "clean, does not compile", "clash", "one contains the other")


def render(rec: dict) -> str:
    pairs = judge(rec["rounds"])  # recomputed from the stored code: the record holds the inputs
    rec["pairs"] = pairs
    rows = ["| kinds of the two changes | pairs | " + " | ".join(OUTCOMES) + " |",
            "|---|---|" + "---|" * len(OUTCOMES)]
    for kinds in ("structural+structural", "knob+structural", "knob+knob", "all"):
        sel = [p for p in pairs if kinds == "all" or p["kinds"] == kinds]
        c = Counter(p["outcome"] for p in sel)
        rows.append(f"| {kinds} | {len(sel)} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
    topics = Counter(r["topic"] for r in rec["rounds"])
    n_ideas = sum(len(r["ideas"]) for r in rec["rounds"])
    return "\n".join([
        "## Merging one win's change onto another's code (issue 14, stacked wins)", "",
        provenance("bench/merge_bench.py", "bench/records/merge.json", f"{rec['date']} on {rec['machine']}",
                   "in-sample for one choice, that hunks which only meet merge (the first note); otherwise "
                   "held-out: merge3 was written and tested on synthetic code before these stores were read"), "",
        f"Every pair of ideas of one round that ran to a metric with code different from the round's reference "
        f"({n_ideas} ideas in {len(rec['rounds'])} rounds of {len(topics)} topics: "
        + ", ".join(f"{t} ({n})" for t, n in sorted(topics.items()))
        + "; the record stores of earlier loops on this machine, listed in the record), merged by "
        "assets/ideas/merge.py `merge3` with the round's reference as the base, as the carry-over does. A knob-only "
        "change (assets/ideas/tuning.py `knob_changes`) is carried as a move, not merged; its rows say how a "
        "merge would do.", "",
        *rows, "",
        *[f"- {n}" for n in rec.get("notes", [])],
    ])


def main(argv: list[str] | None = None) -> int:
    got = stores_cli(__doc__, argv, RECORD, SECTION, render)
    if isinstance(got, int):
        return got
    stores, write = got
    rounds = [r for s in stores for r in collect(Path(s))]
    rec = {"script": "bench/merge_bench.py", "date": today(), "machine": machine(), "stores": stores,
           "rounds": [r for r in rounds if len(r["ideas"]) >= 2], "notes": NOTES}
    return publish(RECORD, SECTION, rec, render, write=write)


if __name__ == "__main__":
    sys.exit(main())
