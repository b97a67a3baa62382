"""A view or reshape whose sizes no longer fit its tensor ("shape '[64, 1, 32]' is invalid for
input of size 1216": a fixed batch size meets the last, smaller batch): on the failing line, the
one size that can be inferred is given as -1 (the first such, the batch dimension first), where the
other sizes divide the tensor's element count. A guess, never sure, but an early one: it only makes sizes agree."""
from __future__ import annotations

import ast
import math
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, dims, replace_on_line

INVALID = re.compile(r"shape '\[(?P<shape>[-\d, ]+)\]' is invalid for input of size (?P<size>\d+)")


def inferred_size(code: str, line: int, shape: list[int], size: int) -> tuple[str, str] | None:
    """The code with one size of the view/reshape call on `line` that has len(shape) sizes made -1,
    the first position whose other sizes divide `size`; None when there is none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("view", "reshape") and n.lineno <= line <= (n.end_lineno or n.lineno)]
    for call in calls:
        args = list(call.args)
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            args = list(args[0].elts)
        if len(args) != len(shape) or -1 in shape or any(isinstance(a, ast.Starred) for a in args):
            continue
        for i, arg in enumerate(args):
            rest = math.prod(shape[:i] + shape[i + 1:])
            if rest <= 0 or size % rest or arg.end_col_offset is None or arg.lineno != arg.end_lineno:
                continue
            what = (f"line {arg.lineno}: {call.func.attr} size {ast.unparse(arg)} -> -1 (inferred: "
                    f"{size} elements over the other sizes, {rest} each)")
            return replace_on_line(code, arg, "-1"), what
    return None


def apply(f: Failure) -> Candidate | None:
    m = INVALID.search(f.error)
    if m is None or f.frame is None:
        return None
    shape = dims(m["shape"])
    found = inferred_size(f.code, f.frame.line, shape, int(m["size"]))
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("view_size", "a view whose sizes do not fit its tensor: the size that divides it made -1 (a guess)",
            apply)
