"""A method passed where its result was meant ("'method' object is not iterable", "... is not
subscriptable": `Adam(model.parameters, lr=...)`, `for k, v in d.items:`): on the failing line, the
one attribute that names a method returning a collection and is not called gets called
(`model.parameters()`). Sure when the line has exactly one such attribute."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, replace_on_line

SIGN = re.compile(r"'(?:method|builtin_function_or_method|function)' object is not (?:iterable|subscriptable)")
# methods whose result, not the method itself, is what code iterates or indexes
COLLECTIONS = {"parameters", "named_parameters", "children", "named_children", "modules", "named_modules",
               "buffers", "named_buffers", "items", "keys", "values", "tolist", "readlines", "state_dict",
               "get_params", "get_feature_names_out", "iterrows", "itertuples", "to_numpy", "copy", "split",
               "splitlines", "nonzero"}


def called(code: str, line: int) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    func_ids = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in COLLECTIONS
             and n.lineno == line == n.end_lineno and id(n) not in func_ids and isinstance(n.ctx, ast.Load)
             and n.end_col_offset is not None]
    if len(found) != 1:
        return None
    node = found[0]
    new = f"{ast.unparse(node)}()"
    return replace_on_line(code, node, new), f"line {node.lineno}: {ast.unparse(node)} -> {new} (the method's result)"


def apply(f: Failure) -> Candidate | None:
    if not SIGN.search(f.error) or f.frame is None:
        return None
    found = called(f.code, f.frame.line)
    return Candidate(*found, sure=True) if found is not None else None


RULE = Rule("uncalled_method", "a method passed where its result was meant ('method' object is not iterable): "
            "called", apply)
