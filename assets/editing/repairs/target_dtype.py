"""A classification loss given class-index targets of a floating (or int32) dtype ("expected
target dtype to be Long or Byte, but got Float", "expected scalar type Long but found Float",
"nll_loss ... not implemented for 'Float'"): the target argument of the loss call on the failing
line becomes `.long()`. The message names the dtype the call needs, so the fix is sure."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, replace_on_line

LONG_NEEDED = re.compile(
    r"expected target dtype to be Long|expected scalar type Long but found|"
    r"\"nll_loss[^\"\n]*\" not implemented for '(?:Float|Double|Half|Int|Short|Char)'")
LOSS_WORDS = ("loss", "entropy", "nll", "criterion")


def _target_call(tree: ast.Module, line: int) -> ast.Call | None:
    """The loss call on `line`: a call with two or more positional arguments, one whose callee's
    text names a loss first; None when there is none or several equally likely."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and len(n.args) >= 2
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    named = [c for c in calls if any(w in ast.unparse(c.func).lower() for w in LOSS_WORDS)]
    pick = named or calls
    return pick[0] if len(pick) == 1 else None


def long_targets(code: str, line: int) -> tuple[str, str] | None:
    """The code with the second argument of the loss call on `line` made `.long()`, and what
    changed; None when the call cannot be found or its target already ends in .long()."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    call = _target_call(tree, line)
    if call is None:
        return None
    target = call.args[1]
    if target.lineno != target.end_lineno or target.end_col_offset is None:
        return None
    text = ast.unparse(target)
    if text.endswith(".long()"):
        return None
    simple = isinstance(target, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))
    new_text = f"{text}.long()" if simple else f"({text}).long()"
    what = f"line {target.lineno}: the loss's target {text} -> {new_text} (class indices are int64)"
    return replace_on_line(code, target, new_text), what


def apply(f: Failure) -> Candidate | None:
    if f.frame is None or not LONG_NEEDED.search(f.error):
        return None
    found = long_targets(f.code, f.frame.line)
    return Candidate(*found) if found is not None else None


RULE = Rule("target_dtype", "a classification loss given float class indices: its target made .long()", apply)
