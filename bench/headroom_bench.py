"""How far can the tuning source's first step go? Every one-knob move of a topic's baseline,
run on the topic's seeds and judged by the loop's own verdict rule, with no LLM.

For each topic, each knob the `tuning` source finds in the baseline code (assets/ideas/tuning/
`find_knobs`) and each of its candidate values (`moves`: both directions) is applied (`apply_move`),
run in the real sandbox on the topic's seeds (budget.seeds) and judged against the baseline's seeds by
assets/shared/verdicts.py `judge_seeds`, the rule of the loop's verdicts. This is the whole
neighbourhood the coordinate search starts from, not the loop's order through it: a topic where no move
is an improvement cannot get one from the tuning source's first step, whatever its order; its
improvements must come from the LLM's ideas (a change of structure) or from moves stacked on a win.

Writes bench/records/headroom.json (every move: its values per seed, the verdict and its reason) and
the section headroom of bench/results/headroom.md; a record written elsewhere (--out) gets a section only when
--section names one (its heading --title, kept in the record).

    .venv/bin/python -m bench.headroom_bench [--topics a,b] [--out bench/records/headroom.json]
    .venv/bin/python -m bench.headroom_bench --merge a.json,b.json     # runs side by side, one record
    .venv/bin/python -m bench.headroom_bench --topics bench/probe_topics/x --out bench/records/headroom_x.json \
        --section headroom_x --title "Headroom on x"
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from assets.ideas.tuning import apply_move, compensations, find_knobs, move_of, moves
from assets.run_results.repair_search import RepairPolicy, run_with_repair
from assets.run_results.seeds import baseline_values, repeat_seeds
from assets.shared.verdicts import judge_seeds
from bench.common import RECORDS, machine, provenance, repo_path, today, write_section
from resources.paths import resolve_topic_dir
from resources.runner import Runner
from schemas.topic import load_topic

SCRIPT = "bench/headroom_bench.py"
TITLE = "Headroom of the tuning source's first step"
SHIPPED = ("image_classification", "pointcloud_classification", "sentiment_classification", "diabetes_regression")


def neighbourhood(code: str, keys: set[str] | None = None) -> list:
    """Every one-knob move of `code` (TuningMove), knob by knob in file order, both directions, then its
    compensating pairs (a learning rate down, the training length beside it up: `compensations`); only
    the knobs whose key is in `keys` when it is given."""
    return [move_of(k, d, v) for k in find_knobs(code) if keys is None or k.key in keys for d, v in moves(k)] \
        + [m for m in compensations(code) if keys is None or m.key in keys]


def pairs_of(rows: list[dict], moves: list, goal: str, n: int) -> list[tuple]:
    """Up to `n` pairs of single moves on different knobs, neither of which was a decline or failed, the
    pairs whose singles' mean differences add up to the most first: does stacking two moves that each
    did no harm clear the tolerance where neither did alone?"""
    sign = 1 if goal == "maximize" else -1
    ok = [(sign * r["delta"], m) for r, m in zip(rows, moves)
          if r["verdict"] in ("improvement", "maintenance") and m.paired is None]
    cand = [(a[0] + b[0], a[1], b[1]) for i, a in enumerate(ok) for b in ok[i + 1:] if a[1].key != b[1].key]
    return [(a, b) for _, a, b in sorted(cand, key=lambda c: -c[0])[:n]]


def apply_all(code: str, ms) -> str:
    """`code` with every move of `ms` applied; a swap goes last, since it renames the callee whose name keys
    another knob's keyword (`RandomForestClassifier(n_estimators=)`). ValueError when one does not apply."""
    for m in sorted(ms, key=lambda m: m.kind == "swap"):
        code = apply_move(code, m)
    return code


def probe_topic(topic: str, work: Path, log=print, keys: set[str] | None = None, pairs: int = 0) -> dict:
    spec = load_topic(resolve_topic_dir(topic))
    code = spec.code_path.read_text()
    runner = Runner()
    t0 = time.time()
    base = baseline_values(spec, runner, log=lambda s: None)

    def row_of(ms: tuple) -> dict:
        ms = [x for m in ms for x in (m, m.paired) if x is not None]  # a compensating pair is two moves
        return {"key": " + ".join(m.key for m in ms), "kind": " + ".join(m.kind for m in ms),
                "direction": " + ".join(m.direction for m in ms), "old": " + ".join(m.old_text for m in ms),
                "new": " + ".join(m.new_text for m in ms), "pair": len(ms) > 1}

    def run(ms: tuple) -> dict:  # the moves applied one after the other, run on the seeds and judged
        tag = "+".join(f"{m.name}_{m.direction}_{m.new_text}" + (f"+{m.paired.name}_up_{m.paired.new_text}"
                                                                  if m.paired else "") for m in ms).replace("/", "_")
        t = time.time()
        try:
            new = apply_all(code, ms)
        except ValueError as e:
            log(f"{topic}: {tag}: {e}")
            return {**row_of(ms), "status": "failed", "error": str(e), "seed_values": [], "verdict": "failed",
                    "reason": "", "delta": None, "seconds": 0.0}
        common = dict(runner=runner, idea_id=tag, log=lambda s: None,
                      policy=RepairPolicy(edit_format="functions", suggestions=False, memo=False))
        at = work / Path(topic).name / tag  # a topic given as an absolute folder must not land inside itself
        first = run_with_repair(spec, new, workdir=at, **common)
        seeded = repeat_seeds(spec, first, runner, at / "seeds", log=lambda s: None, gate=False)
        row = {**row_of(ms), "status": seeded.status, "error": seeded.reason if seeded.status != "success" else "",
               "seed_values": seeded.seed_values or ([seeded.metric_value] if seeded.metric_value is not None
                                                      else []),
               "verdict": "failed", "reason": "", "delta": None, "seconds": round(time.time() - t, 1)}
        if seeded.status == "success" and base:
            v, why, c = judge_seeds(row["seed_values"], base, spec.metric.goal, spec.metric.tolerance)
            row.update(verdict=v, reason=why, delta=c.mean_diff)
        log(f"{topic}: {row['key']} {row['old']} -> {row['new']}: {row['verdict']} {row['reason'][:90]}")
        return row

    singles = neighbourhood(code, keys)
    rows = [run((m,)) for m in singles]
    rows += [run(p) for p in pairs_of(rows, singles, spec.metric.goal, pairs)]
    return {"topic": topic, "metric": spec.metric.name, "goal": spec.metric.goal, "tolerance": spec.metric.tolerance,
            "seeds": spec.budget.seeds, "baseline_seed_values": base, "moves": rows,
            "wall_s": round(time.time() - t0, 1)}


def section(rec: dict) -> str:
    lines = [f"## {rec.get('title') or TITLE}", "",
             provenance(SCRIPT, rec["record"], f"{rec['date']} on {rec['machine']}", rec["sample"]), "",
             "Every one-knob move of each topic's baseline (`find_knobs` x `moves`, both directions), applied without "
             "the LLM, run on the topic's seeds in the sandbox and judged against the baseline's seeds by the loop's "
             "verdict rule (assets/shared/verdicts.py). A topic with no `improvement` here cannot get one "
             "from the tuning source's first step in any order; its wins must come from the LLM's ideas or from "
             "moves stacked on an earlier win. Pairs: the compensating pairs (a learning rate lowered 3x with the "
             "training length beside it raised 3x, `compensations` in assets/ideas/tuning/, which the loop proposes "
             "once a slower rate alone declined) and, with `--pairs`, two single moves on different knobs, neither a "
             "decline, applied together (the largest summed single gains first); the single-move columns leave them "
             "out.", "",
             "| topic | knobs | moves | improvement | maintenance | decline | failed | best move: mean difference "
             "(verdict) | pairs: improvement / run | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t in rec["topics"]:
        ms = [m for m in t["moves"] if not m.get("pair")]
        two = [m for m in t["moves"] if m.get("pair")]
        pairs = f"{sum(m['verdict'] == 'improvement' for m in two)} / {len(two)}" if two else "-"
        count = {v: sum(m["verdict"] == v for m in ms) for v in ("improvement", "maintenance", "decline", "failed")}
        ran = [m for m in ms if m["delta"] is not None]
        sign = 1 if t["goal"] == "maximize" else -1
        best = max(ran, key=lambda m: sign * m["delta"]) if ran else None
        show = (f"{best['key']} {best['old']} -> {best['new']}: {best['delta']:+.4f} ({best['verdict']})"
                if best else "-")
        lines.append(f"| {t['topic']} | {len({m['key'] for m in ms})} | {len(ms)} | {count['improvement']} | "
                     f"{count['maintenance']} | {count['decline']} | {count['failed']} | {show} | {pairs} | "
                     f"{t['wall_s']} |")
    lines += ["", "Every move (mean difference against the baseline's seeds; the verdict's reason):", "",
              "| topic | knob | move | seeds | mean difference | verdict | reason |", "|---|---|---|---|---|---|---|"]
    for t in rec["topics"]:
        for m in t["moves"]:
            d = f"{m['delta']:+.4f}" if m["delta"] is not None else "-"
            why = (m["reason"] or m["error"] or "")[:140].replace("|", "/")
            lines.append(f"| {t['topic']} | {m['key']} ({m['kind']}) | {m['old']} -> {m['new']} | "
                         f"{len(m['seed_values'])} | {d} | {m['verdict']} | {why} |")
    if rec.get("notes"):  # what was concluded from the run, written into the record afterwards
        lines += ["", *[f"- {n}" for n in rec["notes"]]]
    return "\n".join(lines)


def section_name(out: Path, name: str = "") -> str:
    """The section a record written to `out` renders to: `name` when given, else "headroom" for
    the default record and none ("") for a record written elsewhere."""
    return name or ("headroom" if out.resolve() == (RECORDS / "headroom.json").resolve() else "")


def finish(rec: dict, out: Path, name: str = "") -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    if name := section_name(out, name):
        print(write_section(name, section(rec), "headroom"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", default=",".join(SHIPPED), help="comma-separated topic names or folders")
    ap.add_argument("--out", default=str(RECORDS / "headroom.json"))
    ap.add_argument("--knobs", default="", help="comma-separated knob keys to move (default: every knob), e.g. "
                    "'EPOCHS,Adam(weight_decay=)'")
    ap.add_argument("--pairs", type=int, default=0, help="after the single moves, run up to this many pairs of "
                    "moves on two knobs whose singles were not declines, the largest summed gains first (default 0)")
    ap.add_argument("--merge", default="", help="comma-separated records of earlier runs to join into --out")
    ap.add_argument("--section", default="", help="the section of bench/results/headroom.md to write (default: "
                    "headroom for the default --out, none otherwise)")
    ap.add_argument("--title", default="", help=f"the section's heading (default: {TITLE})")
    ap.add_argument("--sample", default="diabetes_regression: in-sample (the swap families were written after a "
                    "probe of model swaps on it); image_classification and pointcloud_classification: in-sample (the "
                    "knob kinds and steps were developed on their loops); other topics: held-out (the neighbourhood "
                    "does not depend on the order of the moves)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    rec = {"script": SCRIPT, "record": repo_path(out), "date": today(), "machine": machine(), "sample": args.sample,
           **({"title": args.title} if args.title else {}), "topics": []}
    if args.merge:
        for p in args.merge.split(","):
            rec["topics"] += json.loads(Path(p).read_text())["topics"]
    else:
        os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="headroom-home-"))
        with tempfile.TemporaryDirectory(prefix="headroom-") as work:
            for topic in args.topics.split(","):
                keys = set(args.knobs.split(",")) if args.knobs else None
                rec["topics"].append(probe_topic(topic, Path(work), keys=keys, pairs=args.pairs))
                finish(rec, out, args.section)  # what is done so far survives a stop
    finish(rec, out, args.section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
