"""Time and tokens of the filtering stage (independence + the novelty loop) on the local model,
for 10 fixed ideas on the shipped point-cloud topic, through the same code the
`filtered_ideas` asset calls (assets.filtered_ideas.filtering.filter_ideas +
assets.filtered_ideas.novelty.novelty_check).

    DAGSTER_HOME=/tmp/rl_bench_home .venv/bin/python -m bench.filtering_bench

The LLM cache lives under DAGSTER_HOME: a re-run with the same home asks the model nothing
and, when every call came from the cache, prints the table without rewriting its page or the
record (bench/records/filtering.json: every idea's filter outcome, time and LLM calls)."""
from __future__ import annotations

import os
import time
from pathlib import Path

from assets.filtered_ideas.filtering import filter_ideas
from assets.filtered_ideas.novelty import novelty_check
from assets.shared.naming import idea_id
from bench.common import machine, provenance, today, write_record, write_section
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM, usage_totals
from resources.paths import resolve_topic_dir
from schemas.records import Idea
from schemas.topic import load_topic

ROOT = Path(__file__).resolve().parents[1]

TOPIC = "pointcloud_classification"
# (name, title, summary): the kind of ideas a round proposes for this topic, written for the bench
IDEAS = [
    ("z_rotation_augment", "Random rotations about the vertical axis",
     "Rotate every training shape by a random angle about z so the classifier stops depending on orientation."),
    ("mean_max_pooling", "Concatenate max and mean pooling",
     "Build the global feature from both the maximum and the average of the per-point features."),
    ("head_dropout", "Dropout in the classification head",
     "Drop 40% of the activations before the last linear layer to reduce overfitting on 2400 shapes."),
    ("label_smoothing", "Label smoothing",
     "Train with smoothed targets (0.1) so the model is less over-confident on the confusable class pairs."),
    ("cosine_schedule", "Cosine learning-rate decay",
     "Decay the learning rate along a cosine curve to zero over the ten epochs."),
    ("knn_edge_features", "Neighbourhood edge features",
     "Before the shared MLP, give each point the offsets to its 8 nearest neighbours so local geometry is seen."),
    ("centroid_distance_feature", "Distance-to-centre input feature",
     "Append each point's distance from the cloud's centroid as a fourth input channel."),
    ("point_dropout_augment", "Random point dropout",
     "Remove a random 10-30% of the points of each training shape to make the model robust to sparse sampling."),
    ("rotation_tta", "Test-time rotation averaging",
     "Classify each test shape under four rotations about z and average the predicted probabilities."),
    ("wider_mlp", "Wider shared MLP",
     "Double the channel widths of the per-point MLP to give the network more capacity within the time budget."),
]


def main() -> None:
    os.environ.setdefault("DAGSTER_HOME", "/tmp/rl_bench_home")
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    spec = load_topic(resolve_topic_dir(TOPIC))
    cfg = spec.ideation
    llm, emb, lit = LLM(), Embedder(), Literature()
    items = [Idea(idea_id=idea_id(TOPIC, "bench", n), topic=TOPIC, round="bench", name=n, title=t, experiment="",
                  summary=s) for n, t, s in IDEAS]
    per_idea: dict[str, tuple[float, int]] = {}

    def novelty(item):
        n0, t0 = len(llm.calls()), time.monotonic()
        out = novelty_check(spec.title, item.title, item.summary, lambda q, k: lit.search(q, k, emb), llm,
                            rounds=cfg.novelty_rounds, k=cfg.novelty_papers)
        per_idea[item.name] = (time.monotonic() - t0, len(llm.calls()) - n0)
        return out

    emb.encode(["warm-up"])  # the embedding model's load is not the stage's cost
    lit.search("warm-up", 1, emb)  # nor is building the corpus index (once per DAGSTER_HOME)
    t0 = time.monotonic()
    out = filter_ideas(items, [], emb.encode, novelty, cfg.independence_threshold, keep_at_most=None,
                       log=lambda m: print(m, flush=True))
    wall = time.monotonic() - t0
    calls = llm.calls()
    tot = usage_totals(calls)
    rows = ["| idea | kept | max cos | novel | searches | LLM calls | s | closest paper | reason |",
            "|---|---|---|---|---|---|---|---|---|"]
    for o in out:
        s, c = per_idea.get(o.name, (0.0, 0))
        rows.append(f"| {o.name} | {o.kept} | {o.max_similarity:.2f} | {o.novel} | {len(o.novelty_queries)} | {c} | "
                    f"{s:.0f} | {o.novelty_closest_paper or ''} | {(o.novelty_reason or '').replace('|', '/')[:90]} |")
    undecided = sum(o.independent and o.novel is None for o in out)
    body = "\n".join([
        "## Filtering stage on the local model",
        "",
        provenance("bench/filtering_bench.py", "bench/records/filtering.json", f"{today()} on {machine()}",
                   "held-out: ideas written for the bench; nothing in the filter was tuned on them"),
        "",
        f"{len(items)} fixed ideas for `{TOPIC}` (round 1: empty bank), "
        f"independence at {cfg.independence_threshold} then the novelty loop (`novelty_rounds: {cfg.novelty_rounds}`, "
        f"`novelty_papers: {cfg.novelty_papers}`, shipped corpus, hybrid search) on `{llm.model_name()}` "
        f"through the shared local server (other helpers' requests may have queued with these).",
        "",
        f"- wall: **{wall:.0f} s** for {len(items)} ideas ({wall / len(items):.0f} s per idea); "
        f"LLM calls {tot['llm_calls']} ({tot['llm_cached_calls']} cached, {tot['llm_failed_calls']} failed), "
        f"prompt tokens {tot['prompt_tokens']}, completion tokens {tot['completion_tokens']}",
        f"- kept {sum(o.kept for o in out)}, not independent {sum(not o.independent for o in out)}, "
        f"not novel {sum(o.novel is False for o in out)}, novelty undecided {undecided}; "
        f"searches per idea {sum(len(o.novelty_queries) for o in out) / len(out):.1f}",
        "",
        *rows,
    ])
    if tot["llm_calls"] and tot["llm_cached_calls"] == tot["llm_calls"]:
        print(body + "\n\n(every call came from the cache: the page left as it is)")
        return
    write_record("filtering", {
        "script": "bench/filtering_bench.py", "date": today(), "machine": machine(), "model": llm.model_name(),
        "topic": TOPIC, "wall_s": round(wall, 1), "usage": tot,
        "ideas": [{**o.model_dump(), "seconds": round(per_idea.get(o.name, (0.0, 0))[0], 1),
                   "llm_calls": per_idea.get(o.name, (0.0, 0))[1]} for o in out]})
    print(write_section("filtering", body, "filtering"))


if __name__ == "__main__":
    main()
