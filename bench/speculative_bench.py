"""Does speculative decoding without a draft model (llama.cpp's n-gram drafts) make the local
model's answers faster, and for which stages? Replays recorded requests of a real loop (the
prompts a diabetes_regression round sent: patches in the `functions` and `whole` formats, a
change plan, an idea proposal) against the embedded server started once per kind of
speculative decoding (resources/local_llm.py SPECULATIVE), greedy (temperature 0), and records
per request: wall time, answer tokens, decode speed, drafted and accepted tokens, and whether the
answer is the same text as without speculation.

    .venv/bin/python -m bench.speculative_bench                   # replay bench/records/speculative_prompts.json
    .venv/bin/python -m bench.speculative_bench extract DIR       # (re)build that file from an llm_cache folder
    .venv/bin/python -m bench.speculative_bench render            # re-render RESULTS.md from the record

Writes bench/records/speculative.json and the section `speculative` of bench/RESULTS.md. The
figures depend on what else the 2 cores do: run it on an idle machine (the record keeps the load)."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import RECORDS, machine, provenance, read_record, today, write_record, write_section

SCRIPT = "bench/speculative_bench.py"
PROMPTS = RECORDS / "speculative_prompts.json"
# system-prompt openings of the stages whose requests are replayed, and how many of each
STAGES = {
    "patch_functions": ("You are an expert PyTorch engineer who edits experiment code", 1200, 3),
    "patch_whole": ("You are an expert PyTorch engineer who edits experiment code", 2500, 1),
    "plan": ("You turn research ideas into precise, minimal code change", 400, 1),
    "ideas": ("You are an ambitious but practical ML researcher", 1150, 1),
}


def extract(cache: Path) -> list[dict]:
    """The replayed requests, picked from an llm_cache folder (resources/llm.py's response cache:
    one JSON per request with its `request`) by stage, in file-name order."""
    picked: list[dict] = []
    files = sorted(cache.glob("*/*.json"))
    for stage, (opening, max_tokens, n) in STAGES.items():
        found = 0
        for f in files:
            req = json.loads(f.read_text())["request"]
            if found < n and req["messages"][0]["content"].startswith(opening) and req.get("max_tokens") == max_tokens:
                picked.append({"stage": stage, "key": f.stem[:16], "messages": req["messages"],
                               "max_tokens": max_tokens})
                found += 1
        if found < n:
            raise SystemExit(f"{cache}: only {found} of {n} {stage} requests")
    return picked


def ask(base_url: str, alias: str, item: dict) -> dict:
    body = json.dumps({"model": alias, "messages": item["messages"], "max_tokens": item["max_tokens"],
                       "temperature": 0, "seed": 0}).encode()
    req = urllib.request.Request(f"{base_url}/chat/completions", body, {"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=1800) as r:
        out = json.loads(r.read())
    wall = time.monotonic() - t0
    text = out["choices"][0]["message"]["content"] or ""
    tm = out.get("timings") or {}
    return {"stage": item["stage"], "key": item["key"], "wall_s": round(wall, 2),
            "prompt_tokens": out["usage"]["prompt_tokens"], "answer_tokens": out["usage"]["completion_tokens"],
            "decode_tok_s": round(tm.get("predicted_per_second") or 0, 2),
            "drafted": tm.get("draft_n"), "accepted": tm.get("draft_n_accepted"),
            "answer_sha256": hashlib.sha256(text.encode()).hexdigest()[:16], "answer": text}


def replay(kinds: list[str], items: list[dict]) -> dict:
    from resources import local_llm as ll

    name = os.environ.get("RESEARCHLOOP_LOCAL_MODEL", "qwen2.5-coder-1.5b")
    model_path = ll.assemble_model(name, progress=True)
    runs = []
    for kind in kinds:
        with tempfile.TemporaryDirectory() as state_dir:  # the bench's own server, not the shared one
            state = ll._start_locked(Path(state_dir), name, model_path, 8192, 2, 300, kind)
            try:
                answers = []
                for item in items:
                    load = os.getloadavg()[0]
                    a = ask(state["base_url"], name, item)
                    a["load_before"] = round(load, 2)
                    answers.append(a)
                    print(f"{kind:<13} {a['stage']:<16} {a['answer_tokens']:>5} tok {a['wall_s']:>7.1f}s "
                          f"{a['decode_tok_s']:>6.1f} tok/s drafted {a['drafted']} accepted {a['accepted']}",
                          flush=True)
            finally:
                ll._kill(state["pid"], grace=5)
        runs.append({"kind": kind, "startup_s": state["startup_s"], "answers": answers})
    return {"script": SCRIPT, "date": today(), "machine": machine(), "model": name, "threads": 2,
            "prompts": str(PROMPTS.relative_to(RECORDS.parents[1])), "runs": runs}


def summary(rec: dict) -> list[dict]:
    """Per kind and stage: answer tokens, wall time, speed-up over `none`, acceptance, same answers."""
    base = {(a["stage"], a["key"]): a for r in rec["runs"] if r["kind"] == "none" for a in r["answers"]}
    rows = []
    for r in rec["runs"]:
        for stage in dict.fromkeys(a["stage"] for a in r["answers"]):
            got = [a for a in r["answers"] if a["stage"] == stage]
            ref = [base.get((a["stage"], a["key"])) for a in got]
            wall, tok = sum(a["wall_s"] for a in got), sum(a["answer_tokens"] for a in got)
            drafted = sum(a["drafted"] or 0 for a in got)
            rows.append({
                "kind": r["kind"], "stage": stage, "requests": len(got), "answer_tokens": tok,
                "wall_s": round(wall, 1), "tok_per_s": round(tok / wall, 2) if wall else 0.0,
                "speedup": round(sum(b["wall_s"] for b in ref if b) / wall, 2) if all(ref) and wall else None,
                "accepted_share": round(sum(a["accepted"] or 0 for a in got) / drafted, 3) if drafted else None,
                "same_answer": sum(bool(b) and a["answer_sha256"] == b["answer_sha256"] for a, b in zip(got, ref)),
            })
    return rows


def render(rec: dict) -> str:
    rows = summary(rec)
    loads = [a["load_before"] for r in rec["runs"] for a in r["answers"]]
    lines = [
        "## Speculative decoding on the local model (n-gram drafts)", "",
        provenance(SCRIPT, "bench/records/speculative.json", f"{rec['date']}, {rec['machine']}",
                   "the requests are one recorded diabetes_regression round's (in-sample for that topic); "
                   "nothing was tuned on them"), "",
        f"{rec['model']}, {rec['threads']} threads, greedy; the requests: `{rec['prompts']}`. "
        f"1-minute load average before each request: {min(loads):.2f}-{max(loads):.2f}.", "",
        "| kind | stage | requests | answer tokens | wall s | tok/s | speed-up vs none | drafts accepted | "
        "same answer as none |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        acc = f"{r['accepted_share']:.0%}" if r["accepted_share"] is not None else "-"
        sp = f"{r['speedup']:.2f}x" if r["speedup"] is not None else "-"
        lines.append(f"| {r['kind']} | {r['stage']} | {r['requests']} | {r['answer_tokens']} | {r['wall_s']} | "
                     f"{r['tok_per_s']} | {sp} | {acc} | {r['same_answer']}/{r['requests']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["extract"]:
        items = extract(Path(argv[1]))
        PROMPTS.write_text(json.dumps(items, indent=1) + "\n")
        print(f"{PROMPTS}: {len(items)} requests ({', '.join(i['stage'] for i in items)})")
        return 0
    if argv[:1] == ["render"]:
        print(write_section("speculative", render(read_record("speculative"))))
        return 0
    from resources.local_llm import SPECULATIVE

    kinds = argv or list(SPECULATIVE[:3])
    rec = replay(kinds, json.loads(PROMPTS.read_text()))
    write_record("speculative", rec)
    print(write_section("speculative", render(rec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
