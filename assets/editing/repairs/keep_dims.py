"""A reduction that dropped the axis it reduced and no longer broadcasts against its source
(NumPy: "operands could not be broadcast together with shapes (675,3) (675,)"; PyTorch: "The size
of tensor a (3) must match the size of tensor b (675) at non-singleton dimension 1"): a sum, mean,
max, ... over an axis on the failing line keeps that axis (`keepdims=True` for NumPy,
`keepdim=True` for PyTorch), so `x / x.sum(axis=1)` divides each row by its own total. A guess
(early: it only makes shapes agree)."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, calls_on_line, dims, replace_on_line

NUMPY = re.compile(r"operands could not be broadcast together with shapes \((?P<a>[\d,]*)\) \((?P<b>[\d,]*)\)")
TORCH = re.compile(r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension")
REDUCTIONS = {"sum", "mean", "max", "min", "amax", "amin", "std", "var", "prod", "logsumexp", "norm", "median",
              "nansum", "nanmean", "argmax", "argmin", "all", "any"}


def _axis_given(call: ast.Call, library_call: bool) -> bool:
    """The reduction names an axis (a keyword, or positionally: the first argument of a method, the
    second of a library function `np.sum(x, 1)`)."""
    if any(k.arg in ("axis", "dim") for k in call.keywords):
        return True
    return len(call.args) > (1 if library_call else 0)


def kept_axis(code: str, line: int, keyword: str) -> tuple[str, str] | None:
    """The code with the first reduction over an axis on `line` that does not keep it given
    `keyword`=True; None without one."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for call in calls_on_line(tree, line):
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in REDUCTIONS:
            continue
        library_call = ast.unparse(func.value) in ("np", "numpy", "torch", "th")
        if any(k.arg in ("keepdims", "keepdim") for k in call.keywords) or not _axis_given(call, library_call):
            continue
        if call.lineno != call.end_lineno or call.end_col_offset is None:
            continue
        text = ast.unparse(call)
        new = f"{text[:-1]}, {keyword}=True)"
        return replace_on_line(code, call, new), (f"line {call.lineno}: {text} -> {new} (the reduced axis is kept, "
                                                  "so the result broadcasts against what it was reduced from)")
    return None


def apply(f: Failure) -> Candidate | None:
    if f.frame is None:
        return None
    if (m := NUMPY.search(f.error)) is not None:
        a, b = dims(m["a"]), dims(m["b"])
        big, small = (a, b) if len(a) > len(b) else (b, a)
        if not any(big[:i] + big[i + 1:] == small for i in range(len(big))):  # one side lost one axis
            return None
        keyword = "keepdims"
    elif TORCH.search(f.error):
        keyword = "keepdim"
    else:
        return None
    found = kept_axis(f.code, f.frame.line, keyword)
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("keep_dims", "a reduction that no longer broadcasts against its source: it keeps the reduced axis "
            "(a guess)", apply)
