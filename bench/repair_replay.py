"""Would the mechanical repair candidates have rescued the ideas real loops lost to errors? (issue 14)

An idea whose run fails after its repair budget is a place of the round spent on nothing. This
bench reads the finished experiments of earlier loops (the memo `result-*.json` files under the
workspaces of their DAGSTER_HOMEs, `--stores`), takes every idea that ended `failed` with the
failure its repair search got furthest to (the code it kept and that code's error), and asks the
mechanical candidates of assets/run_results/suggestions.py `suggested_fix` (no LLM) for a fix.
Each candidate is then run for real on the topic's quick `check` (its dry run) in the sandbox,
in a copy of the idea's own workspace files: `success` (the dry run passes), `progress` (it fails
later with another error) or `same_error`. Failures are deduplicated by (code, error): a resumed
loop's backup folder holds the same ones again.

The record keeps every failure (its error, the rule that answered, the candidate's diff and the
dry run's outcome), so the section re-renders from the record alone. Which rule answered is named,
so the rules added after a look at these failures are counted apart (in-sample for those).

    .venv/bin/python -m bench.repair_replay --stores DIR[,DIR...]   # loop work folders (or DAGSTER_HOMEs)
    FROM_RECORD=1 .venv/bin/python -m bench.repair_replay           # re-render from bench/records/repair_replay.json
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench.common import ROOT, machine, provenance, publish, stores_cli, today

RECORD, SECTION = "repair_replay", "repair_replay"
# the rules written after looking at the failures of these stores (the rest were written before)
IN_SAMPLE_RULES = ("shadowed_import", "parameter_value")
NOTES = ("shadowed_import and parameter_value were written after looking at some of these failures "
         "(pointcloud r2 `transform`, the brainstorm source's diabetes drafts, sentiment r1 "
         "`hyperparameter_tuning`): their counts are in-sample. The other rules predate this record.")


def failures(store: Path) -> list[dict]:
    """Every failed idea of a loop folder: the furthest failure of its repair search."""
    from schemas.records import RunResult

    out = []
    for memo in sorted(store.rglob("result-*.json")):
        if "workspaces" not in memo.parts or "baseline" in memo.parts:
            continue
        try:
            res = RunResult.model_validate_json(memo.read_text())
        except ValueError:
            continue
        if res.status != "failed" or not res.attempts or not res.final_code:
            continue
        kept = [a for a in res.attempts if a.outcome not in ("same_error", "broke")]
        failed = kept[-1]
        if failed.error is None:
            continue
        files = next((p for p in sorted(memo.parent.glob("*/topic.yaml"))), None)
        out.append({"memo": str(memo), "idea_id": res.idea_id, "attempt": failed.attempt, "error": failed.error,
                    "attempt_json": failed.model_dump_json(), "code": res.final_code,
                    "topic_folder": str(files.parent) if files else None})
    return out


def answers(store: Path) -> list[dict]:
    """Every LLM answer in a loop's response cache that was refused as an unusable edit in the
    "functions" format (it did not apply or did not parse), with the file it was meant for (the
    ```python block of the request's first message) and the reason recorded then."""
    from assets.patched_code.edit_formats.base import FENCE_RE

    out = []
    for path in sorted(store.rglob("llm_cache/*/*.json")):
        try:
            entry = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
        error = entry.get("error") or ""
        messages = (entry.get("request") or {}).get("messages") or []
        if "not_applied" not in error or not messages or "only the code you change" not in str(messages):
            continue
        blocks = FENCE_RE.findall(messages[0].get("content", ""))
        if not blocks:
            continue
        kind = "repair" if str(messages[-1].get("content", "")).startswith("The file implements the idea") else "patch"
        out.append({"cache": str(path), "source": blocks[0][1], "answer": entry.get("text") or "",
                    "error_then": error, "kind": kind})
    return out


def reapply(a: dict) -> dict:
    """The refused answer applied again by today's "functions" format."""
    from assets.patched_code.edit_formats import EditError, apply_edit

    row = {"cache": a["cache"], "kind": a["kind"], "error_then": a["error_then"][:300]}
    try:
        edit = apply_edit(a["source"], a["answer"], "functions")
    except EditError as e:
        return {**row, "now": e.status, "error_now": str(e)[:300]}
    return {**row, "now": "applied", "diff": edit.diff}


def replay(f: dict) -> dict:
    """The mechanical candidate for one failure and how its dry run ends."""
    from assets.run_results.experimenting import RunTarget, run_once
    from assets.run_results.suggestions import suggested_fix
    from resources.runner import Runner
    from schemas.records import Attempt
    from schemas.topic import load_topic

    row = {k: f[k] for k in ("memo", "idea_id", "attempt", "error")}
    if f["topic_folder"] is None:
        return {**row, "rule": None, "outcome": "no workspace files"}
    import shutil

    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        # a copy of the idea's workspace files under the topic's own name (load_topic checks it)
        folder = Path(tmp) / yaml.safe_load((Path(f["topic_folder"]) / "topic.yaml").read_text())["name"]
        shutil.copytree(f["topic_folder"], folder, ignore=shutil.ignore_patterns("out", "__pycache__"))
        # the files a run's workspace lacks (a scorer's answers): from the topic folder of that name
        for home in (ROOT / "experiments", ROOT / "bench" / "probe_topics"):
            original = home / folder.name.split("__")[0]
            hidden = yaml.safe_load((original / "topic.yaml").read_text()).get("hidden", []) \
                if (original / "topic.yaml").is_file() else []
            for h in hidden:
                if not (folder / h).exists() and (original / h).is_file():
                    shutil.copy(original / h, folder / h)
        spec = load_topic(folder)
        failed = Attempt.model_validate_json(f["attempt_json"])
        s = suggested_fix(f["code"], failed, spec.code, folder)
        if s is None:
            return {**row, "rule": None, "outcome": "no candidate"}
        which = "check" if spec.check else "run"  # a topic without a dry run: its (quick) full run
        target = RunTarget.of_topic(spec, which)
        base = run_once(target, f["code"], Runner(), Path(tmp) / "before", 1)
        after = run_once(target, s.code, Runner(), Path(tmp) / "after", 1)
    outcome = ("success" if after.error is None else "same_error" if after.error == base.error else "progress")
    return {**row, "rule": s.rule, "what": s.what, "sure": s.sure, "diff": s.diff,
            "command": which, "check_before": base.error, "check_after": after.error, "outcome": outcome}


def render(rec: dict) -> str:
    rows = rec["failures"]
    by_rule = Counter(r["rule"] for r in rows if r["rule"])
    lines = ["## Mechanical repairs replayed on the ideas real loops lost to errors (issue 14)", "",
             provenance(rec["script"], f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                        "in-sample for the rules " + ", ".join(IN_SAMPLE_RULES) + "; " + rec["notes"]),
             f"- Stores: {len(rec['stores'])} loop work folders on this machine; {len(rows)} failed ideas "
             "(deduplicated by code and error)", "",
             "| rule | candidates | dry run passes | fails later (another error) | same error |",
             "|---|---|---|---|---|"]
    for rule, n in sorted(by_rule.items(), key=lambda kv: -kv[1]):
        o = Counter(r["outcome"] for r in rows if r["rule"] == rule)
        lines.append(f"| {rule}{' (in-sample)' if rule in IN_SAMPLE_RULES else ''} | {n} | {o['success']} | "
                     f"{o['progress']} | {o['same_error']} |")
    none = sum(r["rule"] is None for r in rows)
    lines += ["", f"- No mechanical candidate: {none} of {len(rows)}.",
              "- The loops of these stores ran at earlier commits: some of the older rules did not exist yet when "
              "an idea failed, and a candidate the loop did try may have passed the dry run and failed the full "
              "run. A passing dry run here is not a repaired idea (bench/RESULTS.md \"repair\" counts only full "
              "runs that score)."]
    kinds = Counter(r["error"].split(":")[0] for r in rows)
    lines.append("- Errors of the failed ideas: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    refused = rec.get("refused_answers", [])
    if refused:
        lines += ["", "The LLM's answers in the `functions` format that these loops refused (they did not apply or did "
                  "not parse; deduplicated), applied again by today's format (apply and compile only; not run). "
                  "In-sample: the lone-assignment, lone-header, copied-line and segment fall-back rules were written "
                  "after reading some of these answers.", "",
                  "| answers to | refused then | apply now | still refused | no-op now |", "|---|---|---|---|---|"]
        for kind in ("patch", "repair"):
            now = Counter(r["now"] for r in refused if r["kind"] == kind)
            n = sum(now.values())
            lines.append(f"| {kind} prompts | {n} | {now['applied']} | {n - now['applied'] - now['no_op']} | "
                         f"{now['no_op']} |")
    return "\n".join(lines) + "\n"


def _unique(items: list[dict], *fields: str) -> list[dict]:
    """The items, each (by the values of `fields`) once: a resumed loop's backup folder repeats them."""
    seen, out = set(), []
    for item in items:
        key = hashlib.sha256(json.dumps([item[f] for f in fields]).encode()).hexdigest()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def main(argv: list[str] | None = None) -> int:
    got = stores_cli(__doc__, argv, RECORD, SECTION, render)
    if isinstance(got, int):
        return got
    stores, write = got
    todo = _unique([f for s in stores for f in failures(Path(s))], "code", "error")
    rows = []
    for i, f in enumerate(todo, 1):
        rows.append(replay(f))
        print(f"[{i}/{len(todo)}] {f['idea_id']}: {rows[-1]['rule']} -> {rows[-1]['outcome']}", flush=True)
    refused = [reapply(a) for a in _unique([a for s in stores for a in answers(Path(s))], "source", "answer")]
    rec = {"script": "bench/repair_replay.py", "date": today(), "machine": machine(), "stores": stores,
           "failures": rows, "refused_answers": refused, "notes": NOTES}
    return publish(RECORD, SECTION, rec, render, write=write)


if __name__ == "__main__":
    sys.exit(main())
