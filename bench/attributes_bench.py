"""The attribute mode's answers on every development topic: does the local model give each paper's
task / input / output in its own words, or copies of the title or abstract?

    .venv/bin/python -m bench.attributes_bench [--k 4] [--topics a,b] [--no-write]   # make bench-attributes
    .venv/bin/python -m bench.attributes_bench --render     # re-render the section from the record

Only the attribute extraction runs: `rank.ask_attributes`, the pass `researchloop rank --mode attributes`
(rank.rank_papers) makes after its relevance pass, with the same batch (rank.default_batch), prompts, copy
check (scoring.copied_fields via rank.unusable), one re-ask and drop. Its `trace` gives, per paper, the first
answer, why it was not used, whether it was asked again, the second answer and its verdict. The relevance
pass and the scoring are not run. Per topic: K papers of the labelled candidates (the id-hashed choice of
bench/ranking_bench.py, relevant and irrelevant mixed), and the topic's own task attributes as the pipeline
derives them (ranking_bench.brief: topic_brief.build_brief, or the same prompt for a title-and-description
topic).

Every summary in the shipped corpus ends with the paper's attributes stated ("Task: ...; input: ...; output:
..."), which the copy check deliberately accepts (an answer taken from there is right, not a copy). So each
paper is asked twice, in two variants (--abstracts): `corpus`, the summary as it is, and `unstated`, the same
summary cut before that statement (scoring.unstated), as a source whose abstracts state no attributes gives it.

LLM answers are cached under DAGSTER_HOME (default /tmp/rl_bench_home): run on a fresh one for timings.
Record: bench/records/ranking_attributes.json; section "ranking_attributes" of bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import sys
import time

from bench.common import machine, provenance, publish, rerender, today
from bench.ranking_bench import ROOT, brief, candidate_pool, choose, discover, metered, plain_brief

RECORD, SECTION = "ranking_attributes", "ranking_attributes"
ATTRS = ("task", "input", "output")
# The copy check (scoring.copied_from / copied_fields, rank.unusable) was added in commit c5c4917 (2026-11-23)
# and not changed since; its comment says it was written from answers "on topics outside the tuning set" without
# naming them. The topics labelled by then may have been among them (in-sample); the two labelled later
# (3a76d41, 2026-11-27) cannot have been (held-out).
RULES_COMMIT = "c5c4917 (2026-11-23)"
LABELLED_LATER = ("audio_keyword_spotting", "image_generation")


VARIANTS = {
    "corpus": "the corpus summary as it is (it ends with \"Task: ...; input: ...; output: ...\")",
    "unstated": "the same summary cut before its \"Task: ...\" statement (scoring.unstated): the model must name "
                "the attributes itself",
}


def sample(name: str) -> str:
    return "held-out" if name in LABELLED_LATER else "in-sample"


# -- per paper and per topic (pure: from the trace and the papers) -------------------------------------

def paper_row(paper, relevant: bool, trace: dict, final) -> dict:
    """One paper's record from ask_attributes' trace and its result (PaperAttributes or the reason
    there is none). `*_copied`: scoring.copied_fields of that answer ({attribute: title | abstract | input})."""
    from assets.paper_rankings.scoring import copied_fields

    first, again = trace.get("first"), trace.get("again")
    return {
        "paper_id": paper.paper_id, "title": paper.title, "relevant": relevant,
        "first": first, "first_copied": copied_fields(first, paper.title, paper.abstract) if first else {},
        "first_problem": trace.get("first_problem"), "reasked": trace.get("first_problem") is not None,
        "again": again, "again_copied": copied_fields(again, paper.title, paper.abstract) if again else {},
        "again_problem": trace.get("again_problem"),
        "final": None if isinstance(final, str) else final.model_dump(),
        "dropped": isinstance(final, str) and final.startswith("attributes dropped"),
        "error": final if isinstance(final, str) else None,
    }


def summarise(papers: list[dict]) -> dict:
    """Counts over paper rows: papers; fields (and papers) copied at the first answer; first answers
    unusable for another reason (no answer under the id, another paper's description); papers asked
    again; fields copied in the second answer; papers dropped as copies; papers with no answer at all;
    papers whose three attributes are usable (their final answer)."""
    return {
        "papers": len(papers),
        "relevant": sum(p["relevant"] for p in papers),
        "first_fields_copied": sum(len(p["first_copied"]) for p in papers),
        "first_papers_copied": sum(bool(p["first_copied"]) for p in papers),
        "first_by_source": {src: sum(list(p["first_copied"].values()).count(src) for p in papers)
                            for src in ("title", "abstract", "input")},
        "first_other_problem": sum(bool(p["first_problem"]) and not p["first_copied"] for p in papers),
        "reasked": sum(p["reasked"] for p in papers),
        "again_fields_copied": sum(len(p["again_copied"]) for p in papers),
        "dropped": sum(p["dropped"] for p in papers),
        "no_answer": sum(p["final"] is None and not p["dropped"] for p in papers),
        "usable": sum(p["final"] is not None for p in papers),
    }


def topic_attributes(b) -> dict:
    """The topic brief's task attributes, and whether each copies the topic's title or description
    (scoring.copied_from, the papers' check, applied to the topic for information)."""
    from assets.paper_rankings.scoring import copied_from

    out = {a: getattr(b, a) for a in (*ATTRS, "domain")}
    out["copied"] = {a: src for a in ATTRS if (src := copied_from(getattr(b, a), b.title, b.description))}
    out["llm_error"] = b.llm_error
    return out


# -- the run ---------------------------------------------------------------------------------------------

def run_topic(entry: dict, k: int, llm, embedder, literature, corpus: dict, variants=tuple(VARIANTS)) -> dict:
    """One topic: its brief's attributes, its K papers and, per variant, ask_attributes' trace as paper rows."""
    from assets.paper_rankings.rank import ask_attributes, default_batch
    from assets.paper_rankings.scoring import unstated

    name = entry["name"]
    full, brief_cost = metered(llm, lambda: brief(entry, llm))
    rows, pool, candidates = candidate_pool(entry, plain_brief(entry), literature, embedder)
    relevant = {i: bool(rows[i]["relevant"]) for i in pool}
    chosen = [corpus[i] for i in choose(pool, relevant, k)]
    batch = default_batch(llm)
    out = {"name": name, "sample": sample(name), "candidates": candidates,
           "topic": str((entry.get("topic_dir") or entry.get("topic_yaml")).relative_to(ROOT)),
           "labels": str(entry["labels"].relative_to(ROOT)), "batch": batch,
           "topic_attributes": topic_attributes(full), "cost": {"topic_brief": brief_cost}, "variants": {}}
    for variant in variants:
        papers = chosen if variant == "corpus" else [
            p.model_copy(update={"abstract": unstated(p.abstract).strip()}) for p in chosen]
        trace: dict = {}
        finals, cost = metered(llm, lambda papers=papers, trace=trace: ask_attributes(papers, llm, batch, trace=trace))
        rows_ = [paper_row(p, relevant[p.paper_id], trace.get(p.paper_id, {}), f) for p, f in zip(papers, finals)]
        out["variants"][variant] = {"papers": rows_, "cost": cost}
        s = summarise(rows_)
        print(f"{name} ({variant}): {s['papers']} papers ({s['relevant']} relevant) of {candidates}; copied fields "
              f"first {s['first_fields_copied']}, after re-ask {s['again_fields_copied']}, usable {s['usable']}; "
              f"{cost['wall_s']} s", flush=True)
    return out


# -- the section -------------------------------------------------------------------------------------------

def _cell(text) -> str:
    return str(text).replace("|", "/").replace("\n", " ") if text not in (None, "") else "-"


def _answer(a: dict | None) -> str:
    return "-" if not a else " / ".join(_cell(a[x]) for x in ATTRS)


def _copies(c: dict) -> str:
    return ", ".join(f"{a}={src}" for a, src in c.items()) or "none"


def _variant_lines(rec: dict, variant: str) -> list[str]:
    """One variant's per-topic table, its overall lines and every paper's answers."""
    topics = [t for t in rec["topics"] if variant in t["variants"]]
    rows = {t["name"]: t["variants"][variant] for t in topics}
    sums = {n: summarise(v["papers"]) for n, v in rows.items()}
    o = summarise([p for v in rows.values() for p in v["papers"]])
    ho = summarise([p for t in topics if t["sample"] == "held-out" for p in rows[t["name"]]["papers"]])
    rec.setdefault("summary", {})[variant] = {"topics": sums, "overall": o, "held_out": ho}
    wall = sum(v["cost"]["wall_s"] for v in rows.values())
    server = sum(v["cost"]["server_s"] for v in rows.values())
    table = ["| topic | sample | papers (relevant) | fields copied at first answer (papers) | other unusable first "
             "answers | asked again | fields still copied after the re-ask | dropped | papers with all three "
             "attributes usable | LLM s: requests' wall summed / server |", "|---" * 10 + "|"]
    for t in topics:
        s, c = sums[t["name"]], rows[t["name"]]["cost"]
        table.append(f"| {t['name']} | {t['sample']} | {s['papers']} ({s['relevant']}) | {s['first_fields_copied']} "
                     f"({s['first_papers_copied']}) | {s['first_other_problem']} | {s['reasked']} | "
                     f"{s['again_fields_copied']} | {s['dropped']} | {s['usable']}/{s['papers']} | "
                     f"{c['wall_s']} / {c['server_s']} |")
    table.append(f"| **all** | - | {o['papers']} ({o['relevant']}) | **{o['first_fields_copied']}** "
                 f"({o['first_papers_copied']}) | {o['first_other_problem']} | {o['reasked']} | "
                 f"**{o['again_fields_copied']}** | {o['dropped']} | **{o['usable']}/{o['papers']}** | "
                 f"{wall:.1f} / {server:.1f} |")
    paper_rows = ["| topic | paper | relevant | first answer: task / input / output | copied at first | "
                  "second answer (re-ask) | copied at second | final |", "|---" * 8 + "|"]
    for t in topics:
        for p in rows[t["name"]]["papers"]:
            final = ("usable" if p["final"] is not None else "dropped" if p["dropped"] else
                     f"no answer: {_cell(p['error'])[:60]}")
            first = _answer(p["first"]) if p["first"] else f"none ({_cell(p['first_problem'])[:60]})"
            other = "" if p["first_copied"] or not p["first_problem"] else f" ({_cell(p['first_problem'])[:60]})"
            paper_rows.append(f"| {t['name']} | {p['paper_id']} | {'yes' if p['relevant'] else 'no'} | {first} | "
                              f"{_copies(p['first_copied'])}{other} | {_answer(p['again']) if p['reasked'] else '-'}"
                              f" | {_copies(p['again_copied']) if p['reasked'] else '-'} | {final} |")
    return [
        f"### Papers shown as: {variant} ({VARIANTS[variant]})",
        "",
        *table,
        "",
        f"- Overall: {o['first_fields_copied']} of {3 * o['papers']} fields copied at the first answer "
        f"(title {o['first_by_source']['title']}, abstract {o['first_by_source']['abstract']}, output = input "
        f"{o['first_by_source']['input']}; {o['first_papers_copied']} of {o['papers']} papers); "
        f"{o['first_other_problem']} other first answers unusable; {o['again_fields_copied']} fields still copied "
        f"after the re-ask; {o['dropped']} papers dropped as copies, {o['no_answer']} without an answer; "
        f"{o['usable']}/{o['papers']} papers with all three attributes usable.",
        f"- Held-out topics ({' and '.join(LABELLED_LATER)}): {ho['first_fields_copied']} fields copied at the "
        f"first answer, {ho['again_fields_copied']} after the re-ask, {ho['usable']}/{ho['papers']} papers usable.",
        f"- LLM time: the requests' wall times sum to {wall:.1f} s ({server:.1f} s of llama.cpp's own prompt + "
        "decode time; the rest is the wait behind other jobs on the shared server; re-asks can overlap, so the sum "
        "can exceed the elapsed time). A repeated run reads its answers from the cache under DAGSTER_HOME and "
        "reports the first run's request times.",
        "",
        "Every paper's answers:",
        "",
        *paper_rows,
    ]


def render(rec: dict) -> str:
    topics = rec["topics"]
    variants = [v for v in VARIANTS if any(v in t["variants"] for t in topics)]
    brief_s = sum(t["cost"]["topic_brief"]["wall_s"] for t in topics)
    brief_rows = ["| topic | task | input | output | copies the topic's title or description |", "|---" * 5 + "|"]
    for t in topics:
        ta = t["topic_attributes"]
        copied = {a: "description" if src == "abstract" else src for a, src in ta["copied"].items()}
        brief_rows.append(f"| {t['name']} | {_cell(ta['task'])} | {_cell(ta['input'])} | {_cell(ta['output'])} | "
                          + (_copies(copied) if not ta.get("llm_error") else
                             f"not extracted: {_cell(ta['llm_error'])[:80]}") + " |")
    rec["summary"] = {}
    body = [line for v in variants for line in ["", *_variant_lines(rec, v)]]
    names = ", ".join(t["name"] for t in topics)
    return "\n".join([
        "## ranking attributes: copies of the title or abstract on every development topic",
        "",
        provenance("bench/attributes_bench.py", f"bench/records/{RECORD}.json",
                   f"{rec['date']} on {rec['machine']} ({rec['machine_note']})",
                   f"the copy check (scoring.copied_from / copied_fields) was written in commit {RULES_COMMIT} from "
                   "answers on topics the commit does not name, when 7 of these topics were labelled: those 7 count as "
                   f"in-sample, {' and '.join(LABELLED_LATER)} (labelled later) as held-out; nothing was tuned on "
                   "this run"),
        "",
        f"`python -m bench.attributes_bench --k {rec['k']}` (`make bench-attributes`). Model {rec['model']} (local). "
        "Only the attribute extraction of the attribute mode runs (`rank.ask_attributes`, what `researchloop rank "
        "--mode attributes` calls after its relevance pass; no relevance pass, no scoring): the papers of a "
        f"topic in one request of up to {topics[0]['batch'] if topics else '-'}, answers tied to papers by id; an "
        "answer that copies the paper's title or the opening of its abstract (or another paper of the request, or "
        "repeats its input as its output) is asked again once alone with a request for the model's own words, "
        f"and dropped if it still copies. Per topic {rec['k']} labelled candidates (the id-hashed choice of "
        f"`bench/ranking_bench.py`, relevant and irrelevant mixed), topics: {names}. Every summary of the shipped "
        "corpus ends with the paper's attributes stated (\"Task: ...; input: ...; output: ...\"), and the copy "
        "check accepts an answer taken from there; so the papers are shown twice: as in the corpus, and cut before "
        "that statement. \"Usable\" means not a copy by the check's rules, not that the answer is right or "
        "specific (every answer is listed).",
        "",
        f"The topics' own attributes (the pipeline's `topic_brief` prompt; {brief_s:.1f} s of LLM time in all), "
        "checked with the papers' copy rule against the topic's title and description for information:",
        "",
        *brief_rows,
        *body,
    ])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=4, help="papers per topic (default 4)")
    ap.add_argument("--topics", default="", help="comma-separated topic names (default: every development topic)")
    ap.add_argument("--abstracts", default=",".join(VARIANTS),
                    help=f"comma-separated variants of the papers' text (default: all of {', '.join(VARIANTS)})")
    ap.add_argument("--no-write", action="store_true", help="print, do not write the record or bench/RESULTS.md")
    ap.add_argument("--render", action="store_true", help="re-render the section from the committed record")
    ap.add_argument("--note", default="2-core shared VM: other jobs may have used the same cores and llama.cpp "
                    "server at the same time, so wall times are upper bounds", help="what else ran on the machine")
    args = ap.parse_args(argv)
    if args.render:
        return rerender(RECORD, SECTION, render)

    from pipelines.definitions import build_resources
    from resources.literature import load_corpus

    res = build_resources(resolved=True)
    llm, embedder, literature = res["llm"], res["embedder"], res["literature"]
    corpus = {p.paper_id: p for p in load_corpus(ROOT / "corpus" / "papers.jsonl")}
    wanted = set(filter(None, args.topics.split(",")))
    variants = tuple(v for v in VARIANTS if v in args.abstracts.split(","))
    entries = [e for e in discover() if "missing" not in e and (not wanted or e["name"] in wanted)]
    t0 = time.monotonic()
    rec = {"script": "bench/attributes_bench.py", "date": today(), "machine": machine(),
           "machine_note": args.note,
           "model": llm.model_name(), "k": args.k, "rules_commit": RULES_COMMIT,
           "variants": {v: VARIANTS[v] for v in variants},
           "topics": [run_topic(e, args.k, llm, embedder, literature, corpus, variants) for e in entries]}
    rec["wall_s"] = round(time.monotonic() - t0, 1)
    return publish(RECORD, SECTION, rec, render, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
