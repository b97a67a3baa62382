"""Fake runners and a topic for the execution and seed fan-out tests."""
from __future__ import annotations

import threading
from pathlib import Path

import yaml

from resources.sandbox import ProcessResult
from schemas.topic import load_topic

SCRIPT = "print('the fake runner never runs me')\n"


def topic(root: Path, execution: dict | None = None, extra: dict | None = None, **budget):
    d = root / "seedy"
    d.mkdir(parents=True)
    spec = {**BASE, **(extra or {}), "budget": {**BASE["budget"], **budget}}
    if execution is not None:
        spec["execution"] = execution
    (d / "topic.yaml").write_text(yaml.safe_dump(spec))
    (d / "exp.py").write_text(SCRIPT)
    return load_topic(d)


class FakeRunner:
    """Runner.run's stand-in: records each call (seed, keyword arguments, how many ran at once)
    and 'runs' the script by writing final_info.json with accuracy 0.80 + 0.01 * seed. Seeds in
    `fail` exit 1; seeds in `boom` raise; with `barrier`, seeds > 0 wait there for each other
    (only calls that are in flight together get through)."""

    def __init__(self, barrier: threading.Barrier | None = None, fail=(), boom=()):
        self.barrier, self.fail, self.boom = barrier, set(fail), set(boom)
        self.calls: list[dict] = []
        self.active = self.max_active = 0
        self.lock = threading.Lock()

    def run(self, command, workdir, timeout_s, env=None, memory_mb=None, hide=(), **kw):
        seed = int(command[command.index("--seed") + 1]) if "--seed" in command else 0
        with self.lock:
            self.calls.append({"seed": seed, "memory_mb": memory_mb, **kw})
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.barrier is not None and seed > 0:
                self.barrier.wait()
            if seed in self.boom:
                raise RuntimeError(f"no sandbox for seed {seed}")
            ws = Path(workdir)
            logs = ws.parent / "logs"
            logs.mkdir(exist_ok=True)
            out, err = logs / f"{ws.name}.out", logs / f"{ws.name}.err"
            code = 1 if seed in self.fail else 0
            out.write_text("")
            err.write_text("" if code == 0 else f"ValueError: seed {seed} diverged\n")
            if code == 0:
                (ws / "out").mkdir(exist_ok=True)
                (ws / "out" / "final_info.json").write_text(f'{{"accuracy": {0.80 + 0.01 * seed}}}')
            return ProcessResult(command=list(command), workdir=str(ws), exit_code=code, timed_out=False,
                                 killed_reason=None, duration_s=0.1, stdout_path=str(out), stderr_path=str(err),
                                 stdout_tail="", stderr_tail=err.read_text(), sandboxed=True)
        finally:
            with self.lock:
                self.active -= 1

    def seeds(self) -> list[int]:
        return [c["seed"] for c in self.calls]


BASE = {"name": "seedy", "title": "T", "description": "d", "code": "exp.py",
        "run": "python exp.py --seed {seed} --out_dir {out_dir}",
        "metric": {"name": "accuracy", "goal": "maximize", "tolerance": 0.001},
        "budget": {"seeds": 3, "run_timeout_s": 60, "memory_mb": 1024}}
