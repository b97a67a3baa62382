"""Which idea source finds improvements? The same topic run with each idea
source alone, for a few rounds, and what its ideas did when run; and whether the Idea Arena's
ratings predicted what the ideas measured.

For each source of --sources (default ranking, scipip, chains, brainstorm) the topic folder (default
the shipped diabetes_regression, whose runs take seconds, so that the hours go to the sources' LLM
calls: a round of image_classification took 1.75 h per source on the 2 cores; --topic takes a name
under experiments/ or a path) is copied to
<work>/experiments/<topic>__<source>, whose topic.yaml sets `name: <topic>__<source>`,
`ideation.sources: [<source>]` (plus --also, e.g. tuning) and `ideation.arena: true`. Each copy
runs as bench/effectiveness_bench.py runs a topic (`run_topic`: `researchloop run --rounds N` in a
subprocess, RESEARCHLOOP_EXPERIMENTS pointing at the copies), on its own fresh DAGSTER_HOME
(<work>/<source>/dagster_home), so no source reuses another's LLM answers, entity memo or index,
and is summarised with its `summarise_topic`.

Per source: ideas proposed and kept, implemented (patch status ok; a no-op is not implemented),
ran, verified improvements against the round's reference (and against the original baseline), the
best gain over the baseline with its 95% interval, LLM tokens per kept idea (the Arena's
judgements included) and wall time per kept idea. Per source and pooled: Spearman's rank
correlation between each kept idea's Arena rating (FilteredIdea.arena_rating) and its measured gain
(its metric minus the round reference's, sign flipped for a minimize goal), with n and the p-value
(scipy); ideas that failed or did not run have no gain and are left out (counted), and under
MIN_PAIRS pairs the section says "n too small". The Arena rates a round's candidates only when
there are more of them than `budget.ideas_per_round` (assets/filtered_ideas/arena.py `arena_for`),
so each copy asks its source for CANDIDATES times the budget (`ideation.candidates`); the Arena
then rates them all and the filters keep the best rated, as Chain-of-Ideas does. `--also tuning`
adds the tuning source to every run (its move takes a place first). The section counts the rounds that had
a tournament and the kept ideas that were rated, and says so when there were none.

The record (default bench/records/sources.json) holds every idea (run source, idea source, round,
Arena rating and rank, patch status, verdicts, gains) and each run's effectiveness summary; it is
written after each source (`complete: false` until all are done). The section "sources" of
bench/results/sources.md is rendered from it (only when the record is the default one).

    .venv/bin/python -m bench.sources_bench [--topic T] [--sources a,b] [--rounds 3] [--also tuning]
    make bench-sources                                        # the same, with the local model
    FROM_RECORD=1 .venv/bin/python -m bench.sources_bench     # re-render the section only
    .venv/bin/python -m bench.sources_bench --merge a.json,b.json   # sources run side by side, one record
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import typing
from pathlib import Path

import yaml

from assets.filtered_ideas.arena import spearman
from bench.common import RECORDS, machine, page_path, provenance, today, write_record, write_section
from bench.effectiveness_bench import IN_SAMPLE, _ci, _f, fresh_home, run_topic, summarise_topic
from resources.paths import resolve_topic_dir
from resources.store import RecordStore
from resources.timing_log import read_spans
from schemas.topic import IdeaSource, load_topic

SCRIPT = "bench/sources_bench.py"
RECORD = "sources"
SECTION = "sources"
SOURCES = ("ranking", "scipip", "chains", "brainstorm")
DEFAULT_TOPIC = "diabetes_regression"
MIN_PAIRS = 5  # fewer rating-gain pairs than this: no correlation is reported


# -- the topic copies ------------------------------------------------------------------------------

def copy_name(topic: str, source: str) -> str:
    return f"{topic}__{source}"


CANDIDATES = 2  # ideas asked of the source per round, in multiples of the round's budget (ideation.candidates)


def topic_copy(topic_dir: Path, source: str, dest_root: Path, also: typing.Sequence[str] = ()) -> Path:
    """A copy of the topic folder under `dest_root`, named `<topic>__<source>`, whose topic.yaml
    proposes ideas from `source` (and `also`) only and switches the Idea Arena on; checked by
    load_topic. Returns the copy's folder."""
    name = copy_name(topic_dir.name, source)
    dest = dest_root / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(topic_dir, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    raw = yaml.safe_load((dest / "topic.yaml").read_text()) or {}
    ideation = dict(raw.get("ideation") or {})
    budget = int((raw.get("budget") or {}).get("ideas_per_round", 3))
    # twice the budget asked of the source, so the Arena has more candidates than places and rates them all
    ideation.update(sources=[source, *[a for a in also if a != source]], arena=True, candidates=CANDIDATES * budget,
                    brainstorm=False)  # `brainstorm: true` would add the brainstorm source to every copy
    raw.update(name=name, ideation=ideation)
    (dest / "topic.yaml").write_text(yaml.safe_dump(raw, sort_keys=False, width=110))
    load_topic(dest)  # raises TopicSpecError naming the field when the copy is not a valid topic
    return dest


# -- per idea, per source --------------------------------------------------------------------------

def _sign(goal: str) -> float:
    return 1.0 if goal == "maximize" else -1.0


def _gain_ci(ci, goal: str):
    """A 95% interval of idea - reference turned into one of the gain (better > 0)."""
    if not ci or ci[0] is None:
        return None
    return [ci[0], ci[1]] if goal == "maximize" else [-ci[1], -ci[0]]


def idea_rows(summary: dict, source: str) -> list[dict]:
    """Every idea of a run (summarise_topic's raw rounds), with what it did: patch status, whether
    it ran, its verdicts and its gains (better > 0) over the round's reference and the baseline."""
    goal, s = summary["goal"], _sign(summary["goal"])
    out = []
    for raw in summary["rounds"]:
        patches = {p["idea_id"]: p for p in raw["patches"]}
        runs = {r["idea_id"]: r for r in raw["runs"]}
        verdicts = {v["idea_id"]: v for v in raw["verdicts"]}
        for i in raw["ideas"]:
            v, p, r = verdicts.get(i["idea_id"]), patches.get(i["idea_id"]), runs.get(i["idea_id"])
            delta = None if v is None else v.get("delta")
            bdelta = None if v is None else v.get("baseline_delta")
            out.append({
                "source": source, "idea_source": i["source"], "round": raw["round"], "idea_id": i["idea_id"],
                "title": i["title"], "proposal": i["proposal"], "kept": i["kept"], "drop_reason": i["drop_reason"],
                "arena_rating": i.get("arena_rating"), "arena_rank": i.get("arena_rank"),
                "patch": None if p is None else p["status"], "ran": r is not None and r["status"] == "success",
                "verdict": None if v is None else v["verdict"],
                "baseline_verdict": None if v is None else v.get("baseline_verdict"),
                "metric_value": None if v is None else v.get("metric_value"),
                "gain": None if delta is None else round(s * delta, 6),
                "baseline_gain": None if bdelta is None else round(s * bdelta, 6),
                "baseline_gain_ci": None if v is None else _gain_ci(v.get("baseline_ci"), goal),
            })
    return out


def correlation(ideas: list[dict]) -> dict:
    """Spearman's rho between the Arena rating and the measured gain of the kept ideas that have
    both; how many kept ideas were left out and why; the p-value when scipy can give one."""
    kept = [i for i in ideas if i["kept"]]
    rated = [i for i in kept if i["arena_rating"] is not None]
    pairs = [(i["arena_rating"], i["gain"]) for i in rated if i["gain"] is not None]
    out = {"n": len(pairs), "kept": len(kept), "rated": len(rated), "unrated": len(kept) - len(rated),
           "rated_without_gain": len(rated) - len(pairs), "rho": None, "p_value": None, "note": ""}
    if len(pairs) < MIN_PAIRS:
        out["note"] = "n too small"
        return out
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    rho = spearman(xs, ys)
    if rho is None:
        out["note"] = "the ratings or the gains are all equal"
        return out
    out["rho"] = round(rho, 4)
    try:
        from scipy.stats import spearmanr
    except ImportError:  # rho stands without its p-value
        return out
    out["p_value"] = round(float(spearmanr(xs, ys).pvalue), 4)
    return out


def rd2bench_rates(summary: dict) -> dict:
    """RD2Bench's execution and format rates for the loop's own runs (no ground truth needed): of
    the kept ideas that were run, how many ran without an error as the patch wrote them (their
    first attempt, before any repair) and how many reported the topic's metric in the end (after
    repairs). RD2Bench's correlation and value accuracy need a reference output, which an idea has
    not: bench/implementation_bench.py measures those on tasks with ground truth."""
    runs = [r for raw in summary["rounds"] for r in raw["runs"] if r.get("attempts")]
    return {"with_run": len(runs),
            "executed_first": sum(r["attempts"][0].get("error") is None and r["attempts"][0].get("exit_code") == 0
                                  for r in runs),
            "format_ok": sum(r.get("metric_value") is not None for r in runs)}


def source_summary(summary: dict, ideas: list[dict]) -> dict:
    """The per-source figures over a run's rounds (its effectiveness rows and its ideas)."""
    rows = summary["rows"]

    def total(k):
        return sum(r[k] or 0 for r in rows)

    kept = total("kept")
    tokens = total("tokens")
    walls = [r.get("wall_s") for r in rows]
    wall = sum(walls) if rows and all(w is not None for w in walls) else None
    gains = [i for i in ideas if i["kept"] and i["baseline_gain"] is not None]
    best = max(gains, key=lambda i: i["baseline_gain"], default=None)
    return {
        "rounds_done": len(rows), "proposed": total("proposed"), "kept": kept,
        "implemented": total("implemented"), "no_op": total("no_op"), "ran": total("ran"),
        "failed": sum(i["kept"] and i["verdict"] == "failed" for i in ideas),
        "verified_improvements": total("verified_improvements"),
        "improvements_vs_baseline": total("improvements_vs_baseline"),
        "kept_by_idea_source": dict(sorted({s: sum(i["kept"] and i["idea_source"] == s for i in ideas)
                                            for s in {i["idea_source"] for i in ideas}}.items())),
        "best_idea": None if best is None else best["idea_id"],
        "best_gain": None if best is None else best["baseline_gain"],
        "best_gain_ci": None if best is None else best["baseline_gain_ci"],
        "best_verdict_vs_baseline": None if best is None else best["baseline_verdict"],
        "tokens": tokens, "tokens_per_idea": round(tokens / kept) if kept else None,
        "wall_s": None if wall is None else round(wall, 1),
        "wall_s_per_idea": round(wall / kept, 1) if wall is not None and kept else None,
        "arena_rounds": sum(any(i["arena_rating"] is not None for i in ideas if i["round"] == r["round"])
                            for r in rows),
        "correlation": correlation(ideas),
        "rd2bench": rd2bench_rates(summary),
    }


def finish(rec: dict) -> dict:
    """The record's per-source figures and the pooled correlation, from its ideas and summaries."""
    for s in rec["sources"]:
        s["figures"] = source_summary(s["effectiveness"], s["ideas"])
    rec["pooled"] = correlation([i for s in rec["sources"] for i in s["ideas"]])
    rec["complete"] = bool(rec["sources"]) and len(rec["sources"]) == len(rec["sources_asked"]) and all(
        s["figures"]["rounds_done"] == rec["rounds"] for s in rec["sources"])
    return rec


# -- rendering -------------------------------------------------------------------------------------

def _corr(c: dict) -> str:
    if c["rho"] is None:
        return f"{c['note']} (n = {c['n']})"
    p = "" if c["p_value"] is None else f", p = {c['p_value']:.3g}"
    return f"{c['rho']:+.2f} (n = {c['n']}{p})"


def sample_line(rec: dict) -> str:
    return (f"held-out ({rec['topic']}: nothing was tuned on it)" if rec["held_out"] else
            f"in-sample ({rec['topic']}: {rec['in_sample_because']})")


def winners(rec: dict) -> str:
    """Which source led on verified improvements and on the best gain (a tie named as such)."""
    def lead(key):
        vals = {s["source"]: s["figures"][key] for s in rec["sources"] if s["figures"][key] is not None}
        if not vals:
            return "none measured"
        top = max(vals.values())
        best = sorted(k for k, v in vals.items() if v == top)
        return f"{' = '.join(best)} ({top:g})" + (" (tie)" if len(best) > 1 else "")
    return (f"Most verified improvements: {lead('verified_improvements')}; largest gain over the baseline: "
            f"{lead('best_gain')}.")


def render(rec: dict) -> str:
    """The section "sources" of bench/results/sources.md from the record."""
    table = ["| source | rounds | proposed / kept | implemented (no-op) | ran | verified improvements (vs baseline) | "
             "best gain over baseline [95% CI] | tokens per idea | wall s per idea | Arena rounds | "
             "kept ideas rated | Spearman rating vs gain | RD2Bench execution / format of the runs |",
             "|---" * 13 + "|"]
    for s in rec["sources"]:
        g = s["figures"]
        best = "" if g["best_gain"] is None else f"{g['best_gain']:+.4f}{_ci(g['best_gain_ci'])}"
        rd = g.get("rd2bench") or {"with_run": 0}
        rates = "-" if not rd["with_run"] else f"{rd['executed_first']}/{rd['with_run']} / {rd['format_ok']}/" \
                                                f"{rd['with_run']}"
        table.append(
            f"| {s['source']} | {g['rounds_done']}/{rec['rounds']} | {g['proposed']} / {g['kept']} | "
            f"{g['implemented']} ({g['no_op']}) | {g['ran']} | {g['verified_improvements']} "
            f"({g['improvements_vs_baseline']}) | {best} | {_f(g['tokens_per_idea'], '{:d}')} | "
            f"{_f(g['wall_s_per_idea'], '{:.0f}')} | {g['arena_rounds']} | {g['correlation']['rated']}/"
            f"{g['correlation']['kept']} | {_corr(g['correlation'])} | {rates} |")
    p = rec["pooled"]
    also = f" plus {', '.join(rec['also'])}" if rec.get("also") else ""
    incomplete = "" if rec.get("complete") else "; INCOMPLETE: not every source finished its rounds"
    no_arena = [] if any(s["figures"]["arena_rounds"] for s in rec["sources"]) else [
        "- No round had an Arena tournament (a round's candidates never outnumbered `budget.ideas_per_round`: "
        "the source answered fewer ideas than `ideation.candidates` asked), so no idea was rated and there is no "
        "correlation."]
    return "\n".join([
        "## Idea sources: which source's ideas improve the code",
        "",
        provenance(SCRIPT, f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}", sample_line(rec)),
        "",
        (f"The topic {rec['topic']} ({rec['metric']}, {rec['goal']}) run with one idea source at a time{also} "
         f"(`ideation.sources`, `ideation.arena: true`) by `researchloop run --rounds {rec['rounds']}`, each on a "
         f"fresh DAGSTER_HOME, model `{rec['model']}`{incomplete}. "
         "Verified improvements: verdict `improvement` against the round's reference code (in brackets: against "
         "the original baseline). Best gain: the kept idea furthest above the baseline (better > 0). Tokens per "
         "idea: the rounds' LLM tokens (the Arena's judgements included) over their kept ideas. Spearman: the "
         "kept ideas' Arena ratings against their gains over the round's reference; ideas that failed or did "
         f"not run are left out, fewer than {MIN_PAIRS} pairs report no correlation. The Arena runs only in a "
         "round with more candidates than its budget, and refilled ideas are never rated. RD2Bench execution / "
         "format: of the kept ideas run, those whose patch ran without an error before any repair / those that "
         "reported the metric in the end (the ground-truth metrics are in the section implementation)."),
        "",
        *table,
        "",
        f"- Pooled over the sources: Spearman {_corr(p)}; kept ideas {p['kept']}, rated {p['rated']}, rated but "
        f"without a gain (failed or did not run) {p['rated_without_gain']}. Ratings come from separate "
        "tournaments (one per round and source), so pooling them assumes their scales agree.",
        f"- {winners(rec)}",
        *no_arena,
        *[f"- {n}" for n in rec.get("notes", [])],
    ])


# -- running ---------------------------------------------------------------------------------------

def new_record(topic: str, sources: list[str], rounds: int, also: list[str], work: Path, spec) -> dict:
    return {"script": SCRIPT, "date": today(), "machine": f"2-core shared VM: {machine()}", "rounds": rounds,
            "model": "", "topic": topic, "held_out": topic not in IN_SAMPLE,
            "in_sample_because": IN_SAMPLE.get(topic, ""), "metric": spec.metric.name, "goal": spec.metric.goal,
            "budget": spec.budget.ideas_per_round, "sources_asked": sources, "also": also, "work": str(work),
            "complete": False, "wall_s": 0.0, "sources": []}


def run_source(source: str, topic_dir: Path, args, work: Path) -> dict:
    """One source: the topic copy run on its own DAGSTER_HOME, summarised from its records."""
    import dagster as dg

    also = [a for a in args.also.split(",") if a]
    copy = topic_copy(topic_dir, source, work / "experiments", also)
    src_work = work / source
    home = fresh_home(src_work)
    log_file = src_work / "timing.jsonl"
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1", "RESEARCHLOOP_TIMING_LOG": str(log_file),
           "RESEARCHLOOP_EXPERIMENTS": str(work / "experiments")}
    run = run_topic(copy.name, args.rounds, src_work, env, args.parallel, args.hours * 3600)
    summary = summarise_topic(copy.name, args.rounds, RecordStore(root=str(home / "records")),
                              dg.DagsterInstance.from_config(str(home)), run, read_spans(log_file))
    base = topic_dir.name  # the copy is named after the source: in-sample or not is the topic's
    summary.update(held_out=base not in IN_SAMPLE, in_sample_because=IN_SAMPLE.get(base, ""))
    return {"source": source, "topic": copy.name, "model": (run["timings"] or {}).get("model") or "",
            "ideas": idea_rows(summary, source), "effectiveness": summary}


def measure(args, out: Path) -> dict:
    topic_dir = resolve_topic_dir(args.topic)
    spec = load_topic(topic_dir)
    sources = [s for s in args.sources.split(",") if s]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_sources_"))
    work.mkdir(parents=True, exist_ok=True)
    rec = new_record(spec.name, sources, args.rounds, [a for a in args.also.split(",") if a], work, spec)
    print(f"working in {work}; topic {spec.name}; sources: {', '.join(sources)}", flush=True)
    t_all = time.monotonic()
    for source in sources:
        print(f"[{(time.monotonic() - t_all) / 60:5.1f} min] {source}: researchloop run --rounds {args.rounds}",
              flush=True)
        done = run_source(source, topic_dir, args, work)
        model = done.pop("model")
        rec["model"] = rec["model"] or model
        rec["sources"].append(done)
        rec["wall_s"] = round(time.monotonic() - t_all, 1)
        finish(rec)
        write_record(out.stem, rec, out.parent)  # after each source
        g = done["figures"]
        print(f"  {g['rounds_done']} round(s), {g['kept']} kept, {g['verified_improvements']} verified "
              f"improvement(s), {g['correlation']['rated']} rated -> {out}", flush=True)
    return rec


def merge_records(recs: list[dict]) -> dict:
    """One record from runs of this benchmark side by side (same topic, rounds, model and --also; a
    source or several each): their sources in order, the pooled correlation recomputed."""
    if len({(r["topic"], r["rounds"], r["model"], tuple(r.get("also", []))) for r in recs}) != 1:
        raise ValueError("records with different topics, rounds, models or --also cannot be merged")
    merged = {**recs[0], "date": max(r["date"] for r in recs), "work": ", ".join(r["work"] for r in recs),
              "wall_s": max(r.get("wall_s", 0) for r in recs), "merged_from": len(recs),
              "sources_asked": [s for r in recs for s in r["sources_asked"]],
              "sources": [s for r in recs for s in r["sources"]],
              "notes": [n for r in recs for n in r.get("notes", [])]}
    return finish(merged)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topic", default=DEFAULT_TOPIC, help="a topic name under experiments/ or a topic folder")
    ap.add_argument("--sources", default=",".join(SOURCES), help="comma-separated idea sources, one run each")
    ap.add_argument("--also", default="", help="comma-separated sources added to every run (e.g. tuning: its move "
                    "takes a place first, so the source's ideas outnumber the places left)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(RECORDS / f"{RECORD}.json"), help="the raw record")
    ap.add_argument("--work", default="", help="working folder (default: a new temporary one, kept for inspection)")
    ap.add_argument("--parallel", type=int, default=0, help="passed to researchloop run (default: its own)")
    ap.add_argument("--hours", type=float, default=6.0, help="give up on a source after this long")
    ap.add_argument("--merge", default="", help="comma-separated records of earlier runs (run side by side): write "
                    "their sources as one record to --out and render it; runs nothing")
    ap.add_argument("--note", action="append", default=[], help="a line added to the record's notes (repeatable)")
    ap.add_argument("--page", default="", help="the page to write the section into (default: "
                    "bench/results/sources.md when --out is the default record, else none)")
    args = ap.parse_args(argv)
    known = set(typing.get_args(IdeaSource))
    if bad := [s for s in (args.sources + "," + args.also).split(",") if s and s not in known]:
        ap.error(f"unknown idea source(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    out = Path(args.out)
    default_out = out.resolve() == (RECORDS / f"{RECORD}.json").resolve()
    page = Path(args.page) if args.page else (page_path(SECTION) if default_out else None)
    if args.merge:
        rec = merge_records([json.loads(Path(f).read_text()) for f in args.merge.split(",")])
        write_record(out.stem, rec, out.parent)
    elif os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(out.read_text())
    else:
        rec = measure(args, out)
    if args.note:
        rec["notes"] = [*rec.get("notes", []), *args.note]
        write_record(out.stem, rec, out.parent)
    body = render(rec)
    print(body)
    if page is not None:
        write_section(SECTION, body, page)
    return 0 if rec.get("complete") else 1


if __name__ == "__main__":
    sys.exit(main())
