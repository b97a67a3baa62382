"""One attempt of an experiment (DOLPHIN 3.2): `run_once` runs `command` in a fresh sandboxed
copy of the target's folder (the `runner`) with the code file written in, checks that only
the code file differs from the folder's files, and reads the metric (the run's final_info.json,
or the scorer's verdict from a fresh sandbox, `run_scorer`). The same attempt serves a topic's
ideas (`RunTarget.of_topic`: success = the metric in final_info.json) and any script
(`researchloop debug`: success = exit code 0). `code_hash` names a version of the code for the
memos of finished runs.

The repair search around attempts is assets/run_results/repair_search.py; an experiment's
seeds are assets/run_results/seeds.py."""

from __future__ import annotations

import hashlib
import json
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from assets.editing.error_notes import error_notes
from assets.editing.tracebacks import crash_values, error_line, local_structure, own_frames
from assets.editing.workspace import OUT_DIR, PRED_DIR, remove_hidden
from assets.shared.verdicts import in_bounds, parse_metrics
from resources.bounded_json import BadJSON, loads_bounded
from resources.runner import execution_kwargs
from resources.safe_io import read_tail, safe_read_text
from resources.sandbox import prepare_workspace, prune_attempts, workspace_bounds
from resources.workspace_walk import WorkspaceLimitError, copy_tree, hash_files, remove_tree, walk
from schemas.records import Attempt
from schemas.topic import ExecutionSpec, TopicSpec


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
    entry_points: tuple[str, ...] = ()  # the functions the task's evaluator calls (kept by every edit)

    @classmethod
    def of_topic(cls, spec: TopicSpec, which: str = "run", seed: int = 0) -> RunTarget:
        """The topic's `run` command (with `seed`), or its quick `check` (dry run) with which="check"."""
        label = getattr(spec, which) + (f" seed={seed}" if seed else "")
        return cls(folder=spec.path, code_file=spec.code, command=tuple(spec.run_command(OUT_DIR, which, seed=seed)),
                   timeout_s=spec.budget.run_timeout_s, memory_mb=spec.budget.memory_mb, metric=spec.metric.name,
                   label=label, bounds=spec.metric.bounds,
                   score=tuple(spec.run_command(OUT_DIR, "score", seed=seed, pred_dir=PRED_DIR)) if spec.score else (),
                   hidden=tuple(spec.hidden), execution=spec.execution, entry_points=tuple(spec.entry_points))


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
                   error_notes=error_notes(error, frames, ws, crash_values(stderr)) if frames else "",
                   metrics=metrics)
