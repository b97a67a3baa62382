"""Does embedding a dump in parallel pay on this machine (issue 17, RESEARCHLOOP_EMBED_WORKERS)?
The real embedder (all-MiniLM-L6-v2, resources/embedder.py) builds the embedding chunks of a
generated dump (bench/index_bench.py's: corpus words at corpus frequencies, seed 0) through
`resources.sources.embedding_chunks`, once with 1 worker (in the process, torch on every core)
and once with 2 local worker processes (spawned, each loading the model, torch threads =
cores // 2). Each build runs in a fresh process, so each loads the model itself; its wall time
includes those loads. The chunks of both builds are compared (byte-identical, else the largest
difference).

    .venv/bin/python -m bench.embed_parallel_bench              # 2,000 papers, chunks of 250 (minutes)
    .venv/bin/python -m bench.embed_parallel_bench --check      # prints, writes nothing
    .venv/bin/python -m bench.embed_parallel_bench render       # re-render RESULTS.md from the record

Writes bench/records/embed_parallel.json and the section `embed_parallel` of bench/RESULTS.md."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, machine, provenance, read_record, today, write_record, write_section

SCRIPT = "bench/embed_parallel_bench.py"
RECORD = "embed_parallel"
WORKERS = (1, 2)


def build(folder: Path, n: int, workers: int, chunk: int) -> dict:
    """One build of every chunk (run in its own process): wall time, and when each chunk was
    written (seconds from the start, in the order they finished)."""
    from resources import sources
    from resources.embedder import Embedder

    sources.EMBED_CHUNK = chunk
    emb = Embedder()
    shutil.rmtree(folder / f"emb-{sources._model_key(emb)}", ignore_errors=True)
    written: list[float] = []
    save = sources.save_chunk
    t0 = time.perf_counter()

    def timed_save(path, vecs):
        save(path, vecs)
        written.append(round(time.perf_counter() - t0, 2))

    sources.save_chunk = timed_save
    load = os.getloadavg()[0]
    chunks = sources.embedding_chunks(folder, n, emb, workers=workers)
    wall = time.perf_counter() - t0
    return {"workers": workers, "wall_s": round(wall, 1), "papers_per_s": round(n / wall, 1), "chunks": len(chunks),
            "chunk_written_s": written, "torch_threads_each": max(1, sources._cores() // workers),
            "load_before": round(load, 1), "load_after": round(os.getloadavg()[0], 1)}


def _in_process(folder: Path, n: int, workers: int, chunk: int) -> dict:
    """`build` in a fresh interpreter (not a daemonic pool worker, which may not start workers)."""
    code = ("import json, sys; from pathlib import Path; from bench.embed_parallel_bench import build; "
            f"print(json.dumps(build(Path({str(folder)!r}), {n}, {workers}, {chunk})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(rec), flush=True)
    return rec


def compare(a: Path, b: Path) -> dict:
    import numpy as np

    names = sorted(p.name for p in a.iterdir())
    same = names == sorted(p.name for p in b.iterdir()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in names)
    diff = max(float(np.abs(np.load(a / f) - np.load(b / f)).max()) for f in names)
    return {"byte_identical": same, "max_abs_diff": diff}


def run(n: int, chunk: int, work: Path) -> dict:
    from bench.index_bench import _model_name, write_dump
    from resources import sources
    from resources.embedder import Embedder

    dump = work / "dump.jsonl"
    write_dump(dump, n)
    folder = sources.LocalSource(dump, Embedder(), work / "index").folder()
    chunk_dir = folder / f"emb-{sources._model_key(Embedder())}"
    rec = {"script": SCRIPT, "date": today(), "machine": machine(), "cores": sources._cores(), "n": n,
           "chunk": chunk, "embed_batch": sources.EMBED_BATCH, "model": _model_name(Embedder().model_id()),
           "niceness": os.nice(0), "builds": []}
    for w in WORKERS:
        rec["builds"].append(_in_process(folder, n, w, chunk))
        if w == WORKERS[0]:
            shutil.copytree(chunk_dir, work / "first")
    rec["chunks_compared"] = compare(work / "first", chunk_dir)
    return rec


def render(rec: dict) -> str:
    one = rec["builds"][0]
    cmp_ = rec["chunks_compared"]
    same = ("byte-identical" if cmp_["byte_identical"] else
            f"not byte-identical (torch's thread count changes its float sums; largest difference "
            f"{cmp_['max_abs_diff']:.1e})")
    rows = []
    for b in rec["builds"]:
        after_first = (rec["n"] - rec["chunk"] * b["workers"]) / (b["chunk_written_s"][-1] - b["chunk_written_s"][
            b["workers"] - 1]) if len(b["chunk_written_s"]) > b["workers"] else float("nan")
        rows.append(f"| {b['workers']} | {b['torch_threads_each']} | {b['wall_s']} | {b['papers_per_s']} | "
                    f"{after_first:.1f} | {b['wall_s'] / one['wall_s']:.2f} | {b['load_before']} |")
    return "\n".join([
        "## Embedding a dump in parallel (RESEARCHLOOP_EMBED_WORKERS)",
        "",
        provenance(SCRIPT, f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: a generated dump (corpus words at corpus frequencies, seed 0); nothing tuned on it"),
        "",
        (f"The real embedder ({rec['model']}) built the embedding chunks of {rec['n']:,} generated papers "
         f"(chunks of {rec['chunk']}) through `embedding_chunks`, each build in a fresh process on {rec['cores']} "
         "cores, its wall time including the model loads (one in the process for 1 worker, one in each spawned "
         "worker otherwise). 'After the first chunks': papers/s between the first round of chunks and the last "
         "chunk, model loads left out. Load: the 1-minute load average when the build started (the machine "
         "is shared)."),
        "",
        "| workers | torch threads each | wall s | papers/s | papers/s after the first chunks | wall vs 1 worker | "
        "load |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"The chunk files of the two builds are {same}.",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="run", choices=["run", "render"])
    ap.add_argument("--n", type=int, default=2000, help="papers in the generated dump")
    ap.add_argument("--chunk", type=int, default=250, help="papers per chunk (EMBED_CHUNK for the bench)")
    ap.add_argument("--check", action="store_true", help="print the record and section, write neither")
    args = ap.parse_args()
    if args.what == "render":
        rec = read_record(RECORD)
    else:
        work = Path(tempfile.mkdtemp(prefix="embed_parallel_bench-"))
        try:
            rec = run(args.n, args.chunk, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if args.check:
            print(json.dumps(rec, indent=1), "\n", render(rec))
            return
        print("record:", write_record(RECORD, rec))
    print(write_section(RECORD, render(rec)))


if __name__ == "__main__":
    main()
