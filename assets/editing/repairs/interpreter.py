"""The interpreter's "Did you mean: 'factor'?" on a NameError, AttributeError, ImportError or
unexpected keyword: the wrong name becomes the suggested one on the failing line."""
from __future__ import annotations

from assets.editing.repairs.base import Candidate, Failure, Rule
from assets.editing.repairs.renaming import renamed


def apply(f: Failure) -> Candidate | None:
    if f.wrong is None or f.hint is None or f.hint == f.wrong[1] or f.frame is None:
        return None
    kind, wrong = f.wrong
    new, what, sure = renamed(f.lines, f.frame.line, kind, wrong, f.hint, True)
    return Candidate(new, what, sure) if new is not None else None


RULE = Rule("interpreter", "'Did you mean' a name: the wrong name becomes it on the failing line", apply)
