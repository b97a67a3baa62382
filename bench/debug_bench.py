"""`researchloop debug` on suites of small broken scripts, judged by the full run's result.

A suite (bench/broken/<suite>/) holds bug-free standalone training scripts (`bases/*.py`, each
printing `RESULT name=value` as its last line) and a manifest of variants, one bug each, written
as an edit of a base (`old` -> `new`, bench/broken_suite.py `load_script_suite`). For every variant
the bench runs the real command a user runs, `researchloop debug VARIANT.py --json --max-attempts
N`, in a folder of its own, then runs the final version it wrote once more in the sandbox. A
variant counts as repaired only when that run exits 0 and its RESULT is within the tolerance of
the base's own RESULT (run the same way): a "fix" that deletes the training or changes what is
computed does not count.

Suites: `scripts_dev` (in-sample: the debugger's notes and repairs were tuned on it) and
`scripts_heldout` (written by someone who did not see the debugger's tuning cases; measured
after the tuning; its failures then shaped later rules, so it is in-sample for them) and
`scripts_heldout2` (written later, without sight of the rules or of the other suites' variants,
and not used for tuning). The LLM server started by the first variant is kept for the rest, and the LLM cache lives in a
fixed DAGSTER_HOME (RESEARCHLOOP_DEBUG_BENCH_HOME, default /tmp/rl_debug_bench_home), so an
unchanged re-run costs no model time. The record is written after every variant: a run cut off
midway resumes after the last variant it recorded.

    .venv/bin/python -m bench.debug_bench --suite scripts_dev [--attempts 5] [--only NAME,...]
    python -m bench debug --suite scripts_heldout                 # the same (make bench-debug ARGS=...)
    FROM_RECORD=1 .venv/bin/python -m bench.debug_bench --suite scripts_dev   # re-render only
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.broken_suite import SCRIPT_SUITES, load_script_suite
from bench.common import RECORDS, machine, page_path, provenance, today, write_section

SCRIPT = "bench/debug_bench.py"
PAGE = "debug"
TITLE = "researchloop debug on broken scripts"
RESULT_RE = re.compile(r"^RESULT\s+(?P<name>[\w.-]+)\s*=\s*(?P<value>[-+0-9.eE]+|nan|inf)\s*$", re.M)
# a held-out suite whose failures shaped later repair rules is in-sample when measured since (its
# earlier record says held-out, as it then was)
HELD_OUT = {"scripts_heldout": False, "scripts_heldout2": False, "scripts_heldout3": True, "scripts_dev": False}
IN_SAMPLE_BECAUSE = {"scripts_dev": "the debugger's notes were tuned on this suite",
                     "scripts_heldout": "written held out, but its failures shaped later repair rules",
                     "scripts_heldout2": "written held out, but its failures shaped later repair rules"}


def parse_result(stdout: str) -> tuple[str, float] | None:
    """The last `RESULT name=value` line of a run's output."""
    found = RESULT_RE.findall(stdout or "")
    if not found:
        return None
    name, value = found[-1]
    return name, float(value)


def close_enough(value: float, base: float) -> bool:
    """Within 5% of the base's result (or 0.02 absolute, for results near zero): a correct fix
    may differ from the base's own code in details that move the result a little."""
    return abs(value - base) <= max(0.05 * abs(base), 0.02)


def run_script(folder: Path, script: str, timeout_s: float) -> dict:
    """Run a script once in the sandbox (the runner the loop uses): exit code, RESULT, seconds."""
    from resources.sandbox import run_sandboxed

    t0 = time.monotonic()
    res = run_sandboxed(["python", script], folder, timeout_s=timeout_s, memory_mb=4096)
    stdout = Path(res.stdout_path).read_text(errors="replace") if res.stdout_path else res.stdout_tail
    return {"exit_code": res.exit_code, "timed_out": res.timed_out, "result": parse_result(stdout),
            "seconds": round(time.monotonic() - t0, 1), "stderr_tail": (res.stderr_tail or "")[-600:]}


def debug_variant(variant: dict, work: Path, attempts: int, timeout_s: float, env: dict) -> dict:
    """`researchloop debug` on one variant in a folder of its own; its JSON outcome."""
    folder = work / variant["name"]
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / variant["base"]
    script.write_text(variant["code"])
    fixed = folder / "final.py"
    cmd = [sys.executable, "-m", "pipelines.cli", "debug", str(script), "--json", "--max-attempts", str(attempts),
           "--timeout", str(timeout_s), "--output", str(fixed), "--keep-server"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1])
    wall = round(time.monotonic() - t0, 1)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        out = {"fixed": False, "error": f"no JSON from researchloop debug (exit {p.returncode}): {p.stderr[-500:]}"}
    return {"out": out, "wall_s": wall, "final": fixed if fixed.is_file() else None}


def judge(variant: dict, debug: dict, base_result: tuple[str, float] | None, timeout_s: float) -> dict:
    """The record row of one variant: what the debugger said, then the full run of its final version."""
    out = debug["out"]
    per = out.get("per_attempt") or []
    row = {"name": variant["name"], "base": variant["base"], "kind": variant["kind"],
           "debug_says_fixed": bool(out.get("fixed")), "repairs": out.get("repairs", 0), "asked": out.get("asked", 0),
           "first_error": per[0]["error"] if per else out.get("error"), "last_error": per[-1]["error"] if per else None,
           "fix_statuses": [a.get("fix_status") for a in per if a.get("fix_status")],
           "fix_sources": [a.get("fix_source") for a in per if a.get("fix_source")],
           "reason": out.get("reason") or out.get("error"), "wall_s": debug["wall_s"], "llm": out.get("llm", {}),
           "diffs": [d for a in per if (d := a.get("applied_diff") or a.get("fix_diff"))]}
    full = None
    if debug["final"] is not None and row["debug_says_fixed"]:
        final = Path(debug["final"])
        folder = final.parent / "full_run"
        folder.mkdir(exist_ok=True)
        (folder / variant["base"]).write_text(final.read_text())
        full = run_script(folder, variant["base"], timeout_s)
    row["full_run"] = full
    got = (full or {}).get("result")
    row["repaired"] = bool(full and full["exit_code"] == 0 and got and base_result and got[0] == base_result[0]
                           and close_enough(got[1], base_result[1]))
    return row


def measure(suite: str, attempts: int, only: set[str], timeout_s: float, partial: Path | None = None) -> dict:
    """Every variant of the suite (or `only` those); with `partial`, the record is written there
    after each variant, and variants an earlier, unfinished run of the same suite and attempts
    recorded there are kept, not run again."""
    from resources.local_llm import release_server

    variants = [v for v in load_script_suite(suite) if not only or v["name"] in only]
    earlier = json.loads(partial.read_text()) if partial is not None and partial.is_file() else {}
    if earlier.get("complete", True) or (earlier.get("suite"), earlier.get("attempts")) != (suite, attempts):
        earlier = {}
    home = Path(os.environ.get("RESEARCHLOOP_DEBUG_BENCH_HOME", "/tmp/rl_debug_bench_home"))
    home.mkdir(parents=True, exist_ok=True)
    work = home / "work" / suite / time.strftime("%Y%m%d-%H%M%S")
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    os.environ["DAGSTER_HOME"] = str(home)
    rec: dict = {"script": SCRIPT, "date": today(), "machine": machine(), "suite": suite,
                 "held_out": HELD_OUT.get(suite, True), "attempts": attempts, "complete": False,
                 "rows": list(earlier.get("rows", [])), "bases": {}}
    done = {r["name"] for r in rec["rows"]}
    for base in sorted({v["base"] for v in variants}):
        folder = work / "_bases" / Path(base).stem
        folder.mkdir(parents=True, exist_ok=True)
        (folder / base).write_text(variants[[v["base"] for v in variants].index(base)]["base_code"])
        rec["bases"][base] = run_script(folder, base, timeout_s)
        print(f"[debug] base {base}: {rec['bases'][base]['result']} ({rec['bases'][base]['seconds']} s)", flush=True)
    local = not os.environ.get("OPENAI_BASE_URL")
    try:
        for i, v in enumerate(variants, 1):
            if v["name"] in done:
                print(f"[debug] {i}/{len(variants)} {v['name']}: recorded by the earlier run", flush=True)
                continue
            print(f"[debug] {i}/{len(variants)} {v['name']} ({v['kind']})", flush=True)
            d = debug_variant(v, work, attempts, timeout_s, env)
            base_result = rec["bases"][v["base"]].get("result")
            row = judge(v, d, tuple(base_result) if base_result else None, timeout_s)
            rec["rows"].append(row)
            print(f"[debug]   {'REPAIRED' if row['repaired'] else 'not repaired'} in {row['wall_s']} s, "
                  f"{row['repairs']} repairs; last error: {(row['last_error'] or '')[:100]}", flush=True)
            if partial is not None:  # a run cut off here resumes after this variant
                partial.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    finally:
        if local:  # each debug call kept the server it found or started (--keep-server): stopped unless
            release_server()  # another live process (a loop running beside the bench) holds a lease on it
    rec["repaired"] = sum(r["repaired"] for r in rec["rows"])
    rec["total"] = len(rec["rows"])
    rec["complete"] = True
    return rec


def render(rec: dict) -> str:
    sample = "held-out (written without sight of the tuning cases)" if rec["held_out"] else \
        f"in-sample ({IN_SAMPLE_BECAUSE.get(rec['suite'], 'tuned on this suite')})"
    lines = [f"## {TITLE}: {rec['suite']}", "",
             provenance(SCRIPT, f"bench/records/debug_{rec['suite']}.json", f"{rec['date']} on {rec['machine']}",
                        sample), "",
             f"`researchloop debug VARIANT.py --max-attempts {rec['attempts']}` on each variant of "
             f"bench/broken/{rec['suite']}; repaired = the final version's full run exits 0 and its RESULT is within "
             f"5% of the bug-free base's. **Repaired: {sum(r['repaired'] for r in rec['rows'])}/{len(rec['rows'])}"
             + ("" if rec.get("complete", True) else " (INCOMPLETE: the run was cut off; it resumes from the record)")
             + ".**", "",
             "Fixed by: where the last candidate run came from, `rule` (a mechanical repair rule, "
             "assets/editing/repairs/) or `LLM`; an LLM answer served from the bench's cache (a prompt seen in an "
             "earlier run of the bench) counts no tokens and little time.", "",
             "| variant | kind | repaired | fixed by | repairs | last error | wall s | LLM tokens out |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rec["rows"]:
        res = (r.get("full_run") or {}).get("result")
        got = f" ({res[0]} {res[1]:.4g})" if res else ""
        mark = "yes" + got if r["repaired"] else "no" + got
        err = (r["last_error"] or "").replace("|", "/")[:90] if not r["repaired"] else ""
        by = {"suggestion": "rule", "llm": "LLM"}.get((r["fix_sources"] or [""])[-1], "-") if r["repaired"] else "-"
        lines.append(f"| {r['name']} | {r['kind']} | {mark} | {by} | {r['repairs']} | {err} | "
                     f"{r['wall_s']:.0f} | {r['llm'].get('completion_tokens', 0)} |")
    lines += ["", "Bases: " + "; ".join(f"{b}: {tuple(x['result']) if x['result'] else 'no RESULT'}"
                                        for b, x in rec["bases"].items())]
    extra = [f"- Commit ({k}): {v}" for k, v in (rec.get("commits") or {}).items()]
    extra += [f"- {n}" for n in rec.get("notes") or []]
    lines += ["", *extra] if extra else []
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="scripts_dev", choices=SCRIPT_SUITES)
    ap.add_argument("--attempts", type=int, default=5, help="repairs per variant (researchloop debug --max-attempts)")
    ap.add_argument("--only", default="", help="comma-separated variant names")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--out", default="", help="the record (default bench/records/debug_SUITE.json)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else RECORDS / f"debug_{args.suite}.json"
    if os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(out.read_text())
    else:
        rec = measure(args.suite, args.attempts, set(filter(None, args.only.split(","))), args.timeout,
                      partial=None if args.only else out)
        out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    body = render(rec)
    print(body)
    if not args.out and not args.only:
        write_section(f"debug-{rec['suite']}", body, page_path(PAGE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
