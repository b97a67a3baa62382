"""A tensor that autograd tracks turned into NumPy ("Can't call numpy() on Tensor that requires
grad. Use tensor.detach().numpy() instead."): on the failing line, `t.numpy()` becomes
`t.detach().numpy()`; where the line hands the tensor to NumPy instead (`np.array(t)`), the tensor
the values at the crash show requiring grad is detached there. Sure: the message names the fix."""
from __future__ import annotations

import ast

from assets.editing.repairs.base import Candidate, Failure, Rule, calls_on_line, frame_values, replace_on_line

SIGN = "Can't call numpy() on Tensor that requires grad"
TO_NUMPY = {"array", "asarray", "asanyarray", "mean", "std", "concatenate", "stack", "vstack", "hstack", "round"}


def detached(code: str, line: int, values: dict[str, str]) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = [c for c in calls_on_line(tree, line) if c.lineno == c.end_lineno and c.end_col_offset is not None]
    for call in calls:  # t.numpy() -> t.detach().numpy()
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "numpy" and not call.args:
            inner = f.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "detach":
                continue
            new = f"{ast.unparse(inner)}.detach().numpy()"
            what = f"line {call.lineno}: {ast.unparse(call)} -> {new} (the message's fix)"
            return replace_on_line(code, call, new), what
    for call in calls:  # np.array(t) with t requiring grad -> np.array(t.detach())
        f = call.func
        if not (isinstance(f, ast.Attribute) and ast.unparse(f.value) in ("np", "numpy") and f.attr in TO_NUMPY):
            continue
        for arg in call.args:
            if isinstance(arg, ast.Name) and "requires grad" in values.get(arg.id, ""):
                new = f"{arg.id}.detach()"
                return (replace_on_line(code, arg, new),
                        f"line {arg.lineno}: {arg.id} -> {new} (it requires grad; NumPy needs it detached)")
    return None


def apply(f: Failure) -> Candidate | None:
    if SIGN not in f.error or f.frame is None:
        return None
    found = detached(f.code, f.frame.line, frame_values(f.failed.error_notes))
    return Candidate(*found, sure=True) if found is not None else None


RULE = Rule("detach_numpy", "a tensor that requires grad turned into NumPy: detached first (the message's fix)",
            apply)
