"""Running a topic's experiment and repairing it from its traceback (DOLPHIN 3.2).

Each attempt runs in a fresh copy of the topic folder (the sandboxed `runner`), with the
edited file written in. A failed attempt's traceback is reduced to the frames in the
experiment's own code and their local code structure, and the LLM proposes a fix in the
configured edit format. Finished experiments are remembered on disk by the hash of the code
they ran, so a killed and re-run round does not repeat them."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Callable

from assets.patching import WHOLE_FILE_RETRIES, apply_edit, status_of
from assets.prompts import patching as prompts
from assets.tracebacks import error_line, last_traceback, local_structure, own_frames
from assets.verdicts import parse_metrics
from resources.paths import under_home
from resources.runner import prepare_workspace
from schemas.records import Attempt, RunResult
from schemas.topic import TopicSpec

OUT_DIR = "out"


def _tail_file(path: str, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def code_hash(code: str, spec: TopicSpec) -> str:
    return hashlib.sha256(f"{spec.run}\n{spec.budget.run_timeout_s}\n{code}".encode()).hexdigest()[:16]


def run_once(spec: TopicSpec, code: str, runner, workdir: Path, attempt: int) -> Attempt:
    ws = workdir / f"attempt-{attempt}"
    if ws.exists():
        shutil.rmtree(ws)
    prepare_workspace(spec.path, ws)
    (ws / spec.code).write_text(code)
    cmd = spec.run_command(OUT_DIR)
    res = runner.run(cmd, ws, timeout_s=spec.budget.run_timeout_s, memory_mb=spec.budget.memory_mb)
    stderr = _tail_file(res.stderr_path) or res.stderr_tail
    metrics: dict[str, float] = {}
    error = None
    if res.timed_out:
        error = f"timed out after {spec.budget.run_timeout_s:g} s ({res.killed_reason or 'killed'})"
    elif res.exit_code != 0:
        error = error_line(stderr) or f"exit code {res.exit_code}"
        if res.killed_reason:
            error = f"{error} ({res.killed_reason})"
    else:
        f = ws / OUT_DIR / "final_info.json"
        if not f.exists():
            error = "the script exited 0 but wrote no final_info.json"
        else:
            try:
                metrics, error = parse_metrics(json.loads(f.read_text()), spec.metric.name)
            except json.JSONDecodeError as e:
                error = f"final_info.json is not valid JSON: {e}"
    frames = own_frames(stderr, ws) if error else []
    return Attempt(attempt=attempt, command=cmd, exit_code=res.exit_code, timed_out=res.timed_out,
                   duration_s=round(res.duration_s, 2), stdout_tail=res.stdout_tail[-2000:],
                   stderr_tail=stderr[-3000:], error=error, frames=frames,
                   local_structure=local_structure(frames, ws) if frames else "", metrics=metrics)


def run_with_repair(spec: TopicSpec, code: str, *, runner, llm, workdir: Path, idea_id: str, title: str,
                    max_repairs: int, edit_format: str, with_structure: bool = True,
                    log: Callable[[str], None] = print) -> RunResult:
    """Run `code`; on failure ask the LLM for a fix and try again, up to max_repairs fixes."""
    workdir.mkdir(parents=True, exist_ok=True)
    memo = workdir / f"result-{code_hash(code, spec)}-{max_repairs}.json"
    if memo.exists():  # finished before (e.g. a resumed run): do not re-run the experiment
        log(f"{idea_id}: reusing the finished experiment in {memo.name}")
        return RunResult.model_validate_json(memo.read_text())
    attempts: list[Attempt] = []
    current = code
    reason = None
    for n in range(1, max_repairs + 2):
        a = run_once(spec, current, runner, workdir, n)
        attempts.append(a)
        log(f"{idea_id}: attempt {n}: " + ("ok " + json.dumps(a.metrics) if a.error is None else a.error))
        if a.error is None:
            result = RunResult(idea_id=idea_id, status="success", attempts=attempts, n_attempts=n,
                               metrics=a.metrics, metric_value=a.metrics[spec.metric.name], final_code=current)
            break
        reason = a.error
        if n > max_repairs:
            break
        tb = last_traceback(a.stderr_tail)
        error_text = (tb[-2500:] if tb else a.stderr_tail[-1500:]) or a.error
        if a.timed_out:
            error_text = a.error + "\nMake the script finish faster."
        res = llm.complete(
            prompts.fix(current, spec.code, edit_format, error_text, a.local_structure, title, with_structure),
            stage="debug", parse=lambda t, src=current: apply_edit(src, t, edit_format, spec.code),
            max_tokens=2500 if edit_format == "whole" else 900, max_retries=WHOLE_FILE_RETRIES)
        if not res.ok:
            a.fix_status = status_of(res.error)
            reason = f"{a.error}; the repair failed: {res.error}"
            log(f"{idea_id}: repair {n} failed: {res.error}")
            break
        a.fix_status, a.fix_diff = "ok", res.value.diff
        current = res.value.code
    if attempts[-1].error is not None:
        result = RunResult(idea_id=idea_id, status="failed", reason=reason, attempts=attempts,
                           n_attempts=len(attempts), final_code=current)
    memo.write_text(result.model_dump_json())
    return result


def run_reference(spec: TopicSpec, runner, tracker, log: Callable[[str], None] = print) -> RunResult:
    """The baseline: the unmodified reference code, no repairs."""
    code = spec.code_path.read_text()
    workdir = under_home("workspaces", spec.name, "baseline")
    result = run_with_repair(spec, code, runner=runner, llm=None, workdir=workdir, idea_id=f"{spec.name}/baseline",
                             title="baseline", max_repairs=0, edit_format="whole", log=log)
    if result.mlflow_run_id is None and tracker is not None:
        a = result.attempts[-1]
        result.mlflow_run_id = tracker.log_run(
            spec.name, f"{spec.name} baseline", {"researchloop.kind": "baseline", "researchloop.code": code_hash(code, spec)},
            params={"topic": spec.name, "command": " ".join(a.command)}, metrics=result.metrics,
            texts={"stdout_tail.txt": a.stdout_tail, "stderr_tail.txt": a.stderr_tail, "experiment.py": code},
            failed=result.status != "success")
    return result
