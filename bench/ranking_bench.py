"""Paper ranking on the shipped topic with the local model: naive vs task-attribute ranking.

    .venv/bin/python -m bench.ranking_bench [--k 50] [--variants attributes:5,attributes:1,naive:5,judged:1]

The papers are the top k (default 50) the literature search returns for the topic's own
LLM-derived query, every one labelled in bench/labels/pointcloud_relevance.jsonl; precision and
recall of the kept set are against those labels (recall over the relevant papers among the k).
Each variant is one pass of the LLM over the k papers (mode:batch); the attribute pass is also
re-scored offline (relevance alone, attributes alone, thresholds) at no LLM cost.

LLM answers are cached under DAGSTER_HOME (default /tmp/rl_bench_home), so a re-run asks
nothing again; the server-side timings of the first, uncached run are kept in
$DAGSTER_HOME/ranking_timings.json and reported from there. Record: bench/records/ranking.json
(every variant's per-paper scores and usage; written unless --no-write).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

from bench.common import machine, provenance, today, write_record, write_section

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_bench_home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

TOPIC = "pointcloud_classification"
LABELS = ROOT / "bench" / "labels" / "pointcloud_relevance.jsonl"
DISTRACTORS = ("detection", "completion", "segmentation", "registration")   # DOLPHIN Table 3 style
PROMPT_TOK_S, DECODE_TOK_S = 50, 10   # the local model on an idle 2-core machine (the speed section above)


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
    """Records llama.cpp's own timings of every request (compute time without the wait behind other
    users of the shared server, prefix-cache hits) in a file under DAGSTER_HOME, keyed like the
    LLM's response cache; a variant's cost is the sum over the requests it made, so a re-run whose
    answers come from the response cache reports the first run's timings."""

    def __init__(self, llm, path: Path):
        from resources.llm import ResponseCache, request_key

        self.path, self.keys, self.lock = path, [], threading.Lock()
        self.known: dict = json.loads(path.read_text()) if path.exists() else {}
        client = llm.client()
        create = client.chat.completions.create
        self._get, self._cls = ResponseCache.get, ResponseCache
        meter = self

        def get(cache, key):   # every request the ranking makes is first looked up in the cache
            with meter.lock:
                meter.keys.append(key)
            return meter._get(cache, key)

        def timed(**kw):
            key = request_key(kw)
            with meter.lock:
                if key not in meter.keys:   # a retry (the conversation grew): count it too
                    meter.keys.append(key)
            t0 = time.monotonic()
            resp = create(**kw)
            t = (resp.model_extra or {}).get("timings") or {}
            u = resp.usage
            with meter.lock:   # remote endpoints run requests in threads
                meter.known[key] = {
                    "prompt_tokens": u.prompt_tokens if u else 0, "completion_tokens": u.completion_tokens if u else 0,
                    "prompt_evaluated": t.get("prompt_n", 0), "prompt_cached": t.get("cache_n", 0),
                    "server_s": round((t.get("prompt_ms", 0) + t.get("predicted_ms", 0)) / 1000, 2),
                    "wall_s": round(time.monotonic() - t0, 2)}
                tmp = meter.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(meter.known))
                tmp.replace(meter.path)
            return resp

        ResponseCache.get = get
        self._client, self._create = client, create
        client.chat.completions.create = timed

    def close(self) -> dict:
        """Undo the wrapping; the summed cost of this variant's requests."""
        self._cls.get = self._get
        self._client.chat.completions.create = self._create
        rows = [self.known[k] for k in dict.fromkeys(self.keys) if k in self.known]
        out = {f: round(sum(r[f] for r in rows), 2) for f in
               ("prompt_tokens", "completion_tokens", "prompt_evaluated", "prompt_cached", "server_s", "wall_s")}
        return {"requests": len(dict.fromkeys(self.keys)), "timed": len(rows), **out}


def run_variant(name: str, mode: str, batch: int, relevance_batch: int, brief, papers, llm, embedder) -> dict:
    from assets.paper_rankings.rank import rank_papers

    meter = Meter(llm, Path(os.environ["DAGSTER_HOME"]) / "ranking_request_timings.json")
    n0 = len(llm.calls())
    t0 = time.monotonic()
    try:
        scores = rank_papers(brief, papers, llm, mode=mode, embedder=embedder, batch=batch,
                             relevance_batch=relevance_batch, on_done=lambda n: print(".", end="", flush=True))
    finally:
        usage = meter.close()
    calls = llm.calls()[n0:]
    print(f" {name}: {time.monotonic() - t0:.0f}s, {len(calls)} calls ({sum(c.cached for c in calls)} from the "
          f"response cache); {usage}")
    (Path(os.environ["DAGSTER_HOME"]) / f"ranking_{name.replace(':', '_').replace('@', '_')}.jsonl").write_text(
        "".join(s.model_dump_json() + "\n" for s in scores))
    return {"name": name, "mode": mode, "batch": batch, "relevance_batch": relevance_batch, "scores": scores,
            "usage": usage, "papers": papers}


def offline_rows(attr_scores, papers, labels) -> list[tuple[str, dict]]:
    """The attribute pass re-scored without new LLM calls."""
    from assets.paper_rankings.scoring import (
        ATTRIBUTES,
        agreement,
        is_kept,
        score_attributes,
        score_paper,
    )

    ok = [s for s in attr_scores if s.error is None]
    sims = {s.paper_id: {a: getattr(s, f"{a}_similarity") for a in ATTRIBUTES} for s in ok}
    rows = [("relevance category of the attribute pass alone (naive points)",
             {s.paper_id for s in ok if is_kept(score_paper(s.relevance, None))}),
            ("attributes alone (relevance taken as same_task)",
             {s.paper_id for s in ok if is_kept(score_attributes("same_task", agreement(sims[s.paper_id])))})]
    for m, p in ((0.5, 0.3), (0.55, 0.35), (0.6, 0.4), (0.65, 0.45), (0.7, 0.5)):
        rows.append((f"combined, match >= {m}, partial >= {p}",
                     {s.paper_id for s in ok
                      if is_kept(score_attributes(s.relevance, agreement(sims[s.paper_id], m, p)))}))
    return [(label, evaluate(kept, papers, labels)) for label, kept in rows]


def fmt_row(label: str, e: dict) -> str:
    return (f"| {label} | {e['kept']} | {e['tp']} | {e['fp']} | {e['precision']:.2f} | {e['recall']:.2f} | "
            + " | ".join(str(e[w]) for w in DISTRACTORS) + " |")


def describe(r: dict) -> str:
    if r["mode"] == "judged":
        return "judged (the LLM grades input/output agreement itself), 1 paper per request"
    if r["mode"] == "naive":
        return f"naive (relevance only), {r['relevance_batch']} per request"
    return f"attributes, relevance {r['relevance_batch']} + attributes {r['batch']} per request"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=50, help="papers retrieved and ranked")
    ap.add_argument("--variants", default="attributes:5,attributes:5:5,naive:1,naive:5,attributes:1@15,judged:1@20,"
                    "attributes:5@30",
                    help="mode:batch[:relevance_batch][@n], comma-separated: papers per request of the "
                         "attribute pass (naive: of the relevance pass), of the relevance pass (default 1), "
                         "only the first n papers")
    ap.add_argument("--no-write", action="store_true", help="print, do not write bench/RESULTS.md")
    args = ap.parse_args(argv)

    from assets.shared.topics import topic_spec
    from assets.topic_brief.brief import build_brief
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

    results = []
    for v in args.variants.split(","):
        spec, _, n = v.partition("@")
        mode, batch, *rb = spec.split(":")
        rb = int(rb[0]) if rb else (int(batch) if mode == "naive" else 1)
        results.append(run_variant(v, mode, int(batch), rb, brief, papers[:int(n)] if n else papers, llm,
                                   embedder))

    head = ("| ranking | kept | relevant kept | off-topic kept | precision | recall | "
            + " | ".join(f"kept mentioning {w}" for w in DISTRACTORS) + " |")
    sep = "|---" * (6 + len(DISTRACTORS)) + "|"
    everything = evaluate({p.paper_id for p in papers}, papers, labels)
    lines = [head, sep, fmt_row(f"keep all {len(papers)} retrieved (no ranking)", everything)]
    full = [r for r in results if len(r["papers"]) == len(papers)]
    for r in results:
        n = len(r["papers"])
        e = evaluate({s.paper_id for s in r["scores"] if s.kept}, r["papers"], labels)
        failed = sum(s.error is not None for s in r["scores"])
        label = describe(r) + (f", first {n} papers only" if n < len(papers) else "")
        lines.append(fmt_row(label + (f" ({failed} not judged)" if failed else ""), e))
        other = next((f for f in full if f["mode"] == r["mode"] and f["relevance_batch"] == r["relevance_batch"]
                      and f["batch"] != r["batch"]), None)
        if n < len(papers) and other:   # the same papers ranked with the other batch size
            mine = {s.paper_id: s for s in other["scores"][:n]}
            e2 = evaluate({i for i, s in mine.items() if s.kept}, r["papers"], labels)
            same = sum(mine[s.paper_id].kept == s.kept for s in r["scores"])
            lines.append(fmt_row(f"{describe(other)}, the same {n} papers (same keep decision as "
                                 f"{r['batch']} per request for {same}/{n})", e2))
    cost = ["| ranking | papers | requests | prompt tok/paper | of which reused from the prefix cache | "
            "completion tok/paper | server s/paper | wall s/paper (shared server) | total server s | total wall s | "
            f"estimate s/paper at {PROMPT_TOK_S}/{DECODE_TOK_S} tok/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        u, n = r["usage"], len(r["scores"])
        note = "" if u["timed"] == u["requests"] else f" ({u['requests'] - u['timed']} requests untimed)"
        cost.append(f"| {describe(r)}{note} | {n} | {u['requests']} | {u['prompt_tokens'] / n:.0f} | "
                    f"{u['prompt_cached'] / n:.0f} | {u['completion_tokens'] / n:.1f} | {u['server_s'] / n:.1f} | "
                    f"{u['wall_s'] / n:.1f} | {u['server_s']:.0f} | {u['wall_s']:.0f} | "
                    f"{(u['prompt_evaluated'] / PROMPT_TOK_S + u['completion_tokens'] / DECODE_TOK_S) / n:.1f} |")
    attr = next((r for r in full if r["mode"] == "attributes"), None)
    offline = []
    if attr:
        offline = [head, sep] + [fmt_row(label, e) for label, e in offline_rows(attr["scores"], papers, labels)]
    findings = []
    if attr:
        e = evaluate({s.paper_id for s in attr["scores"] if s.kept}, papers, labels)
        met = e["precision"] >= 0.8 and e["recall"] >= 0.6
        findings.append(f"- Goal with the local model, precision >= 0.8 at recall >= 0.6, with the default ranking "
                        f"({describe(attr)}): **{'met' if met else 'not met'}** (precision {e['precision']:.2f}, "
                        f"recall {e['recall']:.2f}).")
    rel = {r["relevance_batch"]: {s.paper_id: s.relevance for s in r["scores"] if s.error is None}
           for r in full if r["mode"] == "naive"}
    if 1 in rel and any(b > 1 for b in rel):
        b = max(rel)
        both = rel[1].keys() & rel[b].keys()
        diff = sum(rel[1][i] != rel[b][i] for i in both)
        findings.append(f"- The relevance category asked {b} papers per request differs from the one asked alone "
                        f"for {diff}/{len(both)} papers; 1 per request: "
                        + ", ".join(f"{c} {list(rel[1].values()).count(c)}" for c in dict.fromkeys(rel[1].values()))
                        + f"; {b} per request: "
                        + ", ".join(f"{c} {list(rel[b].values()).count(c)}" for c in dict.fromkeys(rel[b].values()))
                        + ".")
    body = "\n".join([
        "## Paper ranking: naive vs task-attribute",
        "",
        provenance("bench/ranking_bench.py", "bench/records/ranking.json", f"{today()} on {machine()}",
                   "in-sample: the scoring's thresholds (assets/paper_rankings/scoring.py) were tuned on these "
                   "labelled papers"),
        "",
        f"Model {llm.model_name()} ({'local' if llm.is_local() else 'remote'}), "
        f"embeddings all-MiniLM-L6-v2. Topic `{TOPIC}`; the top {len(papers)} papers the corpus search returns "
        f"for the topic's query ({brief.search_query!r}), {n_rel} of them labelled relevant in "
        "`bench/labels/pointcloud_relevance.jsonl`. Kept = score >= 8. Recall is over those "
        f"{n_rel} relevant papers.",
        "",
        *lines,
        "",
        *findings,
        "",
        "Cost per paper. Server s: llama.cpp's own prompt + decode time, without the wait behind other users "
        "of the shared server (wall s includes that wait); both depend on the CPU load other work put on the "
        "2 cores while a variant ran (decode speed varied between 1.5 and 12 tok/s during these runs), so "
        "compare variants by their tokens, or by the estimate from the tokens evaluated (prompt tokens not "
        "reused from the prefix cache, plus completion tokens) at the idle speed:",
        "",
        *cost,
        "",
        *(["The attribute pass re-scored offline (same LLM answers):", "", *offline] if offline else []),
    ])
    print(body)
    if not args.no_write:
        write_record("ranking", {
            "script": "bench/ranking_bench.py", "date": today(), "machine": machine(), "model": llm.model_name(),
            "topic": TOPIC, "query": brief.search_query, "labels": "bench/labels/pointcloud_relevance.jsonl",
            "papers": [p.paper_id for p in papers],
            "variants": [{"name": r["name"], "mode": r["mode"], "batch": r["batch"],
                          "relevance_batch": r["relevance_batch"], "n_papers": len(r["papers"]), "usage": r["usage"],
                          "scores": [sc.model_dump() for sc in r["scores"]]} for r in results]})
        write_section("ranking", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
