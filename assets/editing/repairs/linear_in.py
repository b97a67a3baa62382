"""A linear layer declared for another input width than reaches it ("mat1 and mat2 shapes cannot
be multiplied (32x32 and 64x2)": the input has 32 features, the layer's weight expects 64 and
gives 2): the layer the failing line calls, found where it is built (`self.out = nn.Linear(64, 2)`),
takes the width the message shows as its in_features. Which layer is meant is read from the failing
line (`self.out(h)`); where that line calls a container, the layer built with the expected width
and output size is taken, when there is exactly one. A guess: the width is right for the layer, but
the bug may lie in the layer before it."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import (
    Candidate,
    Failure,
    Rule,
    call_arg,
    int_literal,
    layers_called,
    replace_on_line,
    torch_class,
)

MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((?P<a>\d+)x(?P<b>\d+) and (?P<c>\d+)x(?P<d>\d+)\)")


def _is_linear(call: ast.Call) -> bool:
    return torch_class(call, "Linear")


def widened_input(code: str, line: int, width: int, expected: int, out: int) -> tuple[str, str] | None:
    """The code with the in_features of the linear layer the call on `line` reaches made `width`;
    None when no single layer can be told."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    layers = layers_called(tree, line, _is_linear)
    if len(layers) > 1:  # a container of layers: the one built for the width and output the message shows
        fits = [l for l in layers if int_literal(call_arg(l, 0, "in_features")) == expected
                or int_literal(call_arg(l, 1, "out_features")) == out]
        layers = fits if len(fits) == 1 else []
    if not layers:  # the line calls no layer built here by name: the one layer built with these sizes
        every = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _is_linear(c)]
        layers = [l for l in every if int_literal(call_arg(l, 0, "in_features")) == expected
                  and int_literal(call_arg(l, 1, "out_features")) in (None, out)]
    if len(layers) != 1:
        return None
    node = call_arg(layers[0], 0, "in_features")
    if node is None or node.lineno != node.end_lineno or node.end_col_offset is None or int_literal(node) == width:
        return None
    what = (f"line {node.lineno}: nn.Linear in_features {ast.unparse(node)} -> {width} (the input reaching it has "
            f"{width} features; the layer expected {expected})")
    return replace_on_line(code, node, str(width)), what


def apply(f: Failure) -> Candidate | None:
    m = MATMUL.search(f.error)
    if m is None or f.frame is None:
        return None
    found = widened_input(f.code, f.frame.line, int(m["b"]), int(m["c"]), int(m["d"]))
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("linear_in", "a linear layer fed another width than it was built for: its in_features made that "
            "width (a guess)", apply)
