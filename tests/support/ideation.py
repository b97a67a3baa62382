"""Ideation helpers: ideas, feedback and embeddings to seed rounds with, a topic's ideation settings,
and the filter materialised with the fake LLM."""
from __future__ import annotations

import dagster as dg
import numpy as np
import yaml

from assets.filtered_ideas.novelty import NoveltyOutcome
from resources.store import Store
from schemas.frames import from_frame, to_frame
from schemas.records import Feedback, FilteredIdea, Idea

TOPIC = "toy_classification"


def idea(name, summary="s", rnd="r1"):
    return Idea(idea_id=f"{TOPIC}/{rnd}/{name}", topic=TOPIC, round=rnd, name=name, title=name.title(),
                experiment="e", summary=summary)


def fb(i: Idea, verdict: str) -> Feedback:
    return Feedback(idea_id=i.idea_id, name=i.name, title=i.title, summary=i.summary, verdict=verdict, reason="x",
                    metric_value=0.5, baseline_value=0.6, delta=-0.1, effective=verdict == "improvement")


def seed_round1(store: Store) -> None:
    ideas = [idea(n, s) for n, (s, _) in R1.items()]
    fi = [FilteredIdea(**i.model_dump(), max_similarity=0.0, independent=True, kept=True) for i in ideas]
    store.write(to_frame(fi, FilteredIdea), "filtered_ideas", TOPIC, "r1")
    store.write(to_frame([fb(i, R1[i.name][1]) for i in ideas], Feedback), "feedback_summary", TOPIC, "r1")


def embed(texts):
    v = np.asarray([VEC[t] for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class Novelty:
    def __init__(self, verdicts: dict[str, NoveltyOutcome]):
        self.verdicts, self.asked = verdicts, []

    def __call__(self, item: Idea) -> NoveltyOutcome:
        self.asked.append(item.name)
        return self.verdicts.get(item.name, NoveltyOutcome(novel=True, reason="fine", queries=[item.name]))


def set_ideation(home, **ideation):
    f = home / "experiments" / TOPIC / "topic.yaml"
    spec = yaml.safe_load(f.read_text())
    f.write_text(yaml.safe_dump({**spec, "ideation": {"sources": ["ranking"], **ideation}}))


def materialize_filter(fake_llm, round_key: str):
    from assets import ALL_ASSETS
    from assets.shared.partitions import multi_key
    from tests.support.resources import make_resources

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", [round_key])
    resources = make_resources(fake_llm.base_url)
    assert dg.materialize(ALL_ASSETS, selection=["topic_brief", "baseline_results"], partition_key=TOPIC,
                          instance=instance, resources=resources).success
    res = dg.materialize(ALL_ASSETS, selection=["round_reference", "papers", "paper_rankings", "ideas",
                                                "filtered_ideas"],
                         partition_key=str(multi_key(TOPIC, round_key)), instance=instance, resources=resources)
    assert res.success
    meta = {k: instance.get_latest_materialization_event(dg.AssetKey(k)).asset_materialization.metadata
            for k in ("ideas", "filtered_ideas")}
    return {i.name: i for i in from_frame(Store().read("filtered_ideas", TOPIC, round_key), FilteredIdea)}, meta


R1 = {  # the fake LLM's round-1 ideas with the verdicts test_round sees, plus a kept improvement
    "negative_step_r1": ("Flip the sign of the learning rate to test the optimiser's direction, variant 1.", "decline"),
    "longer_training_r1": ("Train the logistic regression for longer so it converges.", "improvement"),
    "fancy_kernel_r1": ("Use random Fourier features so the linear model can draw curved boundaries.", "failed"),
    "steady_r1": ("Keep the learning rate but change the random seed.", "maintenance"),
}


VEC = {"a": [1, 0, 0], "a2": [0.95, 0.312, 0], "b": [0, 1, 0], "c": [0, 0, 1], "d": [0, 0.6, -0.8], "f": [-1, 0, 0]}
