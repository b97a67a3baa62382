"""Does the image topic's `screen:` run (a third of the epochs) rank drafts as their full runs do,
and what does it cost? A few hand-written variants of the shipped image experiment (the kind of
drafts an idea's implementation search produces) each run the `screen` command and the full
`run` command once (seed 0) in the sandbox, through the code run_results uses (run_with_repair,
no repairs). Records each variant's short and full metric and wall time, whether the short run's
best is the full run's best, the rank correlation, and the full runs the rule of
assets/run_results/screening.py (promote: 1) would have spent.

    DAGSTER_HOME=/tmp/rl_screen_home .venv/bin/python -m bench.screen_bench

Writes bench/records/screen.json and the section `screen` of bench/RESULTS.md
(`python -m bench.screen_bench render` re-renders it from the record)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bench.common import machine, provenance, read_record, today, write_record, write_section

SCRIPT = "bench/screen_bench.py"
TOPIC = "image_classification"
# (name, old, new): one edit of the reference each, as a draft would make it
VARIANTS = [
    ("reference", "", ""),
    ("lr_3e-3", "LR = 1e-3\n", "LR = 3e-3\n"),
    ("lr_1e-4", "LR = 1e-3\n", "LR = 1e-4\n"),
    ("wider_conv", "def __init__(self, n_classes, width=(16, 32)):", "def __init__(self, n_classes, width=(32, 64)):"),
    ("head_dropout", "nn.Linear(c_in * 7 * 7, 128), nn.ReLU(),",
     "nn.Linear(c_in * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.5),"),
    ("batch_256", "BATCH_SIZE = 64\n", "BATCH_SIZE = 256\n"),
]


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for k, i in enumerate(order):
            r[i] = float(k)
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def render(rec: dict) -> str:
    rows = ["| variant | short run | full run | short s | full s |", "|---|---|---|---|---|"]
    for r in rec["rows"]:
        f = lambda v: "failed" if v is None else f"{v:.4f}"  # noqa: E731
        rows.append(f"| {r['variant']} | {f(r['screen'])} | {f(r['full'])} | {r['screen_wall_s']:.0f} | "
                    f"{r['full_wall_s']:.0f} |")
    return "\n".join([
        "## Screening drafts with a short run (image topic)",
        "",
        provenance(rec["script"], "bench/records/screen.json", f"{rec['date']} on {rec['machine']}", rec["sample"]),
        "",
        f"`{rec['topic']}`: each variant ran `{rec['screen']}` (a third of the epochs) and `{rec['run']}` once "
        "(seed 0, sandboxed, no repairs) while other work shared the 2 cores, so the times are loaded ones.",
        "",
        f"- short runs {rec['screen_wall_s']:.0f} s in all against {rec['full_wall_s']:.0f} s for the full runs "
        f"({rec['screen_wall_s'] / rec['full_wall_s']:.2f} of the cost: loading the data and scoring the test set "
        "do not shrink)",
        f"- best by the short run: {rec['best_by_screen']}; best by the full run: {rec['best_by_full']}; "
        f"Spearman rank correlation {rec['spearman_screen_vs_full']}",
        "- reading: on this topic the short run is a loose proxy, so it declares `promote: 2` (the screen only "
        "prunes when an idea has more than two usable drafts)",
        "",
        *rows,
    ])


def main() -> None:
    if sys.argv[1:] == ["render"]:
        print(write_section("screen", render(read_record("screen"))))
        return
    os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_screen_home")
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    from assets.run_results.experimenting import RunTarget, run_with_repair
    from resources.paths import resolve_topic_dir
    from resources.runner import Runner
    from schemas.topic import load_topic

    spec = load_topic(resolve_topic_dir(TOPIC))
    code = spec.code_path.read_text()
    runner, work = Runner(), Path(os.environ["DAGSTER_HOME"]) / "screen_bench"
    rows = []
    for name, old, new in VARIANTS:
        assert code.count(old) == 1 or not old, name
        variant = code.replace(old, new, 1) if old else code
        row = {"variant": name, "edit": [old.strip(), new.strip()]}
        for which, target in (("screen", RunTarget.of_topic(spec, "screen")), ("full", RunTarget.of_topic(spec))):
            t0 = time.monotonic()
            r = run_with_repair(target, variant, runner=runner, llm=None, workdir=work / name / which, idea_id=name,
                                title=name, max_repairs=0, edit_format="whole", log=lambda m: None, memo=False)
            row[which] = r.metric_value
            row[f"{which}_wall_s"] = round(time.monotonic() - t0, 1)
            row[f"{which}_error"] = r.reason
        rows.append(row)
        print(row, flush=True)
    ok = [r for r in rows if r["screen"] is not None and r["full"] is not None]
    best_screen = max(ok, key=lambda r: r["screen"])["variant"] if ok else None
    best_full = max(ok, key=lambda r: r["full"])["variant"] if ok else None
    rec = {
        "script": SCRIPT, "date": today(), "machine": f"2-core shared VM: {machine()}", "in_sample": False,
        "sample": "not a sample: hand-written variants of the reference, one seed each; nothing tuned on them",
        "topic": TOPIC, "screen": spec.screen, "run": spec.run, "rows": rows,
        "spearman_screen_vs_full": round(spearman([r["screen"] for r in ok], [r["full"] for r in ok]), 3)
        if len(ok) > 2 else None,
        "best_by_screen": best_screen, "best_by_full": best_full, "screen_picks_full_best": best_screen == best_full,
        "screen_wall_s": round(sum(r["screen_wall_s"] for r in rows), 1),
        "full_wall_s": round(sum(r["full_wall_s"] for r in rows), 1),
        "full_runs_without_screen": len(rows), "full_runs_with_screen_promote_1": 1,
    }
    path = write_record("screen", rec)
    write_section("screen", render(rec))
    print(f"best by screen {best_screen}, by full {best_full}; spearman {rec['spearman_screen_vs_full']}; "
          f"screen {rec['screen_wall_s']} s vs full {rec['full_wall_s']} s -> {path}")


if __name__ == "__main__":
    main()
