"""Tensors or arrays joined along the wrong dimension ("Sizes of tensors must match except in
dimension 1", NumPy's "... except for the concatenation axis must match exactly"): features and
statistics of the same batch concatenated along the batch dimension. The join on the failing line
gets the dimension along which its parts' shapes, as the values at the crash show them, differ
while every other dimension agrees; without the shapes, the other of the first two dimensions.
A guess: the shapes can agree along more than one way."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import (
    Candidate,
    Failure,
    Rule,
    calls_on_line,
    frame_values,
    replace_on_line,
    shape_of,
)

MISMATCH = re.compile(r"Sizes of tensors must match except in dimension \d+|except for the concatenation axis "
                      r"must match exactly")
JOINS = ("cat", "concat", "concatenate")


def _join(call: ast.Call) -> bool:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return name in JOINS and bool(call.args) and isinstance(call.args[0], (ast.List, ast.Tuple))


def _dimension(call: ast.Call) -> tuple[ast.expr | None, str]:
    """The node giving the join's dimension (None: the default, 0) and its keyword's name."""
    numpy = not ast.unparse(call.func).startswith("torch")
    for k in call.keywords:
        if k.arg in ("dim", "axis"):
            return k.value, k.arg
    return (call.args[1] if len(call.args) > 1 else None), ("axis" if numpy else "dim")


def _fitting(shapes: list[list[int]], current: int) -> int | None:
    """The one dimension other than `current` along which the shapes may differ while all others agree."""
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return None
    fits = [d for d in range(rank) if d != current % max(rank, 1)
            and all(s[k] == shapes[0][k] for s in shapes for k in range(rank) if k != d)]
    return fits[0] if len(fits) == 1 else None


def joined_along(code: str, line: int, values: dict[str, str]) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for call in (c for c in calls_on_line(tree, line) if _join(c)):
        node, keyword = _dimension(call)
        if node is not None and not (isinstance(node, ast.Constant) and type(node.value) is int
                                     or isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)):
            continue
        current = 0 if node is None else ast.literal_eval(node)
        parts = call.args[0].elts
        shapes = [shape_of(values.get(ast.unparse(p), "")) for p in parts]
        if all(shapes) and len(shapes) > 1:
            new = _fitting([s for s in shapes if s is not None], current)
            why = "the parts' shapes differ only there: " + ", ".join(str(s) for s in shapes)
        else:
            new, why = (1 if current == 0 else 0), "the parts' shapes were not seen"
        if new is None or new == current:
            continue
        if node is not None:
            if node.lineno != node.end_lineno or node.end_col_offset is None:
                continue
            fixed = replace_on_line(code, node, str(new))
        else:
            if call.end_lineno is None or call.end_col_offset is None:
                continue
            lines = code.splitlines(keepends=True)
            raw = lines[call.end_lineno - 1].encode()
            close = call.end_col_offset - 1  # the call's closing parenthesis
            lines[call.end_lineno - 1] = (raw[:close] + f", {keyword}={new}".encode() + raw[close:]).decode()
            fixed = "".join(lines)
        return fixed, f"line {call.lineno}: joined along {keyword} {new} instead of {current} ({why})"
    return None


def apply(f: Failure) -> Candidate | None:
    if not MISMATCH.search(f.error) or f.frame is None:
        return None
    found = joined_along(f.code, f.frame.line, frame_values(f.failed.error_notes))
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("concat_dim", "parts joined along the wrong dimension: the one their shapes differ in (a guess)", apply)
