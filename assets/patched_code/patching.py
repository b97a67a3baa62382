"""Implementing an idea: ask for several drafts of the edit, check each cheaply (applies,
compiles, changes what runs, honest, dry run), record them all (assets/editing/drafts.py)."""
import hashlib
import json
from types import SimpleNamespace

from assets.editing.columns import column_refusal, data_columns, invented_columns
from assets.editing.drafts import (
    DraftStyle,
    cheap_order,
    draft_style,
    failed_status,
    mark_duplicate,
    program_hash,
    viable,
)
from assets.editing.edit_formats import (
    WHOLE_FILE_RETRIES,
    EditError,
    apply_edit,
    edit_status,
    max_tokens,
    unified_diff,
)
from assets.editing.entry_points import broken_interface, live_roots, topic_roots
from assets.editing.honesty import honesty_problems
from assets.editing.resampling import complete_resampled
from assets.editing.suggestions import mend
from assets.editing.workspace import OUT_DIR, remove_hidden
from assets.ideas.tuning import apply_move
from assets.patched_code import prompts as patch_prompts
from assets.patched_code.dead_code import dead_code_only
from assets.shared.data_profile import topic_data
from resources.llm import LLM
from resources.paths import under_home
from resources.runner import execution_kwargs
from resources.safe_io import atomic_write_text, read_memo
from resources.sandbox import prepare_workspace
from schemas.records import Draft, ExperimentPlan, FilteredIdea, Patch
from schemas.topic import TopicSpec


def honest_edit(code: str, edit, metric: str):
    """The edit, unless it drops what makes the result trustworthy (training, evaluation, the
    metrics file) or hard-codes the metric: the honesty check of repairs, for ideas too."""
    if problems := honesty_problems(code, edit.code, metric):
        raise EditError("dishonest", "the patch " + "; ".join(problems) + ": implement the idea and keep "
                        "the training, the evaluation and the metrics file")
    return edit


def _check_memo(text: str) -> dict:
    d = json.loads(text)
    return {"ok": bool(d["ok"]), "last_line": str(d["last_line"])}


def patch_format(llm) -> str:
    """The edit format of idea patches: with edit_format "auto" the local model writes only the
    changed definitions ("functions"; the plan names them), the format it handles best (whole-file
    rewrites came back unchanged for most ideas: bench/RESULTS.md "loop"); otherwise the
    resource's choice. A whole file is then the fallback when no draft is usable."""
    if getattr(llm, "edit_format", None) == "auto" and llm.is_local():
        return "functions"
    return llm.resolved_edit_format()


def check_edit(code: str, edit, spec: TopicSpec):
    """The edit, unless it is dishonest (`honest_edit`), breaks an entry point the task's evaluator
    calls (assets/editing/entry_points.py: "not_applied", no run is spent on it), reads a column the
    data does not have (assets/editing/columns.py: "not_applied", told the real ones) or only adds code
    that never runs in the topic's run (assets/patched_code/dead_code.py): that is not an
    implementation ("no_op")."""
    honest_edit(code, edit, spec.metric.name)
    declared, imported = topic_roots(spec.path, spec.code, code, spec.entry_points)
    if reason := broken_interface([*declared, *imported], code, edit.code):
        raise EditError("not_applied", reason)
    columns = data_columns(spec.path, [*spec.hidden, spec.code])
    if invented := invented_columns(code, edit.code, columns):
        raise EditError("not_applied", column_refusal(invented, columns))
    command = spec.run_command(OUT_DIR)
    if reason := dead_code_only(code, edit.code, command, live_roots(declared, imported, spec.code, command)):
        raise EditError("no_op", reason + ": call the new code where the training or evaluation runs")
    return edit


def _ask_draft(k: int, fmt: str, spec: TopicSpec, code: str, idea: FilteredIdea, plan: ExperimentPlan,
               llm: LLM, style: DraftStyle, note: str = "", data: str = "") -> Draft:
    messages = patch_prompts.implement(code, spec.code, fmt, idea.title, idea.summary, plan.changes,
                                       functions=plan.functions if fmt == "functions" else (),
                                       extra=style.instruction, data=data, method_card=idea.method_card,
                                       entry_points=spec.entry_points)
    parse = lambda t: check_edit(code, apply_edit(code, t, fmt, spec.code), spec)  # noqa: E731
    kw = dict(stage="patched_code", parse=parse, max_tokens=max_tokens(fmt), item=idea.idea_id)
    if style.temperature is None:  # the greedy draft, asked again (sampled) when it is unusable
        res, resamples = complete_resampled(llm, messages, resample_on=("no_op", "syntax_error", "dishonest"),
                                            max_retries=WHOLE_FILE_RETRIES, **kw)
    else:  # one sampled answer: the search's breadth comes from the drafts, not from re-asks
        res, resamples = llm.complete(messages, temperature=style.temperature, seed=style.seed, max_retries=0,
                                      **kw), 0
    how = style.how + note
    if not res.ok:
        return Draft(index=k, edit_format=fmt, status=edit_status(res), reason=res.error, how=how,
                     resamples=resamples)
    patched, mended = mend(res.value.code, spec.path)  # the topic's own modules are not looked up
    diff = unified_diff(code, patched, spec.code) if mended else res.value.diff
    if mended:  # misplaced statements and left-out imports: mended before any run is spent on them
        how += "; mended: " + "; ".join(mended)
    return Draft(index=k, edit_format=fmt, status="ok", how=how, diff=diff, code=patched,
                 code_sha256=program_hash(patched), resamples=resamples)


def mechanical_draft(spec: TopicSpec, code: str, idea: FilteredIdea, fmt: str) -> Draft:
    """The one draft of an idea written without the LLM, checked like any draft: a tuning move
    (assets/ideas/tuning/ `apply_move`) or an earlier win merged in (`Idea.carry`, assets/ideas/merge.py).
    It records `fmt`, the format its LLM repairs will be asked in (neither has a format of its own)."""
    if idea.carry is not None:
        how = f"carried over: {idea.carry.win_id} merged in by lines (no LLM)"
    else:
        how = "tuning move: " + "; ".join(f"{m.where} {m.old_text} -> {m.new_text}"
                                          for m in (idea.tuning, idea.tuning.paired) if m) + " (no LLM)"
    try:
        patched = idea.carry.code if idea.carry is not None else apply_move(code, idea.tuning)
        check_edit(code, SimpleNamespace(code=patched), spec)
    except EditError as e:  # dead code (a knob nothing reads) or dishonest: not an implementation
        return Draft(index=0, edit_format=fmt, status=e.status, reason=str(e), how=how)
    except ValueError as e:  # the knob is no longer in the code at its old value
        return Draft(index=0, edit_format=fmt, status="not_applied", reason=str(e), how=how)
    return Draft(index=0, edit_format=fmt, status="ok", how=how, diff=unified_diff(code, patched, spec.code),
                 code=patched, code_sha256=program_hash(patched))


def make_patch(spec: TopicSpec, code: str, idea: FilteredIdea, plan: ExperimentPlan, llm: LLM, runner) -> Patch:
    """Ask `spec.budget.drafts` drafts (assets/editing/drafts.py), check each cheaply and
    record them all; the Patch carries the first viable draft in cheap order (its code, diff and
    status) and every draft, which run_results ranks with runs."""
    fmt = patch_format(llm)
    drafts: list[Draft] = []
    mechanical = idea.tuning is not None or idea.carry is not None
    data = "" if mechanical else topic_data(spec)  # the topic folder's data files, shown as they are
    if mechanical:  # a hyper-parameter move or a carried-over win: one draft, written without the LLM
        drafts.append(mechanical_draft(spec, code, idea, fmt))
    else:
        for k in range(spec.budget.drafts):
            drafts.append(mark_duplicate(_ask_draft(k, fmt, spec, code, idea, plan, llm, draft_style(k),
                                                    data=data), drafts))
    if not viable(drafts) and not mechanical and fmt == "functions" and llm.resolved_edit_format() == "whole":
        # the local model's changed-definitions answers were all unusable: a whole file as the fallback
        drafts.append(mark_duplicate(_ask_draft(len(drafts), "whole", spec, code, idea, plan, llm, draft_style(0),
                                                note=", whole file (fallback)", data=data), drafts))
    resamples = sum(d.resamples for d in drafts)
    if spec.check:
        for d in viable(drafts):
            d.imports_ok, last_line = self_check(spec, idea, d.code, runner)
            if not d.imports_ok:
                d.reason = "self-check failed: " + last_line
    return patch_from_drafts(idea.idea_id, fmt, drafts, resamples)


def patch_from_drafts(idea_id: str, fmt: str, drafts: list[Draft], resamples: int = 0) -> Patch:
    """The Patch of an idea's checked drafts: the first viable one in cheap order (its code, diff
    and status) with all of them, or the most telling failure when none is viable."""
    order = cheap_order(drafts)
    if not order:
        status, reason = failed_status(drafts)
        return Patch(idea_id=idea_id, edit_format=fmt, status=status, reason=reason, resamples=resamples,
                     drafts=drafts)
    first = order[0]
    return Patch(idea_id=idea_id, edit_format=first.edit_format, status="ok", diff=first.diff, code=first.code,
                 compiles=True, imports_ok=first.imports_ok, reason=first.reason, resamples=resamples, drafts=drafts)


def without_repeated_programs(patches: list[Patch]) -> list[Patch]:
    """The round's patches with every viable draft that is the same program as a viable draft of
    an idea before it marked a duplicate: its run would be that idea's run, counted twice as
    evidence (e.g. the LLM's 'larger embeddings' written exactly as the round's tuning move). An
    idea left with no viable draft is a no-op, so not implemented; the others keep their other
    drafts."""
    seen: dict[str, str] = {}
    out = []
    for p in patches:
        if p.status != "ok" or not p.drafts:
            out.append(p)
            continue
        drafts = [d.model_copy(update={"status": "duplicate", "reason": f"the same program as {seen[d.code_sha256]}"})
                  if d.status == "ok" and d.code_sha256 in seen else d for d in p.drafts]
        for d in viable(drafts):
            seen.setdefault(d.code_sha256, f"{p.idea_id} draft {d.index}")
        out.append(p if drafts == p.drafts else patch_from_drafts(p.idea_id, p.edit_format, drafts, p.resamples))
    return out


def self_check(spec: TopicSpec, idea: FilteredIdea, patched: str, runner) -> tuple[bool, str]:
    """The topic's quick dry run of a patched file in the sandbox: (passed, its last stderr line).
    Memoised by command and code: checked before (a resumed round), not again; a memo cut short
    by a kill is checked again."""
    ws = under_home("workspaces", spec.name, idea.round, idea.name, "check")
    memo = ws.parent / f"check-{hashlib.sha256((spec.check + patched).encode()).hexdigest()[:16]}.json"
    checked = read_memo(memo, _check_memo)
    if checked is None:
        prepare_workspace(spec.path, ws)
        remove_hidden(ws, tuple(spec.hidden))  # a scored topic's labels: never in a run's sight
        (ws / spec.code).write_text(patched)
        r = runner.run(spec.run_command(OUT_DIR, "check"), ws, timeout_s=min(120.0, spec.budget.run_timeout_s),
                       memory_mb=spec.budget.memory_mb, **({"hide": [spec.path]} if spec.hidden else {}),
                       **execution_kwargs(spec.execution))
        checked = {"ok": r.exit_code == 0 and not r.timed_out,
                   "last_line": (r.stderr_tail.strip().splitlines() or ["(no output)"])[-1][:300]}
        atomic_write_text(memo, json.dumps(checked))
    return checked["ok"], checked["last_line"]
