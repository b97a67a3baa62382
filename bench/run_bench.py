"""`make bench`: the loop's speed on this machine, written into bench/RESULTS.md.

1. the shipped topic's baseline run, sandboxed, timed (3 runs);
2. a whole loop (`researchloop run`, default 2 rounds) on the local model in a fresh
   DAGSTER_HOME (the LLM cache starts empty), with per-stage wall time and tokens.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import machine, today, write_section  # noqa: E402


def bench_baseline(topic: str, runs: int = 3) -> list[float]:
    from resources.paths import resolve_topic_dir
    from resources.runner import Runner, prepare_workspace
    from schemas.topic import load_topic

    spec = load_topic(resolve_topic_dir(topic))
    times = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            ws = prepare_workspace(spec.path, Path(d) / f"ws{i}")
            t0 = time.monotonic()
            r = Runner().run(spec.run_command("out"), ws, timeout_s=spec.budget.run_timeout_s)
            times.append(time.monotonic() - t0)
            info = json.loads((ws / "out" / "final_info.json").read_text()) if r.exit_code == 0 else {}
            print(f"baseline run {i + 1}: {times[-1]:.1f}s exit {r.exit_code} {info}")
    return times


def bench_loop(topic: str, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "dagster.yaml").write_text((ROOT / "dagster_home" / "dagster.yaml").read_text())
        out = Path(home) / "timings.json"
        env = {**os.environ, "DAGSTER_HOME": home}
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "pipelines.cli", "run", "--topic", topic, "--rounds", str(rounds),
                        "--timings", str(out)], cwd=ROOT, env=env, check=False)
        data = json.loads(out.read_text())
        data["wall_s"] = round(time.monotonic() - t0, 1)
        return data


def stage_table(data: dict) -> str:
    lines = ["| partition | asset | wall s | LLM calls | prompt tokens | completion tokens |",
             "|---|---|---|---|---|---|"]
    for s in data["stages"]:
        lines.append(f"| {s['partition'].replace('|', chr(92) + '|')} | {s['asset']} | {s['seconds']:.1f} | {s.get('llm_calls', '')} | "
                     f"{s.get('prompt_tokens', '')} | {s.get('completion_tokens', '')} |")
    return "\n".join(lines)


def main() -> None:
    topic = os.environ.get("TOPIC", "pointcloud_classification")
    rounds = int(os.environ.get("ROUNDS", "2"))
    base = bench_baseline(topic)
    loop = bench_loop(topic, rounds)
    body = "\n".join([
        f"## Latest `make bench` ({today()}, {machine()})",
        "",
        f"- baseline run of `{topic}` (sandboxed): median {statistics.median(base):.1f}s over {len(base)} runs",
        f"- `researchloop run --topic {topic} --rounds {rounds}` with `{loop['model']}`, empty LLM cache: "
        f"{loop['wall_s']:.0f}s wall",
        "",
        stage_table(loop),
    ])
    print(write_section("auto", body))


if __name__ == "__main__":
    main()
