"""Task-attribute guided paper ranking (DOLPHIN 3.1), as pure functions.

The small local model gives 8-10 to everything when asked for a number, but it can make
categorical judgements. The 1-10 score is built from two categories:
  relevance to the topic's task  x  agreement of the paper's input/output with the topic's.
A paper is kept when score >= KEEP_AT (8), as in DOLPHIN."""
from __future__ import annotations

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
