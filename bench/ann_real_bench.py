"""Does the dump index's ANN (faiss HNSW, resources/sources.py) find what the exact search finds
on real paper embeddings? (issue 17: "ANN_MIN checked against real embeddings of 100k or more
papers".) bench/index_bench.py measured the HNSW on random unit vectors, whose recall (0.21 at
1M, 0.80 at 100k) is a floor: real embeddings cluster by topic.

The papers: the conference paper lists of papercopilot/paperlists (title + abstract of accepted
and submitted papers of ML, vision, NLP and robotics venues; fetched with the library's `fetch`
tool into a mirror, not shipped here), de-duplicated by lower-cased title and shuffled with seed
0. The queries: the last QUERIES papers of that order, never indexed, embedded as the loop embeds
a topic query (title + abstract with `doc_text`), plus their titles alone (a short query, like a
topic's name). Everything is embedded once by the bundled all-MiniLM-L6-v2 (the embedder
resource's own encode), in resumable chunk files under --work.

Per index size n (the first n papers): the HNSW index exactly as `sources.build_ann` builds it
(M=ANN_M, efConstruction=ANN_EF_BUILD) and searched as `sources.ann_top` searches it (efSearch =
max(ANN_EF_SEARCH, depth)) at the hybrid search's depth (EXACT_DEPTH = 1000) and at depth 10;
recall@10 and recall@1000 against the exact dot product; latency p50/p99 of both.

    .venv/bin/python -m bench.ann_real_bench --lists /tmp/pl    # embeds ~95k papers (about 40 min on 2 cores)
    .venv/bin/python -m bench.ann_real_bench render             # re-render RESULTS.md from the record

Writes bench/records/ann_real.json and the section `ann_real` of bench/RESULTS.md."""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import subprocess
import time
from pathlib import Path

import numpy as np

from bench.common import machine, provenance, read_record, today, write_record, write_section

SCRIPT = "bench/ann_real_bench.py"
RECORD = "ann_real"
QUERIES = 200
CHUNK = 4096
SIZES = (10_000, 25_000, 50_000, 100_000)
MAX_TOKENS = 128   # word pieces embedded per text (the model's default is 256): halves the ~1.5 h embedding here


def paper_rows(lists: Path) -> list[dict]:
    """Unique (by lower-cased title) papers with an abstract of 100+ characters, shuffled (seed 0)."""
    seen: dict[str, dict] = {}
    for f in sorted(glob.glob(str(lists / "*" / "*.json"))):
        try:
            data = json.loads(Path(f).read_text())
        except (OSError, ValueError):
            continue
        for p in data if isinstance(data, list) else []:
            if not isinstance(p, dict):
                continue
            title, abstract = (p.get("title") or "").strip(), (p.get("abstract") or "").strip()
            if title and len(abstract) >= 100 and title.lower() not in seen:
                seen[title.lower()] = {"title": title, "abstract": abstract,
                                       "file": Path(f).relative_to(lists).as_posix()}
    rows = list(seen.values())
    random.Random(0).shuffle(rows)
    return rows


def embed_all(texts: list[str], work: Path, tag: str) -> np.ndarray:
    """The texts' embeddings, chunk by chunk; a chunk already on disk is not embedded again."""
    from resources.embedder import Embedder
    from resources.sources import save_chunk

    emb = Embedder(batch_size=64)
    from resources.embedder import _load

    _load(emb.model_id(), emb.device).max_seq_length = MAX_TOKENS
    work.mkdir(parents=True, exist_ok=True)
    parts, t0, done = [], time.monotonic(), 0
    for a in range(0, len(texts), CHUNK):
        path = work / f"{tag}-{a:07d}-{min(a + CHUNK, len(texts)):07d}.npy"
        if not path.exists():
            save_chunk(path, emb.encode(texts[a:a + CHUNK]))  # renamed into place: a killed run resumes here
            done += len(texts[a:a + CHUNK])
            print(f"{tag}: {a + CHUNK}/{len(texts)} ({done / (time.monotonic() - t0):.1f} texts/s)", flush=True)
        parts.append(np.load(path))
    return np.concatenate(parts), done, time.monotonic() - t0


def pcts(ms: list[float]) -> dict:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2)}


def measure(vecs: np.ndarray, queries: dict[str, np.ndarray], n: int) -> dict:
    import faiss

    from resources import sources

    x = np.ascontiguousarray(vecs[:n], dtype=np.float32)
    t0 = time.monotonic()
    index = faiss.IndexHNSWFlat(x.shape[1], sources.ANN_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = sources.ANN_EF_BUILD
    index.add(x)
    out = {"n": n, "build_s": round(time.monotonic() - t0, 1), "queries": {}}
    for kind, q in queries.items():
        res = {}
        exact_ms, ann_ms, r10, r1000, r10_d10 = [], [], [], [], []
        for v in q:
            t = time.perf_counter()
            s = x @ v
            top = np.argsort(-s)[:sources.EXACT_DEPTH]
            exact_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            ids = sources.ann_top(index, v, sources.EXACT_DEPTH)
            ann_ms.append((time.perf_counter() - t) * 1000)
            r10.append(len(set(ids[:10]) & set(top[:10])) / 10)
            r1000.append(len(set(ids) & set(top)) / len(top))
            r10_d10.append(len(set(sources.ann_top(index, v, 10)) & set(top[:10])) / 10)
        res["recall@10"] = round(float(np.mean(r10)), 4)
        res["recall@1000"] = round(float(np.mean(r1000)), 4)
        res["recall@10_depth10"] = round(float(np.mean(r10_d10)), 4)
        res["min_recall@10"] = round(float(np.min(r10)), 2)
        res["exact"] = pcts(exact_ms)
        res["ann"] = pcts(ann_ms)
        out["queries"][kind] = res
    print(json.dumps(out), flush=True)
    return out


def run(lists: Path, work: Path, max_papers: int | None = None) -> dict:
    rows = paper_rows(lists)
    from resources.sources import doc_text

    docs, qrows = rows[:-QUERIES][:max_papers], rows[-QUERIES:]
    vecs, embedded, secs = embed_all([doc_text(r["title"], r["abstract"]) for r in docs], work, "docs")
    qfull, _, _ = embed_all([doc_text(r["title"], r["abstract"]) for r in qrows], work, "qfull")
    qtitle, _, _ = embed_all([r["title"] for r in qrows], work, "qtitle")
    sizes = [s for s in SIZES if s < len(docs)] + [len(docs)]
    results = [measure(vecs, {"title + abstract": qfull, "title": qtitle}, n) for n in sizes]
    from resources import sources

    head = subprocess.run(["git", "--git-dir", str(lists / ".git"), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip() if (lists / ".git").exists() else ""
    return {"date": today(), "machine": machine(), "papers": len(docs), "available": len(rows) - QUERIES,
            "queries": QUERIES,
            "source": {"repo": "papercopilot/paperlists", "commit": head or "33f9884 (mirror HEAD)",
                       "files": len({r["file"] for r in rows})},
            "embedding": {"model": "all-MiniLM-L6-v2 (bundled)", "max_tokens": MAX_TOKENS, "embedded_now": embedded,
                          "seconds": round(secs, 1),
                          "load_avg": os.getloadavg()[0]},
            "constants": {"ANN_MIN": sources.ANN_MIN, "ANN_M": sources.ANN_M, "ANN_EF_BUILD": sources.ANN_EF_BUILD,
                          "ANN_EF_SEARCH": sources.ANN_EF_SEARCH, "EXACT_DEPTH": sources.EXACT_DEPTH},
            "sizes": results}


def render(rec: dict) -> str:
    lines = [
        "## ANN recall on real paper embeddings",
        "",
        provenance(SCRIPT, f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "in-sample for ANN_MIN (resources/sources.py), which was set from these figures; "
                   "nothing else was tuned on them"),
        "",
        f"{rec['papers']:,} real papers (title + abstract; of {rec.get('available', rec['papers']):,} available, "
        f"the first of the shuffled order) from {rec['source']['files']} conference paper lists of "
        f"{rec['source']['repo']} (commit {rec['source']['commit']}), de-duplicated by title, shuffled (seed 0), "
        f"embedded by {rec['embedding']['model']} (the first {rec['embedding']['max_tokens']} word pieces of each "
        f"text, half the model's default, to halve the embedding time); {rec['queries']} further papers of the same "
        "lists (never indexed) are the queries, embedded as title + abstract and as the title alone. The HNSW "
        "index is built and "
        f"searched as resources/sources.py does (M={rec['constants']['ANN_M']}, efConstruction="
        f"{rec['constants']['ANN_EF_BUILD']}, efSearch = max({rec['constants']['ANN_EF_SEARCH']}, depth)), at the "
        f"hybrid search's depth {rec['constants']['EXACT_DEPTH']}; recall against the exact dot product over the "
        "same n papers. Latencies are in-memory (exact: a matrix-vector product and a sort).",
        "",
        "| papers indexed | HNSW build s | query | recall@10 (depth 1000) | worst query's recall@10 | recall@1000 "
        "| recall@10 at depth 10 | exact p50 / p99 ms | ANN p50 / p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rec["sizes"]:
        for kind, r in s["queries"].items():
            lines.append(f"| {s['n']:,} | {s['build_s']} | {kind} | {r['recall@10']:.3f} | {r['min_recall@10']:.1f} | "
                         f"{r['recall@1000']:.3f} | {r['recall@10_depth10']:.3f} | {r['exact']['p50_ms']} / "
                         f"{r['exact']['p99_ms']} | {r['ann']['p50_ms']} / {r['ann']['p99_ms']} |")
    if rec.get("reading"):
        lines += ["", rec["reading"]]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", nargs="?", default="run", choices=["run", "render"])
    ap.add_argument("--lists", type=Path, default=Path("/tmp/pl"), help="a checkout of papercopilot/paperlists")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ann_real"), help="embedding chunks (resumable)")
    ap.add_argument("--max-papers", type=int, default=None,
                    help="index at most this many papers (the first of the shuffled order); default all")
    args = ap.parse_args()
    if args.action == "render":
        rec = read_record(RECORD)
    else:
        rec = run(args.lists, args.work, args.max_papers)
        old = read_record(RECORD) if Path(f"bench/records/{RECORD}.json").exists() else {}
        if old.get("reading"):
            rec["reading"] = old["reading"]
        print("record:", write_record(RECORD, rec))
    print(write_section(RECORD, render(rec)))


if __name__ == "__main__":
    main()
