"""Mechanical repair candidates: the interpreter's own suggestion, applied without the LLM.

Python names the fix of many one-word mistakes itself: "NameError: name 'factr' is not
defined. Did you mean: 'factor'?", "AttributeError: 'Net' object has no attribute 'forwrd'.
Did you mean: 'forward'?", "Did you forget to import 'math'?" (3.12+). `suggested_fix` turns
such a message into an edit of the failing line (the innermost frame in the edited file) and
nothing else; when the wrong name is not on that line, there is no candidate.

Where Python cannot suggest, the same kind of suggestion is computed here from what the code
defines (read with `ast`, never imported or run): "cannot import name" from a module that is a
file of the script's folder (3.11 suggests nothing there); an attribute of a class the script
defines (torch's nn.Module raises its own AttributeError, without a suggestion); a name that
differs from a defined one by case or a few letters (BATCH_SIZE for batch_size). The closest
name must be close (difflib ratio >= 0.7, or equal ignoring case); otherwise no candidate.

A name that is not defined at all but is a public class or function of a library the script
already imports ("NameError: name 'KFold' is not defined" in a script importing from
sklearn.model_selection, after the model rewrote the imports) gets its import added
(`missing_import`); that lookup imports installed packages only, in a separate isolated
interpreter that never sees the workspace."""
from __future__ import annotations

import ast
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from assets.patched_code.edit_formats import check_compiles, unified_diff
from schemas.records import Attempt

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DID_YOU_MEAN = re.compile(rf"Did you mean:? '({_NAME})'\?")
_FORGOT_IMPORT = re.compile(rf"Did you forget to import '({_NAME})'\?")
# the wrong name in each kind of message, and how it appears in the code
_WRONG = (
    (re.compile(rf"^(?:NameError|UnboundLocalError): (?:name|cannot access \w+ variable) '({_NAME})'"), "name"),
    (re.compile(rf"^[\w.]*AttributeError: .*has no attribute '({_NAME})'"), "attribute"),
    (re.compile(rf"^ImportError: cannot import name '({_NAME})'"), "name"),
    (re.compile(rf"^TypeError: .*got an unexpected keyword argument '({_NAME})'"), "keyword"),
)
_UNDEFINED = re.compile(rf"^NameError: name '({_NAME})' is not defined")
_IMPORT_FROM = re.compile(rf"^ImportError: cannot import name '{_NAME}' from '([\w.]+)'")


@dataclass(frozen=True)
class Suggestion:
    code: str
    diff: str
    what: str  # e.g. "line 5: factr -> factor (the interpreter's suggestion)"


def _module_names(module: str, folder: Path) -> list[str]:
    """Top-level names a module that is a file of `folder` defines (parsed, not imported)."""
    path = folder / (module.replace(".", "/") + ".py")
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    return names


CUTOFF = 0.7  # how close (difflib ratio) a defined name must be to be suggested where Python named none
_OBJECT_ATTR = re.compile(rf"^[\w.]*AttributeError: '({_NAME})' object has no attribute")


def _closest(wrong: str, names: list[str]) -> str | None:
    names = [n for n in dict.fromkeys(names) if n != wrong]
    same = [n for n in names if n.lower() == wrong.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(wrong, names, n=1, cutoff=CUTOFF)
    return close[0] if close else None


def _bound_names(nodes: list[ast.AST]) -> list[str]:
    """Names the statements bind (assignments, loops, with, imports, defs, parameters), walked
    without entering nested functions or classes beyond their own names."""
    out: list[str] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
        elif isinstance(node, ast.arg):
            out.append(node.arg)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _defined_names(tree: ast.Module, line: int) -> list[str]:
    """Names visible at `line`: the module's top level and every function enclosing the line."""
    names = _bound_names(list(tree.body))
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.lineno <= line <= (node.end_lineno or node.lineno)):
            names += _bound_names([node.args, *node.body])
    return names


def _class_members(tree: ast.Module, cls: str) -> list[str]:
    """A class's methods, class attributes and the `self.<name>` its methods assign."""
    out: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == cls):
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(item.name)
                out += [t.attr for t in ast.walk(item) if isinstance(t, ast.Attribute)
                        and isinstance(t.ctx, ast.Store) and isinstance(t.value, ast.Name) and t.value.id == "self"]
            else:
                out += [t.id for t in ast.walk(item) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)]
    return out


def _computed(error: str, kind: str, wrong: str, code: str, line: int, folder: Path | None) -> str | None:
    """The suggestion Python did not make, from what the code defines; None if nothing is close."""
    if (imp := _IMPORT_FROM.match(error)) is not None:
        return _closest(wrong, _module_names(imp.group(1), folder)) if folder is not None else None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if kind == "attribute":
        owner = _OBJECT_ATTR.match(error)
        return _closest(wrong, _class_members(tree, owner.group(1))) if owner else None
    if kind == "name":
        return _closest(wrong, _defined_names(tree, line))
    return None


def _pattern(kind: str, wrong: str) -> re.Pattern:
    if kind == "attribute":  # obj.wrong, obj . wrong
        return re.compile(rf"(\.\s*){re.escape(wrong)}\b")
    if kind == "keyword":  # f(..., wrong=...)
        return re.compile(rf"(\b){re.escape(wrong)}(\s*=(?!=))")
    return re.compile(rf"((?<![\w.])){re.escape(wrong)}\b")  # a bare name, not an attribute


def _import_line(lines: list[str]) -> int:
    """Index where an added `import` goes: before the first top-level import that is not
    `from __future__`, else after the module docstring and __future__ imports."""
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return 0
    after = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            after = node.end_lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            return node.lineno - 1
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str) and node is tree.body[0]):
            after = node.end_lineno
        else:
            break
    return after


# the conventional short names of ML code, imported as such when the code uses one undefined
ALIASES = {"np": "import numpy as np", "pd": "import pandas as pd", "plt": "import matplotlib.pyplot as plt",
           "nn": "import torch.nn as nn", "F": "import torch.nn.functional as F",
           "optim": "import torch.optim as optim", "torch": "import torch", "sklearn": "import sklearn"}
LOOKUP_TIMEOUT_S = 60
LOOKUP_MODULES = 400  # modules imported at most by one lookup (torch.utils.data is within the first 400)
# run by `python -I` (no script folder, no PYTHONPATH, no user site on sys.path): which of the
# modules, and of the public submodules of the packages among them (not the standard library's),
# export `name` as a public class or function; prints the module names as JSON
_LOOKUP = r"""
import importlib, inspect, json, pkgutil, sys
name, wanted, LIMIT = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
ACTS = {"antigravity", "this", "turtle", "turtledemo", "tkinter", "idlelib", "webbrowser"}  # act when imported
def public(m):
    return m.split(".")[0] not in ACTS and not any(
        p.startswith("_") or p in ("tests", "testing", "conftest") for p in m.split("."))
mods = list(dict.fromkeys(m for m in wanted if public(m)))
packages = [m for m in mods if "." not in m and m not in sys.stdlib_module_names]
for _ in range(2):  # two levels below each top package: torch.utils.data, sklearn.linear_model
    below = []
    for m in packages:
        try:
            pkg = importlib.import_module(m)
        except BaseException:
            continue
        below += [f"{m}.{i.name}" for i in pkgutil.iter_modules(getattr(pkg, "__path__", []) or [])
                  if public(i.name)]
    mods += [m for m in below if m not in mods]
    packages = below
found = []
for m in mods[:LIMIT]:
    try:
        mod = importlib.import_module(m)
    except BaseException:
        continue
    obj = getattr(mod, name, None)
    listed = getattr(mod, "__all__", None)
    if (inspect.isclass(obj) or inspect.isroutine(obj)) and (listed is None or name in listed):
        found.append(m)
print(json.dumps(found))
"""


def imported_modules(tree: ast.Module) -> list[str]:
    """The modules a script imports and their top packages (`import a.b` and `from a.b import
    c` both give a.b and a), relative imports left out, in the order they appear."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                out += [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [node.module, node.module.split(".")[0]]
    return list(dict.fromkeys(out))


def pick_module(found: list[str], imported: list[str]) -> str | None:
    """The module to import a name from: one the script already imports from, else the
    shortest path (ties: alphabetical)."""
    direct = [m for m in found if m in imported]
    return min(direct or found, key=lambda m: (m.count("."), len(m), m)) if found else None


def exporting_modules(name: str, modules: list[str]) -> list[str]:
    """Which of `modules` (and the public submodules of the non-stdlib packages among them)
    export `name` as a public class or function, looked up by importing installed packages in
    an isolated interpreter (`-I`, run from an empty folder, a minimal environment): the
    script's own folder is never on its path, so no code the model wrote runs outside the
    sandbox. [] when the lookup fails or times out."""
    if not modules:
        return []
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory(prefix="import-lookup-") as empty:
        try:
            out = subprocess.run([sys.executable, "-I", "-c", _LOOKUP, name, json.dumps(modules),
                                  str(LOOKUP_MODULES)], cwd=empty, env={**env, "HOME": empty}, capture_output=True,
                                 text=True, timeout=LOOKUP_TIMEOUT_S, stdin=subprocess.DEVNULL)
            return [m for m in json.loads(out.stdout.strip().splitlines()[-1]) if isinstance(m, str)] \
                if out.returncode == 0 and out.stdout.strip() else []
        except (subprocess.TimeoutExpired, OSError, ValueError, IndexError):
            return []


def missing_import(name: str, code: str) -> str | None:
    """The import line that defines `name` for this code: a conventional alias (np, pd, F...),
    or `from <module> import <name>` where a module the script imports (or a public submodule
    of its packages) exports it; None when none does."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if name in ALIASES:
        return ALIASES[name]
    imported = imported_modules(tree)
    module = pick_module(exporting_modules(name, imported), imported)
    return f"from {module} import {name}" if module else None


def _with_import(lines: list[str], statement: str) -> str:
    at = _import_line(lines)
    return "".join(lines[:at] + [statement + "\n"] + lines[at:])


def suggested_fix(code: str, failed: Attempt, code_file: str, folder: Path | None = None) -> Suggestion | None:
    """The edit the failure's own message suggests, applied at the failing line of `code_file`;
    None when the message suggests nothing usable. `folder`: where the script's own modules lie
    (for "cannot import name" without a suggestion)."""
    error = (failed.error or "").strip()
    if not error or failed.timed_out:
        return None
    frame = next((f for f in reversed(failed.frames) if f.file == code_file), None)
    lines = code.splitlines(keepends=True)
    if (forgot := _FORGOT_IMPORT.search(error)) is not None:
        new = _with_import(lines, f"import {forgot.group(1)}")
        what = f"added `import {forgot.group(1)}` (the interpreter's suggestion)"
    elif (frame is not None and (undefined := _UNDEFINED.match(error)) is not None and not _DID_YOU_MEAN.search(error)
          and (statement := missing_import(undefined.group(1), code)) is not None):
        new = _with_import(lines, statement)   # before a close defined name: `Ridge` is not the variable `ridge`
        what = f"added `{statement}` ({undefined.group(1)} is not defined; that module exports it)"
    elif frame is None:  # the error arose outside the edited file: no line to change
        return None
    else:
        kind = wrong = None
        for pattern, k in _WRONG:
            if (w := pattern.match(error)) is not None:
                kind, wrong = k, w.group(1)
                break
        if wrong is None:
            return None
        if not 1 <= frame.line <= len(lines):
            return None
        hint = _DID_YOU_MEAN.search(error)
        right = hint.group(1) if hint else _computed(error, kind, wrong, code, frame.line, folder)
        if right is None or right == wrong:
            return None
        line = lines[frame.line - 1]
        fixed, n = _pattern(kind, wrong).subn(lambda h: h.group(1) + right + (h.group(2) if kind == "keyword" else ""),
                                              line)
        if n == 0:  # the name is not on the failing line (e.g. built by getattr): nothing to place
            return None
        new = "".join(lines[:frame.line - 1] + [fixed] + lines[frame.line:])
        what = f"line {frame.line}: {wrong} -> {right} (" + (
            "the interpreter's suggestion)" if hint else "the closest name the code defines)")
    if new == code or check_compiles(new, code_file) is not None:
        return None
    return Suggestion(code=new, diff=unified_diff(code, new, code_file), what=what)
