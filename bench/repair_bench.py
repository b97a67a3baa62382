"""Repair rate of traceback-guided debugging (DOLPHIN 3.2, Table 4) on the broken suite.

Every variant in bench/broken/<suite>/manifest.jsonl is a topic's experiment with one bug
(an edit of the reference, bench/broken_suite.py). For each debugging mode (structure / traceback / error) the repair loop
(`assets.run_results.experimenting.run_with_repair`, the same code the loop and `researchloop debug`
use) runs it with the topic's quick `check` command (a dry run that executes every line on
tiny data), asks the LLM for up to MAX_REPAIRS fixes (default: the topic budget's default, 5), and applies the honesty check. With
FULL_VERIFY=1 every repaired file is also run with the topic's full `run` command.

LLM time is scarce: the LLM cache lives in a fixed DAGSTER_HOME (/tmp/rl_repair_home), so a
re-run with unchanged prompts costs no model time, and the bench stops starting variants after
DEADLINE_MIN minutes. Results: bench/repair_results.json and the "repair" section of
bench/RESULTS.md (held-out suites of the other templates, SUITE=image | sentiment:
bench/repair_results_<suite>.json and section "repair-<suite>").

  .venv/bin/python bench/repair_bench.py                     # structure vs traceback, all variants
  MODES=structure,traceback,error ONLY=missing_attribute,cuda_on_cpu .venv/bin/python bench/repair_bench.py
  FROM_JSON=bench/repair_results.json .venv/bin/python bench/repair_bench.py   # re-render the section only
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_repair_home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)

from bench.broken_suite import SUITES, load_suite  # noqa: E402
from bench.common import machine, today, write_section  # noqa: E402


def repair_one(variant: dict, mode: str, *, spec, llm, runner, max_repairs: int, fmt: str | None,
               full_verify: bool) -> dict:
    from assets.run_results.experimenting import RunTarget, run_once, run_with_repair
    from resources.paths import under_home

    workdir = under_home("bench", mode, variant["name"])
    n0 = len(llm.calls())
    t0 = time.monotonic()
    res = run_with_repair(RunTarget.of_topic(spec, "check"), variant["code"], runner=runner, llm=llm,
                          workdir=workdir, idea_id=variant["name"], title="", max_repairs=max_repairs,
                          edit_format="whole", mode=mode, repair_format=fmt, memo=False, log=lambda s: None)
    calls = llm.calls()[n0:]
    row = {
        "name": variant["name"], "kind": variant["kind"], "mode": mode, "fixed": res.status == "success",
        "runs": res.n_attempts, "repairs": sum(a.fix_rounds for a in res.attempts),
        "reverted": sum(a.reverted for a in res.attempts),
        "fix_statuses": [a.fix_status for a in res.attempts if a.fix_status],
        "resamples": sum(a.fix_resamples for a in res.attempts),
        "first_error": res.attempts[0].error, "last_error": res.attempts[-1].error,
        "fix_errors": [a.fix_error[:200] for a in res.attempts if a.fix_error],
        "wall_s": round(time.monotonic() - t0, 1),
        "llm_s": round(sum(c.seconds for c in calls), 1), "llm_calls": len(calls),
        "cached_calls": sum(c.cached for c in calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "diffs": [a.fix_diff for a in res.attempts if a.fix_diff],
    }
    if full_verify and row["fixed"]:
        full = run_once(RunTarget.of_topic(spec), res.final_code, runner, workdir / "full", 1)
        row["full_run_ok"] = full.error is None
        row["full_run_error"] = full.error
    return row


def table(rows: list[dict], modes: list[str]) -> str:
    by = {(r["name"], r["mode"]): r for r in rows}
    names = list(dict.fromkeys(r["name"] for r in rows))
    head = "| variant | kind | " + " | ".join(modes) + " |"
    out = [head, "|" + "---|" * (2 + len(modes))]
    for n in names:
        cells = []
        for m in modes:
            r = by.get((n, m))
            if r is None:
                cells.append("not run")
                continue
            mark = "fixed" if r["fixed"] else "failed"
            if r["fixed"]:
                mark += f" ({r['repairs']} fix{'es' if r['repairs'] != 1 else ''}"
                mark += f", {r['resamples']} sampled re-ask{'s' if r['resamples'] != 1 else ''})" if r.get("resamples") else ")"
                if "full_run_ok" in r:
                    mark += ", full run ok" if r["full_run_ok"] else ", full run FAILED"
            elif r["fix_statuses"] and r["fix_statuses"][-1] != "ok":
                mark += f" ({r['fix_statuses'][-1]})"
            cells.append(mark)
        kind = next(r["kind"] for r in rows if r["name"] == n)
        out.append(f"| {n} | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def summary(rows: list[dict], modes: list[str]) -> str:
    """Per mode: repair rate and the cost of the LLM calls that were not served from the cache
    (a cache hit records no tokens and no time)."""
    out = ["| mode | repaired | within 2 repairs | honesty rejections | repairs asked | fixes undone | "
           "LLM calls per repair | s per LLM call | output tokens per LLM call | prompt tokens per LLM call |",
           "|---|---|---|---|---|---|---|---|---|---|"]  # a call counts its retry
    for m in modes:
        rs = [r for r in rows if r["mode"] == m]
        if not rs:
            continue
        asked = sum(r["repairs"] for r in rs) or 1
        fresh = sum(r["llm_calls"] - r["cached_calls"] for r in rs) or 1
        dishonest = sum(s == "dishonest" for r in rs for s in r["fix_statuses"])
        within2 = sum(r["fixed"] and r["repairs"] <= 2 for r in rs)
        out.append(f"| {m} | {sum(r['fixed'] for r in rs)}/{len(rs)} | {within2}/{len(rs)} | {dishonest} | {asked} | "
                   f"{sum(r.get('reverted', 0) for r in rs)} | "
                   f"{sum(r['llm_calls'] for r in rs) / asked:.1f} | {sum(r['llm_s'] for r in rs) / fresh:.0f} | "
                   f"{sum(r['completion_tokens'] for r in rs) / fresh:.0f} | {sum(r['prompt_tokens'] for r in rs) / fresh:.0f} |")
    return "\n".join(out)


def main() -> None:
    from resources.llm import LLM
    from resources.paths import resolve_topic_dir
    from resources.runner import Runner
    from schemas.topic import load_topic

    if os.environ.get("FROM_JSON"):  # re-render saved results, no run
        publish(json.loads(Path(os.environ["FROM_JSON"]).read_text()))
        return
    suite = os.environ.get("SUITE", "pointcloud")
    modes = os.environ.get("MODES", "structure,traceback").split(",")
    # the default of a topic's budget.debug_attempts (schemas/topic.py); "within 2 repairs" is reported too
    from schemas.topic import Budget

    max_repairs = int(os.environ.get("MAX_REPAIRS", Budget.model_fields["debug_attempts"].default))
    fmt = os.environ.get("FORMAT") or None  # None: the loop's default for this model
    full_verify = os.environ.get("FULL_VERIFY", "") == "1"
    deadline = time.monotonic() + 60 * float(os.environ.get("DEADLINE_MIN", "40"))
    only = [x for x in os.environ.get("ONLY", "").split(",") if x]
    out_json = Path(os.environ.get("OUT", ROOT / "bench" / f"repair_results{suffix(suite)}.json"))
    spec = load_topic(resolve_topic_dir(SUITES[suite]))
    llm, runner = LLM(), Runner()
    from assets.run_results.experimenting import default_repair_format

    fmt_used = fmt or default_repair_format(llm, "whole")
    variants = [v for v in load_suite(suite) if not only or v["name"] in only]
    rows: list[dict] = []
    skipped: list[str] = []
    t_start = time.monotonic()
    for v in variants:
        if time.monotonic() > deadline:
            skipped.append(v["name"])
            continue
        for m in modes:
            r = repair_one(v, m, spec=spec, llm=llm, runner=runner, max_repairs=max_repairs, fmt=fmt,
                           full_verify=full_verify)
            rows.append(r)
            print(f"{v['name']:26s} {m:10s} {'FIXED ' if r['fixed'] else 'failed'} runs={r['runs']} "
                  f"fixes={r['fix_statuses']} llm={r['llm_s']:.0f}s ({r['cached_calls']}/{r['llm_calls']} cached) "
                  f"wall={r['wall_s']:.0f}s", flush=True)
    data = {"date": today(), "machine": machine(), "model": llm.model_name(), "topic": spec.name, "suite": suite,
            "format": fmt_used, "max_repairs": max_repairs, "modes": modes, "variants": len(variants),
            "wall_s": round(time.monotonic() - t_start), "skipped": skipped, "rows": rows}
    out_json.write_text(json.dumps(data, indent=1))
    publish(data)


def render(d: dict) -> str:
    rows, modes = d["rows"], d["modes"]
    n = d["variants"] - len(d["skipped"])
    return "\n".join([
        f"## Repair rate on the broken suite" + ("" if d["suite"] == "pointcloud" else f" `{d['suite']}` (held out)")
        + f" ({d['date']}, {d['machine']})",
        "",
        f"`bench/repair_bench.py`: {n} broken variants of `{d['topic']}` (bench/broken/{d['suite']}/manifest.jsonl), "
        f"model `{d['model']}`, edit format `{d['format']}`, up to {d['max_repairs']} repair(s) each "
        f"({d['max_repairs'] + 1} runs), verified with the topic's dry run (`check`), honesty check on. "
        f"Wall time {d['wall_s'] / 60:.0f} min (LLM answers served from the cache cost nothing: "
        f"{sum(r['cached_calls'] for r in rows)}/{sum(r['llm_calls'] for r in rows)} this time)."
        + (f" Not run (time bound): {', '.join(d['skipped'])}." if d["skipped"] else ""),
        "",
        summary(rows, modes),
        "",
        table(rows, modes),
        "",
        "DOLPHIN (236B model) reference: about half of the ideas run with traceback + local code "
        "structure, 4/15 without.",
        *([""] + [f"- {n}" for n in d["notes"]] if d.get("notes") else []),
    ])


def suffix(suite: str) -> str:
    """The pointcloud suite is the main one ("repair"); a held-out suite gets its own section and file."""
    return "" if suite == "pointcloud" else f"_{suite}"


def publish(data: dict) -> None:
    body = render(data)
    if os.environ.get("NO_WRITE") != "1":
        write_section("repair" + suffix(data.get("suite", "pointcloud")).replace("_", "-"), body)
    print(body)


if __name__ == "__main__":
    main()
