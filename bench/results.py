"""bench/RESULTS.md: the headline table, computed here from the committed records (so it cannot
drift from them), and the index of the benchmarks' pages (bench/results/NAME.md, one per
registered benchmark) and of the archive (bench/results/archive.md). Every write of a section
rewrites it; `python -m bench --index` rewrites it without measuring anything."""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from bench import REGISTRY
from bench.broken_suite import SCRIPT_SUITES
from bench.pages import PAGES, RESULTS, ROOT, find_section

ARCHIVE = "archive"
MARK = re.compile(r"<!-- bench:([\w-]+):begin -->\s*\n## (.+)")
NOT_RECORDED = "not recorded yet"

INTRO = """\
# Benchmarks

What the loop achieves and costs, measured. Every figure comes from a committed raw record
(`bench/records/*.json`, or the repair bench's `bench/repair_results*.json`) and a section of a
benchmark's page that names its script, its record, when and on what machine it was measured, and
whether it is in-sample (something was tuned on that data), held-out, or not a sample at all.
`tests/bench/test_bench_records.py` checks all of this, and that this file is what
`bench/results.py` computes from the records and pages.

Run one benchmark with `python -m bench NAME` (or `make bench-NAME`); `python -m bench` lists them.
Each writes its record and its own sections of `bench/results/NAME.md`, and rewrites this file;
its docstring says how to re-render its sections from the committed record without measuring
(`FROM_RECORD=1` for most)."""


# -- pages -------------------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def page_sections(path: Path) -> list[tuple[str, str]]:
    """(section name, its `## ` heading) of a page, in order."""
    return MARK.findall(path.read_text()) if path.exists() else []


def link(section: str) -> str:
    """A Markdown link from bench/RESULTS.md to a section of a page."""
    found = find_section(section)
    if found is None:
        return f"section `{section}` (none yet)"
    path, _ = found
    heading = dict(page_sections(path))[section]
    return f"[{heading.replace('`', '')}](results/{path.name}#{slug(heading)})"


def page_header(name: str) -> str:
    """A page's heading and introduction: from the registry, or the archive's."""
    back = "Back to the [headline and index](../RESULTS.md)."
    if name == ARCHIVE:
        return "\n".join([
            "# Archive: superseded runs and one-question probes", "",
            "Sections kept for what they answered and for the figures quoted from them elsewhere. Each names "
            "its committed record and the script that made it; a script since removed from the tree is named "
            "with the commit where it last was (`git show COMMIT:PATH`). Nothing here is current: the "
            "benchmarks' own pages are.", "", back])
    b = REGISTRY.get(name)
    if b is None:
        return f"# {name}"
    return "\n".join([
        f"# {b.title}", "",
        f"`python -m bench {b.name}` (`make bench-{b.name}`; module `{b.module}`, arguments: "
        f"`python -m bench {b.name} --help`). Measures: {b.measures}. Cost: {b.cost}.", "", back])


# -- the headline ------------------------------------------------------------------------------------

@dataclass
class Figure:
    question: str
    answer: str
    sample: str
    records: list[str]    # repository paths of the records the answer is computed from
    sections: list[str]   # the sections that show it in full


def _load(path: str) -> dict | None:
    p = ROOT / path
    return json.loads(p.read_text()) if p.is_file() else None


def _sample_word(section: str) -> str:
    """in-sample / held-out / not a sample, as the section's Sample line starts."""
    found = find_section(section)
    line = next((x for x in (found[1] if found else "").splitlines() if x.startswith("- Sample:")), "")
    m = re.search(r"in-sample|held-out|not a sample", line)
    return m.group(0) if m else "see the section"


def _missing(question: str, record: str, section: str, how: str) -> Figure:
    return Figure(question, f"{NOT_RECORDED}: {how}", "-", [record], [section])


def effectiveness() -> Figure:
    q, path = "Does the loop find improvements on the shipped topics?", "bench/records/effectiveness.json"
    rec = _load(path)
    if rec is None:
        return _missing(q, path, "effectiveness", "`python -m bench effectiveness`")
    per = ", ".join(f"{t['topic']} {t['goals']['verified_improvements']}" for t in rec["topics"])
    total = sum(t["goals"]["verified_improvements"] for t in rec["topics"])
    reached = sum(t["goals"]["improvement_reached"] for t in rec["topics"])
    held = [t["topic"] for t in rec["topics"] if t["held_out"]]
    return Figure(q, f"verified improvements in {rec['rounds']} rounds per topic: {per} ({total} in all; "
                     f"{reached} of {len(rec['topics'])} topics improved), model `{rec['model']}`",
                  f"held-out: {', '.join(held) or 'none'}; in-sample: the others", [path], ["effectiveness"])


def effectiveness_new_topics() -> Figure:
    q = "... and on topics the project was not developed on?"
    paths = {"effectiveness_heldout": "bench/records/effectiveness_heldout.json",
             "effectiveness_probes": "bench/records/effectiveness_probes.json"}
    recs = {s: r for s, p in paths.items() if (r := _load(p)) is not None}
    if not recs:
        return _missing(q, paths["effectiveness_heldout"], "effectiveness_heldout",
                        "`python -m bench effectiveness --topics bench/probe_topics/...`")
    topics = [(t, r["rounds"]) for r in recs.values() for t in r["topics"]]
    answer = "verified improvements: " + ", ".join(
        f"{t['topic']} {t['goals']['verified_improvements']} in {n} rounds" for t, n in topics)
    sample = "; ".join(f"{t['topic']}: {'held-out' if t['held_out'] else 'in-sample'}" for t, _ in topics)
    return Figure(q, answer, sample, [paths[s] for s in recs], list(recs))


def effectiveness_dev_tasks() -> Figure:
    q = "... and do the LLM's own ideas (not tuning) improve tasks of other kinds?"
    path = "bench/records/effectiveness_dev_tasks.json"
    rec = _load(path)
    if rec is None:
        return _missing(q, path, "effectiveness", "`python -m bench effectiveness --dev-tasks`")
    ts = rec["topics"]
    per = ", ".join(f"{t['topic']} {t['goals']['verified_improvements']} (LLM {t['goals'].get('improvements_llm', 0)})"
                    f" in {t['goals']['rounds_done']} round(s)" for t in ts)
    kept = sum(t["goals"].get("kept_llm", 0) for t in ts)
    ran = sum(round((t["goals"].get("llm_ran_share") or 0) * t["goals"].get("kept_llm", 0)) for t in ts)
    card = sum(round((t["goals"].get("llm_card_share") or 0) * t["goals"].get("kept_llm", 0)) for t in ts)
    won = sum(bool(t["goals"].get("improvements_llm")) for t in ts)
    answer = (f"verified improvements: {per}; tasks with an LLM-idea win: {won} of {len(ts)}; kept LLM ideas that "
              f"ran to a metric: {ran}/{kept}" + (f" ({ran / kept:.0%})" if kept else "")
              + f", applying a method card: {card}/{kept}; model `{rec['model']}`")
    return Figure(q, answer, "in-sample (the development tasks shaped the changes)", [path],
                  ["effectiveness_dev_tasks"])


def round_time() -> Figure:
    q, path = "How long does a round take?", "bench/records/effectiveness.json"
    rec = _load(path)
    rows = [r for t in (rec or {}).get("topics", []) for r in t["rows"] if r.get("wall_s")]
    if not rows:
        return _missing(q, path, "effectiveness", "`python -m bench effectiveness`")
    walls = [r["wall_s"] / 60 for r in rows]
    llm = sum(r.get("llm_s") or 0 for r in rows) / sum(r["wall_s"] for r in rows)
    exp = sum(r.get("experiment_s") or 0 for r in rows) / sum(r["wall_s"] for r in rows)
    return Figure(q, f"median {statistics.median(walls):.0f} min (range {min(walls):.0f}-{max(walls):.0f} min) over "
                     f"{len(rows)} timed rounds of the effectiveness run, model `{rec['model']}` on {rec['machine']}; "
                     f"{llm:.0%} of the time in LLM calls, {exp:.0%} in experiments",
                  "not a sample (timings)", [path], ["effectiveness"])


def make_bench() -> Figure:
    q, path = "How long do the baseline and a two-round loop take (`make bench`)?", "bench/records/make_bench.json"
    rec = _load(path)
    if rec is None:
        return _missing(q, path, "make-bench", "`make bench` writes it")
    base, loop = rec["baseline"], rec.get("loop")
    answer = f"baseline of `{rec['topic']}` median {statistics.median(b['wall_s'] for b in base):.1f} s"
    if loop is None:
        answer += "; the loop did not finish"
    else:
        answer += (f"; `researchloop run --rounds {rec['rounds']}` {loop['wall_s'] / 60:.0f} min"
                   + (f" with `{loop['model']}`" if loop.get("model") else "")
                   + f" (exit code {loop['exit_code']})")
    return Figure(q, f"{answer} on {rec['machine']}", "not a sample (timings)", [path], ["make-bench"])


def sandbox_safety() -> Figure:
    q, path = "Does the sandbox contain hostile code?", "bench/sandbox_results.json"
    rec = _load(path)
    h = (rec or {}).get("hostile")
    if not h:
        return _missing(q, path, "sandbox", "`python -m bench sandbox` runs the hostile suite (needs bubblewrap)")
    return Figure(q, f"{h['passed']}/{h['ran']} hostile tests contained ({h['suite']}"
                     + (f"; {h['skipped']} skipped" if h["skipped"] else "") + f"; {h['failed']} failed)",
                  "not a sample (a fixed suite of attacks)", [path], ["sandbox"])


def sandbox_cost() -> Figure:
    q, path = "What does the sandbox cost per run?", "bench/sandbox_results.json"
    rec = _load(path)
    if rec is None:
        return _missing(q, path, "sandbox", "`python -m bench sandbox`")
    s = rec["startup"]
    return Figure(q, f"start-up of a sandboxed process: median {s['after']['median_ms']} ms against "
                     f"{s['unsandboxed']['median_ms']} ms unsandboxed ({s['after']['n']} runs each, "
                     f"on {rec['machine']})",
                  "not a sample (timings)", [path], ["sandbox"])


def ranking() -> Figure:
    q, path = "How well does the ranking keep the relevant papers?", "bench/records/ranking_similarity_all.json"
    rec = _load(path)
    if rec is None:
        return _missing(q, path, "ranking_similarity", "`python -m bench ranking --similarity-only`")
    a, rule = rec["analysis"], rec["analysis"]["shipped"]["rule"]
    g, target = a["goal"][rule], rec["target"]
    keep_all = statistics.mean(t["precision"] for t in a["keep_all"].values())
    return Figure(q, f"the shipped rule ({rule} cosine): macro precision {g['precision']:.2f} at recall "
                     f"{g['recall']:.2f} over {len(rec['topics'])} labelled topics (keeping every candidate: precision "
                     f"{keep_all:.2f}); goal precision >= {target['precision']} at recall >= {target['recall']}: "
                     + ("met" if g["met"] else "not met"),
                  "held-out (leave-one-topic-out)", [path], ["ranking_similarity"])


def repair() -> Figure:
    q = "How often does the debugging loop repair a broken script?"
    parts, records, sections, samples = [], [], [], []
    for suite, section in (("", "repair"), ("_image", "repair-image"), ("_sentiment", "repair-sentiment")):
        path = f"bench/repair_results{suite}.json"
        if (rec := _load(path)) is None:
            continue
        rows = [r for r in rec["rows"] if r["mode"] == "structure"]
        name = rec.get("suite", "pointcloud")
        run = f"{len(rows)} of {rec['variants']} variants run" if len(rows) < rec["variants"] else ""
        parts.append(f"{name} {sum(r['fixed'] for r in rows)}/{len(rows)}" + (f" ({run})" if run else ""))
        records.append(path)
        sections.append(section)
        samples.append(f"{name}: {_sample_word(section)}")
    if not parts:
        return _missing(q, "bench/repair_results.json", "repair", "`python -m bench repair`")
    return Figure(q, "repaired, counted only when the full run scores (structure mode, up to 5 repairs): "
                     + ", ".join(parts), "; ".join(samples), records, sections)


def debug_scripts() -> Figure:
    q = "... and standalone scripts with one classic bug (`researchloop debug`)?"
    parts, records, sections, samples = [], [], [], []
    for suite in SCRIPT_SUITES:
        path = f"bench/records/debug_{suite}.json"
        if (rec := _load(path)) is None:
            continue
        done = f"{sum(r['repaired'] for r in rec['rows'])}/{len(rec['rows'])}"
        parts.append(f"{suite} {done}" + ("" if rec.get("complete", True) else " (incomplete: variants run so far)"))
        records.append(path)
        sections.append(f"debug-{suite}")
        samples.append(f"{suite}: {_sample_word(f'debug-{suite}')}")
    if not parts:
        return _missing(q, "bench/records/debug_scripts_dev.json", "debug-scripts_dev", "`python -m bench debug`")
    return Figure(q, f"repaired, counted only when the final version's full run gives the bug-free script's "
                     f"result (up to 5 repairs): {', '.join(parts)}", "; ".join(samples), records, sections)


def verdicts() -> Figure:
    q, path = "Does the verdict rule call a change that does nothing an improvement?", "bench/null_results.json"
    rec = _load(path)
    if rec is None:
        return _missing(q, path, "verdicts", "`python -m bench null`")
    ok = [t for t in rec["trials"] if t["status"] == "success"]
    nulls, imps = [t for t in ok if t["group"] == "null"], [t for t in ok if t["group"] == "improvement"]
    fi, det = (sum(t["verdict"] == "improvement" for t in ts) for ts in (nulls, imps))
    return Figure(q, f"{fi}/{len(nulls)} null changes judged improvements (false-improvement rate); a small real "
                     f"gain detected {det}/{len(imps)} times ({rec['seeds']} seeds a side, `{rec['topic']}`)",
                  _sample_word("verdicts"), [path], ["verdicts"])


HEADLINE = (effectiveness, effectiveness_new_topics, effectiveness_dev_tasks, round_time, make_bench, sandbox_safety,
            sandbox_cost, ranking, repair, debug_scripts, verdicts)


# -- RESULTS.md --------------------------------------------------------------------------------------

def render_index() -> str:
    lines = [INTRO, "", "## Headline", "",
             "| question | answer | sample | record | in full |", "|---|---|---|---|---|"]
    for f in (fn() for fn in HEADLINE):
        lines.append(f"| {f.question} | {f.answer} | {f.sample} | {', '.join(f'`{r}`' for r in f.records)} | "
                     f"{'; '.join(link(s) for s in f.sections)} |")
    lines += ["", "## Index", "",
              "| benchmark | what it measures | cost | sections on its page |", "|---|---|---|---|"]
    for b in REGISTRY.values():
        secs = page_sections(PAGES / f"{b.name}.md")
        lines.append(f"| [`{b.name}`](results/{b.name}.md): {b.title} | {b.measures} | {b.cost} | "
                     + ("; ".join(f"[{h.replace('`', '')}](results/{b.name}.md#{slug(h)})" for _, h in secs)
                        or "none yet") + " |")
    archived = page_sections(PAGES / f"{ARCHIVE}.md")
    lines += ["", f"[The archive](results/{ARCHIVE}.md) keeps {len(archived)} sections of superseded runs and of "
                  "one-question probes whose scripts were removed from the tree (each names its record, and its "
                  "script at the commit where it last was):", "",
              *[f"- [{h.replace('`', '')}](results/{ARCHIVE}.md#{slug(h)})" for _, h in archived]]
    return "\n".join(lines) + "\n"


def write_index(path: Path = RESULTS) -> Path:
    path.write_text(render_index())
    return path

