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
interpreter that never sees the workspace. The same lookup moves a library's name imported from
the wrong module of that library ("cannot import name 'RandomizedSearchCV' from
'sklearn.preprocessing'") to the module that exports it (`moved_import`), and renames an ensemble
given members of the other task to its sibling that module exports (`task_sibling`). A file
written into a folder that does not exist gets the folder made first (`missing_folder`, no lookup).
A wrapper that calls itself under the imported name it wraps (RecursionError) gets the original
(`shadowed_import`); a top-level name the code gives only as a parameter with one constant gets
that value (`parameter_value`, a guess).

One module, one responsibility: every rule turns one error message into one edit of the failing
code, without the LLM, through the same readers (the names the code defines and binds, its import
lines, the isolated library lookup); `suggested_fix` and `mend` are its two entry points."""
from __future__ import annotations

import ast
import builtins
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from assets.editing.edit_formats import check_compiles, unified_diff
from assets.editing.tracebacks import clip
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
    rule: str  # which rule made it: interpreter, closest_name, missing_import, keyword, parameter_value, ...
    # the message (or the callee's signature) names this fix: tried before the LLM's, not after
    sure: bool = False


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


SURE_RATIO = 0.8  # how close the interpreter's suggestion must be to count as a typo's fix


def _plain_typo(wrong: str, right: str) -> bool:
    """Is the interpreter's suggestion surely the fix: the names differ by case only, or by a
    letter or two in a name of 5+ letters? Python also suggests any short near name: `best`
    (a variable the patch removed) -> `test` in the diabetes runs, which is a guess."""
    return wrong.lower() == right.lower() or (
        min(len(wrong), len(right)) >= 5 and difflib.SequenceMatcher(None, wrong, right).ratio() >= SURE_RATIO)


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
           "optim": "import torch.optim as optim", "torch": "import torch", "sklearn": "import sklearn",
           # the standard library's modules ML scripts use by their own name (3.11 does not say "Did you forget")
           **{m: f"import {m}" for m in ("json", "os", "sys", "math", "time", "random", "re", "csv", "pickle", "copy",
                                         "shutil", "glob", "argparse", "itertools", "functools", "collections",
                                         "logging", "warnings", "datetime", "statistics")}}
LOOKUP_TIMEOUT_S = 60
LOOKUP_MODULES = 400  # modules imported at most by one lookup (torch.utils.data is within the first 400)
# run by `python -I` (no script folder, no PYTHONPATH, no user site on sys.path): which of the
# modules, and of the public submodules of the packages among them (not the standard library's),
# export each of the names as a public class or function; prints {name: [modules]} as JSON
_LOOKUP = r"""
import importlib, inspect, json, pkgutil, sys
names, wanted, LIMIT = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
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
found = {n: [] for n in names}
for m in mods[:LIMIT]:
    try:
        mod = importlib.import_module(m)
    except BaseException:
        continue
    listed = getattr(mod, "__all__", None)
    for name in names:
        obj = getattr(mod, name, None)
        if (inspect.isclass(obj) or inspect.isroutine(obj)) and (listed is None or name in listed):
            found[name].append(m)
print(json.dumps(found))
"""
# run the same way: the keyword parameters of `module`'s attribute path (a class: its
# constructor's), as a JSON list; null when it cannot be imported or has no signature
_PARAMETERS = r"""
import importlib, inspect, json, sys
module, path = sys.argv[1], sys.argv[2]
try:
    obj = importlib.import_module(module)
    for i, part in enumerate(path.split(".")):
        if not hasattr(obj, part):  # a submodule not imported by its package (from sklearn import linear_model)
            importlib.import_module(module + "." + ".".join(path.split(".")[:i + 1]))
        obj = getattr(obj, part)
    params = inspect.signature(obj).parameters.values()
    print(json.dumps([p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]))
except BaseException:
    print("null")
"""


_ANSWERS: dict[tuple[str, ...], object] = {}  # lookups answered in this process: installed packages do not change


def _isolated(script: str, *args: str):
    """Run `script` in a separate isolated interpreter (`-I`, from an empty folder, a minimal
    environment: the workspace is never on its path, so no code the model wrote runs outside the
    sandbox) and read the JSON its last output line prints; None when it fails or times out.
    An answer is kept for the process: the repair note and the keyword fix of one failure, and
    the drafts of one idea, ask the same lookups (2-5 s each); a failure is asked again."""
    key = (script, *args)
    if key not in _ANSWERS and (answer := _run_isolated(script, *args)) is not None:
        _ANSWERS[key] = answer
    return _ANSWERS.get(key)


def _run_isolated(script: str, *args: str):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory(prefix="import-lookup-") as empty:
        try:
            out = subprocess.run([sys.executable, "-I", "-c", script, *args], cwd=empty, env={**env, "HOME": empty},
                                 capture_output=True, text=True, timeout=LOOKUP_TIMEOUT_S, stdin=subprocess.DEVNULL)
            return json.loads(out.stdout.strip().splitlines()[-1]) \
                if out.returncode == 0 and out.stdout.strip() else None
        except (subprocess.TimeoutExpired, OSError, ValueError, IndexError):
            return None


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


def exporting(names: list[str], modules: list[str]) -> dict[str, list[str]]:
    """For each name, which of `modules` (and the public submodules of the non-stdlib packages
    among them) export it as a public class or function, looked up by importing installed
    packages in one isolated interpreter (`_isolated`); [] for a name when the lookup fails."""
    found = _isolated(_LOOKUP, json.dumps(names), json.dumps(modules), str(LOOKUP_MODULES)) \
        if names and modules else None
    found = found if isinstance(found, dict) else {}
    return {n: [m for m in found.get(n, []) if isinstance(m, str)] for n in names}


def exporting_modules(name: str, modules: list[str]) -> list[str]:
    """`exporting` for one name."""
    return exporting([name], modules)[name]


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


# names a module has without binding them, and calls after which any name may exist
_MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
                 "__path__", "__annotations__", "__cached__"}
_DYNAMIC = {"exec", "globals", "__import__"}


def _dynamic(tree: ast.Module) -> bool:
    """Does the module star-import or define names at run time (exec, globals())? Then which
    names exist where cannot be read from the text."""
    return any((isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names))
               or (isinstance(n, ast.Name) and n.id in _DYNAMIC) for n in ast.walk(tree))


def undefined_names(code: str) -> list[str]:
    """Names the code reads but binds nowhere (in any scope) and that are not builtins, in the
    order they appear; [] for code that does not parse, star-imports or defines names at run
    time (exec, globals()). Conservative: a name bound anywhere counts as defined everywhere."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    if _dynamic(tree):
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
    script's imports and drops ones the rest still uses (KFold, Ridge, make_pipeline in the
    diabetes runs), which otherwise costs one failed run and one repair per name. Names nothing
    exports are left for the run to report."""
    names = undefined_names(code)
    statements = list(import_statements(names, code).values()) if names else []
    if not statements:
        return code, []
    new = _with_import(code.splitlines(keepends=True), "\n".join(statements))
    try:
        ast.parse(new)
    except SyntaxError:
        return code, []
    return new, statements


def _reads_now(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement reads when it runs: function and lambda bodies are left out
    (they run when called), their decorators and defaults are not."""
    out: set[str] = set()
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack += [*node.decorator_list, *node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]
            continue
        if isinstance(node, ast.Lambda):
            stack += [*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _binds(stmt: ast.stmt) -> set[str]:
    return set(_bound_names([stmt]))


def reorder_top_level(code: str) -> tuple[str, list[str]]:
    """The code with each top-level statement that reads a name bound only by a later top-level
    statement moved to just after the last such binding, together with the statements in
    between that read what it binds (in their order), and what was moved. The functions format
    sometimes places a new top-level block among the imports, before the constants and data it
    uses (`grid_search = GridSearchCV(make_pipeline(...), ALPHAS, cv=folds)` and
    `grid_search.fit(x_train, y_train)` above the lines that define them, diabetes r1): it fails
    with a NameError although every name exists. Nothing moves when a statement shares a line
    with another, or the binding it waits for itself reads what the moved ones bind."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    if _dynamic(tree):
        return code, []
    moved: list[str] = []
    for _ in range(len(tree.body)):
        body = tree.body
        binds, reads = [_binds(st) for st in body], [_reads_now(st) for st in body]
        move = None
        for i in range(len(body)):
            before = set().union(*binds[:i])
            later = {n: j for j in range(len(body) - 1, i, -1) for n in binds[j]}
            wanted = {n for n in reads[i] - before - set(vars(builtins)) if n in later}
            if not wanted:
                continue
            target = max(later[n] for n in wanted)
            group, bound = [i], set(binds[i]) - before
            for k in range(i + 1, target + 1):
                if reads[k] & bound:
                    group.append(k)
                    bound |= binds[k]
            spans = [(body[k].lineno, body[k].end_lineno) for k in range(len(body))]
            shares = any(spans[k][0] <= spans[m][1] and spans[m][0] <= spans[k][1]
                         for k in group for m in range(len(body)) if m != k)
            if target in group or shares:
                continue
            move = (group, target, sorted(wanted))
            break
        if move is None:
            break
        group, target, names = move
        lines = code.splitlines(keepends=True)
        take = {ln for k in group for ln in range(body[k].lineno - 1, body[k].end_lineno)}
        block = [lines[ln] for ln in sorted(take)]
        end = body[target].end_lineno
        new = "".join([ln for n, ln in enumerate(lines[:end]) if n not in take] + block + lines[end:])
        try:
            tree = ast.parse(new)
        except SyntaxError:
            break
        moved.append(f"moved line{'s' if len(group) > 1 else ''} {', '.join(str(body[k].lineno) for k in group)} "
                     f"below line {end} (reading {', '.join(names)}, defined by then)")
        code = new
    return code, moved


def mend(code: str) -> tuple[str, list[str]]:
    """What every draft and every LLM repair gets before it runs: misplaced top-level statements
    moved below what they read (`reorder_top_level`), then missing library imports added
    (`complete_imports`). Returns the code and one note per change."""
    code, notes = reorder_top_level(code)
    code, added = complete_imports(code)
    return code, notes + [f"added `{a}`" for a in added]


def _import_bindings(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """What each imported name stands for: local name -> (module, attribute path in it)."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], "")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update({a.asname or a.name: (node.module, a.name) for a in node.names if a.name != "*"})
    return out


def _callee(func: ast.expr, bindings: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(module, attribute path) of a call's function when it is an imported name or an
    attribute path from one (`RidgeCV`, `nn.Linear`, `torch.optim.Adam`); None otherwise."""
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in bindings:
        return None
    module, attr = bindings[func.id]
    path = ".".join(([attr] if attr else []) + parts)
    return (module, path) if path else None


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Index into the joined lines of an ast position (its column counts UTF-8 bytes)."""
    return sum(map(len, lines[:lineno - 1])) + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))


def _keyword_call(tree: ast.Module, wrong: str, line: int) -> ast.Call | None:
    """The innermost call spanning `line` that passes the keyword `wrong`."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
             and any(k.arg == wrong for k in n.keywords)]
    return min(calls, key=lambda n: ((n.end_lineno or n.lineno) - n.lineno, (n.end_col_offset or 0) - n.col_offset),
               default=None)


def callee_parameters(code: str, wrong: str, line: int) -> tuple[str, list[str]] | None:
    """(callee, its keyword parameters) of the call at `line` that passes `wrong=`, when the
    callee is a library function or class the script imports (its signature read in the
    isolated interpreter); None otherwise."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    call = _keyword_call(tree, wrong, line)
    callee = _callee(call.func, _import_bindings(tree)) if call is not None else None
    params = _isolated(_PARAMETERS, *callee) if callee else None
    return (".".join(callee), params) if isinstance(params, list) else None


def _keyword_span(code: str, lines: list[str], kw: ast.keyword, right: str | None) -> tuple[int, int, str]:
    """(start, end, replacement) in `code` that renames the keyword argument `kw` to `right`, or
    drops it with its comma when `right` is None."""
    start, end = _offset(lines, kw.lineno, kw.col_offset), _offset(lines, kw.end_lineno, kw.end_col_offset)
    if right is not None:
        return start, start + len(kw.arg), right
    after = len(code[end:]) - len(code[end:].lstrip())
    if code[end + after:end + after + 1] == ",":
        end = end + after + 1 + len(code[end + after + 1:]) - len(code[end + after + 1:].lstrip(" "))
    else:
        before = code[:start].rstrip()
        if before.endswith(","):
            start = len(before) - 1
    return start, end, ""


def keyword_fix(code: str, wrong: str, line: int) -> tuple[str, str, bool] | None:
    """A fix of "got an unexpected keyword argument 'wrong'" raised at `line`: the call there
    passing `wrong=`, with the keyword renamed to the callee's closest parameter (the callee's
    signature read in the isolated interpreter: RidgeCV takes `alphas`, not `alpha`), else with
    the argument dropped; every other call of the same callee passing `wrong=` gets the same edit
    (a cross-validation and the final fit would otherwise fail one after the other). (code, what,
    sure): sure when the signature named the parameter."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    call = _keyword_call(tree, wrong, line)
    if call is None:
        return None
    lines = code.splitlines(keepends=True)
    found = callee_parameters(code, wrong, line)
    taken = {k.arg for k in call.keywords}
    right = _closest(wrong, [p for p in found[1] if p not in taken]) if found else None
    name = found[0] if found else ast.unparse(call.func)
    func = ast.unparse(call.func)
    same = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and ast.unparse(c.func) == func
            and any(k.arg == wrong for k in c.keywords) and not any(k.arg == right for k in c.keywords)]
    kws = sorted((next(k for k in c.keywords if k.arg == wrong) for c in same), key=lambda k: (k.lineno, k.col_offset))
    new = code
    for start, end, text in sorted((_keyword_span(code, lines, k, right) for k in kws), reverse=True):
        new = new[:start] + text + new[end:]
    where = ", ".join(str(k.lineno) for k in kws)
    if right is not None:
        return new, f"line {where}: keyword {wrong}= -> {right}= (a parameter of {name})", True
    return new, f"line {where}: dropped the argument {wrong}= ({name} takes no such keyword)", False


def moved_import(code: str, name: str, module: str, line: int) -> tuple[str, str] | None:
    """"cannot import name 'X' from 'pkg.a'" where another public module of the installed package
    pkg exports X (the model put `RandomizedSearchCV` under sklearn.preprocessing): the
    `from pkg.a import ...` statement at `line` loses X and `from <that module> import X` (its
    alias kept) follows it. None when the statement is not there or no module of pkg exports X."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == module and not n.level
                 and n.lineno <= line <= n.end_lineno and any(a.name == name for a in n.names)), None)
    if node is None:
        return None
    found = [m for m in exporting_modules(name, [module.split(".")[0]]) if m != module]
    right = pick_module(found, imported_modules(tree))
    if right is None:
        return None
    lines = code.splitlines(keepends=True)
    indent = re.match(r"[ \t]*", lines[node.lineno - 1]).group(0)
    alias = next(a for a in node.names if a.name == name)
    rest = [a for a in node.names if a is not alias]
    said = lambda a: a.name + (f" as {a.asname}" if a.asname else "")  # noqa: E731
    new = ([f"{indent}from {module} import {', '.join(said(a) for a in rest)}\n"] if rest else []) + \
        [f"{indent}from {right} import {said(alias)}\n"]
    tail = lines[node.end_lineno - 1]
    after = tail.encode()[node.end_col_offset:].decode()  # a comment or `; more` after the statement
    if after.strip():
        new[-1] = new[-1][:-1] + after
    return ("".join(lines[:node.lineno - 1] + new + lines[node.end_lineno:]),
            f"line {node.lineno}: {name} imported from {right} instead of {module} (the module of that "
            "library that exports it)")


_TASK_KIND = re.compile(rf"^ValueError: The estimator {_NAME} should be a (classifier|regressor)\.")
_KINDS = {"classifier": ("Classifier", "Regressor"), "regressor": ("Regressor", "Classifier")}  # (ensemble, members)


def task_sibling(code: str, error: str) -> tuple[str, str] | None:
    """"The estimator Ridge should be a classifier." (scikit-learn's ensembles check their members'
    task): the script gave regressors to a classifier ensemble (or the reverse), so every name it
    imports from a module whose name ends in Classifier (Regressor) and whose sibling ending in
    Regressor (Classifier) that module also exports is renamed to the sibling, in the imports and
    wherever the code uses it. None when no such name is imported."""
    m = _TASK_KIND.match(error)
    if m is None:
        return None
    wrong, right = _KINDS[m.group(1)]
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    names = {a.name: n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level
             for a in n.names if a.name.endswith(wrong) and a.asname is None}
    if not names:
        return None
    siblings = {old: old[:-len(wrong)] + right for old in names}
    found = exporting(list(siblings.values()), sorted(set(names.values())))
    swap = {old: new for old, new in siblings.items() if names[old] in found.get(new, [])}
    if not swap:
        return None
    new_code = re.sub(r"\b(" + "|".join(map(re.escape, swap)) + r")\b", lambda h: swap[h.group(1)], code)
    return new_code, ", ".join(f"{a} -> {b}" for a, b in swap.items()) + (
        f" (the ensemble's members are {right.lower()}s: its {right} sibling)")


_NO_FOLDER = re.compile(r"^FileNotFoundError: \[Errno 2\] No such file or directory: '([^']+)'")
_WRITERS = {"to_csv", "to_json", "to_parquet", "savefig", "save", "savez", "savetxt"}  # path first (torch: second)


def _written_path(call: ast.Call) -> ast.expr | None:
    """The path argument of a call that writes a file: open(path, "w"/"a"/"x"), df.to_csv(path),
    plt.savefig(path), np.save(path, ...), torch.save(obj, path); None for any other call."""
    f = call.func
    if isinstance(f, ast.Name) and f.id == "open" and call.args:
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        writes = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax")
        return call.args[0] if writes else None
    if isinstance(f, ast.Attribute) and f.attr in _WRITERS and call.args:
        torch_save = f.attr == "save" and isinstance(f.value, ast.Name) and f.value.id == "torch"
        return (call.args[1] if len(call.args) > 1 else None) if torch_save else call.args[0]
    return None


def missing_folder(code: str, error: str, line: int) -> tuple[str, str] | None:
    """"No such file or directory: 'out/final_info.json'" raised at `line` by a call that writes that
    file: `os.makedirs(os.path.dirname(<the call's path>), exist_ok=True)` goes just above the
    statement (and `import os` with the imports when the script lacks it). None when the missing
    path has no folder part or no writing call on that line takes it."""
    m = _NO_FOLDER.match(error)
    if m is None or not os.path.dirname(m.group(1)):
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno <= line <= n.end_lineno
             and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For,
                                    ast.While, ast.Try))]
    stmt = min(stmts, key=lambda n: n.end_lineno - n.lineno, default=None)
    if stmt is None:
        return None
    head = stmt.items if isinstance(stmt, (ast.With, ast.AsyncWith)) else [stmt]
    paths = [p for node in head for c in ast.walk(node) if isinstance(c, ast.Call) and c.lineno == line
             and (p := _written_path(c)) is not None]
    if not paths:
        return None
    lines = code.splitlines(keepends=True)
    indent = re.match(r"[ \t]*", lines[stmt.lineno - 1]).group(0)
    path = ast.get_source_segment(code, paths[0]) or ast.unparse(paths[0])  # as written
    made = f"{indent}os.makedirs(os.path.dirname({path}) or '.', exist_ok=True)\n"
    new = "".join(lines[:stmt.lineno - 1] + [made] + lines[stmt.lineno - 1:])
    if "os" not in _import_bindings(tree):
        new = _with_import(new.splitlines(keepends=True), "import os")
    return new, f"line {stmt.lineno}: made the folder of {m.group(1)!r} before writing it (os.makedirs)"


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
    top = set(_bound_names(list(tree.body))) | set(vars(builtins))
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
    bindings = _import_bindings(tree)
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
        start = _offset(lines, name.lineno, name.col_offset)
        text = text[:start] + alias + text[start + len(name.id):]
    new = _with_import(text.splitlines(keepends=True), "\n".join(imports)) if imports else text
    how = "themselves under the names they wrap" if len(wrapped) > 1 else "itself under the name it wraps"
    return new, f"{', '.join(wrapped)} called {how}: each call inside now goes to the original, imported again"


def _with_import(lines: list[str], statement: str) -> str:
    at = _import_line(lines)
    return "".join(lines[:at] + [statement + "\n"] + lines[at:])


def suggested_fix(code: str, failed: Attempt, code_file: str, folder: Path | None = None) -> Suggestion | None:
    """The edit the failure's own message suggests, applied at the failing line of `code_file`;
    None when the message suggests nothing usable. `folder`: where the script's own modules lie
    (for "cannot import name" without a suggestion). `sure` on the result: the message or a
    library names the fix (the interpreter's suggestion, an import a library the script uses
    provides, a keyword the callee's signature has), not a guess from what the code defines."""
    error = clip((failed.error or "").strip())  # the run wrote it: bounded before any pattern sees it
    if not error or failed.timed_out:
        return None
    frame = next((f for f in reversed(failed.frames) if f.file == code_file), None)
    lines = code.splitlines(keepends=True)
    hint = _DID_YOU_MEAN.search(error)
    sure = True
    if (forgot := _FORGOT_IMPORT.search(error)) is not None:
        new = _with_import(lines, f"import {forgot.group(1)}")
        what, rule = f"added `import {forgot.group(1)}` (the interpreter's suggestion)", "interpreter"
    elif (frame is not None and (undefined := _UNDEFINED.match(error)) is not None
          and (statement := missing_import(undefined.group(1), code)) is not None):
        # before any close defined name: `Ridge` is not the variable `ridge`, and `RidgeCV` is
        # sklearn's class even where Python suggests the `Ridge` the script imports
        new = _with_import(lines, statement)
        what = f"added `{statement}` ({undefined.group(1)} is not defined; that module exports it)"
        rule = "missing_import"
    elif (sibling := task_sibling(code, error)) is not None:
        (new, what), rule = sibling, "task_sibling"
    elif frame is not None and (folder_fix := missing_folder(code, error, frame.line)) is not None:
        (new, what), rule = folder_fix, "missing_folder"
    elif (shadow := shadowed_import(code, error, {f.function for f in failed.frames if f.file == code_file})) \
            is not None:
        (new, what), rule = shadow, "shadowed_import"
    elif frame is None:  # the error arose outside the edited file: no line to change
        return None
    else:
        kind = wrong = None
        for pattern, k in _WRONG:
            if (w := pattern.match(error)) is not None:
                kind, wrong = k, w.group(1)
                break
        if wrong is None or not 1 <= frame.line <= len(lines):
            return None
        imp = _IMPORT_FROM.match(error)
        if kind == "keyword" and hint is None:
            fixed = keyword_fix(code, wrong, frame.line)
            if fixed is None:
                return None
            (new, what, sure), rule = fixed, "keyword"
        elif (imp is not None and hint is None and not (folder is not None and _module_names(imp.group(1), folder))
              and (moved := moved_import(code, wrong, imp.group(1), frame.line)) is not None):
            (new, what), rule = moved, "moved_import"  # a library's name under the wrong module of that library
        else:
            right = hint.group(1) if hint else _computed(error, kind, wrong, code, frame.line, folder)
            if (right is None and kind == "name" and frame.function == "<module>"
                    and (given := parameter_value(code, wrong, frame.line)) is not None):
                (new, what), sure, rule = given, False, "parameter_value"
            elif right is None or right == wrong:
                return None
            else:
                new, what, sure = _renamed(lines, frame.line, kind, wrong, right, hint is not None)
                rule = "interpreter" if hint else "closest_name"
                if new is None:
                    return None
    if new == code or check_compiles(new, code_file) is not None:
        return None
    return Suggestion(code=new, diff=unified_diff(code, new, code_file), what=what, sure=sure, rule=rule)


def _renamed(lines: list[str], at: int, kind: str, wrong: str, right: str, suggested: bool):
    """The code with `wrong` renamed `right` on line `at` (1-based), what was done, and whether that is
    surely the fix; (None, "", False) when the name is not on that line (e.g. built by getattr)."""
    fixed, n = _pattern(kind, wrong).subn(lambda h: h.group(1) + right + (h.group(2) if kind == "keyword" else ""),
                                          lines[at - 1])
    if n == 0:
        return None, "", False
    what = f"line {at}: {wrong} -> {right} (" + (
        "the interpreter's suggestion)" if suggested else "the closest name the code defines)")
    return "".join(lines[:at - 1] + [fixed] + lines[at:]), what, suggested and _plain_typo(wrong, right)
