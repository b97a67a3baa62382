"""Where Python suggests nothing: the wrong name becomes the closest name the code defines
(same letters ignoring case, or difflib ratio >= 0.7), on the failing line; a guess unless
the names differ by case only."""
from __future__ import annotations

from assets.editing.repairs.base import Candidate, Failure, Rule
from assets.editing.repairs.renaming import computed, renamed


def apply(f: Failure) -> Candidate | None:
    if f.wrong is None or f.hint is not None or f.frame is None:
        return None
    kind, wrong = f.wrong
    right = computed(f, kind, wrong)
    if right is None or right == wrong:
        return None
    new, what, sure = renamed(f.lines, f.frame.line, kind, wrong, right, False)
    return Candidate(new, what, sure) if new is not None else None


RULE = Rule("closest_name", "a wrong name Python suggests nothing for: the closest name the code defines", apply)
