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
name must be close (difflib ratio >= 0.7, or equal ignoring case); otherwise no candidate."""
from __future__ import annotations

import ast
import difflib
import re
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
        at = _import_line(lines)
        new = "".join(lines[:at] + [f"import {forgot.group(1)}\n"] + lines[at:])
        what = f"added `import {forgot.group(1)}` (the interpreter's suggestion)"
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
