"""Does the local server decode several requests at once for little more than one? Slots against
concurrent requests.

For each slot count (default 1, 2 and 4) the local server (the default model,
RESEARCHLOOP_LOCAL_MODEL) is started on a private cache folder (links to the shared model file, so a
loop's shared server is never restarted) with that many slots (llama.cpp's parallel slots, each with
the whole per-request window), and for each number of concurrent requests (default 1, 2 and 4) the
same fixed prompt is sent that many times at once with a fixed answer length (temperature 0, the end
of text ignored, so every answer has exactly max_tokens tokens). Before each measured batch an
identical batch of one-token answers puts the prompt into the slots' caches, so the batch measures
decoding. Per configuration: the aggregate decode rate (answer tokens of the batch over its wall
time), each request's latency and its own decode rate (the server's `timings`).

    .venv/bin/python -m bench.slots_bench [--slots 1,2,4] [--concurrency 1,2,4] [--max-tokens 128]
    .venv/bin/python -m bench.slots_bench --quick --out /tmp/slots.json   # small: 1-2 slots, 1-2 requests
    python -m bench slots [ARGS]                                           # the same (make bench-slots)
    FROM_RECORD=1 .venv/bin/python -m bench.slots_bench                    # re-render the section only

The record (default bench/records/slots.json) holds every request's figures; the section "slots" of
bench/results/slots.md is written only when the record is the default one.

`--prefix`: requests that begin alike, as the plans and patches of a round's ideas do (a shipped
topic's experiment code as the system message, then each idea's own line), on one server with
`--prefix-slots` slots, fresh for each case: sent all at once, one after another, and the first alone
then the rest at once. Per case the wall time, the prompt tokens the server read and those it reused
from its cache, the answer tokens and the decode seconds (record bench/records/slots_prefix.json,
section "slots-prefix"). With `--prefix-max-tokens N` over 32 every answer is exactly N tokens, as
long as a plan's or a patch's, where decoding weighs as much as reading (record
bench/records/slots_prefix_answers.json, section "slots-prefix-answers").
`--prefix-kv-unified`: the same with answers of `--prefix-max-tokens`, on slots that share one KV
cache (RESEARCHLOOP_LLM_KV_UNIFIED=1: a prompt an idle slot holds is kept in host memory, where a
request on any slot can take up its prefix; record bench/records/slots_prefix_unified.json, section
"slots-prefix-unified").

`--contention`: one request's decode rate while other processes compete for the cores, for each way
the server's threads can wait (OpenMP's wait policy and spin count, and the thread count): idle,
beside one and two busy processes, and beside two busy processes at a lower priority (`nice`), as a
loop's experiments and step processes compete with its server (record
bench/records/slots_contention.json, section "slots-contention").

`--threads-split`: the server reads prompts with all its threads and may decode answers with fewer
(RESEARCHLOOP_LLM_DECODE_THREADS); per split, idle and beside one busy process, the reading rate of
an unseen prompt, one request's decode rate and (idle) two requests' aggregate (record
bench/records/slots_threads.json, section "slots-threads").
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import RECORDS, machine, page_path, provenance, repo_path, today, write_section
from resources.local_llm import linked_cache, server_status, stop_server
from resources.local_llm.server import decode_thread_count, ensure_server
from resources.settings import settings
from resources.timing_log import server_timings

SCRIPT = "bench/slots_bench.py"
RECORD = "slots"
SECTION = "slots"
TITLE = "Slots: requests decoded at once by the local server"
# a fixed prompt whose answer is code, as most of the loop's answers are
PROMPT = ("Write a Python function `moving_average(xs, k)` that returns the moving averages of the list xs "
          "over windows of k items, with a docstring and a short example of its use.")


def post(url: str, body: dict, timeout_s: float = 1800.0) -> dict:
    """One chat request; its latency and the server's own figures (resources/timing_log.server_timings)."""
    req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        resp = json.loads(r.read())
    return {"latency_s": round(time.monotonic() - t0, 3), **server_timings(resp)}


def ask(url: str, model: str, max_tokens: int) -> dict:
    """The fixed prompt at temperature 0, answered with exactly `max_tokens` tokens."""
    return post(url, {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
                      "temperature": 0, "seed": 0, "ignore_eos": True})


def batch(url: str, model: str, n: int, max_tokens: int) -> dict:
    """`n` identical requests at once: the batch's wall time and each request's figures."""
    with ThreadPoolExecutor(n) as pool:
        t0 = time.monotonic()
        futures = [pool.submit(ask, url, model, max_tokens) for _ in range(n)]
        requests = [f.result() for f in futures]
        wall = time.monotonic() - t0
    return {"wall_s": round(wall, 3), "requests": requests}


def summarise(slots: int, concurrency: int, b: dict) -> dict:
    """One configuration's row: aggregate decode tokens/s over the batch's wall time, latencies, and
    each request's own decode rate as the server timed it."""
    reqs = b["requests"]
    tokens = sum(r.get("answer_tokens", 0) for r in reqs)
    lat = [r["latency_s"] for r in reqs]
    own = [r["answer_tokens"] / r["decode_s"] for r in reqs if r.get("decode_s") and r.get("answer_tokens")]
    return {"slots": slots, "concurrency": concurrency, "answer_tokens": tokens, "wall_s": b["wall_s"],
            "aggregate_tok_s": round(tokens / b["wall_s"], 2) if b["wall_s"] > 0 else 0.0,
            "latency_mean_s": round(statistics.mean(lat), 2), "latency_max_s": round(max(lat), 2),
            "request_tok_s": round(statistics.mean(own), 2) if own else None,
            "prompt_s": round(sum(r.get("prompt_s", 0.0) for r in reqs), 3),
            "cached_tokens": sum(r.get("cached_tokens", 0) for r in reqs)}


def measure(model: str, slot_counts: list[int], concurrencies: list[int], max_tokens: int, ctx_size: int,
            threads: int, work: Path) -> dict:
    cache = linked_cache(model, work / "llm_cache", progress=True)
    rows, raw = [], []
    for slots in slot_counts:
        stop_server(cache)  # each slot count on a fresh server
        t0 = time.monotonic()
        url = ensure_server(model, cache, ctx_size=ctx_size, threads=threads, slots=slots, lease=False)
        startup = round(time.monotonic() - t0, 1)
        state = server_status(cache) or {}
        try:
            for n in concurrencies:
                batch(url, model, n, 1)  # the prompt into the slots' caches: the measured batch decodes
                b = batch(url, model, n, max_tokens)
                row = summarise(slots, n, b)
                rows.append(row)
                raw.append({"slots": slots, "concurrency": n, "server_ctx": state.get("server_ctx"),
                            "startup_s": startup, **b})
                print(json.dumps(row), flush=True)
        finally:
            stop_server(cache)
    return {"script": SCRIPT, "date": today(), "machine": machine(), "load_avg": round(os.getloadavg()[0], 1),
            "model": model, "max_tokens": max_tokens, "ctx_size": ctx_size, "threads": threads,
            "prompt": PROMPT, "rows": rows, "raw": raw}


def render(rec: dict) -> str:
    table = ["| slots | requests at once | aggregate decode tok/s | per request tok/s (server) | "
             "latency mean / max s | batch wall s |", "|---" * 6 + "|"]
    for r in rec["rows"]:
        own = "" if r["request_tok_s"] is None else f"{r['request_tok_s']:.1f}"
        table.append(f"| {r['slots']} | {r['concurrency']} | {r['aggregate_tok_s']:.1f} | {own} | "
                     f"{r['latency_mean_s']:.1f} / {r['latency_max_s']:.1f} | {r['wall_s']:.1f} |")
    return "\n".join([
        f"## {TITLE}",
        "",
        provenance(SCRIPT, rec.get("record") or f"bench/records/{RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: one fixed prompt, timed"),
        "",
        (f"Model `{rec['model']}`, {rec['threads']} threads, a window of {rec['ctx_size']} tokens per slot; each "
         f"request answers exactly {rec['max_tokens']} tokens at temperature 0 (the prompt already cached). "
         "Aggregate: the batch's answer tokens over its wall time; per request: the server's own decode rate. "
         f"Load average at the end: {rec['load_avg']}."),
        "",
        *table,
    ])


PREFIX_RECORD = "slots_prefix"
PREFIX_ANSWERS_RECORD = "slots_prefix_answers"
PREFIX_UNIFIED_RECORD = "slots_prefix_unified"
PREFIX_UNIFIED_TITLE = "Slots: requests that begin alike, on slots that share one KV cache"
PREFIX_TITLE = "Slots: requests that begin alike, at once or one after another"
PREFIX_ANSWERS_TITLE = "Slots: requests that begin alike, with answers as long as a plan's or a patch's"
PREFIX_CODE = "experiments/diabetes_regression/experiment.py"
IDEAS = ["Use gradient boosting instead of the linear model.", "Add polynomial features of degree two.",
         "Standardise the target before fitting.", "Tune the regularisation strength by cross-validation."]


AT_ONCE, ONE_BY_ONE, FIRST_ALONE = "at once", "one after another", "the first alone, then the rest at once"
WAYS = (AT_ONCE, ONE_BY_ONE, FIRST_ALONE)


def ask_prefixed(url: str, model: str, system: str, idea: str, max_tokens: int) -> dict:
    """One idea's request after the shared system message. Answers longer than a sentence are held
    to exactly `max_tokens` tokens, so the ways of sending compare the same decoding work."""
    exact = {"ignore_eos": True} if max_tokens > 32 else {}
    return post(url, {"model": model, "max_tokens": max_tokens, "temperature": 0, "seed": 0, **exact, "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Idea: {idea}\nName the one change to the file, in one sentence."}]})


def measure_prefix(model: str, slots: int, counts: list[int], max_tokens: int, ctx_size: int, threads: int,
                   work: Path) -> dict:
    """For each request count and each of WAYS to send them (all at once; one after another; the
    first alone, then the rest at once), the requests on a fresh server (an empty cache)."""
    cache = linked_cache(model, work / "llm_cache", progress=True)
    code = (Path(__file__).resolve().parents[1] / PREFIX_CODE).read_text()
    system = ("You are an expert engineer who edits experiment code.\n\n"
              f"The current experiment.py:\n```python\n{code}\n```")
    rows = []
    for n in counts:
        for how in WAYS:
            stop_server(cache)
            url = ensure_server(model, cache, ctx_size=ctx_size, threads=threads, slots=slots, lease=False)
            try:
                asks = [(url, model, system, IDEAS[i], max_tokens) for i in range(n)]
                t0 = time.monotonic()
                first = [ask_prefixed(*asks[0])] if how != AT_ONCE else []
                rest = asks[len(first):]
                if how == ONE_BY_ONE:
                    reqs = first + [ask_prefixed(*a) for a in rest]
                else:
                    with ThreadPoolExecutor(max(1, len(rest))) as pool:
                        reqs = first + list(pool.map(lambda a: ask_prefixed(*a), rest))
                wall = round(time.monotonic() - t0, 2)
            finally:
                stop_server(cache)
            row = {"requests": n, "sent": how, "wall_s": wall,
                   "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in reqs),
                   "cached_tokens": sum(r.get("cached_tokens", 0) for r in reqs),
                   "prompt_s": round(sum(r.get("prompt_s", 0.0) for r in reqs), 2), "raw": reqs}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "raw"}), flush=True)
    return {"script": SCRIPT, "date": today(), "machine": machine(), "load_avg": round(os.getloadavg()[0], 1),
            "model": model, "slots": slots, "threads": threads, "decode_threads": decode_thread_count(threads),
            "max_tokens": max_tokens, "exact": max_tokens > 32, "prefix": PREFIX_CODE,
            "kv_unified": settings().llm_kv_unified, "rows": rows}


def render_prefix(rec: dict, record: str = PREFIX_RECORD) -> str:
    table = ["| requests | sent | wall s | prompt tokens | reused from the cache | prompt reading s (server) "
             "| answer tokens | decode s (server) |", "|---" * 8 + "|"]
    for r in rec["rows"]:
        answers = sum(q.get("answer_tokens", 0) for q in r.get("raw", []))
        decode = sum(q.get("decode_s", 0.0) for q in r.get("raw", []))
        table.append(f"| {r['requests']} | {r['sent']} | {r['wall_s']:.1f} | {r['prompt_tokens']} | "
                     f"{r['cached_tokens']} | {r['prompt_s']:.1f} | {answers} | {decode:.1f} |")
    title = {PREFIX_ANSWERS_RECORD: PREFIX_ANSWERS_TITLE, PREFIX_UNIFIED_RECORD: PREFIX_UNIFIED_TITLE}.get(
        record, PREFIX_TITLE)
    return "\n".join([
        f"## {title}", "",
        provenance(SCRIPT, f"bench/records/{record}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: fixed prompts, timed once"), "",
        (f"Model `{rec['model']}`, {rec['slots']} slots, {rec['threads']} threads"
         + (f" ({rec['decode_threads']} decoding)" if "decode_threads" in rec else "")
         + (", one KV cache shared by the slots (an idle slot's prompt kept in host memory for any slot)"
            if rec.get("kv_unified") else "")
         + f", a fresh server (empty cache) for each row. Every request: `{rec['prefix']}` as the system message, "
         f"then one idea's line; answers of {'exactly' if rec.get('exact') else 'at most'} {rec['max_tokens']} "
         f"tokens at temperature 0. Load average at the end: {rec['load_avg']}."),
        "", *table])


CONTENTION_RECORD = "slots_contention"
CONTENTION_TITLE = "Slots: decode beside busy processes, per way the server's threads wait"
# (label, OMP_WAIT_POLICY, GOMP_SPINCOUNT or "" for the policy's own, threads)
WAITS = [("ACTIVE, spin 20000000", "ACTIVE", "20000000", 2), ("ACTIVE, spin 200000", "ACTIVE", "200000", 2),
         ("ACTIVE, spin 10000", "ACTIVE", "10000", 2), ("PASSIVE", "PASSIVE", "", 2),
         ("PASSIVE, 1 thread", "PASSIVE", "", 1)]
LOADS = [("idle", 0, 0), ("1 busy process", 1, 0), ("2 busy processes", 2, 0), ("2 busy processes at nice 10", 2, 10)]
BUSY = "while True:\n    sum(range(10000))\n"


@contextlib.contextmanager
def busy(n: int, niceness: int):
    """`n` processes that keep a core busy with pure Python, at `niceness`, while the block runs
    (given a second to start)."""
    pre = (lambda: os.nice(niceness)) if niceness else None
    procs = [subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=pre) for _ in range(n)]  # noqa: PLW1509
    try:
        time.sleep(1.0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def measure_contention(model: str, max_tokens: int, ctx_size: int, work: Path) -> dict:
    """Per wait configuration, a fresh server; per load, one request (its prompt cached first)."""
    cache = linked_cache(model, work / "llm_cache", progress=True)
    rows = []
    saved = {k: os.environ.get(k) for k in ("RESEARCHLOOP_LLM_WAIT_POLICY", "GOMP_SPINCOUNT",
                                            "RESEARCHLOOP_LLM_DECODE_THREADS")}
    try:
        for label, policy, spin, threads in WAITS:
            os.environ["RESEARCHLOOP_LLM_WAIT_POLICY"] = policy
            os.environ["RESEARCHLOOP_LLM_DECODE_THREADS"] = str(threads)  # every thread decodes
            if spin:
                os.environ["GOMP_SPINCOUNT"] = spin
            else:
                os.environ.pop("GOMP_SPINCOUNT", None)
            stop_server(cache)
            url = ensure_server(model, cache, ctx_size=ctx_size, threads=threads, slots=1, lease=False)
            try:
                ask(url, model, 1)
                for load, n, niceness in LOADS:
                    with busy(n, niceness):
                        r = ask(url, model, max_tokens)
                    tok_s = round(r["answer_tokens"] / r["decode_s"], 2) if r.get("decode_s") else None
                    row = {"wait": label, "threads": threads, "load": load, "decode_tok_s": tok_s, **r}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                stop_server(cache)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"script": SCRIPT, "date": today(), "machine": machine(), "model": model, "max_tokens": max_tokens,
            "ctx_size": ctx_size, "busy": BUSY, "rows": rows}


def render_contention(rec: dict) -> str:
    loads = list(dict.fromkeys(r["load"] for r in rec["rows"]))
    by = {(r["wait"], r["load"]): r for r in rec["rows"]}
    table = ["| the server's threads wait | " + " | ".join(loads) + " |", "|---" * (1 + len(loads)) + "|"]
    for wait in dict.fromkeys(r["wait"] for r in rec["rows"]):
        cells = [f"{by[(wait, ld)]['decode_tok_s']:.1f}" if by.get((wait, ld), {}).get("decode_tok_s") else "-"
                 for ld in loads]
        table.append(f"| {wait} | " + " | ".join(cells) + " |")
    return "\n".join([
        f"## {CONTENTION_TITLE}", "",
        provenance(SCRIPT, f"bench/records/{CONTENTION_RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: one fixed prompt per cell, timed once"), "",
        (f"Model `{rec['model']}`, one slot, a fresh server per row; decode tokens per second of one request "
         f"answering exactly {rec['max_tokens']} tokens (its prompt cached), the server's own timing. A busy "
         "process is a pure-Python loop that keeps one core busy; \"at nice 10\": those processes run at a lower "
         "priority than the server."), "", *table])


def _measured_main(args, record: str, section: str, measure_fn, render_fn) -> int:
    """Measure with `measure_fn(model, max_tokens, ctx_size, work)` into bench/records/`record`.json
    (FROM_RECORD=1: read it back), then write the section `section` rendered by `render_fn`."""
    out = RECORDS / f"{record}.json"
    if os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(out.read_text())
    else:
        model = args.model or settings().local_model
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_slots_"))
        rec = measure_fn(model, args.max_tokens, args.ctx_size, work)
        out.write_text(json.dumps(rec, indent=1) + "\n")
    body = render_fn(rec)
    print(body)
    write_section(section, body, page_path(RECORD))
    return 0


SPLIT_RECORD = "slots_threads"
SPLIT_TITLE = "Slots: threads for prompts and for answers, idle and beside a busy process"
SPLITS = [(2, 2), (2, 1), (1, 1)]  # (threads: prompts, decode threads: answers)
SPLIT_LOADS = [("idle", 0), ("1 busy process", 1)]


def _reading(url: str, model: str, tag: str, text: str) -> dict:
    """A prompt the server has not seen (its first line differs per call), answered with one token:
    the server's prompt-reading rate."""
    r = post(url, {"model": model, "max_tokens": 1, "temperature": 0,
                   "messages": [{"role": "user", "content": f"[{tag}]\n{text}\nSay ok."}]})
    read = r.get("prompt_tokens", 0) - r.get("cached_tokens", 0)
    return {"prompt_read_tokens": read, "prompt_s": r.get("prompt_s"),
            "prompt_tok_s": round(read / r["prompt_s"], 1) if r.get("prompt_s") else None}


def measure_split(model: str, max_tokens: int, ctx_size: int, work: Path) -> dict:
    """Per (threads, decode threads), a fresh 2-slot server; per load, the reading rate of an unseen
    prompt and one request's decode rate; idle, also two requests at once (aggregate decode rate)."""
    cache = linked_cache(model, work / "llm_cache", progress=True)
    text = (Path(__file__).resolve().parents[1] / PREFIX_CODE).read_text()[:1200]
    rows = []
    for threads, decode in SPLITS:
        stop_server(cache)
        os.environ["RESEARCHLOOP_LLM_DECODE_THREADS"] = str(decode)
        try:
            url = ensure_server(model, cache, ctx_size=ctx_size, threads=threads, slots=2, lease=False)
            ask(url, model, 1)
            for load, n in SPLIT_LOADS:
                with busy(n, 0):
                    reading = _reading(url, model, f"{threads}-{decode}-{load}", text)
                    r = ask(url, model, max_tokens)
                    two = batch(url, model, 2, max_tokens) if n == 0 else None
                row = {"threads": threads, "decode_threads": decode, "load": load, **reading,
                       "decode_tok_s": round(r["answer_tokens"] / r["decode_s"], 2) if r.get("decode_s") else None,
                       "two_at_once_tok_s": summarise(2, 2, two)["aggregate_tok_s"] if two else None, "raw": r}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "raw"}), flush=True)
        finally:
            stop_server(cache)
            os.environ.pop("RESEARCHLOOP_LLM_DECODE_THREADS", None)
    return {"script": SCRIPT, "date": today(), "machine": machine(), "model": model, "max_tokens": max_tokens,
            "ctx_size": ctx_size, "busy": BUSY, "rows": rows}


def render_split(rec: dict) -> str:
    table = ["| threads: prompts / answers | load | prompt reading tok/s | decode tok/s, one request | "
             "decode tok/s, two requests at once |", "|---" * 5 + "|"]
    for r in rec["rows"]:
        two = f"{r['two_at_once_tok_s']:.1f}" if r.get("two_at_once_tok_s") else "-"
        table.append(f"| {r['threads']} / {r['decode_threads']} | {r['load']} | {r['prompt_tok_s'] or 0:.1f} | "
                     f"{r['decode_tok_s'] or 0:.1f} | {two} |")
    return "\n".join([
        f"## {SPLIT_TITLE}", "",
        provenance(SCRIPT, f"bench/records/{SPLIT_RECORD}.json", f"{rec['date']} on {rec['machine']}",
                   "not a sample: fixed prompts, timed once"), "",
        (f"Model `{rec['model']}`, 2 slots, a fresh server per thread split (RESEARCHLOOP_LLM_DECODE_THREADS). "
         "Prompt reading: an unseen prompt of a few hundred tokens answered with one token; decode: a cached "
         f"prompt answered with exactly {rec['max_tokens']} tokens; a busy process is a pure-Python loop."),
        "", *table])


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="", help="default: RESEARCHLOOP_LOCAL_MODEL")
    ap.add_argument("--slots", default="1,2,4", help="slot counts, comma-separated")
    ap.add_argument("--concurrency", default="1,2,4", help="requests at once, comma-separated")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ctx-size", type=int, default=2048, help="each slot's window")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="1 and 2 slots, 1 and 2 requests, 8 tokens; writes only --out")
    ap.add_argument("--out", default="", help=f"the record (default bench/records/{RECORD}.json; --quick: none)")
    ap.add_argument("--work", default="", help="the private cache folder's parent (default: a temporary one)")
    ap.add_argument("--prefix", action="store_true", help="requests that begin alike: at once or one after another")
    ap.add_argument("--prefix-slots", type=int, default=2)
    ap.add_argument("--prefix-requests", default="2,3", help="with --prefix: request counts, comma-separated")
    ap.add_argument("--prefix-max-tokens", type=int, default=32,
                    help="with --prefix: each answer's limit (over 32: record slots_prefix_answers.json)")
    ap.add_argument("--prefix-kv-unified", action="store_true",
                    help=f"with --prefix: slots that share one KV cache (record {PREFIX_UNIFIED_RECORD}.json)")
    ap.add_argument("--contention", action="store_true",
                    help="one request's decode rate beside busy processes, per way the server's threads wait")
    ap.add_argument("--threads-split", action="store_true",
                    help="prompt reading and decode rates per split of threads between prompts and answers")
    args = ap.parse_args(argv)
    if args.threads_split:
        return _measured_main(args, SPLIT_RECORD, "slots-threads", measure_split, render_split)
    if args.prefix:
        return _prefix_main(args)
    if args.contention:
        return _measured_main(args, CONTENTION_RECORD, "slots-contention", measure_contention, render_contention)
    default_out = RECORDS / f"{RECORD}.json"
    out = Path(args.out) if args.out else (None if args.quick else default_out)
    if os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(default_out.read_text())
    else:
        if args.quick:
            args.slots, args.concurrency, args.max_tokens, args.ctx_size = "1,2", "1,2", 8, 512
        model = args.model or settings().local_model
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_slots_"))
        rec = measure(model, _ints(args.slots), _ints(args.concurrency), args.max_tokens, args.ctx_size,
                      args.threads, work)
        rec["quick"] = args.quick
        if out is not None and out.resolve() != default_out.resolve():
            rec["record"] = repo_path(out)
    if out is not None and os.environ.get("FROM_RECORD") != "1":
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1) + "\n")
    body = render(rec)
    print(body)
    if out is not None and out.resolve() == default_out.resolve():
        write_section(SECTION, body, page_path(RECORD))
    return 0 if all(r["aggregate_tok_s"] > 0 for r in rec["rows"]) else 1


def _prefix_main(args) -> int:
    """Short answers (the first-token cost of a shared prefix) go to slots_prefix.json; answers of
    `--prefix-max-tokens` > 32 (the plans' and patches' lengths, where decode dominates) to
    slots_prefix_answers.json, each with its own section."""
    long = args.prefix_max_tokens > 32
    record, section = (PREFIX_ANSWERS_RECORD, "slots-prefix-answers") if long else (PREFIX_RECORD, "slots-prefix")
    if args.prefix_kv_unified:
        os.environ["RESEARCHLOOP_LLM_KV_UNIFIED"] = "1"
        record, section = PREFIX_UNIFIED_RECORD, "slots-prefix-unified"
    out = RECORDS / f"{record}.json"
    if os.environ.get("FROM_RECORD") == "1":
        rec = json.loads(out.read_text())
    else:
        model = args.model or settings().local_model
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rl_slots_"))
        rec = measure_prefix(model, args.prefix_slots, _ints(args.prefix_requests), args.prefix_max_tokens, 4096,
                             args.threads, work)
        out.write_text(json.dumps(rec, indent=1) + "\n")
    body = render_prefix(rec, record)
    print(body)
    write_section(section, body, page_path(RECORD))
    return 0


if __name__ == "__main__":
    sys.exit(main())
