"""Paper ranking across the labelled development topics, leave-one-topic-out.

    .venv/bin/python -m bench.ranking_bench [--n 30] [--topics a,b] [--no-attributes] [--no-write]
    .venv/bin/python -m bench.ranking_bench --render     # re-render the section from the record
    .venv/bin/python -m bench.ranking_bench --similarity-only [--render] [--topics a,b] [--no-write]
        # the embedding-only rules on every labelled candidate, no LLM call (its own record and section)

Topics: every `bench/labels/<name>_relevance.jsonl` with a topic, either `bench/labels/<name>_topic.yaml`
(title and description) or a folder `experiments/<name>` or `experiments/<name>_*`. Candidates: the
label file's papers (a label file over LABELLED_ALL papers labels the whole corpus: then the top
RETRIEVED papers the corpus search returns for the topic's query), of which --n are ranked, the
relevant share kept (a fixed, id-hashed choice).

Per paper the local model gives: P(yes) of the yes/no relevance question (one 1-token request,
token log-probabilities), the relevance category and the paper's own task / input / output
(the attribute mode's two passes); the embedder gives the abstract's cosine with the topic. The
modes are scored from those answers without further LLM calls:
- yesno / similarity / combined: each threshold (and the combination's weight) is tuned on the
  other topics and applied to the held-out one (leave-one-topic-out), macro precision at recall
  >= TARGET_RECALL on the tuning topics; the values tuned on every topic (the shipped constants'
  candidates) are reported too, as in-sample;
- attributes: the shipped scoring (its constants were tuned on point-cloud papers: in-sample there);
- naive: the relevance category alone (nothing tuned).

LLM answers are cached under DAGSTER_HOME (default /tmp/rl_bench_home); the first, uncached run's
timings are kept in $DAGSTER_HOME/ranking_request_timings.json. Record: bench/records/ranking_loto.json
(every paper's answers and scores, the tuned values, the verdicts, timings); section "ranking" of
bench/results/ranking.md is rendered from it.

One module for one benchmark: asking, the leave-one-topic-out tuning and the rendering share the
record's shape and nothing outside this benchmark uses them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

from assets.paper_rankings.prompts import topic_text
from assets.paper_rankings.rank import abstract_similarities, rank_papers, yes_no_probabilities
from assets.paper_rankings.scoring import SIMILARITY_AT, graded_score, is_kept, signal_values
from assets.shared.topics import topic_spec
from assets.topic_brief import prompts as brief_prompts
from assets.topic_brief.brief import build_brief
from bench.common import machine, provenance, publish, read_record, rerender, today, write_record, write_section
from resources.literature import load_corpus
from resources.llm import ResponseCache, request_key
from schemas.llm_outputs import TaskAttributes
from schemas.records import TopicBrief

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "bench" / "labels"
PAGE = "ranking"   # bench/results/ranking.md
os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_bench_home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

LABELLED_ALL = 200      # a label file this long labels the corpus, not a candidate list
RETRIEVED = 50          # then: the top papers the corpus search returns for the topic
TARGET_PRECISION, TARGET_RECALL = 0.8, 0.6   # the goal, macro over held-out topics
SIGNAL_MODES = ("combined", "yesno", "similarity")
GRIDS = {   # the keep-from threshold of each mode, the combination's weight, centring on the topic's papers
    "yesno": {"centred": [False, True], "keep_from": [round(0.3 + 0.025 * i, 3) for i in range(25)]},
    "similarity": {"centred": [False, True], "keep_from": [round(0.2 + 0.025 * i, 3) for i in range(25)]},
    "combined": {"centred": [False, True], "weight": [0.5, 0.6, 0.7, 0.8, 0.9],
                 "keep_from": [round(0.3 + 0.025 * i, 3) for i in range(25)]},
}


# -- topics and candidates ---------------------------------------------------------------------------

def label_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def discover(labels: Path = LABELS, experiments: Path = ROOT / "experiments") -> list[dict]:
    """The labelled topics: {name, labels, topic_yaml | topic_dir}. First the topics listed in
    bench/labels/dev_topics.yaml (if present), then every other `<name>_relevance.jsonl` with a topic
    (`<name>_topic.yaml` beside it, or `experiments/<name>` / `experiments/<name>_*`) that is not
    already there; one without a topic comes back with `missing` set."""
    import yaml

    out, topics_seen, labels_seen = [], set(), set()
    registry = labels / "dev_topics.yaml"
    for t in (yaml.safe_load(registry.read_text()) or {}).get("topics", []) if registry.is_file() else []:
        src = ROOT / t["topic"]
        entry = {"name": t["name"], "labels": ROOT / t["labels"]}
        entry["topic_yaml" if src.suffix in (".yaml", ".yml") else "topic_dir"] = src
        out.append(entry)
        topics_seen.add(src.resolve())
        labels_seen.add(entry["labels"].resolve())
    for path in sorted(labels.glob("*_relevance.jsonl")):
        if path.resolve() in labels_seen:
            continue
        name = path.name.removesuffix("_relevance.jsonl")
        entry = {"name": name, "labels": path}
        yaml_file = labels / f"{name}_topic.yaml"
        dirs = sorted(d for d in experiments.glob(f"{name}*") if (d / "topic.yaml").is_file()
                      and (d.name == name or d.name.startswith(name + "_")))
        src = yaml_file if yaml_file.is_file() else dirs[0] if dirs else None
        if src is None:
            entry["missing"] = f"no bench/labels/{name}_topic.yaml and no experiments/{name}*"
        elif src.resolve() in topics_seen:
            continue   # the topic has a label set in the registry already
        else:
            entry["topic_yaml" if src.suffix == ".yaml" else "topic_dir"] = src
            entry["name"] = dirs[0].name if src in dirs else name
            topics_seen.add(src.resolve())
        out.append(entry)
    return out


def _rank_key(paper_id: str) -> str:
    return hashlib.sha256(paper_id.encode()).hexdigest()


def choose(ids: list[str], relevant: dict[str, bool], n: int) -> list[str]:
    """n of the ids with the relevant share kept (at least one of each kind when both exist), chosen
    by a hash of the id (fixed, not the file's order); all of them when n >= len(ids) or n <= 0. Keeps
    the ids' own order."""
    if n <= 0 or n >= len(ids):
        return list(ids)
    rel = sorted((i for i in ids if relevant[i]), key=_rank_key)
    other = sorted((i for i in ids if not relevant[i]), key=_rank_key)
    k = min(len(rel), max(1 if rel else 0, round(n * len(rel) / len(ids))))
    k = max(k, n - len(other))
    picked = set(rel[:k]) | set(other[:n - k])
    return [i for i in ids if i in picked]


def plain_brief(entry: dict):
    """The topic's title and description as a TopicBrief, without asking the LLM for its task
    attributes: all the yes/no question and the similarity read (the attribute mode needs brief())."""
    import yaml

    src = entry["topic_dir"] / "topic.yaml" if "topic_dir" in entry else entry["topic_yaml"]
    raw = yaml.safe_load(src.read_text()) or {}
    title, description = raw["title"].strip(), " ".join(raw["description"].split())
    return TopicBrief(topic=entry["name"], title=title, description=description, metric_name="", metric_goal="",
                      task="", input="", output="", domain="", evaluation="", search_query=f"{title}. {description}")


def brief(entry: dict, llm):
    """The topic brief with the task attributes the LLM extracts (what the pipeline's topic_brief holds)."""
    if "topic_dir" in entry:
        return build_brief(topic_spec(entry["topic_dir"].name), llm)[0]
    return bare_brief(entry["name"], entry["topic_yaml"], llm)


def bare_brief(name: str, yaml_file: Path, llm):
    """A TopicBrief for a topic given only as title and description (no code to run)."""
    import yaml

    raw = yaml.safe_load(yaml_file.read_text()) or {}
    title, description = raw["title"].strip(), " ".join(raw["description"].split())
    metric = raw.get("metric", "metric")
    res = llm.complete(brief_prompts.task_attributes(title, description, metric), stage="topic_brief",
                       schema=TaskAttributes, max_tokens=300)
    attrs = res.value.model_dump() if res.ok else {"task": title, "input": "unknown", "output": "unknown",
                                                   "domain": "unknown", "evaluation": metric, "search_query": title}
    return TopicBrief(topic=name, title=title, description=description, metric_name=metric,
                      metric_goal="maximize", llm_error=res.error, **attrs)


# -- timing ------------------------------------------------------------------------------------------

class Meter:
    """llama.cpp's own timings of every request a pass makes (prompt and decode time without the wait
    behind other users of the shared machine), kept in a file under DAGSTER_HOME keyed like the
    response cache, so a re-run whose answers come from the cache reports the first run's cost."""

    def __init__(self, llm, path: Path):
        self.path, self.keys, self.lock = path, [], threading.Lock()
        self.known: dict = json.loads(path.read_text()) if path.exists() else {}
        client = llm.client()
        create = client.chat.completions.create
        self._get, self._cls = ResponseCache.get, ResponseCache
        meter = self

        def get(cache, key):
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
            with meter.lock:
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
        self._cls.get = self._get
        self._client.chat.completions.create = self._create
        rows = [self.known[k] for k in dict.fromkeys(self.keys) if k in self.known]
        out = {f: round(sum(r[f] for r in rows), 2) for f in
               ("prompt_tokens", "completion_tokens", "prompt_evaluated", "prompt_cached", "server_s", "wall_s")}
        return {"requests": len(dict.fromkeys(self.keys)), "timed": len(rows), **out}


def metered(llm, fn):
    meter = Meter(llm, Path(os.environ["DAGSTER_HOME"]) / "ranking_request_timings.json")
    t0 = time.monotonic()
    try:
        value = fn()
    finally:
        usage = meter.close()
    return value, {**usage, "this_run_wall_s": round(time.monotonic() - t0, 2)}


# -- evaluation and leave-one-topic-out --------------------------------------------------------------

def pr(kept: set[str], relevant: set[str]) -> dict:
    tp = len(kept & relevant)
    return {"kept": len(kept), "tp": tp, "precision": tp / len(kept) if kept else 0.0,
            "recall": tp / len(relevant) if relevant else 0.0}


def signal_kept(mode: str, papers: list[dict], params: dict) -> set[str]:
    """The papers a signal mode keeps with these values (scoring.signal_values, graded_score: a paper
    is kept exactly when its value reaches keep_from)."""
    judged = [p for p in papers if p.get("p_yes") is not None or mode == "similarity"]
    values = signal_values(mode, [p.get("p_yes") for p in judged], [p.get("similarity") for p in judged],
                           weight=params.get("weight", 0.0), centred=params["centred"])
    return {p["paper_id"] for p, v in zip(judged, values) if is_kept(graded_score(v, params["keep_from"]))}


def grid(mode: str) -> list[dict]:
    import itertools

    keys = list(GRIDS[mode])
    return [dict(zip(keys, vals)) for vals in itertools.product(*(GRIDS[mode][k] for k in keys))]


def macro(rows: list[dict]) -> dict:
    return {"precision": sum(r["precision"] for r in rows) / len(rows),
            "recall": sum(r["recall"] for r in rows) / len(rows)}


def tune(mode: str, topics: list[dict]) -> dict:
    """The values of `mode` with the best macro precision at macro recall >= TARGET_RECALL over
    `topics` (ties: higher recall); when none reaches that recall, the best macro F1."""
    best, best_key = None, None
    for params in grid(mode):
        m = macro([pr(signal_kept(mode, t["papers"], params), t["relevant"]) for t in topics])
        f1 = 2 * m["precision"] * m["recall"] / max(m["precision"] + m["recall"], 1e-9)
        key = (1, m["precision"], m["recall"]) if m["recall"] >= TARGET_RECALL else (0, f1, m["recall"])
        if best_key is None or key > best_key:
            best, best_key = params, key
    return best


def loto(mode: str, topics: list[dict]) -> dict:
    """Per held-out topic: the values tuned on the others and precision / recall on it."""
    out = {}
    for t in topics:
        rest = [u for u in topics if u["name"] != t["name"]]
        params = tune(mode, rest)
        kept = signal_kept(mode, t["papers"], params)
        out[t["name"]] = {"params": params, **pr(kept, t["relevant"]), "kept_ids": sorted(kept)}
    return out


# -- the run -----------------------------------------------------------------------------------------

def candidate_pool(entry: dict, topic, literature, embedder) -> tuple[dict[str, dict], list[str], str]:
    """The topic's label rows by id, its candidate ids and what they are: the label file's papers,
    or (a label file over LABELLED_ALL papers) the top RETRIEVED papers of the corpus search."""
    rows = {r["paper_id"]: r for r in label_rows(entry["labels"])}
    if len(rows) > LABELLED_ALL:
        pool = [p.paper_id for p in literature.search(topic.search_query, RETRIEVED, embedder)]
        return rows, pool, f"top {RETRIEVED} of the corpus search for the topic's title and description"
    return rows, list(rows), f"the {len(rows)} labelled candidates"


def rank_topic(entry: dict, n: int, llm, embedder, literature, attributes: int) -> dict:
    """One topic's answers; `attributes`: how many of the n papers (the same id-hashed choice) the
    attribute and naive modes rank (0: none)."""
    name = entry["name"]
    topic = plain_brief(entry)
    full = brief(entry, llm) if attributes else None   # the LLM's task attributes: the attribute mode only
    source = str((entry.get("topic_dir") or entry.get("topic_yaml")).relative_to(ROOT))
    rows, pool, candidates = candidate_pool(entry, topic, literature, embedder)
    corpus = {p.paper_id: p for p in load_corpus(ROOT / "corpus" / "papers.jsonl")}
    relevant = {i: bool(rows[i]["relevant"]) for i in pool}
    ids = choose(pool, relevant, n)
    papers = [corpus[i] for i in ids]
    print(f"{name}: {len(papers)} papers ({sum(relevant[i] for i in ids)} relevant) of {candidates}", flush=True)

    probs, yes_cost = metered(llm, lambda: yes_no_probabilities(topic, papers, llm))
    t0 = time.monotonic()
    sims = abstract_similarities(topic, papers, embedder)
    sim_s = round(time.monotonic() - t0, 2)
    print(f"  yes/no: {yes_cost}; similarity {sim_s} s", flush=True)
    attr, attr_cost, naive = None, None, None
    sub = [p for p in papers if p.paper_id in set(choose(ids, relevant, attributes))] if attributes else []
    if sub:
        attr, attr_cost = metered(llm, lambda: rank_papers(full, sub, llm, mode="attributes", embedder=embedder))
        naive = rank_papers(full, sub, llm, mode="naive")   # the attribute pass's relevance answers, cached
        attr, naive = {s.paper_id: s for s in attr}, {s.paper_id: s for s in naive}
        attr_cost["papers"] = len(sub)
        print(f"  attributes ({len(sub)} papers): {attr_cost}", flush=True)
    out = []
    for i, p in enumerate(papers):
        row = {"paper_id": p.paper_id, "title": p.title, "relevant": relevant[p.paper_id],
               "label_note": rows[p.paper_id].get("note") or rows[p.paper_id].get("reason"),
               "p_yes": probs[i] if not isinstance(probs[i], str) else None,
               "yes_no_error": probs[i] if isinstance(probs[i], str) else None, "similarity": sims[i]}
        if attr and p.paper_id in attr:
            a, nv = attr[p.paper_id], naive[p.paper_id]
            row.update({"relevance": nv.relevance, "naive_score": nv.score, "naive_kept": nv.kept,
                        "attribute_score": a.score, "attribute_kept": a.kept, "attribute_match": a.attribute_match,
                        "paper_task": a.paper_task, "paper_input": a.paper_input, "paper_output": a.paper_output,
                        "attribute_reason": a.reason, "attribute_error": a.error})
        out.append(row)
    return {"name": name, "topic": source, "candidates": candidates, "labels": str(entry["labels"].relative_to(ROOT)),
            "brief": {k: getattr(full or topic, k) for k in ("title", "task", "input", "output")},
            "papers": out, "cost": {"yes_no": yes_cost, "similarity_s": sim_s, "attributes": attr_cost}}


def analyse(rec: dict) -> dict:
    """Leave-one-topic-out and in-sample figures from the per-paper answers of a record."""
    topics = [{"name": t["name"], "papers": t["papers"], "relevant": {p["paper_id"] for p in t["papers"]
                                                                     if p["relevant"]}} for t in rec["topics"]]
    res = {"sample": {
        "held_out": "per topic, values tuned on the other topics only (leave-one-topic-out)",
        "in_sample": "values tuned on all topics, the held-out one included (the shipped constants' source)",
        "fixed": "shipped constants, nothing tuned here (attributes: its constants were tuned on point-cloud "
                 "papers before, so in-sample there)"},
        "held_out": {}, "in_sample": {}, "fixed": {}}
    for mode in SIGNAL_MODES:
        res["held_out"][mode] = loto(mode, topics) if len(topics) > 1 else {}
        params = tune(mode, topics)
        res["in_sample"][mode] = {"params": params, "topics": {
            t["name"]: pr(signal_kept(mode, t["papers"], params), t["relevant"]) for t in topics}}
    # the attribute and naive modes ranked a subset of each topic's papers: they, and the default
    # signal mode with its held-out values, are scored on that subset
    subsets = [{**t, "papers": [p for p in t["papers"] if "attribute_kept" in p]} for t in topics]
    subsets = [{**t, "relevant": {p["paper_id"] for p in t["papers"] if p["relevant"]}} for t in subsets if t["papers"]]
    for mode, field in (("attributes", "attribute_kept"), ("naive", "naive_kept")):
        if subsets:
            res["fixed"][mode] = {t["name"]: pr({p["paper_id"] for p in t["papers"] if p[field]}, t["relevant"])
                                  for t in subsets}
    res["keep_all"] = {t["name"]: pr({p["paper_id"] for p in t["papers"]}, t["relevant"]) for t in topics}
    goals = {}
    for mode in SIGNAL_MODES:
        if res["held_out"][mode]:
            m = macro(list(res["held_out"][mode].values()))
            goals[mode] = {**m, "met": m["precision"] >= TARGET_PRECISION and m["recall"] >= TARGET_RECALL}
    for mode, per in res["fixed"].items():
        m = macro(list(per.values()))
        goals[mode] = {**m, "met": m["precision"] >= TARGET_PRECISION and m["recall"] >= TARGET_RECALL}
    res["goal"] = goals
    res["default"] = max((m for m in SIGNAL_MODES if m in goals),
                         key=lambda m: (goals[m]["met"], goals[m]["recall"] >= TARGET_RECALL, goals[m]["precision"]),
                         default=None)
    if subsets and res["default"] and res["held_out"][res["default"]]:
        mode = res["default"]
        res["fixed_subset_default"] = {
            t["name"]: pr(signal_kept(mode, t["papers"], res["held_out"][mode][t["name"]]["params"]), t["relevant"])
            for t in subsets}
    return res


def per_30(cost: dict | None, n: int, extra_s: float = 0.0) -> dict | None:
    if not cost or not n:
        return None
    return {"server_s": round((cost["server_s"] + extra_s) * 30 / n, 1),
            "wall_s": round((cost["wall_s"] + extra_s) * 30 / n, 1),
            "estimate_idle_s": round((cost["prompt_evaluated"] / PROMPT_TOK_S + cost["completion_tokens"] / DECODE_TOK_S
                                      + extra_s) * 30 / n, 1)}


PROMPT_TOK_S, DECODE_TOK_S = 48, 10   # the local model on the 2 cores when idle (measured: prompt 48 tok/s)


def render(rec: dict) -> str:
    a = rec["analysis"] = analyse(rec)   # recomputed from the per-paper answers
    names = [t["name"] for t in rec["topics"]]
    per_topic = rec["n"] if rec["n"] > 0 else "all labelled"

    def cell(e: dict | None) -> str:
        return "-" if e is None else f"{e['precision']:.2f} / {e['recall']:.2f} ({e['kept']})"

    def mcell(rows: list[dict]) -> str:
        m = macro(rows)
        return f"**{m['precision']:.2f} / {m['recall']:.2f}**"

    head = "| ranking | sample | " + " | ".join(names) + " | macro P / R |"
    sep = "|---" * (len(names) + 3) + "|"
    lines = [head, sep]
    for mode in SIGNAL_MODES:
        ho = a["held_out"].get(mode)
        if ho:
            lines.append(f"| {mode} | held-out (tuned on the other topics) | "
                         + " | ".join(cell(ho[n]) for n in names) + f" | {mcell(list(ho.values()))} |")
        ins = a["in_sample"][mode]
        lines.append(f"| {mode}, {ins['params']} | in-sample (tuned on all topics) | "
                     + " | ".join(cell(ins["topics"][n]) for n in names)
                     + f" | {mcell(list(ins['topics'].values()))} |")
    notes = {"attributes": "held-out, except in-sample on pointcloud (its constants were tuned there)",
             "naive": "held-out (nothing tuned)"}
    sub = rec.get("attributes_n")
    for mode, per in a["fixed"].items():
        lines.append(f"| {mode} (shipped constants), {sub} papers per topic | {notes[mode]} | "
                     + " | ".join(cell(per.get(n)) for n in names) + f" | {mcell(list(per.values()))} |")
    if a.get("fixed_subset_default"):
        per = a["fixed_subset_default"]
        lines.append(f"| {a['default']} on the same {sub} papers per topic | held-out | "
                     + " | ".join(cell(per.get(n)) for n in names) + f" | {mcell(list(per.values()))} |")
    lines.append("| keep everything | - | " + " | ".join(cell(a["keep_all"][n]) for n in names)
                 + f" | {mcell(list(a['keep_all'].values()))} |")
    params = ["| held-out topic | " + " | ".join(f"{m} tuned on the others" for m in SIGNAL_MODES) + " |",
              "|---" * (len(SIGNAL_MODES) + 1) + "|"]
    for n in names:
        params.append(f"| {n} | " + " | ".join(str(a["held_out"].get(m, {}).get(n, {}).get("params", "-"))
                                              for m in SIGNAL_MODES) + " |")
    cost = ["| topic | papers | yes/no requests | yes/no prompt tok/paper (of which from the prefix cache) | "
            "yes/no + similarity per 30 papers: server s / wall s / idle estimate | "
            "attributes per 30 papers: server s / wall s / idle estimate |", "|---|---|---|---|---|---|"]
    for t in rec["topics"]:
        n, c = len(t["papers"]), t["cost"]
        y, at = per_30(c["yes_no"], n, c["similarity_s"]), per_30(c["attributes"], n)
        yn = c["yes_no"]
        cost.append(f"| {t['name']} | {n} | {yn['requests']} | {yn['prompt_tokens'] / n:.0f} "
                    f"({yn['prompt_cached'] / n:.0f}) | {y['server_s']} / {y['wall_s']} / {y['estimate_idle_s']} | "
                    + (f"{at['server_s']} / {at['wall_s']} / {at['estimate_idle_s']}" if at else "-") + " |")
    goal = [f"- {m}: macro precision {g['precision']:.2f}, recall {g['recall']:.2f} on held-out topics: "
            f"goal (P >= {TARGET_PRECISION} at R >= {TARGET_RECALL}) **{'met' if g['met'] else 'not met'}**"
            for m, g in a["goal"].items()]
    copies = sum(bool(p.get("attribute_error") and "dropped" in p["attribute_error"])
                 for t in rec["topics"] for p in t["papers"])
    judged = sum("attribute_kept" in p for t in rec["topics"] for p in t["papers"])
    attr_line = (f"- Attribute answers dropped as copies of the title or abstract after one re-ask: {copies}/{judged}."
                 if judged else "- The attribute and naive modes were not run in this record (`--attributes 0`).")
    return "\n".join([
        "## ranking (LOTO)",
        "",
        provenance("bench/ranking_bench.py", "bench/records/ranking_loto.json",
                   f"{rec['date']} on {rec['machine']} (a 2-core shared VM: other engineers' jobs ran at the same "
                   "time, so wall times are upper bounds)",
                   "each row says: held-out = thresholds tuned on the other topics (leave-one-topic-out); "
                   "in-sample = tuned on all topics, the shipped constants' source"),
        "",
        f"`make bench-ranking`. Model {rec['model']} (local), embeddings all-MiniLM-L6-v2. Per topic {per_topic} "
        "papers (the relevant share of the labelled candidates kept, chosen by a hash of the id), labels as listed "
        "in `bench/labels/dev_topics.yaml`. Cells: precision / recall (papers kept), kept = score >= 8. With "
        f"{per_topic} papers per topic one paper moves a topic's recall by a quarter to a third: the modes' "
        "differences below are within that noise. Default rule (fixed before the run): a mode meeting the goal, "
        f"else one with held-out macro recall >= {TARGET_RECALL}, then the best held-out precision: "
        f"**{a['default']}**.",
        "",
        *lines,
        "",
        *goal,
        attr_line,
        "",
        "Values tuned on the other topics, per held-out topic:",
        "",
        *params,
        "",
        "Cost (server s: llama.cpp's own prompt + decode time; wall s: with the wait behind other work on the "
        f"shared cores; idle estimate: tokens evaluated at {PROMPT_TOK_S} prompt / {DECODE_TOK_S} decode tok/s). "
        "The combined mode's cost is the yes/no pass plus the similarity (embedding) time; the first topic's "
        "similarity time includes loading the embedding model:",
        "",
        *cost,
    ])


# -- the embedding-only modes on every labelled candidate (no LLM call) ---------------------------------
# `--similarity-only`: the abstract's cosine with the topic for every labelled candidate of every topic,
# and rules that keep a paper from it: absolute (the cosine itself), centred (the shipped rule: minus the
# median of the papers ranked together, plus scoring.PIVOT) and rules relative to the topic's own
# candidates (within `delta` of the best one, the top `share`, a z-score). Each rule's one value is tuned
# on six topics and applied to the seventh (leave-one-topic-out, the objective of `tune`); the values tuned
# on all seven are reported as in-sample. Record: bench/records/ranking_similarity_all.json, section
# "ranking_similarity" of bench/results/ranking.md.

SIMILARITY_RECORD, SIMILARITY_SECTION = "ranking_similarity_all", "ranking_similarity"


def _steps(lo: float, hi: float, step: float) -> list[float]:
    return [round(lo + step * i, 4) for i in range(int(round((hi - lo) / step)) + 1)]


SIMILARITY_RULES = {   # rule -> (its value's name, the grid it is tuned over, what it keeps)
    "absolute": ("keep_from", _steps(0.1, 0.8, 0.01), "cosine >= keep_from"),
    "centred": ("keep_from", _steps(0.2, 0.8, 0.01),
                "cosine - median(candidates) + 0.5 >= keep_from (the shipped rule, scoring.CENTRED)"),
    "below_best": ("delta", _steps(0.0, 0.4, 0.01), "cosine >= max(candidates) - delta"),
    "top_share": ("share", _steps(0.05, 1.0, 0.025), "among the ceil(share * n) highest cosines (ties kept)"),
    "z_score": ("z", _steps(-1.5, 2.5, 0.05), "(cosine - mean) / std over the candidates >= z"),
}


def similarity_kept(rule: str, cosines: list[float], value: float) -> list[bool]:
    """Which of one topic's candidates a rule keeps, from their cosines with the topic (pure). The
    centred rule is the shipped one (scoring.signal_values, kept exactly when the value reaches
    keep_from); top_share keeps ties at the last place; z_score with every cosine equal keeps all
    when z <= 0."""
    import math

    if not cosines:
        return []
    if rule == "absolute":
        return [c >= value for c in cosines]
    if rule == "centred":
        return [v >= value for v in signal_values("similarity", [None] * len(cosines), cosines, centred=True)]
    if rule == "below_best":
        return [c >= max(cosines) - value - 1e-9 for c in cosines]
    if rule == "top_share":
        k = min(len(cosines), max(1, math.ceil(value * len(cosines) - 1e-9)))
        last = sorted(cosines, reverse=True)[k - 1]
        return [c >= last for c in cosines]
    if rule == "z_score":
        mean = sum(cosines) / len(cosines)
        sd = math.sqrt(sum((c - mean) ** 2 for c in cosines) / len(cosines))
        return [((c - mean) / sd if sd > 0 else 0.0) >= value - 1e-9 for c in cosines]
    raise ValueError(f"unknown similarity rule {rule!r}; one of {tuple(SIMILARITY_RULES)}")


def best_cut(cosines: list[float], relevant: list[bool]) -> dict:
    """The topic's own best threshold on the cosine, chosen on the topic itself (an upper bound for any
    rule that keeps the papers above a cut): the best precision at recall >= TARGET_RECALL (ties: higher
    recall), else the best F1; with the cut, precision, recall and papers kept."""
    total = sum(relevant)
    best, best_key = None, None
    for cut in sorted(set(cosines), reverse=True):
        kept = [r for c, r in zip(cosines, relevant) if c >= cut]
        m = {"precision": sum(kept) / len(kept), "recall": sum(kept) / total if total else 0.0}
        if best_key is None or goal_key(m) > best_key:
            best, best_key = {"cut": cut, **m, "kept": len(kept), "tp": sum(kept)}, goal_key(m)
    return best


def _rule_kept(rule: str, topic: dict, value: float, signal: str = "cosine") -> set[str]:
    return {p["paper_id"] for p, k in zip(topic["papers"], similarity_kept(
        rule, [p[signal] for p in topic["papers"]], value)) if k}


def goal_key(m: dict) -> tuple:
    """The tuning objective: the best macro precision at macro recall >= TARGET_RECALL (ties: higher
    recall); when nothing reaches that recall, the best macro F1."""
    f1 = 2 * m["precision"] * m["recall"] / max(m["precision"] + m["recall"], 1e-9)
    return (1, m["precision"], m["recall"]) if m["recall"] >= TARGET_RECALL else (0, f1, m["recall"])


def tune_rule(rule: str, topics: list[dict], signal: str = "cosine") -> float:
    """The rule's value with the best goal_key over `topics` (the first in grid order on a tie)."""
    best, best_key = None, None
    for value in SIMILARITY_RULES[rule][1]:
        key = goal_key(macro([pr(_rule_kept(rule, t, value, signal), t["relevant"]) for t in topics]))
        if best_key is None or key > best_key:
            best, best_key = value, key
    return best


def analyse_similarity(rec: dict) -> dict:
    """Per rule: leave-one-topic-out (the value tuned on the other topics, scored on the held-out one),
    in-sample (tuned on all topics) and, for the centred rule, the shipped constant (tuned earlier on 12
    papers per topic of these same topics)."""
    topics = [{"name": t["name"], "papers": t["papers"],
               "relevant": {p["paper_id"] for p in t["papers"] if p["relevant"]}} for t in rec["topics"]]
    res = {"held_out": {}, "in_sample": {}, "goal": {}}
    for rule in SIMILARITY_RULES:
        folds = {}
        for t in topics:
            value = tune_rule(rule, [u for u in topics if u["name"] != t["name"]])
            folds[t["name"]] = {"value": value, **pr(_rule_kept(rule, t, value), t["relevant"])}
        res["held_out"][rule] = folds
        value = tune_rule(rule, topics)
        res["in_sample"][rule] = {"value": value, "topics": {
            t["name"]: pr(_rule_kept(rule, t, value), t["relevant"]) for t in topics}}
        m = macro(list(folds.values()))
        res["goal"][rule] = {**m, "met": m["precision"] >= TARGET_PRECISION and m["recall"] >= TARGET_RECALL}
    res["signals"] = compare_signals(topics) if all(SENTENCE in p for t in topics for p in t["papers"]) else {}
    res["shipped"] = {"rule": "centred", "value": SIMILARITY_AT, "topics": {
        t["name"]: pr(_rule_kept("centred", t, SIMILARITY_AT), t["relevant"]) for t in topics}}
    res["keep_all"] = {t["name"]: pr({p["paper_id"] for p in t["papers"]}, t["relevant"]) for t in topics}
    res["own_best_cut"] = {t["name"]: best_cut([p["cosine"] for p in t["papers"]], [p["relevant"] for p in t["papers"]])
                           for t in topics}
    return res


SENTENCE = "sentence_cosine"   # the paper's field: sentence_similarities (best abstract sentence)
SIGNALS = {"cosine": "title + abstract as one text (rank.abstract_similarities, shipped)",
           SENTENCE: "the abstract's best sentence (ranking_bench.sentence_similarities; not shipped)"}
COMPARED_RULES = ("centred", "z_score")
# labelled (blind to every similarity) after the sentence signal was chosen on the 7 topics before them: for
# the choice of signal these are the only held-out topics
LABELLED_AFTER_CHOICE = ("audio_keyword_spotting", "image_generation")


def abstract_sentences(abstract: str, min_chars: int = 20) -> list[str]:
    """The abstract split after . ! or ? followed by white space; pieces shorter than `min_chars`
    (abbreviations, "Results.") are left out; an abstract with no longer piece is one sentence."""
    parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", abstract or "")]
    return [s for s in parts if len(s) >= min_chars] or [(abstract or "").strip()]


def sentence_similarities(brief, papers: list, embedder) -> list[float]:
    """Per paper, the highest cosine between the topic (title and description) and one sentence of
    its abstract: a paper on the topic's task usually says so in one sentence, which the whole
    abstract's embedding dilutes with its other claims (bench/results/ranking.md "ranking by similarity")."""
    if not papers:
        return []
    sents = [abstract_sentences(p.abstract) for p in papers]
    vecs = embedder.encode([topic_text(brief.title, brief.description)] + [s for ss in sents for s in ss])
    out, at = [], 1
    for ss in sents:
        out.append(round(float((vecs[at:at + len(ss)] @ vecs[0]).max()), 4))
        at += len(ss)
    return out


def auc(scores: list[float], relevant: list[bool]) -> float | None:
    """The chance that a relevant paper scores above an irrelevant one (ties count half); None
    when the topic lacks either."""
    pos = [s for s, r in zip(scores, relevant) if r]
    neg = [s for s, r in zip(scores, relevant) if not r]
    if not pos or not neg:
        return None
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def compare_signals(topics: list[dict]) -> dict:
    """Per signal: each topic's AUC, and per compared rule the leave-one-topic-out folds (the value
    tuned on the other topics for that signal) with their macro precision / recall."""
    out = {}
    for sig in SIGNALS:
        folds = {}
        for rule in COMPARED_RULES:
            per = {}
            for t in topics:
                value = tune_rule(rule, [u for u in topics if u["name"] != t["name"]], sig)
                per[t["name"]] = {"value": value, **pr(_rule_kept(rule, t, value, sig), t["relevant"])}
            folds[rule] = {"topics": per, "macro": macro(list(per.values()))}
        out[sig] = {"auc": {t["name"]: auc([p[sig] for p in t["papers"]], [p["relevant"] for p in t["papers"]])
                            for t in topics}, "held_out": folds}
    return out


def mark_kept(rec: dict) -> None:
    """Each paper's `kept` per rule: held-out (its topic's fold value) and in-sample."""
    a = rec["analysis"]
    for t in rec["topics"]:
        cos = [p["cosine"] for p in t["papers"]]
        held = {r: similarity_kept(r, cos, a["held_out"][r][t["name"]]["value"]) for r in SIMILARITY_RULES}
        ins = {r: similarity_kept(r, cos, a["in_sample"][r]["value"]) for r in SIMILARITY_RULES}
        for i, p in enumerate(t["papers"]):
            p["kept"] = {r: {"held_out": held[r][i], "in_sample": ins[r][i]} for r in SIMILARITY_RULES}


def similarity_topic(entry: dict, embedder, literature, corpus: dict) -> dict:
    """One topic's candidates with their cosine (rank.abstract_similarities: the topic's title and
    description against the paper's title and abstract); no LLM call."""
    topic = plain_brief(entry)
    rows, pool, candidates = candidate_pool(entry, topic, literature, embedder)
    papers = [corpus[i] for i in pool]
    sims = abstract_similarities(topic, papers, embedder)
    best = sentence_similarities(topic, papers, embedder)
    out = [{"paper_id": p.paper_id, "title": p.title, "relevant": bool(rows[p.paper_id]["relevant"]), "cosine": c,
            SENTENCE: b} for p, c, b in zip(papers, sims, best)]
    print(f"{entry['name']}: {len(out)} papers ({sum(p['relevant'] for p in out)} relevant) of {candidates}",
          flush=True)
    return {"name": entry["name"], "topic": str((entry.get("topic_dir") or entry.get("topic_yaml")).relative_to(ROOT)),
            "labels": str(entry["labels"].relative_to(ROOT)), "candidates": candidates, "papers": out}


def render_similarity(rec: dict) -> str:
    a = rec["analysis"] = analyse_similarity(rec)   # recomputed from the per-paper cosines
    mark_kept(rec)
    names = [t["name"] for t in rec["topics"]]
    k = len(names)

    def cell(e: dict) -> str:
        return f"{e['precision']:.2f} / {e['recall']:.2f} ({e['kept']})"

    def mcell(rows: list[dict]) -> str:
        m = macro(rows)
        return f"**{m['precision']:.2f} / {m['recall']:.2f}**"

    sizes = ", ".join(f"{t['name']} {len(t['papers'])} ({sum(p['relevant'] for p in t['papers'])})"
                      for t in rec["topics"])
    lines = ["| rule | sample | " + " | ".join(names) + " | macro P / R |", "|---" * (len(names) + 3) + "|"]
    for rule, (param, _, _) in SIMILARITY_RULES.items():
        ho, ins = a["held_out"][rule], a["in_sample"][rule]
        lines.append(f"| {rule} | held-out ({param} tuned on the other {k - 1} topics) | "
                     + " | ".join(cell(ho[n]) for n in names) + f" | {mcell(list(ho.values()))} |")
        lines.append(f"| {rule}, {param} {ins['value']} | in-sample (tuned on all {k} topics) | "
                     + " | ".join(cell(ins["topics"][n]) for n in names)
                     + f" | {mcell(list(ins['topics'].values()))} |")
    sh = a["shipped"]
    lines.append(f"| centred, keep_from {sh['value']} (shipped constant) | in-sample (tuned before on 12 papers per "
                 "topic of these topics) | " + " | ".join(cell(sh["topics"][n]) for n in names)
                 + f" | {mcell(list(sh['topics'].values()))} |")
    lines.append("| keep everything | - | " + " | ".join(cell(a["keep_all"][n]) for n in names)
                 + f" | {mcell(list(a['keep_all'].values()))} |")
    own = a["own_best_cut"]
    lines.append(f"| each topic's own best cut on the cosine (at recall >= {TARGET_RECALL} on the topic) | in-sample "
                 "(chosen on the topic itself) | " + " | ".join(cell(own[n]) for n in names)
                 + f" | {mcell(list(own.values()))} |")
    rules = [f"- {rule}: {what}" for rule, (_, _, what) in SIMILARITY_RULES.items()]
    values = ["| held-out topic | " + " | ".join(f"{r} ({SIMILARITY_RULES[r][0]})" for r in SIMILARITY_RULES) + " |",
              "|---" * (len(SIMILARITY_RULES) + 1) + "|"]
    for n in names:
        values.append(f"| {n} | " + " | ".join(str(a["held_out"][r][n]["value"]) for r in SIMILARITY_RULES) + " |")
    compared = render_signals(a["signals"], names) if a.get("signals") else []
    goal = [f"- {r}: held-out macro precision {g['precision']:.2f}, recall {g['recall']:.2f}: goal (P >= "
            f"{TARGET_PRECISION} at R >= {TARGET_RECALL}) **{'met' if g['met'] else 'not met'}**"
            for r, g in a["goal"].items()]
    return "\n".join([
        "## ranking by similarity on all labelled candidates (LOTO)",
        "",
        provenance("bench/ranking_bench.py", f"bench/records/{SIMILARITY_RECORD}.json",
                   f"{rec['date']} on {rec['machine']} (embeddings only; no LLM call)",
                   f"each row says: held-out = the rule's value tuned on the other {k - 1} topics and applied to "
                   f"the held-out one (leave-one-topic-out); in-sample = tuned on all {k} topics, the scored topic "
                   "included"),
        "",
        "`python -m bench.ranking_bench --similarity-only` (`make bench-ranking-similarity`). The cosine between the "
        "topic's title and description and each paper's title and abstract (all-MiniLM-L6-v2, "
        "`rank.abstract_similarities`, what the shipped `similarity` mode reads), for every labelled candidate "
        f"of the {k} development topics (`bench/labels/dev_topics.yaml`); papers (relevant) per topic: {sizes}. "
        "Each rule's one value is tuned for the best macro precision at macro recall >= "
        f"{TARGET_RECALL} on the tuning topics (else the best macro F1). Cells: precision / recall (papers kept). "
        "The relative rules are taken over a topic's labelled candidates (the top 40-60 papers of the corpus "
        "search for the topic); in the loop they are taken over the papers a round ranks together.",
        "",
        "Rules:",
        "",
        *rules,
        "",
        *lines,
        "",
        *goal,
        "",
        f"Values tuned on the other {k - 1} topics, per held-out topic:",
        "",
        *values,
        *compared,
    ])


def render_signals(sig: dict, names: list[str]) -> list[str]:
    """The two texts the cosine can compare, side by side: per-topic AUC and the leave-one-topic-out
    precision / recall of the compared rules (each signal's value tuned on the other topics)."""
    def fmt(x):
        return "-" if x is None else f"{x:.2f}"

    after = [n for n in names if n in LABELLED_AFTER_CHOICE]
    head = ["| signal | what | " + " | ".join(names) + " | mean AUC | mean AUC, topics labelled after the choice |",
            "|---" * (len(names) + 4) + "|"]
    rows = []
    for s, what in SIGNALS.items():
        au = sig[s]["auc"]
        vals = [au[n] for n in names if au[n] is not None]
        late = [au[n] for n in after if au[n] is not None]
        rows.append(f"| {s} | {what} | " + " | ".join(fmt(au[n]) for n in names)
                    + f" | {fmt(sum(vals) / len(vals) if vals else None)} | "
                    + (fmt(sum(late) / len(late)) if late else "none yet") + " |")
    pr_head = ["| signal, rule | " + " | ".join(names) + " | macro P / R |", "|---" * (len(names) + 2) + "|"]
    pr_rows = []
    for s in SIGNALS:
        for rule, f in sig[s]["held_out"].items():
            pr_rows.append(f"| {s}, {rule} | " + " | ".join(
                f"{f['topics'][n]['precision']:.2f} / {f['topics'][n]['recall']:.2f}" for n in names)
                + f" | **{f['macro']['precision']:.2f} / {f['macro']['recall']:.2f}** |")
    wins = sum(1 for n in names if None not in (sig[SENTENCE]["auc"][n], sig["cosine"]["auc"][n])
               and sig[SENTENCE]["auc"][n] > sig["cosine"]["auc"][n])
    def mean(sig_name, topics):
        vals = [sig[sig_name]["auc"][n] for n in topics if sig[sig_name]["auc"][n] is not None]
        return sum(vals) / len(vals) if vals else None

    verdict = []
    if after and None not in (mean(SENTENCE, after), mean("cosine", after)):
        carried = mean(SENTENCE, after) > mean("cosine", after)
        verdict = [f"On the topics labelled after the choice the mean AUC is {mean(SENTENCE, after):.2f} "
                   f"(best sentence) against {mean('cosine', after):.2f} (whole abstract): the advantage seen on "
                   "the first topics "
                   + ("carried." if carried else "**did not carry**, so the shipped similarity stays the whole "
                      "abstract's."), ""]
    return ["", "### Which text the cosine compares: the whole abstract or its best sentence", "",
            "The sentence signal was chosen among 9 text variants and their sums after looking at these numbers on "
            "the first 7 topics (in-sample for those 7); "
            + (f"{', '.join(after)} {'was' if len(after) == 1 else 'were'} labelled afterwards, blind to every "
               "similarity, and are held-out for the choice." if after else "no topic labelled after the choice yet."),
            "AUC per topic (the chance a relevant paper scores above an irrelevant one; no threshold):", "",
            *head, *rows, "",
            f"The best sentence scores higher AUC than the whole abstract on {wins} of {len(names)} topics.", "",
            *verdict,
            "Leave-one-topic-out precision / recall (each signal's value tuned on the other topics):", "",
            *pr_head, *pr_rows]


def similarity_only(args) -> int:
    """The `--similarity-only` run: cosines for every labelled candidate, the rules analysed, the record
    and section written (or, with --render, re-rendered from the committed record). No LLM call."""
    if args.render:
        return rerender(SIMILARITY_RECORD, SIMILARITY_SECTION, render_similarity, PAGE)
    # imported here, not at the top: pipelines.definitions builds the code location's resources from the
    # environment when imported, which must come after this module's DAGSTER_HOME default
    from pipelines.definitions import build_resources

    res = build_resources(resolved=True)   # the LLM resource is never used here
    embedder, literature = res["embedder"], res["literature"]
    corpus = {p.paper_id: p for p in load_corpus(ROOT / "corpus" / "papers.jsonl")}
    wanted = set(filter(None, args.topics.split(",")))
    entries = [e for e in discover() if "missing" not in e and (not wanted or e["name"] in wanted)]
    rec = {"script": "bench/ranking_bench.py --similarity-only", "date": today(), "machine": machine(),
           "machine_note": "2-core shared VM (other jobs ran at the same time; no timing is reported)",
           "embedder": "all-MiniLM-L6-v2", "embedder_model": embedder.model_id(),
           "topic_text": "title. description (prompts.topic_text)", "paper_text": "title. abstract",
           "target": {"precision": TARGET_PRECISION, "recall": TARGET_RECALL},
           "rules": {r: {"value": v, "grid": g, "keeps": w} for r, (v, g, w) in SIMILARITY_RULES.items()},
           "topics": [similarity_topic(e, embedder, literature, corpus) for e in entries]}
    return publish(SIMILARITY_RECORD, SIMILARITY_SECTION, rec, render_similarity, PAGE, write=not args.no_write)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30, help="papers ranked per topic (default 30; 0: every candidate)")
    ap.add_argument("--topics", default="", help="comma-separated topic names (default: every labelled topic)")
    ap.add_argument("--attributes", type=int, default=-1,
                    help="papers per topic for the attribute and naive modes (slow on the local model; default: "
                         "all --n, 0: none)")
    ap.add_argument("--no-attributes", action="store_true", help="the same as --attributes 0")
    ap.add_argument("--attributes-topics", default="", help="comma-separated topics the attribute and naive modes "
                    "rank (default: all)")
    ap.add_argument("--no-write", action="store_true", help="print, do not write the record or the page")
    ap.add_argument("--render", action="store_true", help="re-render the section from the committed record")
    ap.add_argument("--similarity-only", action="store_true",
                    help="the embedding-only rules on every labelled candidate, no LLM call (record "
                         f"bench/records/{SIMILARITY_RECORD}.json, its own section)")
    args = ap.parse_args(argv)
    if args.similarity_only:
        return similarity_only(args)
    if args.render:   # the analysis again from the record's per-paper answers (no LLM call)
        rec = read_record("ranking_loto")
        body = render(rec)
        write_record("ranking_loto", rec)
        print(write_section("ranking", body, PAGE))
        return 0

    from pipelines.definitions import build_resources  # here: it reads the environment on import (above)

    res = build_resources(resolved=True)
    llm, embedder, literature = res["llm"], res["embedder"], res["literature"]
    entries = discover()
    for e in entries:
        if "missing" in e:
            print(f"skipped {e['name']}: {e['missing']}")
    wanted = set(filter(None, args.topics.split(",")))
    entries = [e for e in entries if "missing" not in e and (not wanted or e["name"] in wanted)]
    attr_n = 0 if args.no_attributes else max(args.n, 0) if args.attributes < 0 else args.attributes
    attr_topics = set(filter(None, args.attributes_topics.split(","))) or {e["name"] for e in entries}
    rec = {"script": "bench/ranking_bench.py", "date": today(), "machine": machine(),
           "machine_note": "2-core shared VM (other engineers' jobs ran at the same time)",
           "model": llm.model_name(), "n": args.n,
           "attributes_n": attr_n,
           "topics": [rank_topic(e, args.n, llm, embedder, literature, attr_n if e["name"] in attr_topics else 0)
                      for e in entries]}
    rec["analysis"] = analyse(rec)
    body = render(rec)
    print(body)
    if not args.no_write:
        write_record("ranking_loto", rec)
        write_section("ranking", body, PAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
