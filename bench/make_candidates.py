"""Candidate papers for a development topic: what the project's own retrieval returns for it.

    .venv/bin/python -m bench.make_candidates --topic experiments/image_classification --n 60
    .venv/bin/python -m bench.make_candidates --topic-yaml bench/labels/graph_topic.yaml --n 60 \
        --labels bench/labels/graph_relevance.jsonl
    .venv/bin/python -m bench.make_candidates --dev sentiment_classification   # topic + labels from the manifest

The query is the topic's title and description; the search is the shipped corpus source of
resources/literature.py (BM25 + the local embedding model, fused by reciprocal rank), the same
search the pipeline runs. One JSON line per paper goes to stdout (or --out): rank, paper_id,
title, abstract. With --labels, each line also says whether that label file has the paper and
its label, and a last summary line on stderr counts the retrieved papers still unlabelled and the
labelled papers the search did not return (the hand-picked distractors; the label files mark
each row's origin in the field `origin`: "retrieved" or "added").

bench/labels/dev_topics.yaml lists the development topics (topic source, label file, how deep the
search was labelled); `--dev NAME` takes both from there. The labels themselves are written by
hand from these abstracts (bench/labels/README.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

from resources.embedder import Embedder
from resources.literature import Literature
from schemas.topic import load_topic

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "bench" / "labels" / "dev_topics.yaml"


def dev_topics(manifest: Path = MANIFEST) -> list[dict]:
    """The development topics: name, field, topic (folder or YAML), labels (file) and retrieved
    (labelled search depth), paths made absolute."""
    out = []
    for t in yaml.safe_load(manifest.read_text())["topics"]:
        out.append({**t, "topic": ROOT / t["topic"], "labels": ROOT / t["labels"], "retrieved": int(t["retrieved"])})
    return out


def dev_topic(name: str, manifest: Path = MANIFEST) -> dict:
    found = [t for t in dev_topics(manifest) if t["name"] == name]
    if not found:
        raise SystemExit(f"no development topic {name!r} in {manifest}: "
                         f"{', '.join(t['name'] for t in dev_topics(manifest))}")
    return found[0]


def query_of(source: str | Path) -> str:
    """topic_query for a manifest entry's `topic`: a folder or a bare YAML file."""
    source = Path(source)
    return topic_query(topic_dir=source) if source.is_dir() else topic_query(topic_yaml=source)


def topic_query(topic_dir: str | None = None, topic_yaml: str | None = None) -> str:
    """The retrieval query of a topic: its title and description, from a topic folder (validated
    like any topic) or from a bare YAML file with `title` and `description` only."""
    if topic_dir:
        spec = load_topic(topic_dir)
        title, description = spec.title, spec.description
    else:
        raw = yaml.safe_load(Path(topic_yaml).read_text()) or {}
        title, description = raw.get("title"), raw.get("description")
        if not (isinstance(title, str) and title.strip() and isinstance(description, str) and description.strip()):
            raise ValueError(f"{topic_yaml}: needs a non-empty 'title' and 'description'")
    return f"{title.strip()}. {' '.join(description.split())}"


def unlabelled(rows: list[dict], labels: dict[str, dict], depth: int) -> list[str]:
    """The retrieved papers down to rank `depth` that the label file lacks."""
    return [r["paper_id"] for r in rows if r["rank"] <= depth and r["paper_id"] not in labels]


def candidates(query: str, n: int, corpus: str | Path | None = None, index_dir: str | Path | None = None) -> list[dict]:
    """The top n corpus papers for the query, best first, as plain dicts."""
    lit = Literature(corpus=str(corpus or ""), index_dir=str(index_dir or ""))
    papers = lit.search(query, n, Embedder())
    return [{"rank": i, "paper_id": p.paper_id, "title": p.title, "abstract": p.abstract,
             "retrieval_score": p.retrieval_score} for i, p in enumerate(papers, 1)]


def read_labels(path: str | Path) -> dict[str, dict]:
    return {r["paper_id"]: r for r in map(json.loads, Path(path).read_text().splitlines()) if r}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--topic", help="a topic folder with topic.yaml (e.g. experiments/image_classification)")
    src.add_argument("--topic-yaml", help="a YAML file with only title and description (bench/labels/*_topic.yaml)")
    src.add_argument("--dev", metavar="NAME", help="a development topic of bench/labels/dev_topics.yaml "
                     "(its topic, and its label file unless --labels is given)")
    ap.add_argument("--n", type=int, help="how many papers to retrieve (default 60; with --dev, the depth "
                    "its labels cover)")
    ap.add_argument("--labels", help="a label file (JSON lines) to compare the candidates with")
    ap.add_argument("--out", help="write the candidates here instead of stdout")
    ap.add_argument("--corpus", help="another corpus file (default: the shipped corpus/papers.jsonl)")
    ap.add_argument("--index-dir", default=os.environ.get("RESEARCHLOOP_BENCH_INDEX", "/tmp/rl_bench_home/index"),
                    help="where the search index is built once and reused (default /tmp/rl_bench_home/index)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    if args.dev:
        entry = dev_topic(args.dev)
        query = query_of(entry["topic"])
        args.labels = args.labels or entry["labels"]
        args.n = args.n or entry["retrieved"]
    else:
        query = topic_query(args.topic, args.topic_yaml)
    args.n = args.n or 60
    rows = candidates(query, args.n, args.corpus, args.index_dir)
    labels = read_labels(args.labels) if args.labels else None
    if labels is not None:
        for r in rows:
            lab = labels.get(r["paper_id"])
            r["labelled"] = lab is not None
            r["relevant"] = lab["relevant"] if lab else None
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    if labels is not None:
        got = {r["paper_id"] for r in rows}
        missing = unlabelled(rows, labels, args.n)
        extra = sorted(set(labels) - got)
        print(f"query: {query[:100]}...\n{len(rows)} retrieved, {len(missing)} of them unlabelled"
              f"{': ' + ', '.join(missing) if missing else ''}; {len(extra)} labelled papers not retrieved",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
