"""Running an experiment and repairing it from its traceback (DOLPHIN 3.2).

Each attempt runs in a fresh copy of the folder (the sandboxed `runner`), with the edited
file written in. A failed attempt's traceback is reduced to the frames in the experiment's own
code and their local code structure; the LLM (in "structure" mode) first writes its analysis
of that structure, then proposes a fix in the configured edit format, which must pass the
honesty check (assets/editing/honesty.py) before it runs. The same loop serves a topic's ideas
(`RunTarget.of_topic`: success = the metric in final_info.json) and any script
(`researchloop debug`: success = exit code 0). Finished experiments are remembered on disk
by the hash of the code they ran, so a killed and re-run round does not repeat them.

One module, one responsibility (running a target and repairing it): the attempt loop, the
scorer run and the seed runs share the RunTarget, the workspace steps and that memo. The
editing pieces it uses (edit formats, tracebacks, error notes, repair rules) are in assets/editing/."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from assets.editing.edit_formats import (
    WHOLE_FILE_RETRIES,
    EditError,
    apply_edit,
    check_compiles,
    edit_status,
    max_tokens,
    unified_diff,
)
from assets.editing.error_notes import error_notes
from assets.editing.honesty import honesty_problems
from assets.editing.resampling import complete_resampled
from assets.editing.suggestions import mend, suggested_fix
from assets.editing.tracebacks import (
    MARK,
    error_line,
    format_frames,
    last_traceback,
    local_structure,
    own_frames,
)
from assets.editing.workspace import OUT_DIR, PRED_DIR, remove_hidden
from assets.run_results import prompts
from assets.shared.verdicts import (
    beats,
    in_bounds,
    parse_metrics,
    second_look,
    seed_summary,
)
from resources.bounded_json import BadJSON, loads_bounded
from resources.paths import under_home
from resources.runner import chosen_backend, execution_kwargs
from resources.safe_io import (
    atomic_write_text,
    read_memo,
    read_tail,
    safe_read_text,
)
from resources.sandbox import prepare_workspace, prune_attempts, workspace_bounds
from resources.workspace_walk import WorkspaceLimitError, copy_tree, hash_files, remove_tree, walk
from schemas.records import Attempt, RunResult
from schemas.topic import ExecutionSpec, TopicSpec

MODES = prompts.MODES


# output tokens an edit may take: a whole file is long, definitions or blocks are short


ANALYSIS_TOKENS = 120  # a few sentences; the small model ignores length requests


@dataclass(frozen=True)
class RunTarget:
    """What one attempt runs: `command` in a fresh copy of `folder` with `code_file` replaced.
    With a `metric`, success needs OUT_DIR/final_info.json holding it; without, exit code 0."""
    folder: Path
    code_file: str
    command: tuple[str, ...]
    timeout_s: float
    memory_mb: int = 4096
    metric: str | None = None
    label: str = ""  # what identifies the command in the memo hash
    ignore: tuple[str, ...] = ()  # file patterns not copied into the workspace (() = the runner's default)
    bounds: tuple[float, float] | None = None  # the metric's valid range: a value outside fails the attempt
    score: tuple[str, ...] = ()  # the scorer (fresh sandbox, after a run that exits 0); it writes the metric
    hidden: tuple[str, ...] = ()  # files of `folder` the run's workspace lacks (only the scorer sees them)
    execution: ExecutionSpec | None = None  # the topic's backend and Ray request (None: the environment's)

    @classmethod
    def of_topic(cls, spec: TopicSpec, which: str = "run", seed: int = 0) -> RunTarget:
        """The topic's `run` command (with `seed`), or its quick `check` (dry run) with which="check"."""
        label = getattr(spec, which) + (f" seed={seed}" if seed else "")
        return cls(folder=spec.path, code_file=spec.code, command=tuple(spec.run_command(OUT_DIR, which, seed=seed)),
                   timeout_s=spec.budget.run_timeout_s, memory_mb=spec.budget.memory_mb, metric=spec.metric.name,
                   label=label, bounds=spec.metric.bounds,
                   score=tuple(spec.run_command(OUT_DIR, "score", seed=seed, pred_dir=PRED_DIR)) if spec.score else (),
                   hidden=tuple(spec.hidden), execution=spec.execution)


def as_target(spec: TopicSpec | RunTarget) -> RunTarget:
    return spec if isinstance(spec, RunTarget) else RunTarget.of_topic(spec)


LOG_TAIL_CHARS = 20000  # of a run's stderr/stdout file, for the error line and the traceback
FINAL_INFO_BYTES = 1 << 20


def read_final_info(folder: Path) -> tuple[object, str | None]:
    """(parsed JSON, None) or (None, why) for folder/OUT_DIR/final_info.json, which the sandboxed
    run wrote: read with safe_read (a symlink, FIFO, device or file over 1 MB is refused, with
    the reason) and parsed with bounds (`loads_bounded`: nesting, numbers too large for a float),
    so whatever the run wrote ends as the attempt's failure, never as a crashed step. Raises
    FileNotFoundError when there is none."""
    try:
        raw = safe_read_text(Path(OUT_DIR) / "final_info.json", folder, FINAL_INFO_BYTES)
    except FileNotFoundError:
        raise
    except OSError as e:
        return None, f"final_info.json was not read: {e.strerror or e}"
    try:
        return loads_bounded(raw), None
    except BadJSON as e:
        return None, f"final_info.json: {e}"


def code_hash(code: str, spec: TopicSpec | RunTarget) -> str:
    t = as_target(spec)
    scored = f"score={' '.join(t.score)} hidden={','.join(t.hidden)}\n" if t.score else ""
    return hashlib.sha256(f"{t.label or ' '.join(t.command)}\n{t.timeout_s}\n{scored}{code}".encode()).hexdigest()[:16]


def file_hashes(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file under `root` by relative path (a symlink by its target), leaving out
    the paths in `skip` and everything under a skipped folder. The walk is bounded like the
    workspace itself: a tree past the quota raises WorkspaceLimitError with the reason."""
    return hash_files(root, workspace_bounds(), skip)


def _hashes_after(ws: Path, skip: tuple[str, ...]) -> dict[str, str] | str:
    """The workspace's file hashes after a run, or the reason the run's tree was refused."""
    try:
        return file_hashes(ws, skip=skip)
    except WorkspaceLimitError as e:
        return f"the run left a workspace past its bounds: {e}"


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Files of `before` that are gone or different in `after` (new files are allowed)."""
    return sorted(k for k, v in before.items() if after.get(k) != v)


_METRIC_LINE = r"(?i)(?:^|[^A-Za-z0-9_]){name}\s*[:=]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def metrics_from_output(stdout: str, metric: str) -> dict:
    """What a scorer that writes no final_info.json printed: the last line that is a JSON object,
    else the last `<metric>: value` (or `=`) on a line, else a last line that is a bare number
    (an evaluation script from another benchmark, used as it is). Only the last LOG_TAIL_CHARS
    of `stdout` are read; a JSON line is parsed with bounds (`loads_bounded`)."""
    stdout = stdout[-LOG_TAIL_CHARS:]
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("{") and ln.endswith("}"):
            try:
                info = loads_bounded(ln)
            except BadJSON:
                continue
            if isinstance(info, dict):
                return info
    found = re.findall(_METRIC_LINE.format(name=re.escape(metric)), stdout)
    if found:
        return {metric: float(found[-1])}
    if lines:
        try:
            return {metric: float(lines[-1])}
        except ValueError:
            pass
    return {}


def _unplain(src: Path) -> set[str]:
    """What of the run's OUT_DIR the scorer must not get: links (they would point into the host),
    FIFOs and devices, and the run's own final_info.json."""
    out = {"final_info.json"}
    for e in walk(src, workspace_bounds()):
        if not (stat.S_ISREG(e.st.st_mode) or stat.S_ISDIR(e.st.st_mode)):
            out.add(e.rel)
    return out


def _copy_predictions(src: Path, dest: Path) -> None:
    """The run's OUT_DIR into the scorer's workspace: plain files and folders only (no symlinks,
    which would point into the host), without the run's own final_info.json."""
    dest.mkdir(parents=True)
    if src.is_dir() and not src.is_symlink():
        # bounded like a workspace: a sparse file counts by its length, a deep tree is refused
        copy_tree(src, dest, workspace_bounds(), skip=_unplain(src))


def run_scorer(t: RunTarget, ws: Path, runner,
               env: dict[str, str] | None = None) -> tuple[dict[str, float], str | None]:
    """Score a finished run in a fresh sandbox: a pristine copy of the topic folder (the scorer
    script and the hidden files) plus the run's OUT_DIR as PRED_DIR; the scorer writes
    OUT_DIR/final_info.json (or prints the metric). Returns (metrics, error). The verdict is the
    scorer's: the run's final_info.json is moved aside to final_info.by_experiment.json."""
    sws = ws.parent / f"{ws.name}-score"
    prepare_workspace(t.folder, sws, **({"ignore": t.ignore} if t.ignore else {}))
    pred = sws / PRED_DIR
    if pred.exists() or pred.is_symlink():
        remove_tree(pred)
    try:
        _copy_predictions(ws / OUT_DIR, pred)
    except WorkspaceLimitError as e:
        remove_hidden(sws, t.hidden)
        return {}, f"the run's {OUT_DIR}/ was not given to the scorer: {e}"
    res = runner.run(list(t.score), sws, timeout_s=t.timeout_s, memory_mb=t.memory_mb, **({"env": env} if env else {}),
                     **execution_kwargs(t.execution))
    out = ws / OUT_DIR
    real_out = out.is_dir() and not out.is_symlink()  # a link made by the run is never written through
    claimed = out / "final_info.json"
    if real_out and claimed.is_file() and not claimed.is_symlink():
        claimed.replace(claimed.with_name("final_info.by_experiment.json"))
    if res.timed_out or res.exit_code != 0:
        stderr = read_tail(res.stderr_path, LOG_TAIL_CHARS) or res.stderr_tail
        why = "timed out" if res.timed_out else (error_line(stderr) or f"exit code {res.exit_code}")
        remove_hidden(sws, t.hidden)
        return {}, f"the scorer failed: {why}"
    try:
        info, bad = read_final_info(sws)
    except FileNotFoundError:
        out_tail = read_tail(res.stdout_path, LOG_TAIL_CHARS) or res.stdout_tail
        info, bad = metrics_from_output(out_tail, t.metric or ""), None
    if bad:
        remove_hidden(sws, t.hidden)
        return {}, f"the scorer's {bad}"
    remove_hidden(sws, t.hidden)  # the labels stay in the topic folder only
    metrics, error = parse_metrics(info, t.metric) if t.metric else ({}, None)
    if error is None and (real_out or not (out.exists() or out.is_symlink())):
        out.mkdir(exist_ok=True)
        (out / "final_info.json").unlink(missing_ok=True)
        (out / "final_info.json").write_text(json.dumps(metrics, indent=2))
    return metrics, error and f"the scorer: {error}"


def run_once(spec: TopicSpec | RunTarget, code: str, runner, workdir: Path, attempt: int,
             env: dict[str, str] | None = None) -> Attempt:
    """One sandboxed attempt; `env` adds variables to the command's environment (e.g. the
    fan-out's CUDA_VISIBLE_DEVICES / thread counts)."""
    t = as_target(spec)
    ws = workdir / f"attempt-{attempt}"
    remove_tree(ws)
    prepare_workspace(t.folder, ws, **({"ignore": t.ignore} if t.ignore else {}))
    prune_attempts(workdir)  # only the newest attempt folders stay on disk
    remove_hidden(ws, t.hidden)
    (ws / t.code_file).write_text(code)
    before = file_hashes(ws, skip=(t.code_file, OUT_DIR))  # only the code may differ from the topic's files
    cmd = list(t.command)
    extra = {"env": env} if env else {}
    extra.update(execution_kwargs(t.execution))
    if t.hidden:  # the topic folder itself holds the hidden files: out of the run's sight
        extra["hide"] = [t.folder]
    res = runner.run(cmd, ws, timeout_s=t.timeout_s, memory_mb=t.memory_mb, **extra)
    stderr = read_tail(res.stderr_path, LOG_TAIL_CHARS) or res.stderr_tail
    metrics: dict[str, float] = {}
    error = None
    if res.timed_out:
        error = f"timed out after {t.timeout_s:g} s ({res.killed_reason or 'killed'})"
    elif res.exit_code != 0:
        error = error_line(stderr) or f"exit code {res.exit_code}"
        if res.killed_reason:
            error = f"{error} ({res.killed_reason})"
    elif isinstance(after := _hashes_after(ws, (t.code_file, OUT_DIR)), str):
        error = after
    elif changed := changed_files(before, after):
        error = (f"the run changed or deleted {', '.join(changed[:5])}: only {t.code_file} may differ "
                 "from the topic's files")
    elif t.score:
        metrics, error = run_scorer(t, ws, runner, env)
    elif t.metric is not None:
        try:
            info, error = read_final_info(ws)
        except FileNotFoundError:
            info, error = None, "the script exited 0 but wrote no final_info.json"
        if error is None:
            metrics, error = parse_metrics(info, t.metric)
    if error is None and t.metric is not None and t.bounds is not None and not in_bounds(metrics[t.metric], t.bounds):
        error = f"{t.metric} = {metrics[t.metric]:g} is outside its bounds [{t.bounds[0]:g}, {t.bounds[1]:g}]"
    frames = own_frames(stderr, ws) if error else []
    return Attempt(attempt=attempt, command=cmd, exit_code=res.exit_code, timed_out=res.timed_out,
                   duration_s=round(res.duration_s, 2), stdout_tail=res.stdout_tail[-2000:],
                   stderr_tail=stderr[-3000:], error=error, frames=frames,
                   local_structure=local_structure(frames, ws, mark=True) if frames else "",
                   error_notes=error_notes(error, frames, ws) if frames else "", metrics=metrics)


def default_repair_format(llm, edit_format: str) -> str:
    """The edit format of repairs: the patch's format, except on the local model with the
    format left on "auto", where only the changed definitions are asked for (a fraction of a
    whole file's output tokens; measured in bench/RESULTS.md, section "repair")."""
    if llm is not None and getattr(llm, "edit_format", "") == "auto" and llm.is_local():
        return "functions"
    return edit_format


def error_report(a: Attempt, mode: str) -> str:
    """What the model is told about a failed attempt in each debugging mode."""
    if a.timed_out:
        return f"{a.error}\nMake the script finish faster."
    if mode == "error":
        return a.error or "the script failed"
    if mode == "structure" and a.frames and a.error:  # the frames in the script's own code
        return format_frames(a.frames, a.error)
    tb = last_traceback(a.stderr_tail)
    return (tb[-2500:] if tb else a.stderr_tail[-1500:]) or a.error or "the script failed"


# errors that say the code itself refers to something that is not there: when one surfaces at a
# line the last fix wrote, that fix broke the script rather than moved its error on
BROKEN_BY_FIX = ("NameError", "UnboundLocalError", "AttributeError", "ImportError", "ModuleNotFoundError",
                 "SyntaxError", "IndentationError", "RecursionError")


def written_lines(old: str, new: str) -> set[int]:
    """1-based numbers of the lines of `new` that an edit of `old` wrote (inserted or replaced)."""
    sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return {j + 1 for tag, _, _, j1, j2 in sm.get_opcodes() if tag in ("replace", "insert") for j in range(j1, j2)}


def broken_by_fix(before: Attempt, after: Attempt, old_code: str, new_code: str, code_file: str) -> bool:
    """Did the fix from `old_code` (run as `before`) to `new_code` (run as `after`) break the
    script: a new error of a BROKEN_BY_FIX kind, raised in a line the fix wrote?"""
    if after.error is None or after.timed_out or after.error == before.error or not after.frames:
        return False
    kind = after.error.split(":", 1)[0].strip().rsplit(".", 1)[-1]
    inner = after.frames[-1]
    return kind in BROKEN_BY_FIX and inner.file == code_file and inner.line in written_lines(old_code, new_code)


def repair(a: Attempt, current: str, reference: str, *, target: RunTarget, llm, mode: str, edit_format: str,
           title: str = "", honesty: bool = True, item: str | None = None, failed: Attempt | None = None,
           rejected: str = "", unhelpful: str = "", ask_round: int = 0) -> str | None:
    """Ask the LLM to fix the failure recorded in `failed` (default: `a`) of the code `current`;
    fills a.analysis, a.fix_status, a.fix_diff, a.fix_error. Returns the repaired code, or None
    when no usable fix came back. `item`: the idea the LLM calls are accounted to; `rejected`: a
    fix already tried on `current` that made things worse (shown so it is not proposed again);
    `unhelpful`: fixes of `current` already run that left the same error;
    `ask_round` > 0: earlier repairs of this failure brought no usable fix (asked again, sampled).
    A fix must apply in `edit_format` (a file that does not parse is rewritten whole) and,
    with `honesty`, keep what `reference` (the code the loop started from) trains, evaluates
    and writes."""
    f = failed or a
    error = error_report(f, mode)
    fmt = edit_format if check_compiles(current, target.code_file) is None else "whole"
    if mode == "structure" and not f.timed_out and not (ask_round and a.analysis):  # asked again: same analysis
        res = llm.complete(prompts.analyse(current, target.code_file, error, f.local_structure, title,
                                           notes=f.error_notes),
                           stage="debug_analysis", max_tokens=ANALYSIS_TOKENS, max_retries=0, item=item)
        a.analysis = (res.text or "").strip()[:1500] if res.ok else ""

    def parse(text: str, src: str = current):
        try:
            edit = apply_edit(src, text.replace(MARK, ""), fmt, target.code_file)  # markers copied from the prompt
        except EditError as e:
            if e.status != "no_op":
                raise
            # the small model often returns the faulty line itself: say what that means
            raise EditError("no_op", "the code you returned is already in the file, unchanged, so running it "
                            f"fails again with: {(f.error or '')[:200]}. Return it changed so that this error "
                            "cannot happen") from None
        if honesty and (problems := honesty_problems(reference, edit.code, target.metric)):
            raise EditError("dishonest", "the fix " + "; ".join(problems) + ": fix the error instead")
        return edit

    messages = prompts.fix(current, target.code_file, fmt, error, f.local_structure, title, mode=mode,
                           analysis=a.analysis, generic=target.metric is None, notes=f.error_notes,
                           rejected=rejected, unhelpful=unhelpful)
    res, resamples = complete_resampled(llm, messages, stage="debug", parse=parse, max_tokens=max_tokens(fmt),
                                        max_retries=WHOLE_FILE_RETRIES, item=item, round=ask_round)
    a.fix_resamples += resamples
    if not res.ok:
        a.fix_status, a.fix_error = edit_status(res), res.error
        return None
    a.fix_status, a.fix_diff = "ok", res.value.diff
    fixed, mended = mend(res.value.code)
    if mended:  # misplaced statements and left-out imports of the fix: mended, no run spent on them
        a.fix_diff = unified_diff(current, fixed, target.code_file)
    return fixed


_QUOTED = re.compile(r"'[^'\n]*'")


def renamed_only(before: Attempt, after: Attempt, old_code: str, new_code: str, code_file: str) -> bool:
    """Did the fix only swap the name the error is about for another that fails the same way: the
    same message but for what it quotes, raised in a line the fix wrote (the small model renames
    `dropout=` to `dropout_rate=` for a callee that takes neither)? A same message at a line the
    fix did not write is the next such mistake further on (a second undefined name), which is
    progress."""
    if after.error is None or before.error is None or after.timed_out or not after.frames:
        return False
    if _QUOTED.sub("''", after.error) != _QUOTED.sub("''", before.error):
        return False
    inner = after.frames[-1]
    return inner.file == code_file and inner.line in written_lines(old_code, new_code)


def _outcome(parent: Attempt, run: Attempt, old_code: str, new_code: str, code_file: str) -> str:
    """How far a candidate fix of `parent`'s failure got: success > progress (a different error:
    the run got past the old one) > same_error (also: the same error about another name, from a
    line the fix wrote, `renamed_only`) > broke (a new name/attribute/import error in a line the
    fix wrote)."""
    if run.error is None:
        return "success"
    if broken_by_fix(parent, run, old_code, new_code, code_file):
        return "broke"
    if run.error == parent.error or renamed_only(parent, run, old_code, new_code, code_file):
        return "same_error"
    return "progress"


def _set_aside(tried: list[tuple[str, Attempt]], outcome: str) -> str:
    """The set-aside candidates of one failure with the given outcome, for the next prompt
    (the latest last; diffs cut to their end)."""
    shown = [(d, r) for d, r in tried if r.outcome == outcome][-2:]
    return "\n".join(f"{d[-1500:]}\nWith it, the script failed with: {r.error}" for d, r in shown)


def run_with_repair(spec: TopicSpec | RunTarget, code: str, *, runner, llm, workdir: Path, idea_id: str,
                    title: str, max_repairs: int, edit_format: str,
                    log: Callable[[str], None] = print, mode: str = "structure", repair_format: str | None = None,
                    honesty: bool = True, memo: bool = True, env: dict[str, str] | None = None,
                    on_attempt: Callable[[Attempt], None] | None = None,
                    suggestions: bool | None = None) -> RunResult:
    """Run `code`; on failure search for a fix: candidate fixes, each checked by running it.

    The search, per failure: the LLM's fix first; then the interpreter's own suggestion
    ("Did you mean: 'x'?", applied at the failing line without the LLM, see
    assets/editing/suggestions.py) when `suggestions` is on; then the LLM again (sampled,
    told which fixes were already run and what they did). A candidate that succeeds ends the
    search; one that gets further (a different error) becomes the failure to fix next; one that
    fails with the same error, or breaks the script (a new name/attribute/import error in a line
    it wrote), is set aside and the next candidate starts from the same code again. A failed
    result keeps the furthest code reached. An answer that cannot be used (does not apply,
    changes nothing, fails the honesty check) is asked again while the budget lasts.

    max_repairs: the budget, counted in candidates asked for: each LLM fix asked (usable or not)
    and each suggestion tried counts 1 (0: just run once). The runs are at most max_repairs + 1.
    suggestions: None = on for a topic's runs (`spec` a TopicSpec), off for a bare RunTarget
    (the repair benchmark's DOLPHIN modes); `researchloop debug` turns it on. With llm=None and
    suggestions on, the search uses the interpreter's suggestions alone.

    mode: "structure" (traceback + local code structure, analysed first; the default),
    "traceback" (traceback only) or "error" (last error line only). repair_format: the edit
    format of fixes (None: the patch's `edit_format`, or "functions" on the local model, see
    `default_repair_format`)."""
    target = as_target(spec)
    if mode not in MODES:
        raise ValueError(f"unknown debugging mode {mode!r} (one of {', '.join(MODES)})")
    suggestions = isinstance(spec, TopicSpec) if suggestions is None else suggestions
    fmt = repair_format or default_repair_format(llm, edit_format)
    workdir.mkdir(parents=True, exist_ok=True)
    variant = (f"{max_repairs}" if max_repairs == 0
               else f"{max_repairs}-{mode}-{fmt}" + ("" if honesty else "-unchecked")
               + ("-suggest" if suggestions else "") + ("" if llm is not None else "-nollm"))
    memo_file = workdir / f"result-{code_hash(code, target)}-{variant}.json"
    # finished before (e.g. a resumed run): do not re-run the experiment; a memo cut short by a
    # kill is ignored (and the experiment run again) rather than failing every later attempt
    if memo and (done := read_memo(memo_file, RunResult.model_validate_json, log=lambda m: log(f"{idea_id}: {m}"))):
        log(f"{idea_id}: reusing the finished experiment in {memo_file.name}")
        return done
    notify = on_attempt or (lambda a: None)
    attempts: list[Attempt] = []

    def run(code_now: str, parent: Attempt | None = None, source: str = "", diff: str = "") -> Attempt:
        if attempts:
            notify(attempts[-1])  # its repair is settled: report it
        n = len(attempts) + 1
        a = run_once(target, code_now, runner, workdir, n, env=env)
        a.parent, a.fix_source, a.applied_diff = (parent.attempt if parent else None), source, diff
        attempts.append(a)
        log(f"{idea_id}: attempt {n}: " + ("ok " + json.dumps(a.metrics) if a.error is None else a.error))
        return a

    latest = run(code)
    failure = (code, latest)  # the failure being repaired: its code and its run (the furthest reached)
    tried: list[tuple[str, Attempt]] = []  # candidates of this failure that were set aside: (diff, run)
    seen = {code}  # versions already run for this failure (a candidate equal to one is not run again)
    llm_asks, suggested = 0, False  # per failure: LLM fixes asked; the suggestion tried
    hints: dict[int, object] = {}  # per failure (its attempt number): the suggestion, computed once
    asked = 0  # the budget: candidates asked for (an unusable LLM answer counts too)
    reason = latest.error
    while latest.error is not None and asked < max_repairs:
        source, failed = failure
        if suggestions and failed.attempt not in hints:
            hints[failed.attempt] = suggested_fix(source, failed, target.code_file, target.folder)
        hint = hints.get(failed.attempt)
        # a sure suggestion (the message or a library names the fix) before the LLM; a guessed one
        # after the LLM's first fix; alone without an LLM
        if suggestions and not suggested and (llm is None or llm_asks >= 1 or (hint is not None and hint.sure)):
            suggested = True
            if hint is None or hint.code in seen:
                continue
            if honesty and (problems := honesty_problems(code, hint.code, target.metric)):
                log(f"{idea_id}: the interpreter's suggestion was not tried: {'; '.join(problems)}")
                continue
            asked += 1
            log(f"{idea_id}: repair {asked}: {hint.what}")
            candidate, how, diff = hint.code, "suggestion", hint.diff
        elif llm is not None:
            fixed = repair(latest, source, code, target=target, llm=llm, mode=mode, edit_format=fmt, title=title,
                           honesty=honesty, item=idea_id, failed=failed, rejected=_set_aside(tried, "broke"),
                           unhelpful=_set_aside(tried, "same_error"), ask_round=latest.fix_rounds)
            asked += 1
            llm_asks += 1
            latest.fix_rounds += 1
            if fixed is None:  # no usable answer: the next candidate (asked again, sampled) while budget is left
                log(f"{idea_id}: repair {asked} failed: {latest.fix_error}")
                reason = f"{failed.error}; the repair failed: {latest.fix_error}"
                continue
            if fixed in seen:
                log(f"{idea_id}: repair {asked} proposed a version already run")
                reason = f"{failed.error}; the repair proposed a version already run"
                continue
            log(f"{idea_id}: repair {asked} applied ({latest.fix_diff.count(chr(10))} diff lines)")
            candidate, how, diff = fixed, "llm", latest.fix_diff
        else:
            break  # no candidate source left for this failure
        seen.add(candidate)
        latest = run(candidate, failed, how, diff)
        latest.outcome = _outcome(failed, latest, source, candidate, target.code_file)
        reason = latest.error
        if latest.outcome in ("success", "progress"):  # it got further: its failure is the one to fix now
            failure, tried, seen, llm_asks, suggested = (candidate, latest), [], {candidate}, 0, False
        else:  # no further: set aside, the next candidate starts from the same code
            latest.reverted = latest.outcome == "broke"
            tried.append((diff, latest))
            reason = failed.error
            log(f"{idea_id}: the fix before attempt {latest.attempt} "
                + ("broke the script" if latest.reverted else "left the same error")
                + f": the next one starts from attempt {failed.attempt}'s code")
    notify(attempts[-1])
    final_code, final = failure
    if final.error is None:
        result = RunResult(idea_id=idea_id, status="success", attempts=attempts, n_attempts=len(attempts),
                           metrics=final.metrics, final_code=final_code,
                           metric_value=final.metrics.get(target.metric) if target.metric else None)
    else:
        result = RunResult(idea_id=idea_id, status="failed", reason=reason or final.error, attempts=attempts,
                           n_attempts=len(attempts), final_code=final_code)
    if memo:
        atomic_write_text(memo_file, result.model_dump_json())
    return result


def repeat_seeds(spec: TopicSpec, result: RunResult, runner, workdir: Path, env: dict[str, str] | None = None,
                 log: Callable[[str], None] = print, reference: float | None = None, gate: bool = True) -> RunResult:
    """With budget.seeds = n > 1: run a successful result's final code again with seeds 1..n-1
    (the run itself was seed 0; `run_seeds`: side by side on the ray backend); the metric becomes
    the mean, with the per-seed values and their spread (sample standard deviation) beside it. A
    seed that fails fails the result: the change is not robust. With `gate` (ideas) only a result
    whose seed 0 beats the `reference` (default: the mean of the baseline's seeds, memoised, see
    `baseline_values`) is repeated; the others keep their one seed, which the verdict's test
    cannot call an improvement."""
    n = spec.budget.seeds or 1
    if result.status != "success" or result.seed_values:
        return result
    if n <= 1:
        return result.model_copy(update={"seed_values": [result.metric_value]})
    if gate:
        ref = reference
        if ref is None:
            base = baseline_values(spec, runner, env=env, log=log)
            ref = seed_summary(base)[0] if base else None
        if not beats(result.metric_value, ref, spec.metric.goal):
            log(f"{result.idea_id}: seed 0 gave {result.metric_value:.4g}, not better than the baseline's "
                f"{'?' if ref is None else f'{ref:.4g}'}: not repeated")
            return result.model_copy(update={"seed_values": [result.metric_value]})
    return with_more_seeds(spec, result, [result.metric_value], n, runner, workdir, env=env, log=log)


def with_more_seeds(spec: TopicSpec, result: RunResult, values: list[float], n: int, runner, workdir: Path,
                    env: dict[str, str] | None = None, log: Callable[[str], None] = print, **extra) -> RunResult:
    """`result` after its code ran seeds len(values)..n-1 as well (`run_seeds`): the metric
    becomes the mean of all n values, with their spread and seed 0's value beside it; `extra`
    fields are set too. A seed that fails fails the result: the change is not robust."""
    values = list(values)
    seeds = range(len(values), n)
    for seed, r in zip(seeds, run_seeds(spec, result.final_code, seeds, runner, workdir, result.idea_id, env=env,
                                        log=log)):
        if r.status != "success":
            return result.model_copy(update={"status": "failed", "reason": f"seed {seed} failed: {r.reason}"})
        values.append(r.metric_value)
    mean, spread = seed_summary(values)
    m = spec.metric.name
    return result.model_copy(update={
        "metric_value": mean, "seed_values": values, "metric_spread": spread, **extra,
        "metrics": {**result.metrics, f"{m}_seed0": values[0], m: mean, f"{m}_spread": spread}})


def second_look_seeds(spec: TopicSpec, result: RunResult, reference_values: list[float], reference_code: str | None,
                      runner, workdir: Path, env: dict[str, str] | None = None,
                      log: Callable[[str], None] = print) -> RunResult:
    """The second look (assets/shared/verdicts.py): a repeated result better than the
    reference's `reference_values` by more than the tolerance but not significant runs seeds
    n..2n-1, and the reference code the same seeds (`reference_seeds`); the result then carries
    all its 2n values and the reference's 2n (`reference_values`), which the verdict tests at the
    second look's level. A seed of the idea that fails fails the result (`with_more_seeds`);
    reference seeds that fail leave the result at its first look."""
    n = spec.budget.seeds or 1
    if (not spec.budget.second_look or result.status != "success" or result.reference_values or not reference_code
            or not second_look(result.seed_values, reference_values, spec.metric.goal, spec.metric.tolerance, n)):
        return result
    log(f"{result.idea_id}: better than the reference on {n} seeds but not significant: a second look, "
        f"seeds {n}..{2 * n - 1} for it and for the reference")
    ref = reference_seeds(spec, reference_code, reference_values, 2 * n, runner, env=env, log=log)
    if ref is None:
        log(f"{result.idea_id}: the reference's extra seeds failed: the first look stands")
        return result
    return with_more_seeds(spec, result, result.seed_values, 2 * n, runner, workdir, env=env, log=log,
                           reference_values=ref)


def reference_seeds(spec: TopicSpec, code: str, values: list[float], n: int, runner,
                    env: dict[str, str] | None = None, log: Callable[[str], None] = print) -> list[float] | None:
    """The reference code's metric for seeds 0..n-1: the `values` already known, then the missing
    seeds run, memoised per code (workspaces/<topic>/reference-<sha>/seed-<k>) under a lock, since
    the round's idea steps run side by side and need the same seeds. None when one fails."""
    if len(values) >= n:
        return list(values[:n])
    from filelock import FileLock

    root = under_home("workspaces", spec.name, f"reference-{hashlib.sha256(code.encode()).hexdigest()[:12]}")
    missing = range(len(values), n)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / "seeds.lock")):
        runs = run_seeds(spec, code, missing, runner, root, f"{spec.name}/reference", env=env, log=log)
    if len(runs) != len(missing) or any(r.status != "success" for r in runs):
        return None
    return list(values) + [r.metric_value for r in runs]


def run_seeds(spec: TopicSpec, code: str, seeds: Sequence[int], runner, workdir: Path, idea_id: str,
              env: dict[str, str] | None = None, log: Callable[[str], None] = print) -> list[RunResult]:
    """`code` run once per seed, no repairs, each memoised in workdir/seed-<k> (a resumed run
    redoes only the seeds that did not finish). On the ray backend (the topic's `execution.backend`,
    else RESEARCHLOOP_BACKEND) the seeds are submitted together, one thread per seed waiting on its
    Ray task, and each runs to its end whatever the others do; on the local backend they run one
    after the other (side by side they would only share the same cores) and stop at the first
    that fails. Returns the results in seed order up to and including the first that failed; an
    exception raised for a seed (e.g. no sandbox on a worker) is raised, after the other seeds
    finished, where the loop one after the other would have raised it."""
    def one(seed: int) -> RunResult:
        return run_with_repair(RunTarget.of_topic(spec, seed=seed), code, runner=runner, llm=None,
                               workdir=workdir / f"seed-{seed}", idea_id=f"{idea_id} seed {seed}", title="",
                               max_repairs=0, edit_format="whole", log=log, env=env)

    seeds = list(seeds)
    fan_out = len(seeds) > 1 and chosen_backend(spec.execution) == "ray"
    if fan_out:
        log(f"{idea_id}: seeds {', '.join(map(str, seeds))} submitted together")
    outcomes = _each_in_a_thread(one, seeds) if fan_out else None
    results: list[RunResult] = []
    for i, seed in enumerate(seeds):
        if outcomes is None:
            r = one(seed)
        else:
            r, error = outcomes[i]
            if error is not None:
                raise error
        results.append(r)
        if r.status != "success":
            break
    return results


def _each_in_a_thread(fn: Callable, items: list) -> list[tuple[object, BaseException | None]]:
    """fn(item) for all items at once, one thread each (the caller bounds their number: seeds are
    at most 10, an idea's drafts at most 8); (result, exception) per item, in item order. Daemon
    threads: a step cancelled while they wait on their Ray tasks can still exit (Ray then ends the
    tasks of the gone process), where a ThreadPoolExecutor's threads would be waited for at exit."""
    out: list[tuple[object, BaseException | None]] = [(None, None)] * len(items)

    def work(i: int, item) -> None:
        try:
            out[i] = (fn(item), None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
            out[i] = (None, e)

    threads = [threading.Thread(target=work, args=(i, item), name=f"researchloop-{i}", daemon=True)
               for i, item in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def each_at_once(fn: Callable, items: list) -> list:
    """fn(item) for all items at once (`_each_in_a_thread`), the results in item order; an
    exception raised for one item is raised once all have finished (the first in item order,
    where a loop one after the other would have raised it)."""
    outcomes = _each_in_a_thread(fn, items)
    for _, error in outcomes:
        if error is not None:
            raise error
    return [r for r, _ in outcomes]


def baseline_values(spec: TopicSpec, runner, env: dict[str, str] | None = None,
                    log: Callable[[str], None] = print) -> list[float]:
    """The baseline's per-seed metric values: the memoised runs of `run_reference` (run now if the
    baseline has not run with these seeds yet); [] when the baseline fails."""
    from filelock import FileLock

    # idea steps run side by side: one of them runs what is missing, the others then read its memos
    with FileLock(str(under_home("workspaces", spec.name) / "baseline.lock")):
        r = run_reference(spec, runner, None, log=log, env=env)
    if r.status != "success":
        return []
    return r.seed_values or [r.metric_value]


def run_reference(spec: TopicSpec, runner, tracker, log: Callable[[str], None] = print,
                  env: dict[str, str] | None = None, code: str | None = None) -> RunResult:
    """The baseline: the unmodified reference code, no repairs. `code`: the reference as
    topic_brief captured it (default: the file in the topic folder, for code outside a round)."""
    code = spec.code_path.read_text() if code is None else code
    workdir = under_home("workspaces", spec.name, "baseline")
    result = run_with_repair(spec, code, runner=runner, llm=None, workdir=workdir, idea_id=f"{spec.name}/baseline",
                             title="baseline", max_repairs=0, edit_format="whole", log=log, env=env)
    result = repeat_seeds(spec, result, runner, workdir, env=env, log=log, gate=False)
    if result.mlflow_run_id is None and tracker is not None:
        a = result.attempts[-1]
        result.mlflow_run_id = tracker.log_run(
            spec.name, f"{spec.name} baseline",
            {"researchloop.kind": "baseline", "researchloop.code": code_hash(code, spec)},
            params={"topic": spec.name, "command": " ".join(a.command)}, metrics=result.metrics,
            texts={"stdout_tail.txt": a.stdout_tail, "stderr_tail.txt": a.stderr_tail, "experiment.py": code},
            failed=result.status != "success")
    return result
