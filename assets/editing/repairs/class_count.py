"""A class count one short ("Target 9 is out of bounds": a label equals the number of classes the
model outputs): the name that held that count where the run failed (read from the values at the
crash, tracebacks.crash_values) is assigned one more; for a one-hot encoding ("Class values must
be smaller than num_classes") the count it is given becomes the labels' largest value + 1, the
range the values at the crash show. A guess, never sure (the labels could as well be the thing to
change), but an early one: it only makes a count agree with the labels."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import (
    INT_RANGE,
    Candidate,
    Failure,
    Rule,
    calls_on_line,
    frame_values,
    last_value,
    replace_on_line,
)

OUT_OF_BOUNDS = re.compile(r"Target (?P<t>\d+) is out of bounds")
ONE_HOT = "Class values must be smaller than num_classes"
INT_VALUE = re.compile(r"^\s{4}(?P<name>[A-Za-z_]\w*) = (?P<v>-?\d+)$", re.M)


def one_more(code: str, values: str, target: int) -> tuple[str, str] | None:
    """The code with the first name the values show holding `target` (the innermost frame's first)
    assigned one more at its last plain assignment; None when no such name is assigned in the code."""
    names = [m["name"] for m in INT_VALUE.finditer(values) if int(m["v"]) == target]
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for name in dict.fromkeys(names):
        if (v := last_value(tree, name)) is None:
            continue
        old = ast.unparse(v)
        new = str(target + 1) if isinstance(v, ast.Constant) else f"{old} + 1"
        what = (f"line {v.lineno}: {name} = {old} -> {new} (the run had {name} = {target} and a "
                f"label {target}: a class count is the largest label + 1)")
        return replace_on_line(code, v, new), what
    return None


def one_hot_count(code: str, line: int, values: dict[str, str]) -> tuple[str, str] | None:
    """For a one-hot encoding on `line` given a class count below its labels' largest value + 1
    (the labels' range read from the values at the crash): the count made that, where it is given
    as a constant or a name assigned once in a line."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for call in calls_on_line(tree, line):
        if not ast.unparse(call.func).endswith("one_hot") or not call.args:
            continue
        count = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords
                                                               if k.arg == "num_classes"), None)
        top = INT_RANGE.search(values.get(ast.unparse(call.args[0]), ""))
        if count is None or top is None:
            continue
        needed = int(top["max"]) + 1
        where, name = (last_value(tree, count.id), count.id) if isinstance(count, ast.Name) else (count, "num_classes")
        if not isinstance(where, ast.Constant) or where.lineno != where.end_lineno or where.end_col_offset is None:
            continue
        return (replace_on_line(code, where, str(needed)),
                f"line {where.lineno}: {name} {where.value} -> {needed} (the labels reach {needed - 1})")
    return None


def apply(f: Failure) -> Candidate | None:
    if ONE_HOT in f.error and f.frame is not None:
        found = one_hot_count(f.code, f.frame.line, frame_values(f.failed.error_notes))
        return Candidate(*found, sure=False, early=True) if found is not None else None
    m = OUT_OF_BOUNDS.search(f.error)
    if m is None or not f.failed.error_notes:
        return None
    found = one_more(f.code, f.failed.error_notes, int(m["t"]))
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("class_count", "a label out of bounds of the classes: the count that equals it, one more (a guess)",
            apply)
