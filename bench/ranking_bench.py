"""Paper ranking on the shipped topic with the local model: naive vs task-attribute ranking.

    .venv/bin/python bench/ranking_bench.py [--k 50] [--variants attributes:5,attributes:1,naive:5,judged:1]

The papers are the top k (default 50) the literature search returns for the topic's own
LLM-derived query, every one labelled in bench/labels/pointcloud_relevance.jsonl; precision and
recall of the kept set are against those labels (recall over the relevant papers among the k).
Each variant is one pass of the LLM over the k papers (mode:batch); the attribute pass is also
re-scored offline (relevance alone, attributes alone, thresholds) at no LLM cost.

LLM answers are cached under DAGSTER_HOME (default /tmp/rl_bench_home), so a re-run asks
nothing again; the server-side timings of the first, uncached run are kept in
$DAGSTER_HOME/ranking_timings.json and reported from there.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_bench_home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from bench.common import machine, today, write_section  # noqa: E402

TOPIC = "pointcloud_classification"
LABELS = ROOT / "bench" / "labels" / "pointcloud_relevance.jsonl"
DISTRACTORS = ("detection", "completion", "segmentation", "registration")   # DOLPHIN Table 3 style


def load_labels(path: Path = LABELS) -> dict[str, bool]:
    return {r["paper_id"]: bool(r["relevant"]) for r in map(json.loads, path.read_text().splitlines()) if r}


def evaluate(kept_ids: set[str], papers, labels: dict[str, bool]) -> dict:
    """Precision / recall of the kept set and the distractor keyword counts among kept papers."""
    relevant = {p.paper_id for p in papers if labels[p.paper_id]}
    tp = len(kept_ids & relevant)
    counts = {w: sum(bool(re.search(rf"\b{w}\b", f"{p.title} {p.abstract}", re.I)) for p in papers
                     if p.paper_id in kept_ids) for w in DISTRACTORS}
    return {"kept": len(kept_ids), "tp": tp, "fp": len(kept_ids) - tp,
            "precision": tp / len(kept_ids) if kept_ids else 0.0, "recall": tp / len(relevant) if relevant else 0.0,
            **counts}


class Meter:
    """Wraps the LLM client to record llama.cpp's per-request timings (compute time without
    the queue behind other users of the shared server, and the prefix-cache hits)."""

    def __init__(self, llm):
        self.requests: list[dict] = []
        client = llm.client()
        create = client.chat.completions.create

        def timed(**kw):
            resp = create(**kw)
            t = (resp.model_extra or {}).get("timings") or {}
            self.requests.append({"prompt_n": t.get("prompt_n", 0), "cache_n": t.get("cache_n", 0),
                                  "predicted_n": t.get("predicted_n", 0),
                                  "compute_s": (t.get("prompt_ms", 0) + t.get("predicted_ms", 0)) / 1000})
            return resp

        client.chat.completions.create = timed


def run_variant(name: str, mode: str, batch: int, brief, papers, llm, embedder, store: dict) -> dict:
    key = f"{name}@{len(papers)}"
    from assets.papers import rank_papers

    meter = Meter(llm)
    n0 = len(llm.calls())
    t0 = time.monotonic()
    scores = rank_papers(brief, papers, llm, mode=mode, embedder=embedder, batch=batch,
                         on_done=lambda n: print(".", end="", flush=True))
    wall = time.monotonic() - t0
    calls = llm.calls()[n0:]
    print(f" {name}: {wall:.0f}s, {len(calls)} calls ({sum(c.cached for c in calls)} cached)")
    usage = {"requests": len(calls), "prompt_tokens": sum(c.prompt_tokens for c in calls),
             "completion_tokens": sum(c.completion_tokens for c in calls), "wall_s": round(wall, 1),
             "server_s": round(sum(r["compute_s"] for r in meter.requests), 1),
             "prompt_evaluated": sum(r["prompt_n"] for r in meter.requests),
             "prompt_cached": sum(r["cache_n"] for r in meter.requests),
             "first30_server_s": None, "per_request": meter.requests}
    if meter.requests and not any(c.cached for c in calls):   # an uncached run: remember its timings
        # the requests that ranked the first 30 papers: each pass asks ceil(n / batch) requests in
        # order (the attribute mode makes two passes; a retried answer would shift this slightly)
        per = 1 if mode == "judged" else batch
        per_pass, first = -(-len(papers) // per), -(-min(30, len(papers)) // per)
        idx = [i * per_pass + j for i in range(2 if mode == "attributes" else 1) for j in range(first)]
        usage["first30_server_s"] = round(sum(meter.requests[i]["compute_s"] for i in idx
                                              if i < len(meter.requests)), 1)
        store[key] = usage
    elif key in store:   # answers came from the cache: report the first run's timings
        usage = store[key]
    (Path(os.environ["DAGSTER_HOME"]) / f"ranking_{name.replace(':', '_')}.jsonl").write_text(
        "".join(s.model_dump_json() + "\n" for s in scores))
    return {"name": name, "mode": mode, "batch": batch, "scores": scores, "usage": usage, "papers": papers}


def offline_rows(attr_scores, papers, labels) -> list[tuple[str, dict]]:
    """The attribute pass re-scored without new LLM calls."""
    from assets.ranking import ATTRIBUTES, agreement, is_kept, score_attributes, score_paper

    ok = [s for s in attr_scores if s.error is None]
    sims = {s.paper_id: {a: getattr(s, f"{a}_similarity") for a in ATTRIBUTES} for s in ok}
    rows = [("relevance category of the attribute pass alone (naive points)",
             {s.paper_id for s in ok if is_kept(score_paper(s.relevance, None))}),
            ("attributes alone (relevance taken as same_task)",
             {s.paper_id for s in ok if is_kept(score_attributes("same_task", agreement(sims[s.paper_id])))})]
    for m, p in ((0.5, 0.3), (0.55, 0.35), (0.6, 0.4), (0.65, 0.45), (0.7, 0.5)):
        rows.append((f"combined, match >= {m}, partial >= {p}",
                     {s.paper_id for s in ok if is_kept(score_attributes(s.relevance, agreement(sims[s.paper_id], m, p)))}))
    return [(label, evaluate(kept, papers, labels)) for label, kept in rows]


def fmt_row(label: str, e: dict, extra: str = "") -> str:
    return (f"| {label} | {e['kept']} | {e['tp']} | {e['fp']} | {e['precision']:.2f} | {e['recall']:.2f} | "
            + " | ".join(str(e[w]) for w in DISTRACTORS) + f" |{extra}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=50, help="papers retrieved and ranked")
    ap.add_argument("--variants", default="attributes:5,naive:5,attributes:1:15,judged:1",
                    help="mode:batch[:n], comma-separated; n: rank only the first n papers")
    ap.add_argument("--no-write", action="store_true", help="print, do not write bench/RESULTS.md")
    args = ap.parse_args(argv)

    from assets.topic import build_brief, topic_spec
    from pipelines.definitions import build_resources

    res = build_resources(resolved=True)
    llm, embedder, literature = res["llm"], res["embedder"], res["literature"]
    spec = topic_spec(TOPIC)
    brief, _ = build_brief(spec, llm)
    papers = literature.search(brief.search_query, args.k, embedder)
    labels = load_labels()
    missing = [p.paper_id for p in papers if p.paper_id not in labels]
    if missing:
        raise SystemExit(f"unlabelled papers among the retrieved: {missing}")
    n_rel = sum(labels[p.paper_id] for p in papers)
    print(f"query {brief.search_query!r}: {len(papers)} papers, {n_rel} labelled relevant")

    timings_file = Path(os.environ["DAGSTER_HOME"]) / "ranking_timings.json"
    store = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    results = []
    for v in args.variants.split(","):   # mode:batch[:n] -- n: only the first n papers
        mode, batch, *n = v.split(":")
        results.append(run_variant(v, mode, int(batch), brief, papers[:int(n[0])] if n else papers, llm, embedder,
                                   store))
        timings_file.write_text(json.dumps(store, indent=1))

    head = ("| ranking | kept | relevant kept | off-topic kept | precision | recall | "
            + " | ".join(f"kept mentioning {w}" for w in DISTRACTORS) + " |")
    sep = "|---" * (6 + len(DISTRACTORS)) + "|"
    everything = evaluate({p.paper_id for p in papers}, papers, labels)
    lines = [head, sep, fmt_row(f"keep all {len(papers)} retrieved (no ranking)", everything)]
    full = {(r["mode"], r["batch"]): r for r in results if len(r["papers"]) == len(papers)}
    for r in results:
        n = len(r["papers"])
        e = evaluate({s.paper_id for s in r["scores"] if s.kept}, r["papers"], labels)
        failed = sum(s.error is not None for s in r["scores"])
        label = f"{r['mode']}, {r['batch']} per request" + (f", first {n} papers only" if n < len(papers) else "")
        lines.append(fmt_row(label + (f" ({failed} not judged)" if failed else ""), e))
        other = next((f for (m, b), f in full.items() if m == r["mode"] and b != r["batch"]), None)
        if n < len(papers) and other:   # the same papers ranked with the other batch size
            mine = {s.paper_id: s for s in other["scores"][:n]}
            e2 = evaluate({i for i, s in mine.items() if s.kept}, r["papers"], labels)
            same = sum(mine[s.paper_id].kept == s.kept for s in r["scores"])
            lines.append(fmt_row(f"{other['mode']}, {other['batch']} per request, the same {n} papers "
                                 f"(same keep decision as {r['batch']} per request for {same}/{n})", e2))
    cost = ["| ranking | requests | prompt tok/paper | of which cached (prefix reuse) | completion tok/paper | "
            "server s/paper | wall s/paper (shared server) | server s for the first 30 papers |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        u, n = r["usage"], len(r["scores"])
        cached = f"{u['prompt_cached'] / n:.0f}" if u.get("prompt_cached") is not None else ""
        cost.append(f"| {r['mode']}, {r['batch']} per request | {u['requests']} | {u['prompt_tokens'] / n:.0f} | {cached} | "
                    f"{u['completion_tokens'] / n:.1f} | {u['server_s'] / n:.1f} | {u['wall_s'] / n:.1f} | "
                    f"{u['first30_server_s'] if u.get('first30_server_s') is not None else ''} |")
    attr = next((r for r in results if r["mode"] == "attributes"), None)
    offline = []
    if attr:
        offline = [head, sep] + [fmt_row(label, e) for label, e in offline_rows(attr["scores"], papers, labels)]
    body = "\n".join([
        "## Paper ranking: naive vs task-attribute (bench/ranking_bench.py)",
        "",
        f"{today()}, {machine()}; model {llm.model_name()} ({'local' if llm.is_local() else 'remote'}), "
        f"embeddings all-MiniLM-L6-v2. Topic `{TOPIC}`; the top {len(papers)} papers the corpus search returns "
        f"for the topic's query ({brief.search_query!r}), {n_rel} of them labelled relevant in "
        "`bench/labels/pointcloud_relevance.jsonl`. Kept = score >= 8. Recall is over those "
        f"{n_rel} relevant papers.",
        "",
        *lines,
        "",
        "Cost per paper (server s: llama.cpp's own prompt + decode time, without waiting for other users "
        "of the shared server; wall s includes that wait):",
        "",
        *cost,
        "",
        *(["The attribute pass re-scored offline (same LLM answers):", "", *offline] if offline else []),
    ])
    print(body)
    if not args.no_write:
        write_section("ranking", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
