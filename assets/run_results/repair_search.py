"""The repair search (DOLPHIN 3.2): run an experiment (`run_once`, assets/run_results/
experimenting.py) and, while it fails, search for a fix from its traceback: candidate fixes
asked of the LLM or made from the interpreter's own suggestion, each checked by running it,
within what a `RepairPolicy` lets the search spend.

A failed attempt's traceback is reduced to the frames in the experiment's own code and their
local code structure; the LLM (in "structure" mode) first writes its analysis of that
structure, then proposes a fix in the configured edit format, which must edit the code file
only (assets/run_results/edit_scope.py) and pass the honesty check (assets/editing/honesty.py)
before it runs. An answer that gives back a version already run is asked again once, shown the
versions already run; a second such answer ends the search (the idea's next draft, if any, gets
its run). Finished searches are remembered on disk by the hash of the code they started from,
so a killed and re-run round does not repeat them."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from assets.editing.columns import column_refusal, data_columns, invented_columns
from assets.editing.drafts import program_hash
from assets.editing.edit_formats import (
    WHOLE_FILE_RETRIES,
    EditError,
    apply_edit,
    check_compiles,
    edit_status,
    max_tokens,
    unified_diff,
)
from assets.editing.entry_points import broken_interface, topic_roots
from assets.editing.honesty import honesty_problems
from assets.editing.resampling import complete_resampled
from assets.editing.suggestions import mend, suggested_fix
from assets.editing.tracebacks import MARK, format_frames, last_traceback
from assets.run_results import prompts
from assets.run_results.edit_scope import OTHER_FILE, EditScope
from assets.run_results.experimenting import RunTarget, as_target, code_hash, run_once
from resources.safe_io import atomic_write_text, read_memo
from schemas.records import Attempt, RunResult
from schemas.topic import TopicSpec

MODES = prompts.MODES

ANALYSIS_TOKENS = 120  # a few sentences; the small model ignores length requests

REPEATED = "repeated"  # the fix status of an answer that gave back a version already run
# the versions already run, shown in the re-ask after a repeat: each diff cut to its end, all
# of them to the total (the latest first to stay)
REPEAT_DIFF_CHARS = 1200
REPEAT_SHOWN_CHARS = 4000


@dataclass(frozen=True)
class RepairPolicy:
    """What the repair search may spend and how it asks. The default runs the code once.

    max_repairs: the budget, counted in candidates asked for: each LLM fix asked (usable or
    not) and each suggestion tried counts 1 (0: just run once); the runs are at most
    max_repairs + 1. edit_format: the patch's edit format; repair_format: the edit format of
    fixes (None: `edit_format`, or "functions" on the local model, see `default_repair_format`).
    mode: "structure" (traceback + local code structure, analysed first), "traceback"
    (traceback only) or "error" (last error line only). honesty: fixes must keep what the
    starting code trains, evaluates and writes. suggestions: the interpreter's "Did you mean"
    as candidates (None: on for a topic's runs, `spec` a TopicSpec, off for a bare RunTarget).
    memo: reuse (and write) the finished search's result on disk."""
    max_repairs: int = 0
    edit_format: str = "whole"
    mode: str = "structure"
    repair_format: str | None = None
    honesty: bool = True
    suggestions: bool | None = None
    memo: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown debugging mode {self.mode!r} (one of {', '.join(MODES)})")
        if self.max_repairs < 0:
            raise ValueError(f"max_repairs must be 0 or more, not {self.max_repairs}")


RUN_ONCE = RepairPolicy()  # no repairs: the code runs once (baselines, seeds, screen runs)


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
           rejected: str = "", unhelpful: str = "", ask_round: int = 0, repeated: str = "",
           scope: EditScope | None = None) -> str | None:
    """Ask the LLM to fix the failure recorded in `failed` (default: `a`) of the code `current`;
    fills a.analysis, a.fix_status, a.fix_diff, a.fix_error. Returns the repaired code, or None
    when no usable fix came back. `item`: the idea the LLM calls are accounted to; `rejected`: a
    fix already tried on `current` that made things worse (shown so it is not proposed again);
    `unhelpful`: fixes of `current` already run that left the same error;
    `ask_round` > 0: earlier repairs of this failure brought no usable fix (asked again, sampled).
    `repeated`: the note of the re-ask after an answer that gave back a version already run
    (`prompts.repeated_versions`), shown instead of `rejected` and `unhelpful`.
    A fix must apply in `edit_format` (a file that does not parse is rewritten whole), edit
    the code file only (`scope`, default: the target's folder; else refused as OTHER_FILE)
    and, with `honesty`, keep what `reference` (the code the loop started from) trains,
    evaluates and writes."""
    f = failed or a
    error = error_report(f, mode)
    fmt = edit_format if check_compiles(current, target.code_file) is None else "whole"
    if mode == "structure" and not f.timed_out and not (ask_round and a.analysis):  # asked again: same analysis
        res = llm.complete(prompts.analyse(current, target.code_file, error, f.local_structure, title,
                                           notes=f.error_notes),
                           stage="debug_analysis", max_tokens=ANALYSIS_TOKENS, max_retries=0, item=item)
        a.analysis = (res.text or "").strip()[:1500] if res.ok else ""

    scope = scope or EditScope(target.folder, target.code_file)
    columns = data_columns(target.folder, [*target.hidden, target.code_file])  # a fix reads only real columns

    def roots(src: str) -> list[str]:  # the entry points a fix must keep (declared, or imported by the harness)
        declared, imported = topic_roots(target.folder, target.code_file, src, list(target.entry_points))
        return [*declared, *imported]

    def parse(text: str, src: str = current):
        if why := scope.refusal(text, src):  # before applying: the format would write it into the code file
            raise EditError(OTHER_FILE, why)
        try:
            edit = apply_edit(src, text.replace(MARK, ""), fmt, target.code_file)  # markers copied from the prompt
        except EditError as e:
            if e.status != "no_op":
                raise
            # the small model often returns the faulty line itself: say what that means
            raise EditError("no_op", "the code you returned is already in the file, unchanged, so running it "
                            f"fails again with: {(f.error or '')[:200]}. Return it changed so that this error "
                            "cannot happen") from None
        if why := scope.refusal("", src, edit.code):
            raise EditError(OTHER_FILE, why)
        if why := broken_interface(roots(src), src, edit.code):
            raise EditError("not_applied", why + ": keep the functions the task's evaluator calls as they are")
        if invented := invented_columns(reference, edit.code, columns):  # the loop's own code's names stay
            raise EditError("not_applied", column_refusal(invented, columns))
        if honesty and (problems := honesty_problems(reference, edit.code, target.metric)):
            raise EditError("dishonest", "the fix " + "; ".join(problems) + ": fix the error instead")
        return edit

    messages = prompts.fix(current, target.code_file, fmt, error, f.local_structure, title, mode=mode,
                           analysis=a.analysis, generic=target.metric is None, notes=f.error_notes,
                           rejected=rejected, unhelpful=unhelpful, repeated=repeated,
                           entry_points=target.entry_points)
    res, resamples = complete_resampled(llm, messages, stage="debug", parse=parse, max_tokens=max_tokens(fmt),
                                        max_retries=WHOLE_FILE_RETRIES, item=item, round=ask_round)
    a.fix_resamples += resamples
    if not res.ok:
        a.fix_status, a.fix_error = (OTHER_FILE if res.error_kind == OTHER_FILE else edit_status(res)), res.error
        return None
    a.fix_status, a.fix_diff = "ok", res.value.diff
    fixed, mended = mend(res.value.code, target.folder)  # the folder's own modules are not looked up
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


def _repeat_note(attempt: int, again: str, source: str, failed: Attempt, tried: list[tuple[str, Attempt]],
                 attempts: list[Attempt], code_file: str) -> str:
    """The re-ask's note after the answer `again` gave back the version `attempt` ran: the
    versions already run from `source` (the set-aside candidates, and the repeated version when
    it is none of them) as diffs against it, cut to REPEAT_DIFF_CHARS each and REPEAT_SHOWN_CHARS
    in all, the latest kept first."""
    versions = [(d, r.error or "") for d, r in tried]
    if attempt != failed.attempt and all(r.attempt != attempt for _, r in tried):
        versions.append((unified_diff(source, again, code_file), attempts[attempt - 1].error or ""))
    shown: list[tuple[str, str]] = []
    room = REPEAT_SHOWN_CHARS
    for d, e in reversed(versions):
        d = d if len(d) <= REPEAT_DIFF_CHARS else "...\n" + d[-REPEAT_DIFF_CHARS:]
        e = e[:300]
        if len(d) + len(e) > room:
            break
        shown.insert(0, (d, e))
        room -= len(d) + len(e)
    return prompts.repeated_versions(attempt, attempt == failed.attempt, shown)


def run_with_repair(spec: TopicSpec | RunTarget, code: str, *, runner, llm=None, workdir: Path, idea_id: str,
                    title: str = "", policy: RepairPolicy = RUN_ONCE, log: Callable[[str], None] = print,
                    env: dict[str, str] | None = None,
                    on_attempt: Callable[[Attempt], None] | None = None) -> RunResult:
    """Run `code`; on failure search for a fix within `policy`: candidate fixes, each checked by
    running it.

    The search, per failure: the LLM's fix first; then the interpreter's own suggestion
    ("Did you mean: 'x'?", applied at the failing line without the LLM, see
    assets/editing/suggestions.py) when the policy's `suggestions` is on (before the LLM's fix
    when it is sure or an early guess); then the LLM again
    (sampled, told which fixes were already run and what they did). A candidate that succeeds
    ends the search; one that gets further (a different error) becomes the failure to fix next;
    one that fails with the same error, or breaks the script (a new name/attribute/import error
    in a line it wrote), is set aside and the next candidate starts from the same code again. A
    failed result keeps the furthest code reached. An answer that cannot be used (does not
    apply, changes nothing, edits another file than the code file, fails the honesty check) is
    asked again while the budget lasts.

    A version already run in this search (the same program: comments and layout aside) is never
    run again. An LLM answer that gives one back is asked again once, with a prompt that shows
    the versions already run as diffs against the current code and asks for a different change
    (fix status REPEATED on the attempt being fixed); when that answer gives one back too, the
    search ends there, failed, without spending the rest of its budget: the model has nothing
    new for this failure, and the idea's next draft (assets/run_results/running.py) is the next
    thing to try. Each LLM ask counts against `policy.max_repairs`.

    With llm=None and suggestions on, the search uses the interpreter's suggestions alone;
    `env` adds variables to each run's environment; `on_attempt` is told of each attempt once
    its repair is settled."""
    target = as_target(spec)
    max_repairs, mode, honesty = policy.max_repairs, policy.mode, policy.honesty
    suggestions = isinstance(spec, TopicSpec) if policy.suggestions is None else policy.suggestions
    fmt = policy.repair_format or default_repair_format(llm, policy.edit_format)
    workdir.mkdir(parents=True, exist_ok=True)
    variant = (f"{max_repairs}" if max_repairs == 0
               else f"{max_repairs}-{mode}-{fmt}" + ("" if honesty else "-unchecked")
               + ("-suggest" if suggestions else "") + ("" if llm is not None else "-nollm"))
    memo_file = workdir / f"result-{code_hash(code, target)}-{variant}.json"
    # finished before (e.g. a resumed run): do not re-run the experiment; a memo cut short by a
    # kill is ignored (and the experiment run again) rather than failing every later attempt
    if policy.memo and (done := read_memo(memo_file, RunResult.model_validate_json,
                                          log=lambda m: log(f"{idea_id}: {m}"))):
        log(f"{idea_id}: reusing the finished experiment in {memo_file.name}")
        return done
    notify = on_attempt or (lambda a: None)
    attempts: list[Attempt] = []
    ran: dict[str, int] = {}  # every version run in this search (its program_hash) -> the attempt that ran it
    scope = EditScope(target.folder, target.code_file)

    def run(code_now: str, parent: Attempt | None = None, source: str = "", diff: str = "") -> Attempt:
        if attempts:
            notify(attempts[-1])  # its repair is settled: report it
        n = len(attempts) + 1
        a = run_once(target, code_now, runner, workdir, n, env=env)
        a.parent, a.fix_source, a.applied_diff = (parent.attempt if parent else None), source, diff
        attempts.append(a)
        ran.setdefault(program_hash(code_now), n)
        log(f"{idea_id}: attempt {n}: " + ("ok " + json.dumps(a.metrics) if a.error is None else a.error))
        return a

    latest = run(code)
    failure = (code, latest)  # the failure being repaired: its code and its run (the furthest reached)
    tried: list[tuple[str, Attempt]] = []  # candidates of this failure that were set aside: (diff, run)
    llm_asks, suggested = 0, False  # per failure: LLM fixes asked; the suggestion tried
    repeat: str | None = None  # the last LLM answer gave back this version already run: the next ask shows them
    hints: dict[int, object] = {}  # per failure (its attempt number): the suggestion, computed once
    asked = 0  # the budget: candidates asked for (an unusable LLM answer counts too)
    reason = latest.error
    while latest.error is not None and asked < max_repairs:
        source, failed = failure
        if suggestions and failed.attempt not in hints:
            hints[failed.attempt] = suggested_fix(source, failed, target.code_file, target.folder)
        hint = hints.get(failed.attempt)
        # a sure suggestion (the message or a library names the fix) before the LLM, and an early guess
        # (it only makes sizes agree); another guess after the LLM's first fix; alone without an LLM
        if suggestions and not suggested and (llm is None or llm_asks >= 1
                                              or (hint is not None and (hint.sure or hint.early))):
            suggested = True
            if hint is None or program_hash(hint.code) in ran:
                continue
            if honesty and (problems := honesty_problems(code, hint.code, target.metric)):
                log(f"{idea_id}: the interpreter's suggestion was not tried: {'; '.join(problems)}")
                continue
            asked += 1
            log(f"{idea_id}: repair {asked}: {hint.what}")
            candidate, how, diff = hint.code, "suggestion", hint.diff
        elif llm is not None:
            note = "" if repeat is None else _repeat_note(ran[program_hash(repeat)], repeat, source, failed, tried,
                                                          attempts, target.code_file)
            fixed = repair(latest, source, code, target=target, llm=llm, mode=mode, edit_format=fmt, title=title,
                           honesty=honesty, item=idea_id, failed=failed, rejected=_set_aside(tried, "broke"),
                           unhelpful=_set_aside(tried, "same_error"), ask_round=latest.fix_rounds,
                           repeated=note, scope=scope)
            asked += 1
            llm_asks += 1
            latest.fix_rounds += 1
            if fixed is None:  # no usable answer: the next candidate (asked again, sampled) while budget is left
                repeat = None
                log(f"{idea_id}: repair {asked} failed: {latest.fix_error}")
                reason = f"{failed.error}; the repair failed: {latest.fix_error}"
                continue
            if (n := ran.get(program_hash(fixed))) is not None:
                latest.fix_status = REPEATED
                if repeat is not None:  # asked for a different change, it repeated again: nothing new to run
                    latest.fix_error = (f"asked for a different change, the answer gave back attempt {n}'s version "
                                        "again: the search stopped")
                    reason = (f"{failed.error}; the repairs gave back versions already run (attempts "
                              f"{ran[program_hash(repeat)]} and {n}) even when asked for a different change")
                    log(f"{idea_id}: repair {asked} gave back attempt {n}'s version again: the search stops")
                    break
                latest.fix_error = (f"the answer gave back attempt {n}'s version, already run: asked again for a "
                                    "different change, shown the versions already run")
                reason = f"{failed.error}; the repair proposed a version already run (attempt {n})"
                log(f"{idea_id}: repair {asked} proposed a version already run (attempt {n}): asked for another")
                repeat = fixed
                continue
            repeat = None
            log(f"{idea_id}: repair {asked} applied ({latest.fix_diff.count(chr(10))} diff lines)")
            candidate, how, diff = fixed, "llm", latest.fix_diff
        else:
            break  # no candidate source left for this failure
        latest = run(candidate, failed, how, diff)
        latest.outcome = _outcome(failed, latest, source, candidate, target.code_file)
        reason = latest.error
        if latest.outcome in ("success", "progress"):  # it got further: its failure is the one to fix now
            failure, tried, llm_asks, suggested, repeat = (candidate, latest), [], 0, False, None
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
    if policy.memo:
        atomic_write_text(memo_file, result.model_dump_json())
    return result


