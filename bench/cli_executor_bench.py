"""`researchloop run` with in-process steps (--parallel 1) vs Dagster's multiprocess executor
(--parallel 2, step processes forked from a preloaded forkserver): one round of the toy test topic
with the scripted fake LLM (tests/fake_llm.py), each in a fresh DAGSTER_HOME, so the figures are
the loop driver's own cost (process start, imports, resource set-up), not the model's.

  .venv/bin/python -m bench.cli_executor_bench      # writes bench/records/cli_executor.json
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, machine, today, write_record

TOPIC = "toy_classification"


def run_once(parallel: int, base_url: str) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"rl-cli-p{parallel}-"))
    (home / "dagster_home").mkdir()
    shutil.copytree(ROOT / "tests" / "fixtures" / TOPIC, home / "experiments" / TOPIC)
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster_home"),
           "RESEARCHLOOP_EXPERIMENTS": str(home / "experiments"), "OPENAI_BASE_URL": base_url,
           "OPENAI_API_KEY": "sk-test", "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole",
           "HF_HUB_OFFLINE": "1"}
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--topic", TOPIC, "--rounds", "1",
                        "--parallel", str(parallel), "--timings", str(home / "t.json")],
                       cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"--parallel {parallel} failed:\n{p.stdout[-3000:]}")
    timings = json.loads((home / "t.json").read_text())
    shutil.rmtree(home, ignore_errors=True)
    return {"parallel": parallel, "wall_s": round(wall, 1), "round_s": timings["rounds"][0]["seconds"],
            "load_avg_1min_before": round(load_before, 2), "load_avg_1min_after": round(os.getloadavg()[0], 2),
            "stages": {s["asset"]: s["seconds"] for s in timings["stages"] if s["partition"] != TOPIC}}


def main() -> None:
    from tests.fake_llm import FakeLLMServer

    with FakeLLMServer() as server:
        rows = [run_once(parallel, server.base_url) for parallel in (1, 2)]
    for r in rows:
        print(f"--parallel {r['parallel']}: round {r['round_s']}s, whole CLI {r['wall_s']}s "
              f"(load {r['load_avg_1min_before']} -> {r['load_avg_1min_after']})")
    path = write_record("cli_executor", {"script": "bench/cli_executor_bench.py", "date": today(), "machine": machine(),
                                         "topic": TOPIC, "llm": "tests/fake_llm.py", "runs": rows})
    print(path)


if __name__ == "__main__":
    main()
