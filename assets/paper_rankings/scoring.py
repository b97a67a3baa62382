"""Task-attribute guided paper ranking (DOLPHIN 3.1), as pure functions.

The small local model gives 8-10 to everything when asked for a number, but it can make
categorical judgements. The 1-10 score is built from two categories:
  relevance to the topic's task  x  agreement of the paper's input/output with the topic's.
A paper is kept when score >= KEEP_AT (8), as in DOLPHIN."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

KEEP_AT = 8


RELEVANCE_POINTS = {
    "same_task": 6,
    "neighbouring_task": 3,
    "same_field_other_task": 1,
    "unrelated": 0,
}


ATTRIBUTE_POINTS = {
    "input_and_output_match": 4,
    "only_output_matches": 2,
    "only_input_matches": 1,
    "neither_matches": 0,
}


NAIVE_POINTS = {  # relevance alone, for the naive ranking DOLPHIN compares against
    "same_task": 10,
    "neighbouring_task": 8,
    "same_field_other_task": 5,
    "unrelated": 1,
}


def score_paper(relevance: str, attribute_match: str | None) -> int:
    """1-10 from the two categories; attribute_match None means the naive (relevance-only) mode."""
    if attribute_match is None:
        return NAIVE_POINTS[relevance]
    return max(1, min(10, RELEVANCE_POINTS[relevance] + ATTRIBUTE_POINTS[attribute_match]))


def is_kept(score: int, keep_at: int = KEEP_AT) -> bool:
    return score >= keep_at


# -- attribute mode: the LLM names each paper's own task, input and output; the code compares
# them with the topic's by embedding similarity (all-MiniLM-L6-v2 cosine) and grades each
# attribute "match" / "partial" / "differs". Measured (bench/ranking_bench.py): the 1.5B model
# calls detection and completion papers relevant ("same_task"), but what it writes as their
# output ("3D bounding boxes", "complete point cloud") differs from ours. The output is what
# separates a neighbouring task on the same data from ours, so it weighs most; the input
# separates fields; the task name blends both (its embedding is dominated by the data words).

ATTRIBUTES = ("task", "input", "output")


MATCH_AT = 0.6     # cosine at which an attribute counts as the topic's


PARTIAL_AT = 0.4


# An input this far from the topic's is another kind of data (RGB images, graphs, text for a
# point-cloud topic): the paper works in another field, whatever its task and output say, so
# its score is capped below KEEP_AT. On the 1.5B model's recorded answers for the point-cloud
# topic (tests/fixtures/ranking/pointcloud_8.json): "RGB images" 0.22, "point coordinates" 0.38,
# "raw xyz point set" 0.44, "rendered views of a mesh" 0.62: a thin margin below, set from 8 papers.
FOREIGN_AT = 0.25


LEVEL_POINTS = {   # what each graded attribute adds to the score
    "task": {"match": 2, "partial": 1, "differs": 0},
    "input": {"match": 1, "partial": 1, "differs": 0, "foreign": 0},
    "output": {"match": 3, "partial": 1, "differs": 0},
}


ATTRIBUTE_RELEVANCE_POINTS = {   # the LLM's categorical relevance in the attribute mode
    "same_task": 4,
    "neighbouring_task": 3,       # the small model cannot tell these two apart: the attributes do
    "same_field_other_task": 1,
    "unrelated": 0,
}


_SPLIT = re.compile(r"[,;/()]|\b(?:or|and|then|of|on|in|from|with|for|sampled|given)\b")


_FILLER = re.compile(r"^(?:(?:an?|the|one|some|each|its|their|also|used)\b\s*)+")


def parts(text: str) -> list[str]:
    """The text and its pieces: a paper often lists several tasks or outputs ("class label or
    per-point labels"); an attribute agrees when any piece agrees."""
    text = " ".join(text.split())
    pieces = [_FILLER.sub("", p.strip(" .-")).strip() for p in _SPLIT.split(text)]
    return list(dict.fromkeys([text] + [p for p in pieces if len(p) >= 3]))


def attribute_similarities(topic: Mapping[str, str], papers: Sequence[Mapping[str, str]],
                           encode: Callable[[list[str]], np.ndarray]) -> list[dict[str, float]]:
    """Per paper and attribute, the best cosine between any piece of the paper's attribute and any
    piece of the topic's. `encode` returns L2-normalised rows (Embedder.encode); every distinct
    piece is encoded once."""
    texts = list(dict.fromkeys(t for a in ATTRIBUTES for src in (topic, *papers) for t in parts(src[a])))
    if not texts:
        return [dict.fromkeys(ATTRIBUTES, 0.0) for _ in papers]
    vec = dict(zip(texts, np.asarray(encode(texts), dtype=np.float32)))
    out = []
    for p in papers:
        sims = {}
        for a in ATTRIBUTES:
            mine, theirs = parts(topic[a]), parts(p[a])
            sims[a] = round(float(max((vec[x] @ vec[y] for x in mine for y in theirs), default=0.0)), 3)
        out.append(sims)
    return out


def grade(sim: float, match_at: float = MATCH_AT, partial_at: float = PARTIAL_AT) -> str:
    return "match" if sim >= match_at else "partial" if sim >= partial_at else "differs"


def agreement(sims: Mapping[str, float], match_at: float = MATCH_AT, partial_at: float = PARTIAL_AT,
              foreign_at: float = FOREIGN_AT) -> dict[str, str]:
    """Graded task / input / output; an input below foreign_at is "foreign" (another kind of data)."""
    levels = {a: grade(sims[a], match_at, partial_at) for a in ATTRIBUTES}
    if sims["input"] < foreign_at:
        levels["input"] = "foreign"
    return levels


def agreement_label(levels: Mapping[str, str]) -> str:
    """e.g. 'task match, input partial, output differs' (stored as attribute_match)."""
    return ", ".join(f"{a} {levels[a]}" for a in ATTRIBUTES)


def score_attributes(relevance: str, levels: Mapping[str, str]) -> int:
    """1-10 from the LLM's relevance category and the graded task / input / output agreement;
    a foreign input caps it below KEEP_AT."""
    points = ATTRIBUTE_RELEVANCE_POINTS[relevance] + sum(LEVEL_POINTS[a][levels[a]] for a in ATTRIBUTES)
    if levels["input"] == "foreign":
        points = min(points, KEEP_AT - 1)
    return max(1, min(10, points))
