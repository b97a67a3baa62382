"""`make bench`: the loop's speed on this machine, written into bench/RESULTS.md.

1. the shipped topic's baseline run, sandboxed, timed (3 runs);
2. a whole loop (`researchloop run`, default 2 rounds) on the local model in a fresh
   DAGSTER_HOME (the LLM cache starts empty), with per-stage wall time and tokens.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "RESULTS.md"
BEGIN, END = "<!-- bench:auto:begin -->", "<!-- bench:auto:end -->"


def machine() -> str:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) / 2**20
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}"


def bench_baseline(topic: str, runs: int = 3) -> list[float]:
    from resources.runner import Runner, prepare_workspace
    from resources.paths import resolve_topic_dir
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
    section = "\n".join([
        BEGIN,
        f"## Latest `make bench` ({dt.date.today()}, {machine()})",
        "",
        f"- baseline run of `{topic}` (sandboxed): median {statistics.median(base):.1f}s over {len(base)} runs",
        f"- `researchloop run --topic {topic} --rounds {rounds}` with `{loop['model']}`, empty LLM cache: "
        f"{loop['wall_s']:.0f}s wall",
        "",
        stage_table(loop),
        END,
    ])
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    if BEGIN in text:
        text = text.split(BEGIN)[0] + section + text.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    RESULTS.write_text(text)
    print(section)


if __name__ == "__main__":
    main()
