"""How many broken variants the interpreter's own suggestions repair alone (no LLM).

The repair search (assets/run_results/experimenting.py run_with_repair) tries, per failure,
the fix Python's error message suggests ("Did you mean: 'x'?", assets/run_results/suggestions.py)
besides the LLM's. This scores that candidate source alone: every variant of the broken suites
(bench/broken/<suite>/manifest.jsonl) goes through run_with_repair with llm=None and
suggestions on, on the topic's quick `check` dry run (up to MAX_REPAIRS candidates, default 5);
a variant counts as repaired only when the repaired file's FULL run then scores, the rule of
bench/repair_bench.py (bench/repair_scoring.py). No model is asked. FULL_RUN=0 skips the full
runs (a loaded machine may need many minutes per run): the record then counts only the variants
whose dry run passes after the suggestions, an upper bound of the repaired ones, and says so.

  .venv/bin/python -m bench.repair_mechanical        # all suites -> bench/records/repair_mechanical.json
  SUITES=pointcloud FULL_RUN=0 .venv/bin/python -m bench.repair_mechanical
  SUITES=image,sentiment FULL_TIMEOUT=1800 RECORD=repair_mechanical_full .venv/bin/python -m bench.repair_mechanical
  SUITES=pointcloud ONLY=wrong_import_name RECORD=repair_mechanical_full_pointcloud \
      .venv/bin/python -m bench.repair_mechanical
"""
from __future__ import annotations

import os
import time

from bench.broken_suite import SUITES, load_suite
from bench.common import machine, today, write_record
from bench.repair_scoring import full_run, score_row


def repair_mechanically(variant: dict, spec, runner, max_repairs: int, full: bool, timeout_s: float) -> dict:
    from assets.run_results.experimenting import RunTarget, run_with_repair
    from resources.paths import under_home

    t0 = time.monotonic()
    workdir = under_home("bench", "mechanical", spec.name, variant["name"])
    res = run_with_repair(RunTarget.of_topic(spec, "check"), variant["code"], runner=runner, llm=None,
                          workdir=workdir, idea_id=variant["name"], title="", max_repairs=max_repairs,
                          edit_format="whole", suggestions=True, memo=False, log=lambda s: None)
    row = {"name": variant["name"], "kind": variant["kind"], "fixed": res.status == "success",
           "runs": res.n_attempts, "suggestions_tried": sum(a.fix_source == "suggestion" for a in res.attempts),
           "outcomes": [a.outcome for a in res.attempts[1:]],
           "first_error": res.attempts[0].error, "last_error": res.attempts[-1].error,
           "diffs": [a.applied_diff for a in res.attempts if a.applied_diff], "dry_run_ok": res.status == "success"}
    if full:
        scored = full_run(spec, res.final_code, runner, workdir / "full", timeout_s=timeout_s) if row["dry_run_ok"] \
            else None
        row = score_row(row, scored)
    else:
        row.update(fixed=None, full_run_ok=None, full_run_error="not run (FULL_RUN=0)")
    row["wall_s"] = round(time.monotonic() - t0, 1)
    return row


def main() -> None:
    from bench.broken_suite import ROOT
    from resources.runner import Runner
    from schemas.topic import load_topic

    max_repairs = int(os.environ.get("MAX_REPAIRS", 5))
    full = os.environ.get("FULL_RUN", "1") != "0"
    timeout_s = float(os.environ.get("FULL_TIMEOUT", 900))
    suites = [s for s in os.environ.get("SUITES", ",".join(SUITES)).split(",") if s]
    runner = Runner()
    rows = {}
    for suite in suites:
        spec = load_topic(ROOT / "experiments" / SUITES[suite])
        rows[suite] = []
        only = [n for n in os.environ.get("ONLY", "").split(",") if n]
        for v in [v for v in load_suite(suite) if not only or v["name"] in only]:
            r = repair_mechanically(v, spec, runner, max_repairs, full, timeout_s)
            rows[suite].append(r)
            print(f"{suite}/{v['name']}: dry run {'passes' if r['dry_run_ok'] else 'fails'}, full run "
                  f"{'not run' if r['fixed'] is None else 'scores' if r['fixed'] else 'does not score'} "
                  f"(suggestions {r['suggestions_tried']}, first error: {(r['first_error'] or '')[:90]})", flush=True)
    totals = {s: {"variants": len(rs), "with_a_suggestion": sum(r["suggestions_tried"] > 0 for r in rs),
                  "dry_run_passes": sum(r["dry_run_ok"] for r in rs),
                  "fixed": sum(bool(r["fixed"]) for r in rs) if full else None} for s, rs in rows.items()}
    path = write_record(os.environ.get("RECORD", "repair_mechanical"), {
        "script": "bench/repair_mechanical.py", "date": today(), "machine": f"2-core shared VM: {machine()}",
        "sample": "in-sample: the broken suites were known when the suggestion code was written (nothing in it "
                  "names a variant)",
        "rule": ("repaired = the dry run passes after the suggestions AND the repaired file's full run scores"
                 if full else "full runs not made (FULL_RUN=0): dry_run_passes is an upper bound of the repaired"),
        "full_run": full, "full_timeout_s": timeout_s if full else None,
        "llm": None, "max_repairs": max_repairs, "only": os.environ.get("ONLY", ""), "totals": totals, "rows": rows})
    print(f"{path}: {totals}")


if __name__ == "__main__":
    main()
