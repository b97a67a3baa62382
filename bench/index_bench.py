"""How far does the local dump index scale (issue 17)? On a generated dump of N papers (titles
and abstracts drawn, with a fixed seed, from the words of the shipped corpus at their corpus
frequencies): (a) the real embedder's throughput (all-MiniLM-L6-v2, resources/embedder.py) on a
sample of the dump, (b) the BM25 index build (normalised Parquet + bm25s, resources/sources.py
`_build_index`) on all N, (c) the faiss HNSW build on N random unit vectors of the
embedder's dimension (embedding N papers here would take days; random vectors have no topical
structure, so their recall is a pessimistic floor) and, on a smaller n, HNSW against IVF-Flat,
(d) query latency p50/p99 of the exact dot product, the ANN index and the full hybrid search
(LocalSource.search: BM25 + the real embedder's query vector against those vectors), and the
ANN's recall@10 against exact, (e) a projection to the full arXiv snapshot (2.7M papers).
Each phase runs in its own process, so its peak RSS is its own.

    .venv/bin/python -m bench.index_bench                       # N = 1,000,000 (about half an hour)
    .venv/bin/python -m bench.index_bench --n 20000 --check     # a quick check: prints, writes nothing
    .venv/bin/python -m bench.index_bench render                # re-render RESULTS.md from the record

Writes bench/records/index.json and the section `index` of bench/RESULTS.md. The figures depend on
what else the 2 cores do: the record keeps the load average of each phase."""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import multiprocessing as mp
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, machine, provenance, read_record, today, write_record, write_section

SCRIPT = "bench/index_bench.py"
RECORD = "index"
ARXIV = 2_700_000          # papers in the full arXiv metadata snapshot
PHASES = ("embed", "bm25", "ann", "vectors", "hybrid")
DEPTH = 1000               # the embedding-side depth the hybrid search asks for (sources.EXACT_DEPTH)


# ---------------------------------------------------------------- the generated dump

def vocabulary() -> tuple[list[str], list[int]]:
    """The words of the shipped corpus and their cumulative counts (random.choices' cum_weights,
    computed once): a realistic (Zipf-like) word mix."""
    counts: collections.Counter = collections.Counter()
    for line in (ROOT / "corpus" / "papers.jsonl").read_text().splitlines():
        rec = json.loads(line)
        text = f"{rec['title']} {rec.get('summary') or rec.get('abstract')}"
        counts.update(re.findall(r"[a-z][a-z-]+", text.lower()))
    words = sorted(counts)
    return words, list(itertools.accumulate(counts[w] for w in words))


def write_dump(path: Path, n: int, seed: int = 0) -> None:
    """n papers as JSON lines: 6-14 title words, 100-220 abstract words (arXiv abstracts
    average about 150 words)."""
    rng = random.Random(seed)
    words, cum = vocabulary()
    with path.open("w") as f:
        for i in range(n):
            title = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(6, 14))).capitalize()
            abstract = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(100, 220))).capitalize() + "."
            f.write(json.dumps({"paper_id": f"gen{i:07d}", "title": title, "abstract": abstract}) + "\n")


def queries(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    words, cum = vocabulary()
    return [" ".join(rng.choices(words, cum_weights=cum, k=rng.randint(3, 6))) for _ in range(n)]


# ---------------------------------------------------------------- phases (each in its own process)

def _phase(fn, *args) -> dict:
    """Run fn(*args) in a fresh process; its result plus the process's peak RSS and the load."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        out = pool.apply(_measured, (fn, *args))
    print(json.dumps({fn.__name__: out}), flush=True)
    return out


def _measured(fn, *args) -> dict:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    out = fn(*args)
    return {**out, "wall_s": round(time.perf_counter() - t0, 2), "base_rss_mb": round(base),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "load": round(os.getloadavg()[0], 1)}


def _model_name(model_id: str) -> str:
    from resources.embedder import default_model_path

    return "all-MiniLM-L6-v2, bundled" if model_id == default_model_path() else model_id


def embed_throughput(dump: Path, sample: int) -> dict:
    """Papers/s of the real embedder on the dump's first `sample` papers, after a warm-up."""
    import polars as pl

    from resources.embedder import Embedder
    from resources.sources import doc_text

    emb = Embedder()
    texts = [doc_text(t, a) for t, a in pl.scan_ndjson(dump).head(sample).select("title", "abstract")
             .collect().iter_rows()]
    t0 = time.perf_counter()
    dim = emb.encode(texts[:32]).shape[1]
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb.encode(texts)
    s = time.perf_counter() - t0
    return {"papers": len(texts), "seconds": round(s, 2), "papers_per_s": round(len(texts) / s, 1),
            "dim": dim, "model_load_s": round(load_s, 1), "model": _model_name(emb.model_id()),
            "torch_threads": __import__("torch").get_num_threads()}


def bm25_build(dump: Path, root: Path) -> dict:
    from resources.sources import _build_index, index_folder

    folder = index_folder(dump, "jsonl", (), root)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    _build_index(dump, "jsonl", (), folder)
    s = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return {"seconds": round(s, 1), "papers_per_s": round(json.loads((folder / "meta.json").read_text())["papers"] / s),
            "folder": str(folder), "index_mb": round(size / 2**20)}


def random_chunks(folder: Path, n: int, dim: int, model_id: str, seed: int = 0) -> dict:
    """n random unit vectors as the embedding chunks of `model_id` in the index folder (where
    LocalSource.search finds them)."""
    import numpy as np

    from resources import sources

    chunk_dir = folder / f"emb-{sources.hashlib.sha256(model_id.encode()).hexdigest()[:12]}"
    chunk_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for a, b in sources.chunk_plan({}, n, sources.EMBED_CHUNK):
        x = rng.standard_normal((b - a, dim), dtype=np.float32)
        np.save(chunk_dir / sources._chunk_name(a, b), x / np.linalg.norm(x, axis=1, keepdims=True))
    return {"chunk_dir": str(chunk_dir)}


def _chunks(chunk_dir: str) -> list[Path]:
    return sorted(Path(chunk_dir).glob("chunk-*.npy"))


def ann_build(chunk_dir: str, n: int) -> dict:
    from resources import sources

    chunks = _chunks(chunk_dir)
    path = chunks[0].parent.with_suffix(".faiss")
    t0 = time.perf_counter()
    sources.build_ann(chunks, path)
    return {"seconds": round(time.perf_counter() - t0, 1), "index_mb": round(path.stat().st_size / 2**20)}


def _query_vectors(n: int, dim: int, seed: int = 2):
    import numpy as np

    q = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _recall(scores, found, k: int = 10) -> float:
    import numpy as np

    kth = np.sort(scores)[-k]
    return float(np.mean(scores[found[:k]] >= kth - 1e-6))


def _pcts(ms: list[float]) -> dict:
    import numpy as np

    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2)}


def vector_latency(chunk_dir: str, n: int, nq: int) -> dict:
    """Exact top-DEPTH by dot product over the memory-mapped chunks vs the ANN index, per query."""
    from resources import sources

    chunks = _chunks(chunk_dir)
    index = sources.ann_index(chunks, n)
    qs = _query_vectors(nq, index.d)
    exact_ms, ann_ms, recalls = [], [], []
    sources.exact_scores(chunks, qs[0])                      # page the chunks in once
    for q in qs:
        t0 = time.perf_counter()
        scores = sources.exact_scores(chunks, q)
        sources._top(scores, DEPTH)
        exact_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        found = sources.ann_top(index, q, DEPTH)
        ann_ms.append((time.perf_counter() - t0) * 1000)
        recalls.append(_recall(scores, found))
    return {"exact": _pcts(exact_ms), "ann": _pcts(ann_ms), "recall_at_10": round(sum(recalls) / len(recalls), 3),
            "queries": nq, "faiss_threads": __import__("faiss").omp_get_max_threads()}


def _ivf_flat(x):
    """The alternative: IVF-Flat with ~4 sqrt(n) cells (faiss's guideline; >= 39 training points
    each), scanning 1/16 of them or enough for ~4x DEPTH vectors, whichever is more."""
    import faiss

    n, dim = x.shape
    nlist = max(1, min(int(4 * n ** 0.5), n // 39))
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.train(x[:: max(1, n // (40 * nlist))])
    ivf.add(x)
    params = faiss.SearchParametersIVF(nprobe=min(nlist, max(round(nlist / 16), -(-4 * DEPTH * nlist // n))))
    return lambda q: ivf.search(q[None, :], DEPTH, params=params)[1][0], f"IVF-Flat, {params.nprobe}/{nlist} cells"


def _candidate(name: str, x):
    """One of the compared indexes built over x: (query -> top DEPTH rows, a description)."""
    from resources import sources

    if name == "ivf_flat":
        return _ivf_flat(x)
    with tempfile.TemporaryDirectory() as d:
        c = Path(d) / sources._chunk_name(0, len(x))
        __import__("numpy").save(c, x)
        sources.build_ann([c], Path(d) / "i.faiss")
        hnsw = __import__("faiss").read_index(str(Path(d) / "i.faiss"))
    return (lambda q: sources.ann_top(hnsw, q, DEPTH)), f"HNSW, M={sources.ANN_M}, efSearch={DEPTH}"


def hnsw_vs_ivf(chunk_dir: str, n: int, nq: int) -> dict:
    """Both candidate indexes on the first n vectors: build time, latency at DEPTH, recall@10."""
    import numpy as np

    parts: list = []
    for p in _chunks(chunk_dir):
        if sum(map(len, parts)) >= n:
            break
        parts.append(np.load(p))
    x = np.concatenate(parts)[:n]
    qs = _query_vectors(nq, x.shape[1])
    out = {"n": n, "queries": nq}
    for name in ("ivf_flat", "hnsw"):
        t0 = time.perf_counter()
        search, what = _candidate(name, x)
        build = time.perf_counter() - t0
        ms, rec = [], []
        for q in qs:
            t0 = time.perf_counter()
            found = search(q)
            ms.append((time.perf_counter() - t0) * 1000)
            rec.append(_recall(x @ q, found))
        out[name] = {"index": what, "build_s": round(build, 1), **_pcts(ms),
                     "recall_at_10": round(sum(rec) / len(rec), 3)}
    return out


def hybrid_latency(dump: Path, root: Path, qtexts: list[str]) -> dict:
    """LocalSource.search end to end with the real embedder (the query vector only: the papers'
    vectors are the random ones), after one warm-up search."""
    from resources import sources
    from resources.embedder import Embedder

    src = sources.LocalSource(dump, Embedder(), root)
    src.search(qtexts[0], 10)
    ms = []
    for q in qtexts:
        t0 = time.perf_counter()
        src.search(q, 10)
        ms.append((time.perf_counter() - t0) * 1000)
    return {**_pcts(ms), "path": "ann" if src.size() >= sources.ANN_MIN else "exact", "queries": len(qtexts)}


# ---------------------------------------------------------------- the run and its section

def projection(rec: dict) -> dict:
    """The full arXiv snapshot at the measured rates: embedding at the measured papers/s on this
    machine's cores, and on 8 and 64 cores assuming throughput scales linearly with cores (an
    assumption, not a measurement); BM25 and the ANN build scaled linearly from N."""
    rate, cores, n = rec["embed"]["papers_per_s"], os.cpu_count() or 2, rec["n"]
    hours = {str(c): round(ARXIV / (rate * c / cores) / 3600, 1) for c in sorted({cores, 8, 64})}
    return {"papers": ARXIV, "embed_hours_by_cores": hours,
            "embeddings_gb": round(ARXIV * rec["embed"]["dim"] * 4 / 1e9, 1),
            "bm25_build_min": round(rec["bm25"]["seconds"] * ARXIV / n / 60, 1),
            "ann_build_min": round(rec["ann"]["seconds"] * ARXIV / n / 60, 1)}


def run(n: int, sample: int, nq: int, hnsw_n: int, work: Path) -> dict:
    from resources import sources

    dump = work / "dump.jsonl"
    t0 = time.perf_counter()
    write_dump(dump, n)
    gen_s = time.perf_counter() - t0
    root = work / "index"
    rec = {"script": SCRIPT, "date": today(), "machine": machine(), "n": n, "niceness": os.nice(0),
           "dump_mb": round(dump.stat().st_size / 2**20), "generate_s": round(gen_s, 1),
           "constants": {"EMBED_CHUNK": sources.EMBED_CHUNK, "ANN_MIN": sources.ANN_MIN,
                         "ANN_M": sources.ANN_M, "ANN_EF_BUILD": sources.ANN_EF_BUILD,
                         "ANN_EF_SEARCH": sources.ANN_EF_SEARCH}}
    rec["embed"] = _phase(embed_throughput, dump, sample)
    rec["bm25"] = _phase(bm25_build, dump, root)
    from resources.embedder import Embedder

    chunk_dir = random_chunks(Path(rec["bm25"]["folder"]), n, rec["embed"]["dim"], Embedder().model_id())["chunk_dir"]
    rec["ann"] = _phase(ann_build, chunk_dir, n)
    rec["vectors"] = _phase(vector_latency, chunk_dir, n, nq)
    rec["hybrid"] = _phase(hybrid_latency, dump, root, queries(nq))
    rec["hnsw_vs_ivf"] = _phase(hnsw_vs_ivf, chunk_dir, min(n, hnsw_n), min(nq, 100))
    rec["projection"] = projection(rec)
    return rec


def render(rec: dict) -> str:
    e, b, a, v, h, c, p = (rec[k] for k in ("embed", "bm25", "ann", "vectors", "hybrid", "hnsw_vs_ivf", "projection"))
    cores = ", ".join(f"{k} cores {hrs} h" for k, hrs in p["embed_hours_by_cores"].items())
    return "\n".join([
        "## Literature index at scale",
        "",
        provenance(SCRIPT, f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: a generated dump (corpus words at corpus frequencies, seed 0) and random unit "
                   "vectors; nothing tuned on it"),
        "",
        (f"A generated dump of {rec['n']:,} papers ({rec['dump_mb']} MB of JSON lines). The papers' vectors are "
         f"{rec['n']:,} random unit vectors of the embedder's dimension ({e['dim']}), not embeddings: embedding "
         f"them here would take {rec['n'] / e['papers_per_s'] / 3600:.0f} h. Random vectors have no topical "
         "structure, so the ANN recall below is a pessimistic floor (tests/test_dump_index.py: >= 0.9 on "
         "clustered synthetic embeddings). Each phase ran in its own process; peak RSS is that process's. "
         f"1-minute load average after each phase: {', '.join(str(rec[k]['load']) for k in PHASES)} "
         "(2 = both cores busy)."),
        "",
        "| phase | result | time | peak RSS MB |",
        "|---|---|---|---|",
        (f"| embedder ({e['model']}, {e['torch_threads']} torch threads) | {e['papers_per_s']} papers/s on "
         f"{e['papers']:,} papers | {e['seconds']} s | {e['peak_rss_mb']} |"),
        (f"| BM25 build (Parquet + bm25s) | {b['papers_per_s']:,} papers/s, index {b['index_mb']} MB | "
         f"{b['seconds']} s | {b['peak_rss_mb']} |"),
        (f"| ANN build ({c['hnsw']['index'].split(', efSearch')[0]}) | index {a['index_mb']} MB | {a['seconds']} s | "
         f"{a['peak_rss_mb']} |"),
        "",
        f"Query latency over {v['queries']} queries (top {DEPTH}, the hybrid search's embedding-side depth):",
        "",
        "| search | p50 ms | p99 ms |",
        "|---|---|---|",
        f"| exact dot product (memory-mapped chunks) | {v['exact']['p50_ms']} | {v['exact']['p99_ms']} |",
        (f"| ANN ({c['hnsw']['index']}) | {v['ann']['p50_ms']} | "
         f"{v['ann']['p99_ms']} |"),
        (f"| hybrid LocalSource.search, k=10 ({h['path']} path, BM25 + query embedding + fusion) | {h['p50_ms']} | "
         f"{h['p99_ms']} |"),
        "",
        f"ANN recall@10 against exact (random vectors and queries): {v['recall_at_10']}.",
        "",
        f"The two candidate indexes on the first {c['n']:,} vectors ({c['queries']} queries, top {DEPTH}):",
        "",
        "| index | build s | p50 ms | p99 ms | recall@10 |",
        "|---|---|---|---|---|",
        *(f"| {r['index']} | {r['build_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['recall_at_10']} |"
          for r in (c["hnsw"], c["ivf_flat"])),
        "",
        (f"Projected to the full arXiv snapshot ({p['papers']:,} papers): embedding at the measured rate takes "
         f"{cores} (8 and 64 cores assume throughput scales linearly with cores: an assumption, not measured); the "
         f"embeddings take {p['embeddings_gb']} GB (float32), and the HNSW index that plus its graph. Scaled linearly "
         f"from {rec['n']:,} papers: BM25 build {p['bm25_build_min']} min, ANN build {p['ann_build_min']} min "
         "(an HNSW insert costs ~log n: a slight underestimate)."),
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="run", choices=["run", "render"])
    ap.add_argument("--n", type=int, default=1_000_000, help="papers in the generated dump")
    ap.add_argument("--sample", type=int, default=2000, help="papers embedded for the throughput")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--hnsw-n", type=int, default=100_000, help="vectors for the IVF-Flat vs HNSW comparison")
    ap.add_argument("--check", action="store_true", help="print the record and section, write neither")
    ap.add_argument("--work", default="", help="a folder for the dump and its index (default: a temporary one)")
    args = ap.parse_args()
    if args.what == "render":
        rec = read_record(RECORD)
    else:
        work = Path(args.work or tempfile.mkdtemp(prefix="index_bench-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            rec = run(args.n, args.sample, args.queries, args.hnsw_n, work)
        finally:
            if not args.work:
                shutil.rmtree(work, ignore_errors=True)
        if args.check:                         # a trial run: nothing of bench/ is rewritten
            print(json.dumps(rec, indent=1), "\n", render(rec))
            return
        print("record:", write_record(RECORD, rec))
    print(write_section(RECORD, render(rec)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
