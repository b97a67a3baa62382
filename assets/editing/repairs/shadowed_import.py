"""A wrapper that calls itself under the imported name it wraps (RecursionError) gets the
original, imported again under another name."""
from __future__ import annotations

import ast
import builtins
import re

from assets.editing.code_reading import import_bindings, offset, with_import
from assets.editing.repairs.base import Candidate, Failure, Rule

_RECURSION = re.compile(r"^RecursionError\b")


def shadowed_import(code: str, error: str, functions: set[str]) -> tuple[str, str] | None:
    """"RecursionError: maximum recursion depth exceeded" in a function that wraps an imported
    name (or a builtin) under that same name and calls it inside: `def make_dataset(...):
    x, y = make_dataset(...)` after `from data import make_dataset` calls itself for ever (the
    small model writes such wrappers to add a step around a library call). The call inside each
    such wrapper is pointed at the original, imported again under another name (`from data import
    make_dataset as _imported_make_dataset`; `builtins.print` for a builtin); the wrapper keeps its
    name, so the code that calls it gets the added step. `functions`: the functions of the script
    in the failing frames (one of the wrappers must be among them). None otherwise."""
    if _RECURSION.match(error) is None:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    bindings = import_bindings(tree)
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(bindings)
    lines = code.splitlines(keepends=True)
    calls: list[tuple[ast.Name, str]] = []  # the self-calls and the name each becomes
    imports: list[str] = []
    wrapped: list[str] = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        own = [c.func for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
               and c.func.id == node.name]
        if not own:
            continue
        if node.name in bindings:
            module, attr = bindings[node.name]
            alias = f"_imported_{node.name}"
            while alias in taken:
                alias = "_" + alias
            imports.append(f"from {module} import {attr} as {alias}" if attr else f"import {module} as {alias}")
        elif node.name in vars(builtins):
            alias = f"builtins.{node.name}"
            if "builtins" not in bindings and "import builtins" not in imports:
                imports.append("import builtins")
        else:
            continue
        wrapped.append(node.name)
        calls += [(f, alias) for f in own]
    if not wrapped or not set(wrapped) & functions:
        return None
    text = code
    for name, alias in sorted(calls, key=lambda c: (c[0].lineno, c[0].col_offset), reverse=True):
        start = offset(lines, name.lineno, name.col_offset)
        text = text[:start] + alias + text[start + len(name.id):]
    new = with_import(text.splitlines(keepends=True), "\n".join(imports)) if imports else text
    how = "themselves under the names they wrap" if len(wrapped) > 1 else "itself under the name it wraps"
    return new, f"{', '.join(wrapped)} called {how}: each call inside now goes to the original, imported again"


def apply(f: Failure) -> Candidate | None:
    found = shadowed_import(f.code, f.error, {fr.function for fr in f.failed.frames if fr.file == f.code_file})
    return Candidate(*found) if found is not None else None


RULE = Rule("shadowed_import", "a function calling itself under the imported name it wraps: the original is called",
            apply)
