"""What the mechanical repairs read from a script's text (`ast`, never imported or run): the
names it defines and binds, its imports and what each imported name stands for, the library
callee of a call, where an added import goes; and the few text edits they share (an import
line added, a keyword argument renamed or dropped)."""
from __future__ import annotations

import ast
import difflib
from pathlib import Path

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
CUTOFF = 0.7  # how close (difflib ratio) a defined name must be to be suggested where Python named none


def closest(wrong: str, names: list[str], cutoff: float = CUTOFF) -> str | None:
    """The name among `names` equal to `wrong` ignoring case, else the closest by difflib (ratio
    >= cutoff); None when nothing is close."""
    names = [n for n in dict.fromkeys(names) if n != wrong]
    same = [n for n in names if n.lower() == wrong.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(wrong, names, n=1, cutoff=cutoff)
    return close[0] if close else None


def module_names(module: str, folder: Path) -> list[str]:
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


def bound_names(nodes: list[ast.AST]) -> list[str]:
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


def defined_names(tree: ast.Module, line: int) -> list[str]:
    """Names visible at `line`: the module's top level and every function enclosing the line."""
    names = bound_names(list(tree.body))
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.lineno <= line <= (node.end_lineno or node.lineno)):
            names += bound_names([node.args, *node.body])
    return names


def class_members(tree: ast.Module, cls: str) -> list[str]:
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


def import_line(lines: list[str]) -> int:
    """Index where an added `import` goes: before the first top-level import that is not
    `from __future__`, else after the module docstring and __future__ imports."""
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return 0
    after = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            after = node.end_lineno or node.lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            return node.lineno - 1
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str) and node is tree.body[0]):
            after = node.end_lineno or node.lineno
        else:
            break
    return after


def with_import(lines: list[str], statement: str) -> str:
    """The code with `statement` (one or more import lines) added where imports go."""
    at = import_line(lines)
    return "".join(lines[:at] + [statement + "\n"] + lines[at:])


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


def import_bindings(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """What each imported name stands for: local name -> (module, attribute path in it)."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], "")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update({a.asname or a.name: (node.module, a.name) for a in node.names if a.name != "*"})
    return out


def callee(func: ast.expr, bindings: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
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


def offset(lines: list[str], lineno: int, col: int) -> int:
    """Index into the joined lines of an ast position (its column counts UTF-8 bytes)."""
    return sum(map(len, lines[:lineno - 1])) + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))


def keyword_span(code: str, lines: list[str], kw: ast.keyword, right: str | None) -> tuple[int, int, str]:
    """(start, end, replacement) in `code` that renames the keyword argument `kw` to `right`, or
    drops it with its comma when `right` is None."""
    start = offset(lines, kw.lineno, kw.col_offset)
    end = offset(lines, kw.end_lineno or kw.lineno, kw.end_col_offset or kw.col_offset)
    if right is not None:
        return start, start + len(kw.arg or ""), right
    after = len(code[end:]) - len(code[end:].lstrip())
    if code[end + after:end + after + 1] == ",":
        end = end + after + 1 + len(code[end + after + 1:]) - len(code[end + after + 1:].lstrip(" "))
    else:
        before = code[:start].rstrip()
        if before.endswith(","):
            start = len(before) - 1
    return start, end, ""


def dynamic(tree: ast.Module) -> bool:
    """Does the module star-import or define names at run time (exec, globals())? Then which
    names exist where cannot be read from the text."""
    return any((isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names))
               or (isinstance(n, ast.Name) and n.id in _DYNAMIC) for n in ast.walk(tree))


_DYNAMIC = {"exec", "globals", "__import__"}
