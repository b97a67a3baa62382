"""RD2Bench-style implementation metrics on the tasks of bench/implementation/: the LLM
gets each task's signature and description (never the ground truth), its code runs in the
project's sandbox on the same random inputs as the ground truth, and the attempts are scored by
bench/implementation/metrics.py: execution, format, correlation and value accuracy of the outputs,
and for layers the depth-weighted tensor shape and value consistency.

    make bench-implementation                                  # the local model (llama.cpp server)
    OPENAI_BASE_URL=... OPENAI_API_KEY=... RESEARCHLOOP_MODEL=... make bench-implementation
    ATTEMPTS=5 ONLY=focal_loss,rms_norm .venv/bin/python -m bench.implementation_bench

ATTEMPTS answers per task (default 3): the first greedy, the others sampled (temperature 0.8,
seeds 1, 2, ...), as RD2Bench reports the average and the best over independent attempts. Each
answer runs alone in its own sandboxed process. The LLM cache lives in DAGSTER_HOME (default
/tmp/rl_impl_home), so a re-run with the same prompts asks the model nothing. Writes
bench/records/implementation[_<model>].json and the section implementation[-<model>] of
bench/results/implementation.md (the local model: no suffix)."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from assets.editing.edit_formats.whole import MAX_TOKENS, extract_whole_file
from bench.common import machine, provenance, today, write_record, write_section
from bench.implementation.evaluate import Task, evaluate, ground_truth, load_tasks
from bench.implementation.metrics import TaskScore, summarize
from bench.implementation.prompts import implement
from resources.llm import LLM

SCRIPT = "bench/implementation_bench.py"
COLUMNS = ["execution", "format", "correlation", "accuracy", "exact", "shape_consistency", "value_consistency"]


def slug(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:40]


def record_name(local: bool, model: str) -> str:
    return "implementation" if local else f"implementation_{slug(model)}"


def ask(llm, task: Task, attempt: int):
    """One answer: (code or None, error, LLM seconds, tokens)."""
    spec = task.spec
    extra = {} if attempt == 0 else {"temperature": 0.8, "seed": attempt}
    res = llm.complete(implement(spec["signature"], spec["description"], spec["entry"]), stage="implementation",
                       parse=extract_whole_file, max_tokens=min(MAX_TOKENS, 900), item=task.name, **extra)
    tokens = res.call.prompt_tokens + res.call.completion_tokens
    return (res.value if res.ok else None), res.error, res.call.seconds, tokens, res.call.cached


def run(tasks: list[Task], llm, attempts: int, log=print) -> dict:
    truth = ground_truth(tasks)
    rows = []
    for task in tasks:
        for n in range(attempts):
            code, err, llm_s, tokens, cached = ask(llm, task, n)
            t0 = time.monotonic()
            if code is None:
                score = TaskScore(task.name, task.kind, False, False, None, 0.0,
                                  0.0 if task.kind == "layer" else None, 0.0 if task.kind == "layer" else None,
                                  f"no usable answer: {err}")
            else:
                score = evaluate(task, code, truth[task.name])
            rows.append({**score.as_dict(), "attempt": n, "llm_s": round(llm_s, 1), "tokens": tokens,
                         "cached": cached, "run_s": round(time.monotonic() - t0, 1), "code": code})
            log(f"{task.name} #{n}: executed={score.executed} format={score.format_ok} "
                f"corr={score.correlation} acc={score.accuracy:.2f} {score.error or ''}"[:200])
    return {"rows": rows, "tasks": [t.name for t in tasks]}


def _scores(rows: list[dict]) -> list[TaskScore]:
    keep = set(TaskScore.__dataclass_fields__)
    return [TaskScore(**{k: v for k, v in r.items() if k in keep}) for r in rows]


def _fmt(v) -> str:
    return "" if v is None else f"{v:.2f}"


def render(rec: dict) -> str:
    rows = rec["rows"]
    overall = summarize(_scores(rows))
    name = rec["record"].removeprefix("bench/records/").removesuffix(".json")
    lines = [
        f"## Implementation tasks (RD2Bench metrics): `{rec['model']}`",
        "",
        provenance(SCRIPT, rec["record"], f"{rec['date']} on {rec['machine']}",
                   "held-out: the tasks and their descriptions were written for this bench before any model "
                   "answer was seen; nothing was tuned on the answers"),
        "",
        f"{len(rec['tasks'])} tasks (bench/implementation/tasks.yaml), {rec['attempts']} attempts each (the first "
        f"greedy, the others sampled at temperature 0.8), each attempt run alone in the sandbox on the ground "
        f"truth's inputs; endpoint: {rec['endpoint']}; wall {rec['wall_s']:.0f} s. Avg over attempts, max = the best "
        "attempt; a missing correlation counts 0; accuracy: share of values within 1e-5 + 1e-4 x |truth|; "
        "exact: attempts with every value right; shape/value consistency: layers only, depth-weighted "
        "(gamma 1.1).",
        "",
        "| task | kind | exec | format | corr avg | corr max | acc avg | acc max | shape cons. | value cons. |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in rec["tasks"]:
        mine = [r for r in rows if r["task"] == t]
        s = summarize(_scores(mine))
        lines.append(
            f"| {t} | {mine[0]['kind']} | {_fmt(s['execution'])} | {_fmt(s['format'])} | {_fmt(s['correlation'])} | "
            f"{_fmt(max((r['correlation'] or 0.0) for r in mine))} | {_fmt(s['accuracy'])} | "
            f"{_fmt(max(r['accuracy'] for r in mine))} | {_fmt(s.get('shape_consistency'))} | "
            f"{_fmt(s.get('value_consistency'))} |")
    lines.append(f"| **all** | | {_fmt(overall['execution'])} | {_fmt(overall['format'])} | "
                 f"{_fmt(overall['correlation'])} | | {_fmt(overall['accuracy'])} | | "
                 f"{_fmt(overall.get('shape_consistency'))} | {_fmt(overall.get('value_consistency'))} |")
    lines += ["", f"Exact (every value right): {_fmt(overall['exact'])} of attempts. Section `{name}`."]
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_impl_home")
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    attempts = int(os.environ.get("ATTEMPTS", "3"))
    only = {s for s in os.environ.get("ONLY", "").split(",") if s}
    tasks = [t for t in load_tasks() if not only or t.name in only]
    llm = LLM()
    local = llm.is_local()
    model = llm.model_name()
    t0 = time.monotonic()
    out = run(tasks, llm, attempts, log=lambda m: print(m, flush=True))
    name = record_name(local, model)
    rec = {"script": SCRIPT, "record": f"bench/records/{name}.json", "date": today(), "machine": machine(),
           "model": model, "endpoint": "local llama.cpp server" if local else "OPENAI_BASE_URL endpoint",
           "attempts": attempts, "wall_s": round(time.monotonic() - t0, 1), **out}
    rec["summary"] = summarize(_scores(rec["rows"]))
    if all(r["cached"] for r in rec["rows"]):
        print(render(rec) + "\n\n(every answer came from the cache: record and page left as they are)")
        return
    write_record(name, rec)
    print(write_section(name.replace("_", "-"), render(rec), "implementation"))


if __name__ == "__main__":
    main()
