"""Implementation drafts of one idea (a round is a search, not a line): how each is asked, which
are the same program, which is tried first, and what the idea's patch says when none is usable.

Every kept idea gets `budget.drafts` drafts. Draft 0 is the greedy answer (asked again, sampled,
when it changes nothing: assets/editing/resampling.py); each later draft is one sampled
answer with its own temperature, seed and instruction (DRAFT_STYLES), so the drafts differ in
more than noise. A draft is *viable* when it applies, compiles, changes what the program runs
(assets/patched_code/dead_code.py), keeps the training, evaluation and metrics file
(assets/editing/honesty.py) and is not the same normalised program as an earlier draft.
The topic's `check:` dry run then ranks the viable ones (`cheap_order`); the run stage decides
between them with runs (assets/run_results/screening.py)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from assets.editing.edit_formats.base import _code_only
from schemas.records import Draft


@dataclass(frozen=True)
class DraftStyle:
    how: str
    temperature: float | None  # None: the resource's own (near-greedy)
    seed: int | None
    instruction: str = ""


DRAFT_STYLES = (
    DraftStyle("greedy", None, None),
    DraftStyle("sampled t=0.7, smallest change", 0.7, 11,
               "Make the smallest change that fully implements the idea, and make sure the training or the "
               "evaluation really uses the new code (a function nobody calls changes nothing)."),
    DraftStyle("sampled t=0.9, thorough", 0.9, 12,
               "Implement the idea thoroughly where the plan says, and make sure every new function or class is "
               "called by the training or the evaluation."),
)


def draft_style(k: int) -> DraftStyle:
    """Draft k's style; beyond the listed ones the last style again with a new seed."""
    if k < len(DRAFT_STYLES):
        return DRAFT_STYLES[k]
    last = DRAFT_STYLES[-1]
    return DraftStyle(f"{last.how}, seed {last.seed + k}", last.temperature, last.seed + k, last.instruction)


def program_hash(code: str) -> str:
    """sha256 of the program without comments, docstrings and formatting (of the text when it
    does not parse): two drafts with equal hashes run the same program."""
    norm = _code_only(code)
    return hashlib.sha256((code if norm is None else norm).encode()).hexdigest()


def mark_duplicate(draft: Draft, earlier: list[Draft]) -> Draft:
    """`draft` marked a duplicate when an earlier viable draft is the same program."""
    if draft.status != "ok":
        return draft
    for e in earlier:
        if e.status == "ok" and e.code_sha256 == draft.code_sha256:
            return draft.model_copy(update={"status": "duplicate", "duplicate_of": e.index,
                                            "reason": f"the same program as draft {e.index}"})
    return draft


def viable(drafts: list[Draft]) -> list[Draft]:
    return [d for d in drafts if d.status == "ok"]


def cheap_order(drafts: list[Draft]) -> list[Draft]:
    """The viable drafts, most promising first without running them: those whose dry run passed
    (or that had none) before those whose dry run failed (a repair may still fix them), then in
    the order asked (the greedy draft first)."""
    return sorted(viable(drafts), key=lambda d: (d.imports_ok is False, d.index))


# when no draft is viable, the patch records the most telling failure: a dishonest or broken
# answer says more than an unchanged one, which says more than a failed call
_FAILURE_ORDER = ("dishonest", "syntax_error", "not_applied", "no_op", "llm_failed")


def failed_status(drafts: list[Draft]) -> tuple[str, str]:
    """(status, reason) of an idea none of whose drafts is viable. The status is "no_op" (the idea
    counts as not implemented) only when every draft changed nothing that runs."""
    kinds = [d.status for d in drafts if d.status != "duplicate"]
    if kinds and all(k == "no_op" for k in kinds):
        status = "no_op"
    else:
        status = next((k for k in _FAILURE_ORDER if k in kinds and k != "no_op"), "no_op")
    reason = "; ".join(f"draft {d.index}: {d.status}" + (f" ({d.reason})" if d.reason else "") for d in drafts)
    return status, reason
