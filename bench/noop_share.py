"""How often an idea's patch changes nothing (issue 14, "edits the small model can make"): a
few fixed ideas for the point-cloud topic, planned and patched on the local model through the
code the `experiment_plans` and `patched_code` assets call (make_plan, make_patch), with the
shipped defaults: edit format `auto` (the local model writes changed definitions named by the
plan, a whole file as fallback), `budget.drafts` drafts, the dead-code check and the topic's
dry run in the sandbox. Nothing is run in full.

    DAGSTER_HOME=/tmp/rl_noop_home .venv/bin/python -m bench.noop_share        # N=6 ideas by default
    N=3 .venv/bin/python -m bench.noop_share

Writes bench/records/noop_share.json: per idea the plan (changes, named definitions), every draft
(status, reason, how it was asked, diff, dry run) and the LLM time and tokens; the shares of
ideas whose patch changed nothing, of drafts that changed nothing and of greedy first drafts that
changed nothing (what one draft would give). The LLM cache lives under DAGSTER_HOME."""
from __future__ import annotations

import os
import time
from pathlib import Path

from bench.common import machine, today, write_record
from bench.filtering_bench import IDEAS, TOPIC

SCRIPT = "bench/noop_share.py"


def summary(rows: list[dict], spec, llm, t_all: float, n: int) -> dict:
    """The record: every idea's row and the shares over the ideas done so far (of `n` asked)."""
    from assets.patched_code.patching import patch_format
    from resources.llm import usage_totals

    drafts = [d for r in rows for d in r["drafts"]]
    first = [r["drafts"][0] for r in rows if r["drafts"]]
    rec = {
        "script": SCRIPT, "date": today(), "machine": f"2-core shared VM: {machine()}",
        "in_sample": False, "sample": "held-out: ideas written for bench/filtering_bench.py; nothing tuned on them",
        "model": llm.model_name(), "topic": TOPIC, "edit_format": patch_format(llm),
        "drafts_per_idea": spec.budget.drafts,
        "check": spec.check, "wall_s": round(time.monotonic() - t_all, 1), "usage": usage_totals(llm.calls()),
        "ideas": len(rows), "ideas_asked": n, "complete": len(rows) == n,
        "ideas_no_op": sum(r["status"] == "no_op" for r in rows),
        "ideas_implemented": sum(r["status"] == "ok" for r in rows),
        "drafts_total": len(drafts), "drafts_no_op": sum(d["status"] == "no_op" for d in drafts),
        "drafts_dead_code": sum(d["status"] == "no_op" and "never runs" in (d["reason"] or "") for d in drafts),
        "drafts_duplicate": sum(d["status"] == "duplicate" for d in drafts),
        "drafts_viable": sum(d["status"] == "ok" for d in drafts),
        "first_drafts_no_op": sum(d["status"] == "no_op" for d in first),
        "rows": rows,
    }
    rec["share_ideas_no_op"] = round(rec["ideas_no_op"] / max(1, len(rows)), 3)
    rec["share_drafts_no_op"] = round(rec["drafts_no_op"] / max(1, len(drafts)), 3)
    return rec


def main() -> None:
    os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_noop_home")
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    from assets.experiment_plans.planning import make_plan
    from assets.patched_code.patching import make_patch
    from assets.shared.naming import idea_id
    from resources.llm import LLM, usage_totals
    from resources.paths import resolve_topic_dir
    from resources.runner import Runner
    from schemas.records import FilteredIdea
    from schemas.topic import load_topic

    n = int(os.environ.get("N", "6"))
    spec = load_topic(resolve_topic_dir(TOPIC))
    code = spec.code_path.read_text()
    llm, runner = LLM(), Runner()
    rows = []
    t_all = time.monotonic()
    for name, title, text in IDEAS[:n]:
        idea = FilteredIdea(idea_id=idea_id(TOPIC, "bench", name), topic=TOPIC, round="bench", name=name, title=title,
                            experiment=text, summary=text, max_similarity=0.0, independent=True, novel=True,
                            kept=True)
        c0, t0 = len(llm.calls()), time.monotonic()
        plan = make_plan(spec, code, idea, llm)
        patch = make_patch(spec, code, idea, plan, llm, runner)
        calls = llm.calls()[c0:]
        rows.append({
            "idea": name, "title": title, "plan_changes": plan.changes, "plan_location": plan.location,
            "plan_functions": plan.functions, "plan_error": plan.error, "status": patch.status,
            "reason": patch.reason, "edit_format": patch.edit_format,
            "drafts": [d.model_dump(exclude={"code"}) for d in patch.drafts],
            "seconds": round(time.monotonic() - t0, 1), "usage": usage_totals(calls)})
        print(f"{name}: {patch.status} ({[d.status for d in patch.drafts]}) in {rows[-1]['seconds']} s", flush=True)
        rec = summary(rows, spec, llm, t_all, n)
        path = write_record("noop_share", rec)  # after each idea: a partial record says so ("complete")
    print(f"{rec['ideas_no_op']}/{len(rows)} ideas changed nothing; "
          f"drafts: {rec['drafts_no_op']}/{rec['drafts_total']} "
          f"no-op ({rec['drafts_dead_code']} dead code), {rec['drafts_duplicate']} duplicates, "
          f"{rec['drafts_viable']} viable; wall {rec['wall_s']} s -> {path}")


if __name__ == "__main__":
    main()
