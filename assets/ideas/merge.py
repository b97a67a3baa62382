"""A three-way merge of programs by lines, for carrying a verified improvement over onto a new
reference code: the change a win made to its round's reference (base -> theirs) is replayed on
the code the next round works on (base -> ours), the way `git merge-file` or diff3 would (but hunks
that only meet merge), and a clash gives no program rather than a guess.

Pure functions, no Dagster: assets/ideas/generation.py `carried_ideas` uses them.
"""
from __future__ import annotations

from difflib import SequenceMatcher
from typing import NamedTuple


class Change(NamedTuple):
    """Lines `start:end` of the base replaced by `lines` (an insertion when start == end)."""
    start: int
    end: int
    lines: tuple[str, ...]


def changes(base: list[str], side: list[str]) -> list[Change]:
    """The hunks that turn `base` into `side`, in order."""
    ops = SequenceMatcher(None, base, side, autojunk=False).get_opcodes()
    return [Change(i1, i2, tuple(side[j1:j2])) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _clash(a: Change, b: Change) -> bool:
    """Two hunks of different sides rewrite some base line both (they overlap), or insert different lines
    at one place (no order of the two is safe to assume). Hunks that only meet merge: their order in the
    file is the base's (diff3 and git call adjacent hunks a conflict too; here the merged program is run
    and judged on its seeds before anything keeps it)."""
    if a == b:
        return False
    if a.start == a.end == b.start == b.end:
        return True
    return a.start < b.end and b.start < a.end


def _lines(text: str) -> list[str]:
    """The lines with their ends; a last line without one gets it, so that it compares equal."""
    lines = text.splitlines(keepends=True)
    return lines[:-1] + [lines[-1] + "\n"] if lines and not lines[-1].endswith("\n") else lines


def merge3(base: str, ours: str, theirs: str) -> str | None:
    """`ours` with the change from `base` to `theirs` replayed on it, or None when the two changes
    clash (`_clash`: they rewrite a line of `base` both, or insert at one place). A hunk both sides
    made alike is taken once."""
    b, o, t = _lines(base), _lines(ours), _lines(theirs)
    mine, yours = changes(b, o), changes(b, t)
    if any(_clash(x, y) for x in mine for y in yours):
        return None
    out, at = [], 0
    for c in sorted(set(mine) | set(yours)):
        out += b[at:c.start] + list(c.lines)
        at = c.end
    return "".join(out + b[at:])

