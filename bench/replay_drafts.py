"""Replay the drafts of a finished loop through the mechanical part of today's repair search,
with no LLM: how many of the drafts the model wrote would run now, before any LLM repair?

For each draft of each idea in the `patched_code` records of a DAGSTER_HOME (a loop the
effectiveness bench ran), each draft that applied (status ok) is run in the real sandbox twice:

- `as_written`: the draft as recorded, run once (no repair);
- `verdict`: a draft that runs after mending is run on the topic's other seeds and judged against the
  baseline's seeds by the loop's verdict rule;
- `mechanical`: the draft mended (`mend`: misplaced statements moved, missing imports added), then the
  repair search with suggestions only (`run_with_repair`, llm=None, the topic's
  `budget.debug_attempts` candidates): the interpreter's and the libraries' suggestions.

The LLM's repairs are not replayed (they depend on the model's answers to the new errors); the
original loop's own outcome per idea is in its effectiveness record. Writes
bench/records/<name>.json and the section <name> of bench/RESULTS.md.

    .venv/bin/python -m bench.replay_drafts --home /tmp/eff/dagster_home --topic diabetes_regression \
        --name replay_diabetes --sample "in-sample: ..."
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import polars as pl

from bench.common import machine, provenance, today, write_record, write_section
from resources.runner import Runner
from schemas.frames import from_frame
from schemas.records import Patch
from schemas.topic import load_topic

SCRIPT = "bench/replay_drafts.py"


def replay(home: Path, topic: str, work: Path) -> list[dict]:
    from assets.feedback_summary.verdicts import judge_seeds
    from assets.run_results.experimenting import baseline_values, repeat_seeds, run_with_repair
    from assets.run_results.suggestions import mend
    from resources.paths import resolve_topic_dir

    spec = load_topic(resolve_topic_dir(topic))  # a name under experiments/ or a topic folder
    runner = Runner()
    base = baseline_values(spec, runner, log=lambda s: None)
    rows = []
    for path in sorted((home / "records" / "patched_code" / spec.name).glob("r*.parquet")):
        for patch in from_frame(pl.read_parquet(path), Patch):
            for d in patch.drafts:
                if d.status != "ok" or not d.code:
                    continue
                tag = f"{patch.idea_id.split('/')[-1]}-d{d.index}"
                common = dict(runner=runner, llm=None, idea_id=tag, title="", edit_format="functions",
                              log=lambda s: None, suggestions=True, memo=False)
                first = run_with_repair(spec, d.code, workdir=work / path.stem / tag / "as_written", max_repairs=0,
                                        **common)
                completed, added = mend(d.code)
                mech = run_with_repair(spec, completed, workdir=work / path.stem / tag / "mechanical",
                                       max_repairs=spec.budget.debug_attempts, **common)
                verdict = None
                if mech.status == "success":  # the topic's seeds and its verdict rule, against the baseline's seeds
                    seeded = repeat_seeds(spec, mech, runner, work / path.stem / tag / "seeds", log=lambda s: None,
                                          gate=False)
                    if seeded.status == "success":
                        v, why, _ = judge_seeds(seeded.seed_values, base, spec.metric.goal, spec.metric.tolerance)
                        verdict = {"verdict": v, "reason": why, "seed_values": seeded.seed_values}
                rows.append({
                    "round": path.stem, "idea_id": patch.idea_id, "draft": d.index,
                    "as_written": {"status": first.status, "error": first.reason, "metric": first.metric_value},
                    "mended": added, "verdict": verdict,
                    "mechanical": {"status": mech.status, "error": mech.reason, "metric": mech.metric_value,
                                   "attempts": [{"fix_source": a.fix_source, "error": a.error,
                                                 "diff": a.applied_diff} for a in mech.attempts]},
                })
                print(f"{path.stem} {tag}: as written {first.status} ({(first.reason or '')[:60]}); "
                      f"mended {added}; mechanical {mech.status} ({(mech.reason or '')[:60]})", flush=True)
    return rows


def section(rows: list[dict], name: str, topic: str, home: str, sample: str) -> str:
    ideas = sorted({r["idea_id"] for r in rows})
    ran_as = sum(r["as_written"]["status"] == "success" for r in rows)
    ran_mech = sum(r["mechanical"]["status"] == "success" for r in rows)
    ideas_as = len({r["idea_id"] for r in rows if r["as_written"]["status"] == "success"})
    ideas_mech = len({r["idea_id"] for r in rows if r["mechanical"]["status"] == "success"})
    lines = [f"## Replayed drafts: what the mechanical repairs do now ({Path(topic).name})", "",
             provenance(SCRIPT, f"bench/records/{name}.json", f"{today()} on {machine()}", sample), "",
             f"The drafts of the loop recorded in `{home}` (every draft that applied, {len(rows)} drafts of "
             f"{len(ideas)} ideas), each run in the sandbox as written and after today's mechanical repair "
             "search without any LLM (mended: misplaced top-level statements moved below what they read, "
             "missing imports added; then the interpreter's and the libraries' suggestions within the topic's "
             "repair budget).", "",
             "| | drafts that run | ideas with a draft that runs |", "|---|---|---|",
             f"| as written | {ran_as}/{len(rows)} | {ideas_as}/{len(ideas)} |",
             f"| mended + mechanical repairs | {ran_mech}/{len(rows)} | {ideas_mech}/{len(ideas)} |", "",
             f"Verified improvements over the baseline's seeds among them (the verdict rule of "
             f"assets/feedback_summary/verdicts.py): "
             f"{sum(bool(r['verdict']) and r['verdict']['verdict'] == 'improvement' for r in rows)}.", "",
             "| round | idea | draft | as written | mended before the run | after the mechanical repairs | verdict "
             "over the topic's seeds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        show = lambda o: "runs" + (f" ({o['metric']:.4f})" if o["metric"] is not None else "") \
            if o["status"] == "success" else (o["error"] or "failed")[:90].replace("|", "/")  # noqa: E731
        lines.append(f"| {r['round']} | {r['idea_id'].split('/')[-1]} | {r['draft']} | {show(r['as_written'])} | "
                     f"{'; '.join(r['mended']) or '-'} | "
                     f"{show(r['mechanical'])} | "
                     + (f"{r['verdict']['verdict']}: {r['verdict']['reason']}" if r["verdict"] else "-") + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="the DAGSTER_HOME of a finished loop")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--name", default="replay_drafts", help="record and section name")
    ap.add_argument("--sample", default="in-sample", help="in-sample or held-out, and why")
    args = ap.parse_args()
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="replay-home-"))
    with tempfile.TemporaryDirectory(prefix="replay-") as work:
        rows = replay(Path(args.home), args.topic, Path(work))
    write_record(args.name, {"script": SCRIPT, "date": today(), "machine": machine(), "home": args.home,
                             "topic": args.topic, "sample": args.sample, "drafts": rows})
    print(write_section(args.name, section(rows, args.name, args.topic, args.home, args.sample)))


if __name__ == "__main__":
    main()
