"""The independence filter, DOLPHIN Algorithm 1, as a pure function over embeddings.

The bank starts with the summaries of earlier ineffective ideas. Each new idea is compared
with every idea in the bank; if its highest cosine similarity is below the threshold it is
kept and joins the bank, so near-duplicates inside one round are caught too."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class IndependenceDecision:
    index: int
    independent: bool
    max_similarity: float
    nearest: str | None  # id of the most similar bank entry


def independence_filter(idea_vecs: np.ndarray, idea_ids: list[str], bank_vecs: np.ndarray | None,
                        bank_ids: list[str], threshold: float = 0.8) -> list[IndependenceDecision]:
    """idea_vecs / bank_vecs must be L2-normalised rows (cosine = dot product)."""
    dim = idea_vecs.shape[1] if idea_vecs.size else 0
    bank = [np.asarray(v, dtype=np.float32) for v in (bank_vecs if bank_vecs is not None and len(bank_vecs) else [])]
    ids = list(bank_ids)
    decisions = []
    for i, v in enumerate(idea_vecs):
        if bank:
            sims = np.stack(bank) @ v
            j = int(np.argmax(sims))
            best, nearest = float(sims[j]), ids[j]
        else:
            best, nearest = 0.0, None
        keep = best < threshold
        decisions.append(IndependenceDecision(i, keep, round(best, 4), nearest))
        if keep:
            bank.append(np.asarray(v, dtype=np.float32).reshape(dim))
            ids.append(idea_ids[i])
    return decisions
