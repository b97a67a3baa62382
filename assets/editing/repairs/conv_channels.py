"""A convolution that gets another number of channels than it was built for ("Given groups=1,
weight of size [16, 1, 5], expected input[1, 32, 64] to have 1 channels, but got 32 channels
instead"). Two readings, each checked against what the run saw:

* the input lacks its channel dimension: a (batch, length) tensor reaches a Conv1d (PyTorch takes
  it as one unbatched sample, hence the leading 1). When the tensor the failing line passes has one
  dimension fewer than the weight (the values at the crash), it is given one: `x.unsqueeze(1)`;
* the layer was built for another channel count: the convolution built with the in- and output
  channels the message shows, as literals, takes the input's count as its in_channels.

Guesses, early: they only make sizes agree."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import (
    Candidate,
    Failure,
    Rule,
    call_arg,
    calls_on_line,
    dims,
    frame_values,
    int_literal,
    replace_on_line,
    shape_of,
    torch_class,
)

CHANNELS = re.compile(r"weight of size \[(?P<w>[\d, ]+)\], expected input\[(?P<x>[\d, ]+)\] to have (?P<want>\d+) "
                      r"channels, but got (?P<got>\d+) channels")
CONVS = ("Conv1d", "Conv2d", "Conv3d")


def with_channel_dim(code: str, line: int, weight: list[int], values: dict[str, str]) -> tuple[str, str] | None:
    """The tensor on `line` that has one dimension fewer than the weight given a channel dimension."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for call in calls_on_line(tree, line):
        for arg in call.args:
            shape = shape_of(values.get(ast.unparse(arg), "")) if isinstance(arg, (ast.Name, ast.Attribute)) else None
            if shape is None or len(shape) != len(weight) - 1 or arg.end_col_offset is None:
                continue
            new = f"{ast.unparse(arg)}.unsqueeze(1)"
            return replace_on_line(code, arg, new), (f"line {arg.lineno}: {ast.unparse(arg)} -> {new} (shape {shape} "
                                                     f"lacks the channel dimension the convolution reads)")
    return None


def built_for_input(code: str, out_c: int, want: int, got: int) -> tuple[str, str] | None:
    """The one convolution built with literal channels (want, out_c) given `got` input channels."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    convs = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and torch_class(c, *CONVS)
             and int_literal(call_arg(c, 0, "in_channels")) == want
             and int_literal(call_arg(c, 1, "out_channels")) == out_c]
    if len(convs) != 1:
        return None
    node = call_arg(convs[0], 0, "in_channels")
    if node is None or node.end_col_offset is None:
        return None
    return replace_on_line(code, node, str(got)), (f"line {node.lineno}: in_channels {want} -> {got} (the input "
                                                  f"reaching the convolution has {got} channels)")


def apply(f: Failure) -> Candidate | None:
    m = CHANNELS.search(f.error)
    if m is None or f.frame is None:
        return None
    weight, x, want, got = dims(m["w"]), dims(m["x"]), int(m["want"]), int(m["got"])
    found = None
    if x and x[0] == 1 and len(x) == len(weight):  # possibly an unbatched sample: a missing channel dimension
        found = with_channel_dim(f.code, f.frame.line, weight, frame_values(f.failed.error_notes))
    if found is None:
        found = built_for_input(f.code, weight[0], want, got)
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("conv_channels", "a convolution given another channel count: the missing channel dimension added, or "
            "its in_channels made the input's (a guess)", apply)
