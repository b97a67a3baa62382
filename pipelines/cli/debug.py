"""`researchloop debug SCRIPT`: run any Python script in the sandbox and repair it from its
traceback, with the same loop the research rounds use (`assets.run_results.repair_search.run_with_repair`).

  researchloop debug train.py                       # up to 3 repairs, writes train.fixed.py
  researchloop debug train.py --max-attempts 0      # just run it once, sandboxed
  researchloop debug train.py --json --mode traceback --output fixed.py --script-args "--epochs 1"
  researchloop debug train.py --no-llm              # only the interpreter's own "Did you mean" fixes

Repairs are a search: for each failure the model's fix is run first, then the fix Python's own
message suggests ("Did you mean: 'predict'?", applied at the failing line without the model),
then the model again, told which fixes were run and what they did; a fix that gets further
(another error) is kept and its error fixed next, one that does not is set aside. --max-attempts
counts the fixes asked for (an answer that could not be applied counts too).

Each attempt runs `python SCRIPT [SCRIPT_ARGS]` in a fresh copy of the script's folder under
bubblewrap (no network, only the copy writable). Success is exit code 0. The original file is
never overwritten unless --output names it. Progress goes to stderr; with --json, stdout holds
one JSON object (fixed, attempts, exit_code, timed_out, stdout_tail, stderr_tail, and every
attempt's error and fix status)."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from assets.editing.edit_formats import EDIT_FORMATS
from assets.run_results.experimenting import RunTarget
from assets.run_results.repair_search import MODES, RepairPolicy, default_repair_format, run_with_repair
from pipelines.cli.common import ensure_home, plain
from resources.llm import LLM, usage_totals
from resources.local_llm import server_status
from resources.paths import under_home
from resources.runner import Runner, unsandboxed_by_environment
from resources.sandbox import sandbox_available
from resources.settings import settings
from resources.workspace_walk import Bounds, WorkspaceLimitError, walk

DEFAULT_REPAIRS = 3
# not copied into each attempt's workspace: dotfiles and dot-folders (.git, .env, .netrc, ...:
# often credentials), environments, earlier fixes
IGNORE = (".*", "__pycache__", "*.pyc", "venv", "node_modules", "*.fixed.py")
MAX_FOLDER_MB, MAX_FOLDER_FILES = 500, 20000


def add_parser(subparsers) -> argparse.ArgumentParser:
    d = subparsers.add_parser(
        "debug", help="run a script sandboxed and repair it from its traceback",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("script", help="the Python script to run (its folder is copied for each attempt)")
    d.add_argument("--script-args", default="", metavar="ARGS",
                   help='arguments for the script, as one shell-quoted string (e.g. "--epochs 1")')
    d.add_argument("--max-attempts", type=int, default=DEFAULT_REPAIRS, metavar="N",
                   help=f"candidate fixes to ask for and try (default {DEFAULT_REPAIRS}; 0 just runs the script "
                        "once)")
    d.add_argument("--no-llm", action="store_true",
                   help="no model: try only the fixes Python's error messages suggest (\"Did you mean ...?\")")
    d.add_argument("--no-suggestions", action="store_true",
                   help="do not try the fixes Python's error messages suggest (the model's fixes only)")
    d.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds per run (default 300)")
    d.add_argument("--memory-mb", type=int, default=4096, help="memory limit per run (default 4096)")
    d.add_argument("--output", default="", metavar="PATH",
                   help="where to write the final version (default: SCRIPT.fixed.py next to the script)")
    d.add_argument("--json", action="store_true", help="print one JSON object with the outcome on stdout")
    d.add_argument("--mode", choices=MODES, default="structure",
                   help="what the model is shown: traceback + local code structure (default), "
                        "the traceback only, or the last error line only")
    d.add_argument("--edit-format", choices=("auto", *EDIT_FORMATS), default="auto",
                   help="how the model returns a fix (auto: changed definitions on the local model, "
                        "else the LLM resource's format)")
    d.add_argument("--keep-server", action="store_true", help="leave a local LLM server started here running")
    d.set_defaults(fn=cmd_debug)
    return d


def _folder_too_big(folder: Path) -> str | None:
    """Why the script's folder is too big to copy for every attempt, or None. The walk is the
    bounded one of the workspaces (a deep or huge tree is refused, never recursed into)."""
    try:
        for _ in walk(folder, Bounds(max_bytes=MAX_FOLDER_MB << 20, max_entries=MAX_FOLDER_FILES), ignore=IGNORE):
            pass
    except WorkspaceLimitError as e:
        return (f"{folder} is too big to copy for each attempt ({e}): put the script in a folder of its own "
                "(with what it needs)")
    return None


def default_output(script: Path) -> Path:
    return script.with_name(script.stem + ".fixed.py")


def attempt_record(a) -> dict:
    return {"attempt": a.attempt, "exit_code": a.exit_code, "timed_out": a.timed_out, "duration_s": a.duration_s,
            "error": a.error, "frames": [f"{f.file}:{f.line} in {f.function}" for f in a.frames],
            "analysis": a.analysis, "fix_status": a.fix_status, "fix_error": a.fix_error, "fix_diff": a.fix_diff,
            "fix_rounds": a.fix_rounds, "parent": a.parent, "fix_source": a.fix_source, "outcome": a.outcome,
            "applied_diff": a.applied_diff}


def outcome(script: Path, result, output: Path | None, mode: str, edit_format: str, workdir: Path,
            llm_usage: dict) -> dict:
    last = result.attempts[-1]
    return {
        "script": str(script), "fixed": result.status == "success", "attempts": result.n_attempts,
        "repairs": sum(a.parent is not None for a in result.attempts),  # candidate fixes run
        "asked": sum(a.fix_rounds for a in result.attempts) + sum(a.fix_source == "suggestion"
                                                                  for a in result.attempts),
        "exit_code": last.exit_code, "timed_out": last.timed_out,
        "stdout_tail": last.stdout_tail, "stderr_tail": last.stderr_tail, "reason": result.reason,
        "output": str(output) if output else None, "mode": mode, "edit_format": edit_format,
        "workdir": str(workdir), "per_attempt": [attempt_record(a) for a in result.attempts], "llm": llm_usage,
    }


def cmd_debug(args) -> int:
    ensure_home()
    err = Console(stderr=True)

    def fail(msg: str) -> int:
        err.print(f"[red]researchloop debug:[/red] {escape(msg)}", highlight=False)
        if args.json:
            print(json.dumps({"script": args.script, "fixed": False, "error": msg}))
        return 2

    script = Path(args.script).resolve()
    if not script.is_file():
        return fail(f"no such file: {args.script}")
    if script.suffix != ".py":
        return fail(f"{args.script} is not a .py file")
    if args.max_attempts < 0 or args.timeout <= 0:
        return fail("--max-attempts must be >= 0 and --timeout > 0")
    if args.no_llm and args.no_suggestions:
        return fail("--no-llm and --no-suggestions leave no way to repair: use --max-attempts 0 to just run it")
    output = Path(args.output).resolve() if args.output else default_output(script)
    if (why := _folder_too_big(script.parent)) is not None:
        return fail(why)
    unsandboxed = unsandboxed_by_environment()
    if not unsandboxed:
        ok, why = sandbox_available()
        if not ok:
            return fail(f"cannot run the script in a sandbox: {why} "
                        "(set RESEARCHLOOP_UNSANDBOXED=1 to run it unisolated, at your own risk)")

    try:
        script_args = shlex.split(args.script_args)
    except ValueError as e:
        return fail(f"--script-args: {e}")
    target = RunTarget(folder=script.parent, code_file=script.name, command=("python", script.name, *script_args),
                       timeout_s=args.timeout, memory_mb=args.memory_mb, metric=None, ignore=IGNORE)
    llm = None
    started_server = False
    if args.max_attempts > 0 and not args.no_llm:
        llm = LLM(edit_format=settings().edit_format if args.edit_format == "auto"
                  else args.edit_format)
        if llm.is_local():
            started_server = not (server_status() or {}).get("alive")
    fmt = default_repair_format(llm, llm.resolved_edit_format()) if llm is not None else "whole"
    workdir = under_home("debug", f"{script.stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    original = script.read_text()
    how = ("the model" if llm else "") + (" and " if llm and not args.no_suggestions else "") + (
        "Python's suggestions" if not args.no_suggestions else "")
    err.print(f"[bold]researchloop debug[/bold] {script.name}: up to {args.max_attempts} repairs ({how}), "
              f"mode {args.mode}, edit format {fmt}" + (f", model {llm.model_name()}" if llm else "")
              + (" [yellow](UNSANDBOXED)[/yellow]" if unsandboxed else "") + f"\n  workspace {workdir}",
              highlight=False)

    def log(msg: str) -> None:
        err.print("  " + plain(msg.split(": ", 1)[-1]), highlight=False)  # script output: no markup, no escapes

    try:
        with err.status(f"debugging {script.name}"):
            policy = RepairPolicy(max_repairs=args.max_attempts, edit_format=fmt, mode=args.mode, repair_format=fmt,
                                  memo=False, suggestions=not args.no_suggestions)
            result = run_with_repair(target, original, runner=Runner(), llm=llm, workdir=workdir,
                                     idea_id=script.name, policy=policy, log=log)
    finally:
        if started_server and not args.keep_server:
            llm.local_llm.stop()
    written = None
    if result.final_code != original or args.output:
        if output == script and not args.output:  # never overwrite the original by default
            output = default_output(script)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(result.final_code)
        written = output
    usage = usage_totals(llm.calls()) if llm is not None else usage_totals([])
    out = outcome(script, result, written, args.mode, fmt, workdir, usage)
    if out["fixed"]:
        err.print(f"[green]fixed[/green] after {out['repairs']} repair(s)" if out["repairs"] else
                  "[green]runs without error[/green]", highlight=False)
    else:
        err.print(f"[red]still failing[/red]: {plain(result.reason or '')}", highlight=False)
    if written:
        err.print(f"final version written to {written}", highlight=False)
    if args.json:
        print(json.dumps(out))
    return 0 if out["fixed"] else 1

