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

from assets.editing.repairs.base import Candidate, Failure, Rule, calls_on_line, replace_on_line

MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((?P<a>\d+)x(?P<b>\d+) and (?P<c>\d+)x(?P<d>\d+)\)")


def _is_linear(call: ast.Call) -> bool:
    name = ast.unparse(call.func)
    return name in ("Linear", "nn.Linear", "torch.nn.Linear")


def _arg(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _literal(node: ast.expr | None) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _attribute_name(node: ast.expr) -> str | None:
    """`self.out` -> "out"; `out` -> "out"."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def widened_input(code: str, line: int, width: int, expected: int, out: int) -> tuple[str, str] | None:
    """The code with the in_features of the linear layer the call on `line` reaches made `width`;
    None when no single layer can be told."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    built: dict[str, list[ast.Call]] = {}  # the name a value is kept under -> the linear layers built in it
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and (name := _attribute_name(node.targets[0])):
            layers = [c for c in ast.walk(node.value) if isinstance(c, ast.Call) and _is_linear(c)]
            if layers:
                built.setdefault(name, []).extend(layers)
    called = [name for c in calls_on_line(tree, line) if (name := _attribute_name(c.func)) in built]
    layers = [layer for name in dict.fromkeys(called) for layer in built[name]]
    if len(layers) > 1:  # a container of layers: the one built for the width and output the message shows
        fits = [l for l in layers if _literal(_arg(l, 0, "in_features")) == expected
                or _literal(_arg(l, 1, "out_features")) == out]
        layers = fits if len(fits) == 1 else []
    if not layers:  # the line calls no layer built here by name: the one layer built with these sizes
        every = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _is_linear(c)]
        layers = [l for l in every if _literal(_arg(l, 0, "in_features")) == expected
                  and _literal(_arg(l, 1, "out_features")) in (None, out)]
    if len(layers) != 1:
        return None
    node = _arg(layers[0], 0, "in_features")
    if node is None or node.lineno != node.end_lineno or node.end_col_offset is None or _literal(node) == width:
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
