"""Loading the implementation tasks and running code for them in the project's sandbox
(resources/runner.py, as the loop's experiments run): the code and harness.py are copied into a
fresh workspace and run there; the host only reads the result file back (resources/safe_io).
Nothing a candidate wrote is imported into this process."""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.implementation.metrics import TaskScore, score_task
from resources.runner import Runner
from resources.safe_io import UnsafeFile, safe_read_text
from resources.sandbox import ProcessResult

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks.yaml"
TRUTH = HERE / "truth"
HARNESS = HERE / "harness.py"
RESULT_MAX_BYTES = 8 << 20


@dataclass
class Task:
    spec: dict

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def kind(self) -> str:
        return self.spec["kind"]

    def truth_code(self) -> str:
        return (TRUTH / f"{self.name}.py").read_text()


def load_tasks(path: Path = TASKS) -> list[Task]:
    specs = yaml.safe_load(path.read_text())
    names = [s["name"] for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate task names in {path}")
    return [Task(s) for s in specs]


@dataclass
class RunOutcome:
    results: dict              # job id -> the harness's result ({"error", "sets"}); a job missing: never reported
    process: ProcessResult


def run_jobs(jobs: Sequence[tuple[str, Task, str]], runner: Runner | None = None, timeout_s: float = 120,
             memory_mb: int = 2048, workdir: Path | None = None) -> RunOutcome:
    """Run (job id, task, code) jobs in one sandboxed process (torch is imported once); each job's
    code is its own module file, a job that raises is recorded as failed and the next one runs."""
    runner = runner or Runner()
    own = workdir is None
    root = Path(tempfile.mkdtemp(prefix="impl-bench-")) if own else Path(workdir)
    ws = root / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copy(HARNESS, ws / "harness.py")
        listing = []
        for n, (job_id, task, code) in enumerate(jobs):
            fname = f"impl_{n}.py"
            (ws / fname).write_text(code)
            listing.append({"id": job_id, "code": fname, "task": task.spec})
        (ws / "jobs.json").write_text(json.dumps(listing))
        proc = runner.run(["python", "harness.py", "jobs.json", "results.json"], ws, timeout_s=timeout_s,
                          memory_mb=memory_mb, env={"OMP_NUM_THREADS": "1"})
        try:
            results = json.loads(safe_read_text(ws / "results.json", root=ws, max_bytes=RESULT_MAX_BYTES))
            if not isinstance(results, dict):
                results = {}
        except (OSError, UnsafeFile, ValueError):
            results = {}
        return RunOutcome(results=results, process=proc)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def ground_truth(tasks: Sequence[Task], runner: Runner | None = None) -> dict[str, dict]:
    """The ground truth's results per task name (trusted code: one sandboxed run for all)."""
    out = run_jobs([(t.name, t, t.truth_code()) for t in tasks], runner, timeout_s=60 + 20 * len(tasks))
    missing = [t.name for t in tasks if t.name not in out.results or out.results[t.name].get("error")]
    if missing:
        raise RuntimeError(f"ground truth failed for {missing}: "
                           f"{[out.results.get(m, {}).get('error') for m in missing]} {out.process.stderr_tail[-500:]}")
    return out.results


def evaluate(task: Task, code: str, truth: dict, runner: Runner | None = None, timeout_s: float = 60) -> TaskScore:
    """One candidate implementation, alone in its own sandboxed run (a candidate that hangs or
    kills its process affects only itself)."""
    out = run_jobs([("candidate", task, code)], runner, timeout_s=timeout_s)
    got = out.results.get("candidate")
    score = score_task(task.spec, truth, got)
    if got is None and out.process.killed_reason:
        score.error = f"killed: {out.process.killed_reason}"
    return score


def evaluate_batch(items: Sequence[tuple[Task, str]], truth: dict[str, dict],
                   runner: Runner | None = None) -> list[TaskScore]:
    """Several candidates in one sandboxed run (for trusted or test code: a candidate that ends
    the process ends the batch; the ones after it score as not executed)."""
    out = run_jobs([(f"job{n}", t, c) for n, (t, c) in enumerate(items)], runner,
                   timeout_s=60 + 20 * len(items))
    return [score_task(t.spec, truth[t.name], out.results.get(f"job{n}")) for n, (t, _) in enumerate(items)]
