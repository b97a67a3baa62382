""""got an unexpected keyword argument 'alpha'" without a suggestion: the keyword is renamed to
the callee's closest parameter (its signature read in the isolated interpreter), or dropped
(assets/editing/calls.py `keyword_fix`)."""
from __future__ import annotations

from assets.editing.calls import keyword_fix
from assets.editing.repairs.base import Candidate, Failure, Rule


def apply(f: Failure) -> Candidate | None:
    if f.wrong is None or f.wrong[0] != "keyword" or f.hint is not None or f.frame is None:
        return None
    fixed = keyword_fix(f.code, f.wrong[1], f.frame.line)
    return Candidate(*fixed) if fixed is not None else None


RULE = Rule("keyword", "a keyword the callee does not take: renamed to its closest parameter, else dropped", apply)
