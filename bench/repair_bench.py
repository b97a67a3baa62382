"""Repair rate of traceback-guided debugging (DOLPHIN 3.2, Table 4) on the broken suite.

Every variant in bench/broken/<suite>/manifest.jsonl is a topic's experiment with one bug
(an edit of the reference, bench/broken_suite.py). For each debugging mode (structure / traceback /
error) the repair loop
(`assets.run_results.repair_search.run_with_repair`, the same code the loop and `researchloop debug`
use) runs it with the topic's quick `check` command (a dry run that executes every line on
tiny data), asks the LLM for up to MAX_REPAIRS fixes (default: the topic budget's default, 5), and
applies the honesty check.
A variant counts as repaired only if the repaired file's FULL run (the topic's `run` command)
then exits 0 and writes the metric (bench/repair_scoring.py); each row records the dry run's
and the full run's outcome and the final code.

LLM time is scarce: the LLM cache lives in a fixed DAGSTER_HOME (/tmp/rl_repair_home), so a
re-run with unchanged prompts costs no model time, and the bench stops starting variants after
DEADLINE_MIN minutes. Results: bench/repair_results.json and the "repair" section of
bench/results/repair.md (held-out suites of the other templates, SUITE=image | sentiment:
bench/repair_results_<suite>.json and section "repair-<suite>").

  .venv/bin/python -m bench.repair_bench                     # structure vs traceback, all variants
  MODES=structure,traceback,error ONLY=missing_attribute,cuda_on_cpu .venv/bin/python -m bench.repair_bench
  FROM_JSON=bench/repair_results.json .venv/bin/python -m bench.repair_bench   # re-render the section only
  RESCORE=1 SUITE=image nice -n 10 .venv/bin/python -m bench.repair_bench   # full runs for a record made
                                                         # before the rule (no LLM; rebuilt from the diffs)
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from assets.run_results.experimenting import RunTarget
from assets.run_results.repair_search import RepairPolicy, default_repair_format, run_with_repair
from bench.broken_suite import SUITES, load_suite
from bench.common import machine, today, write_section
from bench.repair_scoring import code_id, dry_run_ok, final_code, full_run, score_row
from resources.llm import LLM
from resources.paths import resolve_topic_dir, under_home
from resources.runner import Runner
from schemas.topic import Budget, load_topic

ROOT = Path(__file__).resolve().parents[1]


def repair_one(variant: dict, mode: str, *, spec, llm, runner, max_repairs: int, fmt: str | None) -> dict:
    workdir = under_home("bench", mode, variant["name"])
    n0 = len(llm.calls())
    t0 = time.monotonic()
    res = run_with_repair(RunTarget.of_topic(spec, "check"), variant["code"], runner=runner, llm=llm,
                          workdir=workdir, idea_id=variant["name"], log=lambda s: None,
                          policy=RepairPolicy(max_repairs=max_repairs, mode=mode, repair_format=fmt, memo=False))
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
    row["final_code"] = res.final_code
    full = full_run(spec, res.final_code, runner, workdir / "full") if row["fixed"] else None
    row = score_row(row, full)
    row["scored_by"] = "full_run"
    return row


def rescore(path: Path) -> dict:
    """Score a record made before the full-run rule: rebuild each dry-run-passing row's final
    code from its diffs, check it still passes the dry run (the rebuild is the code the loop
    accepted), then make the topic's full run. Identical code is run once. The record is saved
    after every run, so an interrupted re-score resumes where it stopped; after RESCORE_DEADLINE_MIN
    minutes no new run is started and the rows left say so ("not re-scored")."""
    data = json.loads(path.read_text())
    suite = data.get("suite", "pointcloud")
    spec = load_topic(resolve_topic_dir(SUITES[suite]))
    variants = {v["name"]: v["code"] for v in load_suite(suite)}
    runner, work = Runner(), under_home("bench", "rescore", suite)
    # the machine is shared: a slow run is not a failed repair (RESCORE_TIMEOUT_S, default 30 min)
    timeout_s = max(spec.budget.run_timeout_s, float(os.environ.get("RESCORE_TIMEOUT_S", 1800)))
    deadline = time.monotonic() + 60 * float(os.environ.get("RESCORE_DEADLINE_MIN", "600"))
    # RESCORE_THREADS: threads per run (the runner's default is 2); on a crowded machine one thread
    # wastes less time waiting at the other's barriers. The reference runs with the same setting.
    threads = os.environ.get("RESCORE_THREADS")
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads} if threads else None

    def save() -> None:
        path.write_text(json.dumps(data, indent=1))

    info = data.setdefault("rescored", {"date": today(), "machine": machine(), "niceness": os.nice(0),
                                        "load_avg_at_start": round(os.getloadavg()[0], 1), "full_runs": 0,
                                        "threads": int(threads) if threads else 2,
                                        "dry_run_based": summary_counts(data["rows"], data["modes"], "dry")})
    if "reference_full_run" not in data:  # the unmodified reference, same runner and machine state
        data["reference_full_run"] = full_run(spec, spec.code_path.read_text(), runner, work / "reference",
                                              env=env, timeout_s=timeout_s)
        info["full_runs"] += 1
        print("reference", data["reference_full_run"], flush=True)
        save()
    done: dict[str, dict] = {}
    for i, row in enumerate(data["rows"]):
        if row.get("scored_by"):
            if row.get("final_code_id") and row.get("full_run_s") is not None:
                done[row["final_code_id"]] = {k: row.get(k) for k in ("full_run_ok", "full_run_metric",
                                                                      "full_run_error", "full_run_s",
                                                                      "full_run_timeout_s")}
            continue
        if not row["fixed"]:  # the dry run never passed: no full run to make
            data["rows"][i] = {**score_row(row, None), "scored_by": "dry run failed (no full run)"}
            continue
        code = final_code(variants[row["name"]], row)
        cid = code_id(code)
        if cid not in done and time.monotonic() > deadline:
            continue  # left as it was: a dry-run pass whose full run was not made
        if cid not in done:
            ok, err = dry_run_ok(spec, code, runner, work / cid / "check")
            if not ok:  # the rebuild is not what the loop accepted: say so, do not guess
                raise SystemExit(f"{row['name']} ({row['mode']}): the rebuilt code fails its dry run: {err}")
            done[cid] = full_run(spec, code, runner, work / cid, env=env, timeout_s=timeout_s)
            info["full_runs"] += 1
        data["rows"][i] = {**score_row(row, done[cid]), "final_code_id": cid,
                           "scored_by": f"full run, re-scored {today()} from the recorded diffs"}
        r = data["rows"][i]
        print(f"{r['name']:28s} {r['mode']:10s} full run {'ok' if r['full_run_ok'] else 'FAILED'} "
              f"{r['full_run_metric'] if r['full_run_ok'] else r['full_run_error']} ({done[cid]['full_run_s']} s)",
              flush=True)
        save()
    info["repaired_full_run"] = summary_counts(data["rows"], data["modes"], "repaired")
    info["not_rescored"] = summary_counts(data["rows"], data["modes"], "not_rescored")
    save()
    publish(data)
    return data


def outcome(r: dict) -> str:
    """repaired (the full run scored) | full_run_failed | dry_run_failed | not_rescored (a dry-run
    pass of an older record whose full run has not been made)."""
    if "full_run_ok" not in r:
        return "not_rescored" if r["fixed"] else "dry_run_failed"
    if r["fixed"]:
        return "repaired"
    return "full_run_failed" if r.get("dry_run_ok") else "dry_run_failed"


def summary_counts(rows: list[dict], modes: list[str], what: str) -> dict[str, str]:
    """Per mode, "k/n": rows whose outcome is `what` ("dry": rows whose dry run passed)."""
    def hit(r):
        return outcome(r) in ("repaired", "full_run_failed", "not_rescored") if what == "dry" else outcome(r) == what

    return {m: f"{sum(hit(r) for r in rows if r['mode'] == m)}/{sum(r['mode'] == m for r in rows)}" for m in modes}


def scored(rows: list[dict]) -> bool:
    """Were any of these rows scored by the full run (True), or only by the dry run (older records)?"""
    return any("full_run_ok" in r for r in rows)


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
            dry = r.get("dry_run_ok", r["fixed"])
            if "full_run_ok" not in r:  # an older record: the dry run was all that was checked
                mark = ("dry run passed" + (", full run not made (not re-scored)" if scored(rows) else "")
                        if dry else "failed")
            elif r["fixed"]:
                mark = f"repaired, full run {r['full_run_metric']:.4f}"
            else:
                mark = f"dry run passed, full run failed: {(r['full_run_error'] or '')[:80]}" if dry else "failed"
            if dry:
                mark += f" ({r['repairs']} fix{'es' if r['repairs'] != 1 else ''}"
                resamples = r.get("resamples", 0)
                mark += f", {resamples} sampled re-ask{'s' if resamples != 1 else ''})" if resamples else ")"
            elif r["fix_statuses"] and r["fix_statuses"][-1] != "ok":
                mark += f" ({r['fix_statuses'][-1]})"
            cells.append(mark)
        kind = next(r["kind"] for r in rows if r["name"] == n)
        out.append(f"| {n} | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def summary(rows: list[dict], modes: list[str]) -> str:
    """Per mode: repair rate and the cost of the LLM calls that were not served from the cache
    (a cache hit records no tokens and no time)."""
    full = scored(rows)
    out = ["| mode | "
           + ("repaired (full run scores) | dry run passes | " if full else "dry run passes (no full run) | ")
           + "within 2 repairs | honesty rejections | repairs asked | fixes undone | "
           "LLM calls per repair | s per LLM call | output tokens per LLM call | prompt tokens per LLM call |",
           "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if full else "")]  # a call counts its retry
    for m in modes:
        rs = [r for r in rows if r["mode"] == m]
        if not rs:
            continue
        asked = sum(r["repairs"] for r in rs) or 1
        fresh = sum(r["llm_calls"] - r["cached_calls"] for r in rs) or 1
        dishonest = sum(s == "dishonest" for r in rs for s in r["fix_statuses"])
        counts = {o: sum(outcome(r) == o for r in rs) for o in ("repaired", "full_run_failed", "not_rescored")}
        dry = sum(counts.values())
        if full:
            ok = [r for r in rs if outcome(r) == "repaired"]
            pending = f" (+{counts['not_rescored']} not re-scored)" if counts["not_rescored"] else ""
            rate = f"{len(ok)}/{len(rs)}{pending} | {dry}/{len(rs)}"
            within2 = sum(r["repairs"] <= 2 for r in ok)
        else:
            rate = f"{dry}/{len(rs)}"
            within2 = sum(outcome(r) == "not_rescored" and r["repairs"] <= 2 for r in rs)
        out.append(f"| {m} | {rate} | {within2}/{len(rs)} | {dishonest} | {asked} | "
                   f"{sum(r.get('reverted', 0) for r in rs)} | "
                   f"{sum(r['llm_calls'] for r in rs) / asked:.1f} | {sum(r['llm_s'] for r in rs) / fresh:.0f} | "
                   f"{sum(r['completion_tokens'] for r in rs) / fresh:.0f} | "
                   f"{sum(r['prompt_tokens'] for r in rs) / fresh:.0f} |")
    return "\n".join(out)


def bench_home() -> None:
    """The fixed DAGSTER_HOME whose LLM cache makes re-runs free (set when run as a script, not on import)."""
    os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_repair_home")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)


def main() -> None:
    bench_home()
    if os.environ.get("FROM_JSON"):  # re-render saved results, no run
        publish(json.loads(Path(os.environ["FROM_JSON"]).read_text()))
        return
    suite = os.environ.get("SUITE", "pointcloud")
    if os.environ.get("RESCORE") == "1":
        rescore(Path(os.environ.get("OUT", ROOT / "bench" / f"repair_results{suffix(suite)}.json")))
        return
    modes = os.environ.get("MODES", "structure,traceback").split(",")
    # the default of a topic's budget.debug_attempts (schemas/topic.py); "within 2 repairs" is reported too
    max_repairs = int(os.environ.get("MAX_REPAIRS", Budget.model_fields["debug_attempts"].default))
    fmt = os.environ.get("FORMAT") or None  # None: the loop's default for this model
    deadline = time.monotonic() + 60 * float(os.environ.get("DEADLINE_MIN", "40"))
    only = [x for x in os.environ.get("ONLY", "").split(",") if x]
    out_json = Path(os.environ.get("OUT", ROOT / "bench" / f"repair_results{suffix(suite)}.json"))
    spec = load_topic(resolve_topic_dir(SUITES[suite]))
    llm, runner = LLM(), Runner()
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
            r = repair_one(v, m, spec=spec, llm=llm, runner=runner, max_repairs=max_repairs, fmt=fmt)
            rows.append(r)
            print(f"{v['name']:26s} {m:10s} {'FIXED ' if r['fixed'] else 'failed'} runs={r['runs']} "
                  f"fixes={r['fix_statuses']} llm={r['llm_s']:.0f}s ({r['cached_calls']}/{r['llm_calls']} cached) "
                  f"wall={r['wall_s']:.0f}s", flush=True)
    data = {"date": today(), "machine": machine(), "model": llm.model_name(), "topic": spec.name, "suite": suite,
            "format": fmt_used, "max_repairs": max_repairs, "modes": modes, "variants": len(variants),
            "wall_s": round(time.monotonic() - t_start), "skipped": skipped, "rows": rows}
    out_json.write_text(json.dumps(data, indent=1))
    publish(data)


SAMPLE = {"pointcloud": "in-sample: the repair loop's changes (error notes, applier fixes, undoing fixes) were "
                         "made while measuring this suite",
          "image": "held-out: the variants were written after the repair changes, nothing was tuned to them",
          "sentiment": "held-out: the variants were written after the repair changes, nothing was tuned to them"}


def render(d: dict) -> str:
    rows, modes = d["rows"], d["modes"]
    n = d["variants"] - len(d["skipped"])
    suite = d.get("suite", "pointcloud")
    re_ = d.get("rescored")
    ref = d.get("reference_full_run")
    if scored(rows):
        rule = ("counted as repaired only if the repaired file's full run (the topic's `run` command) exits 0 "
                "and writes the metric; the dry run (`check`) is what the repair loop itself checks")
    else:
        rule = ("**dry-run based**: counted as fixed when the topic's dry run (`check`) passed; no full run was "
                "made (re-score with `RESCORE=1`)")
    measured = f"{d['date']} on {d['machine']}" + (
        f" (repairs); {re_['date']} on {re_['machine']} (full runs, re-scored without the LLM: "
        f"{re_['full_runs']} sandboxed runs, {re_.get('threads', 2)} thread(s) each, at niceness "
        f"{re_['niceness']}, load average "
        f"{re_['load_avg_at_start']} at the start)" if re_ else "")
    lines = [
        "## Repair rate on the broken suite" + ("" if suite == "pointcloud" else f" `{suite}` (held out)"),
        "",
        "- Script: `bench/repair_bench.py`" + (" (`RESCORE=1` for the full runs)" if re_ else ""),
        f"- Record: `bench/repair_results{suffix(suite)}.json`",
        f"- Measured: {measured}",
        f"- Sample: {SAMPLE.get(suite, 'held-out')}",
        "",
        f"{n} broken variants of `{d['topic']}` (bench/broken/{suite}/manifest.jsonl), "
        f"model `{d['model']}`, edit format `{d['format']}`, up to {d['max_repairs']} repair(s) each "
        f"({d['max_repairs'] + 1} runs), honesty check on; {rule}. "
        f"Wall time of the repairs {d['wall_s'] / 60:.0f} min (LLM answers served from the cache cost nothing: "
        f"{sum(r['cached_calls'] for r in rows)}/{sum(r['llm_calls'] for r in rows)} this time)."
        + (f" Not run (time bound): {', '.join(d['skipped'])}." if d["skipped"] else ""),
    ]
    if ref:
        lines.append("")
        lines.append("The unmodified reference's full run on the same runner: "
                     + (f"{ref['full_run_metric']:.4f}" if ref["full_run_ok"] else f"failed ({ref['full_run_error']})")
                     + f" ({ref['full_run_s']:.0f} s).")
    if re_:
        before = ", ".join(f"{m} {v}" for m, v in re_["dry_run_based"].items())
        after = ", ".join(f"{m} {v}" for m, v in re_.get("repaired_full_run", {}).items())
        lines.append("")
        pending = {m: v for m, v in re_.get("not_rescored", {}).items() if not v.startswith("0/")}
        lines.append(f"Re-scored: dry-run based {before}; by the full run {after or '(in progress)'}"
                     + ("; dry-run passes whose full run was not made before the re-score's deadline: "
                        + ", ".join(f"{m} {v}" for m, v in pending.items()) if pending else "") + ".")
    return "\n".join(lines + [
        "",
        summary(rows, modes),
        "",
        table(rows, modes),
        "",
        ("DOLPHIN (236B model) reference: about half of the ideas run with traceback + local code "
         "structure, 4/15 without."),
        *([""] + [f"- {n}" for n in d["notes"]] if d.get("notes") else []),
    ])


def suffix(suite: str) -> str:
    """The pointcloud suite is the main one ("repair"); a held-out suite gets its own section and file."""
    return "" if suite == "pointcloud" else f"_{suite}"


def publish(data: dict) -> None:
    body = render(data)
    if os.environ.get("NO_WRITE") != "1":
        write_section("repair" + suffix(data.get("suite", "pointcloud")).replace("_", "-"), body, "repair")
    print(body)


if __name__ == "__main__":
    main()
