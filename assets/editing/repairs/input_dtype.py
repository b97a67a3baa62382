"""Float64 data meeting float32 weights ("mat1 and mat2 must have the same dtype, but got Double and
Float", "Input type (double) and bias type (float) should be the same", "expected scalar type Float
but found Double"): the tensors the values at the crash show as float64 are made float32 where the
code creates them from NumPy (`torch.from_numpy(...)`, `torch.tensor(...)`, `torch.as_tensor(...)`
without a dtype: `.float()` appended). The message names both dtypes and the weights are float32,
so the fix is sure."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule

DOUBLE_VS_FLOAT = re.compile(
    r"must have the same dtype, but got Double and Float|Input type \((?:double|torch\.DoubleTensor)\) and "
    r"(?:weight|bias) type \((?:float|torch\.FloatTensor)\)|expected scalar type Float but found Double|"
    r"expected (?:m1 and m2|mat1 and mat2) to have the same dtype, but got: double != float")
FLOAT64 = re.compile(r"^\s{4}(?P<name>[A-Za-z_]\w*) = torch tensor, shape \[[^\]]*\], float64", re.M)
MAKERS = ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor")


def _made_from_numpy(value: ast.expr) -> bool:
    """Is `value` a tensor made from data without a dtype (`torch.from_numpy(X)`, `torch.tensor(X)`)?"""
    return (isinstance(value, ast.Call) and ast.unparse(value.func) in MAKERS
            and not any(k.arg == "dtype" for k in value.keywords))


def float32_inputs(code: str, values: str) -> tuple[str, str] | None:
    """The code with `.float()` after every creation of a tensor the values show as float64; None
    when none of them is created so in the code."""
    names = set(FLOAT64.findall(values))
    if not names:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    spots: list[tuple[ast.expr, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        targets = [t for t in node.targets if isinstance(t, ast.Name) and t.id in names]
        if targets and _made_from_numpy(node.value):
            spots.append((node.value, targets[0].id))
        for t in node.targets:  # a, b = torch.from_numpy(X), torch.from_numpy(y)
            if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                spots += [(v, e.id) for e, v in zip(t.elts, node.value.elts)
                          if isinstance(e, ast.Name) and e.id in names and _made_from_numpy(v)]
    spots = [(v, n) for v, n in spots if v.end_lineno is not None and v.end_col_offset is not None]
    if not spots:
        return None
    lines = code.splitlines(keepends=True)
    for v, _ in sorted(spots, key=lambda s: (s[0].end_lineno, s[0].end_col_offset), reverse=True):
        raw = lines[v.end_lineno - 1].encode()
        lines[v.end_lineno - 1] = (raw[:v.end_col_offset] + b".float()" + raw[v.end_col_offset:]).decode()
    what = ", ".join(f"line {v.lineno}: {n} made float32 (.float())"
                     for v, n in sorted(spots, key=lambda s: s[0].lineno))
    return "".join(lines), what + " (float64 data met the model's float32 weights)"


def apply(f: Failure) -> Candidate | None:
    if not DOUBLE_VS_FLOAT.search(f.error) or not f.failed.error_notes:
        return None
    found = float32_inputs(f.code, f.failed.error_notes)
    return Candidate(*found) if found is not None else None


RULE = Rule("input_dtype", "float64 data meeting float32 weights: the tensors made from NumPy made .float()", apply)
