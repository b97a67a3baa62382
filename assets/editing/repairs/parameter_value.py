"""A top-level name the code gives only as a parameter with one constant (`def __init__(self,
num_epochs=4)`, then `for epoch in range(num_epochs)` at the top level) gets that value: a
guess, never sure. Only where the message names no close defined name."""
from __future__ import annotations

import ast
import builtins

from assets.editing.code_reading import bound_names
from assets.editing.repairs.base import Candidate, Failure, Rule
from assets.editing.repairs.renaming import computed


def _literal(node: ast.expr | None) -> str | None:
    """The source of a constant (a number, string, bool or None; a negative number too), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return ast.unparse(node) if isinstance(node.operand.value, (int, float)) else None
    return ast.unparse(node) if isinstance(node, ast.Constant) and not isinstance(node.value, bytes) else None


def _given_values(tree: ast.Module) -> dict[str, set[str]]:
    """Per name: the constants the code gives it as a parameter's default or a call's keyword."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, default in pairs:
                if (v := _literal(default)) is not None:
                    out.setdefault(arg.arg, set()).add(v)
        elif isinstance(node, ast.keyword) and node.arg and (v := _literal(node.value)) is not None:
            out.setdefault(node.arg, set()).add(v)
    return out


def parameter_value(code: str, name: str, line: int) -> tuple[str, str] | None:
    """"NameError: name 'num_epochs' is not defined" at the top level, where the code names it only as
    a parameter (`def __init__(self, ..., num_epochs=4, batch_size=32)`, the small model's way of
    making settings "tunable") and gives it one constant there (a default, or `num_epochs=4` at a
    call): `num_epochs = 4` goes just above the top-level statement that failed, together with the
    other names of that statement in the same state (one run instead of one per name). None when
    the name is bound at the top level, or given no constant or several different ones."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    stmt = next((s for s in tree.body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
    if stmt is None or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    top = set(bound_names(list(tree.body))) | set(vars(builtins))
    given = _given_values(tree)
    read = [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    names = [n for n in dict.fromkeys([name] + read) if n not in top and len(given.get(n, ())) == 1]
    if name not in names:
        return None
    lines = code.splitlines(keepends=True)
    added = [f"{n} = {next(iter(given[n]))}\n" for n in names]
    new = "".join(lines[:stmt.lineno - 1] + added + lines[stmt.lineno - 1:])
    return new, (f"line {stmt.lineno}: defined {', '.join(a.strip() for a in added)} above it (the value the "
                 "code gives each as a parameter; nothing defined them at the top level)")


def apply(f: Failure) -> Candidate | None:
    if f.wrong is None or f.hint is not None or f.frame is None or f.frame.function != "<module>":
        return None
    kind, wrong = f.wrong
    if kind != "name" or computed(f, kind, wrong) is not None:
        return None
    found = parameter_value(f.code, wrong, f.frame.line)
    return Candidate(*found, sure=False) if found is not None else None


RULE = Rule("parameter_value", "a top-level name given only as a parameter with one constant: defined with it",
            apply)
