"""How the repair benchmark scores a variant, and re-scoring older records.

A variant counts as repaired only when the repaired script's FULL run (the topic's `run`
command, not the quick dry run the repair loop checks against) exits 0 and writes the metric.
A row of bench/repair_results*.json records which: `dry_run_ok` (the repair loop's own success),
`full_run_ok`, `full_run_metric`, `full_run_error`, and `fixed` = both.

Records written before this rule hold the fixes as unified diffs (`diffs`, one per applied fix,
in order) but not the final code; `final_code` rebuilds it from the variant by applying the
diffs in turn (every context line must match, so a wrong rebuild is an error, not a guess), and
`rescore` runs it (dry run first, to show the rebuild is the code the loop accepted, then the
full run). Re-scored rows say so in `scored_by`.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from assets.run_results.experimenting import RunTarget, run_once

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    pass


def apply_unified_diff(text: str, diff: str) -> str:
    """Apply one unified diff (as difflib writes it) to `text`; its context and removed lines
    must match the text exactly, at the line numbers the hunk header gives."""
    src = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0  # next line of src not yet copied
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1  # the ---/+++ header
    if i == len(lines):
        raise DiffError("no hunk in the diff")
    while i < len(lines):
        m = HUNK.match(lines[i])
        if not m:
            raise DiffError(f"expected a hunk header, got {lines[i]!r}")
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)  # an empty old range names the line before
        if start < pos:
            raise DiffError(f"hunk at line {start + 1} overlaps the previous one")
        out.extend(src[pos:start])
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            tag, body = line[:1], line[1:]
            if tag == "\\":  # "\ No newline at end of file" (difflib does not write it)
                i += 1
                continue
            if tag in (" ", "-"):
                have = src[pos] if pos < len(src) else None
                if have is None or have.rstrip("\n") != body.rstrip("\n"):
                    raise DiffError(f"line {pos + 1}: expected {body.rstrip()!r}, found "
                                    f"{(have or '<end of file>').rstrip()!r}")
                pos += 1
                if tag == " ":
                    out.append(have)
            elif tag == "+":
                out.append(body)
            else:
                raise DiffError(f"unexpected diff line {line!r}")
            i += 1
    out.extend(src[pos:])
    return "".join(out)


def final_code(variant_code: str, row: dict) -> str:
    """The code a recorded repair ended with: the variant with the row's fixes applied in order.
    A row in which a fix was undone (`reverted`) branched from an earlier version and cannot be
    rebuilt from its diffs alone."""
    if row.get("final_code"):
        return row["final_code"]
    if row.get("reverted"):
        raise DiffError(f"{row['name']}: a fix was undone in this run; its diffs do not chain")
    code = variant_code
    for n, d in enumerate(row.get("diffs", []), 1):
        try:
            code = apply_unified_diff(code, d)
        except DiffError as e:
            raise DiffError(f"{row['name']} ({row['mode']}), fix {n}: {e}") from None
    return code


def code_id(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:12]


def full_run(spec, code: str, runner, workdir: Path, env: dict[str, str] | None = None,
             timeout_s: float | None = None) -> dict:
    """The topic's full run of `code` in the sandbox: the fields a record row keeps. `timeout_s`
    (default: the topic's run timeout) may be raised on a loaded machine: the question is
    whether the code runs and scores, not how fast a shared CPU runs it."""
    from dataclasses import replace

    target = RunTarget.of_topic(spec, "run")
    if timeout_s is not None:
        target = replace(target, timeout_s=timeout_s)
    a = run_once(target, code, runner, workdir, 1, env=env)
    return {"full_run_ok": a.error is None, "full_run_metric": a.metrics.get(spec.metric.name),
            "full_run_error": a.error, "full_run_s": a.duration_s, "full_run_timeout_s": target.timeout_s}


def dry_run_ok(spec, code: str, runner, workdir: Path) -> tuple[bool, str | None]:
    a = run_once(RunTarget.of_topic(spec, "check"), code, runner, workdir, 1)
    return a.error is None, a.error


def score_row(row: dict, full: dict | None) -> dict:
    """`row` with the full-run fields set and `fixed` meaning: the dry run passed AND the full run
    scored. `full` is None when the dry run never passed (no full run is made)."""
    dry = row.get("dry_run_ok", row["fixed"])
    out = {**row, "dry_run_ok": dry}
    if dry and full is not None:
        out.update(full)
    else:
        out.update({"full_run_ok": False, "full_run_metric": None,
                    "full_run_error": None if not dry else "not run", "full_run_s": None})
    out["fixed"] = bool(dry and out["full_run_ok"])
    return out
