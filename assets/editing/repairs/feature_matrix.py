"""One feature given to a scikit-learn estimator as a 1-D column ("Expected a 2-dimensional
container but got <class 'pandas.core.series.Series'>", "Expected 2D array, got 1D array
instead"): on the failing line, the data argument of the fit / predict / transform / score call
becomes a one-column matrix: `df["col"]` -> `df[["col"]]`, any other expression `.to_frame()`
(a Series) or `.reshape(-1, 1)` (an array), as the message says. Sure: the message names the fix."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, replace_on_line

ONE_D = re.compile(r"Expected a 2-dimensional container but got <class '(?P<cls>[\w.]+)'>|"
                   r"Expected 2D array, got 1D array instead")
METHODS = ("fit", "predict", "predict_proba", "transform", "fit_transform", "score", "decision_function",
           "fit_predict")


def one_column(code: str, line: int, series: bool) -> tuple[str, str] | None:
    """The code with the first argument of the estimator call on `line` made a one-column matrix."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in METHODS and n.args and n.lineno <= line <= (n.end_lineno or n.lineno)]
    for call in calls:
        arg = call.args[0]
        if arg.lineno != arg.end_lineno or arg.end_col_offset is None:
            continue
        old = ast.unparse(arg)
        if isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Constant) and isinstance(arg.slice.value, str):
            new = f"{ast.unparse(arg.value)}[[{arg.slice.value!r}]]"
        else:
            new = f"{old}.to_frame()" if series else f"{old}.reshape(-1, 1)"
        what = f"line {arg.lineno}: {old} -> {new} (the estimator takes a matrix of features)"
        return replace_on_line(code, arg, new), what
    return None


def apply(f: Failure) -> Candidate | None:
    m = ONE_D.search(f.error)
    if m is None or f.frame is None:
        return None
    found = one_column(f.code, f.frame.line, series="Series" in (m["cls"] or ""))
    return Candidate(*found) if found is not None else None


RULE = Rule("feature_matrix", "one feature given to an estimator as a 1-D column: made a one-column matrix", apply)
