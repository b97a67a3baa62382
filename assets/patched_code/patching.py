"""Implementing an idea: ask for an edit, apply it, dry-run the result."""
import hashlib
import json

from assets.patched_code import prompts as patch_prompts
from assets.patched_code.edit_formats import (
    WHOLE_FILE_RETRIES,
    EditError,
    apply_edit,
    edit_status,
    max_tokens,
)
from assets.patched_code.resampling import complete_resampled
from assets.run_results.experimenting import OUT_DIR, remove_hidden
from assets.run_results.honesty import honesty_problems
from resources.llm import LLM
from resources.paths import under_home
from resources.runner import prepare_workspace
from resources.safe_io import atomic_write_text, read_memo
from schemas.records import ExperimentPlan, FilteredIdea, Patch
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


def make_patch(spec: TopicSpec, code: str, idea: FilteredIdea, plan: ExperimentPlan, llm: LLM, runner) -> Patch:
    fmt = llm.resolved_edit_format()
    # an unchanged or uncompilable file is asked for again, sampled, before the idea counts as
    # not implemented (the 1.5B model returned the file unchanged for most ideas: bench/RESULTS.md "loop")
    res, resamples = complete_resampled(
        llm, patch_prompts.implement(code, spec.code, fmt, idea.title, idea.summary, plan.changes),
        resample_on=("no_op", "syntax_error", "dishonest"), stage="patched_code",
        parse=lambda t: honest_edit(code, apply_edit(code, t, fmt, spec.code), spec.metric.name),
        max_tokens=max_tokens(fmt),
        max_retries=WHOLE_FILE_RETRIES, item=idea.idea_id)
    if not res.ok:
        return Patch(idea_id=idea.idea_id, edit_format=fmt, status=edit_status(res), reason=res.error,
                     resamples=resamples)
    patch = Patch(idea_id=idea.idea_id, edit_format=fmt, status="ok", diff=res.value.diff, code=res.value.code,
                  compiles=True, resamples=resamples)
    if spec.check:  # quick dry run in the sandbox: does it import and start?
        ws = under_home("workspaces", spec.name, idea.round, idea.name, "check")
        memo = ws.parent / f"check-{hashlib.sha256((spec.check + patch.code).encode()).hexdigest()[:16]}.json"
        # checked before (a resumed round): not again; a memo cut short by a kill is checked again
        checked = read_memo(memo, _check_memo)
        if checked is None:
            prepare_workspace(spec.path, ws)
            remove_hidden(ws, tuple(spec.hidden))  # a scored topic's labels: never in a run's sight
            (ws / spec.code).write_text(patch.code)
            r = runner.run(spec.run_command(OUT_DIR, "check"), ws, timeout_s=min(120.0, spec.budget.run_timeout_s),
                           memory_mb=spec.budget.memory_mb, **({"hide": [spec.path]} if spec.hidden else {}))
            checked = {"ok": r.exit_code == 0 and not r.timed_out,
                       "last_line": (r.stderr_tail.strip().splitlines() or ["(no output)"])[-1][:300]}
            atomic_write_text(memo, json.dumps(checked))
        patch.imports_ok = checked["ok"]
        if not patch.imports_ok:
            patch.reason = "self-check failed: " + checked["last_line"]
    return patch
