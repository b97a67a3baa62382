"""A flatten that swallowed the batch dimension ("mat1 and mat2 shapes cannot be multiplied
(1x8192 and 128x64)": one row whose width is a whole multiple of the layer's input width, the
batch's rows laid end to end): the flatten or view that made it, on the failing line or earlier in
the same function, keeps the first dimension (`torch.flatten(x)` -> `torch.flatten(x, 1)`,
`x.view(-1)` -> `x.view(x.size(0), -1)`). A guess (early: it only makes sizes agree); it goes
before `linear_in`, which would otherwise widen the layer to the whole batch."""
from __future__ import annotations

import ast

from assets.editing.repairs.base import Candidate, Failure, Rule, replace_on_line
from assets.editing.repairs.linear_in import MATMUL

FLAT = ("-1", "(-1,)", "1, -1", "(1, -1)")  # views that make one row (or no rows) of everything


def _kept_batch(call: ast.Call) -> str | None:
    """The call made to keep the first dimension, or None when it already does (or is no flatten)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "flatten" and not call.keywords:
        if ast.unparse(func.value) in ("torch", "th") and len(call.args) == 1:
            return f"{ast.unparse(func)}({ast.unparse(call.args[0])}, 1)"
        if not call.args and ast.unparse(func.value) not in ("torch", "th", "np", "numpy"):
            return f"{ast.unparse(func.value)}.flatten(1)"
        return None
    if func.attr in ("view", "reshape") and not call.keywords and call.args:
        args = ", ".join(ast.unparse(a) for a in call.args)
        if args in FLAT and ast.unparse(func.value) not in ("torch", "np", "numpy"):
            tensor = ast.unparse(func.value)
            return f"{tensor}.{func.attr}({tensor}.size(0), -1)" if " " not in tensor else None
    return None


def batch_kept(code: str, line: int) -> tuple[str, str] | None:
    """The code with the last flatten before or on `line`, in the function holding `line`, made to
    keep the batch dimension; None without one."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    scope = min(funcs, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if funcs else tree
    calls = [(c, new) for c in ast.walk(scope) if isinstance(c, ast.Call) and c.lineno <= line
             and c.lineno == c.end_lineno and c.end_col_offset is not None and (new := _kept_batch(c))]
    if not calls:
        return None
    call, new = max(calls, key=lambda cn: (cn[0].lineno, cn[0].col_offset))
    what = f"line {call.lineno}: {ast.unparse(call)} -> {new} (it flattened the batch into one row)"
    return replace_on_line(code, call, new), what


def apply(f: Failure) -> Candidate | None:
    m = MATMUL.search(f.error)
    if m is None or f.frame is None:
        return None
    rows, width, expected = int(m["a"]), int(m["b"]), int(m["c"])
    if rows != 1 or expected <= 0 or width % expected or width == expected:
        return None
    found = batch_kept(f.code, f.frame.line)
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("flatten_batch", "a flatten over the batch (one row, a multiple of the layer's width): the flatten "
            "keeps the first dimension (a guess)", apply)
