"""Mechanical repair candidates: the interpreter's own suggestion, applied without the LLM.

Python names the fix of many one-word mistakes itself: "NameError: name 'factr' is not
defined. Did you mean: 'factor'?", "AttributeError: 'Net' object has no attribute 'forwrd'.
Did you mean: 'forward'?", "Did you forget to import 'math'?" (3.12+). `suggested_fix` turns
such a message into an edit of the failing line (the innermost frame in the edited file) and
nothing else; when the message names no fix, or the wrong name is not on that line, there is
no candidate. Python 3.11 suggests nothing for "cannot import name"; for a module that is a
file of the script's folder the closest name it defines is suggested here (read with `ast`,
never imported)."""
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
        right = hint.group(1) if (hint := _DID_YOU_MEAN.search(error)) else None
        if right is None and (imp := _IMPORT_FROM.match(error)) is not None and folder is not None:
            close = difflib.get_close_matches(wrong, _module_names(imp.group(1), folder), n=1, cutoff=0.6)
            right = close[0] if close else None
        if right is None or right == wrong or not 1 <= frame.line <= len(lines):
            return None
        line = lines[frame.line - 1]
        fixed, n = _pattern(kind, wrong).subn(lambda h: h.group(1) + right + (h.group(2) if kind == "keyword" else ""),
                                              line)
        if n == 0:  # the name is not on the failing line (e.g. built by getattr): nothing to place
            return None
        new = "".join(lines[:frame.line - 1] + [fixed] + lines[frame.line:])
        what = f"line {frame.line}: {wrong} -> {right} (the interpreter's suggestion)"
    if new == code or check_compiles(new, code_file) is not None:
        return None
    return Suggestion(code=new, diff=unified_diff(code, new, code_file), what=what)
