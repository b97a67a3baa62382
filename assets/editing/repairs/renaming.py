"""Renaming the wrong name of a message on the failing line: to the interpreter's suggestion
("Did you mean: 'factor'?") or, where Python named none, to the closest name the code defines
(`computed`: "cannot import name" from a module of the script's folder, an attribute of a class
the script defines, a name that differs by case or a few letters)."""
from __future__ import annotations

import ast
import difflib
import re

from assets.editing.code_reading import NAME, class_members, closest, defined_names, module_names
from assets.editing.repairs.base import IMPORT_FROM, Failure

_OBJECT_ATTR = re.compile(rf"^[\w.]*AttributeError: '({NAME})' object has no attribute")


def computed(f: Failure, kind: str, wrong: str) -> str | None:
    """The suggestion Python did not make, from what the code defines; None if nothing is close."""
    error, code, line, folder = f.error, f.code, f.frame.line if f.frame else 0, f.folder
    if (imp := IMPORT_FROM.match(error)) is not None:
        return closest(wrong, module_names(imp.group(1), folder)) if folder is not None else None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if kind == "attribute":
        owner = _OBJECT_ATTR.match(error)
        return closest(wrong, class_members(tree, owner.group(1))) if owner else None
    if kind == "name":
        return closest(wrong, defined_names(tree, line))
    return None


SURE_RATIO = 0.8  # how close the interpreter's suggestion must be to count as a typo's fix


def plain_typo(wrong: str, right: str) -> bool:
    """Is the interpreter's suggestion surely the fix: the names differ by case only, or by a
    letter or two in a name of 5+ letters? Python also suggests any short near name: `best`
    (a variable the patch removed) -> `test` in the diabetes runs, which is a guess."""
    return wrong.lower() == right.lower() or (
        min(len(wrong), len(right)) >= 5 and difflib.SequenceMatcher(None, wrong, right).ratio() >= SURE_RATIO)


def pattern(kind: str, wrong: str) -> re.Pattern:
    if kind == "attribute":  # obj.wrong, obj . wrong
        return re.compile(rf"(\.\s*){re.escape(wrong)}\b")
    if kind == "keyword":  # f(..., wrong=...)
        return re.compile(rf"(\b){re.escape(wrong)}(\s*=(?!=))")
    return re.compile(rf"((?<![\w.])){re.escape(wrong)}\b")  # a bare name, not an attribute


def renamed(lines: list[str], at: int, kind: str, wrong: str, right: str, suggested: bool):
    """The code with `wrong` renamed `right` on line `at` (1-based), what was done, and whether that is
    surely the fix; (None, "", False) when the name is not on that line (e.g. built by getattr)."""
    fixed, n = pattern(kind, wrong).subn(lambda h: h.group(1) + right + (h.group(2) if kind == "keyword" else ""),
                                          lines[at - 1])
    if n == 0:
        return None, "", False
    what = f"line {at}: {wrong} -> {right} (" + (
        "the interpreter's suggestion)" if suggested else "the closest name the code defines)")
    return "".join(lines[:at - 1] + [fixed] + lines[at:]), what, suggested and plain_typo(wrong, right)
