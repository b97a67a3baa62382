"""A script's imports, mended from what installed libraries export (read by the isolated lookup,
assets/editing/lookup.py): the names it uses undefined that a library it imports defines get
their import (`complete_imports`, `missing_import`), and a library's name imported from the
wrong module of that library moves to the module that exports it (`moved_import`)."""
from __future__ import annotations

import ast
import builtins
import re

from assets.editing.code_reading import dynamic, imported_modules, pick_module, with_import
from assets.editing.lookup import exporting, exporting_modules

# the conventional short names of ML code, imported as such when the code uses one undefined
ALIASES = {"np": "import numpy as np", "pd": "import pandas as pd", "plt": "import matplotlib.pyplot as plt",
           "nn": "import torch.nn as nn", "F": "import torch.nn.functional as F",
           "optim": "import torch.optim as optim", "torch": "import torch", "sklearn": "import sklearn",
           # the standard library's modules ML scripts use by their own name (3.11 does not say "Did you forget")
           **{m: f"import {m}" for m in ("json", "os", "sys", "math", "time", "random", "re", "csv", "pickle", "copy",
                                         "shutil", "glob", "argparse", "itertools", "functools", "collections",
                                         "logging", "warnings", "datetime", "statistics")},
           # and the standard library's classes and functions they use by name (not math's: `log` or
           # `exp` in array code means NumPy's)
           **{n: f"from {m} import {n}" for m, names in (
               ("collections", ("Counter", "defaultdict", "OrderedDict", "namedtuple", "deque")),
               ("pathlib", ("Path",)), ("functools", ("partial", "reduce", "lru_cache")),
               ("dataclasses", ("dataclass", "field", "asdict")),
               ("itertools", ("product", "combinations", "permutations", "chain", "islice")),
               ("typing", ("List", "Dict", "Tuple", "Optional", "Any", "Callable")),
               ("copy", ("deepcopy",))) for n in names}}

# names a module has without binding them
_MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
                 "__path__", "__annotations__", "__cached__"}


def import_statements(names: list[str], code: str) -> dict[str, str]:
    """The import line that defines each of `names` for this code, for those that have one: a
    conventional alias (np, pd, F...), or `from <module> import <name>` where a module the script
    imports (or a public submodule of its packages) exports it; one isolated lookup for all."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    out = {n: ALIASES[n] for n in names if n in ALIASES}
    rest = [n for n in names if n not in out]
    imported = imported_modules(tree)
    for name, found in exporting(rest, imported).items():
        if (module := pick_module(found, imported)) is not None:
            out[name] = f"from {module} import {name}"
    return out


def missing_import(name: str, code: str) -> str | None:
    """`import_statements` for one name; None when no imported library exports it."""
    return import_statements([name], code).get(name)


def undefined_names(code: str) -> list[str]:
    """Names the code reads but binds nowhere (in any scope) and that are not builtins, in the
    order they appear; [] for code that does not parse, star-imports or defines names at run
    time (exec, globals()). Conservative: a name bound anywhere counts as defined everywhere."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    if dynamic(tree):
        return []
    bound: set[str] = set()
    used: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                used.append((node.lineno, node.col_offset, node.id))
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound |= set(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    names = [n for _, _, n in sorted(used)]
    return [n for n in dict.fromkeys(names) if n not in bound and n not in vars(builtins) and n not in _MODULE_NAMES]


def complete_imports(code: str) -> tuple[str, list[str]]:
    """The code with an import added for every undefined name an imported library (or a
    conventional alias) defines, and the import lines added: the small model often rewrites a
    script's imports and drops ones the rest still uses (KFold, Ridge, make_pipeline), which
    otherwise costs one failed run and one repair per name. Names nothing exports are left for
    the run to report."""
    names = undefined_names(code)
    statements = list(import_statements(names, code).values()) if names else []
    if not statements:
        return code, []
    new = with_import(code.splitlines(keepends=True), "\n".join(statements))
    try:
        ast.parse(new)
    except SyntaxError:
        return code, []
    return new, statements


def moved_import(code: str, name: str, module: str, line: int,
                 found: list[str] | None = None) -> tuple[str, str] | None:
    """"cannot import name 'X' from 'pkg.a'" where another public module of the installed package
    pkg exports X (the model put `RandomizedSearchCV` under sklearn.preprocessing): the
    `from pkg.a import ...` statement at `line` loses X and `from <that module> import X` (its
    alias kept) follows it. `found`: the modules of pkg that export X when already looked up.
    None when the statement is not there or no module of pkg exports X."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == module and not n.level
                 and n.lineno <= line <= (n.end_lineno or n.lineno) and any(a.name == name for a in n.names)), None)
    if node is None:
        return None
    if found is None:
        found = exporting_modules(name, [module.split(".")[0]])
    right = pick_module([m for m in found if m != module], imported_modules(tree))
    if right is None:
        return None
    lines = code.splitlines(keepends=True)
    indent = re.match(r"[ \t]*", lines[node.lineno - 1]).group(0)  # type: ignore[union-attr]
    alias = next(a for a in node.names if a.name == name)
    rest = [a for a in node.names if a is not alias]

    def said(a: ast.alias) -> str:
        return a.name + (f" as {a.asname}" if a.asname else "")

    new = ([f"{indent}from {module} import {', '.join(said(a) for a in rest)}\n"] if rest else []) + \
        [f"{indent}from {right} import {said(alias)}\n"]
    end = node.end_lineno or node.lineno
    after = lines[end - 1].encode()[node.end_col_offset:].decode()  # a comment or `; more` after the statement
    if after.strip():
        new[-1] = new[-1][:-1] + after
    return ("".join(lines[:node.lineno - 1] + new + lines[end:]),
            f"line {node.lineno}: {name} imported from {right} instead of {module} (the module of that "
            "library that exports it)")
