"""The functions of the edited file that something outside it calls: the task's evaluator or
harness (topic.yaml `entry_points`), or another Python file of the topic folder that imports
them. Nothing in the edited file calls them, so without them every edit inside one would look
like code that never runs (assets/patched_code/dead_code.py), and an edit that renames one, or
changes its required parameters, breaks a caller the loop cannot see until a run fails.

Pure functions over source text: `entry_names` (the declared ones of one file), `imported_names`
(the ones other sources take from it), `live_roots` (what dead-code analysis must keep), and
`broken_interface` (the reason an edit breaks one, or None). `topic_roots` is the one that
reads the topic folder."""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

# every top-level public name is a root: the file is a library run by something else
ALL_PUBLIC = "*"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MAX_SOURCES = 200        # other Python files of a topic folder read for imports of the edited file
_MAX_SOURCE_BYTES = 1 << 20
_MAX_ENTRIES = 20000      # folder entries looked at while finding them


def module_names(code_file: str) -> set[str]:
    """The names an import of `code_file` may use: the dotted path ('pkg.strategy') and the bare
    stem ('strategy', when the caller puts its folder on sys.path)."""
    p = Path(code_file).with_suffix("")
    return {".".join(p.parts), p.name}


def entry_names(entry_points: list[str] | tuple[str, ...], code_file: str) -> list[str]:
    """The names ('fn' or 'Class.method') that `entry_points` items ('path.py:name') declare for
    `code_file`."""
    out = []
    for e in entry_points:
        path, _, name = e.rpartition(":")
        if Path(path) == Path(code_file) and name:
            out.append(name)
    return out


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level functions and classes by name, and methods as 'Class.method'."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (*_FUNCS, ast.ClassDef)):
            out[node.name] = node
            if isinstance(node, ast.ClassDef):
                for m in node.body:
                    if isinstance(m, _FUNCS):
                        out[f"{node.name}.{m.name}"] = m
    return out


def _names_module(text: str, code_file: str, modules: set[str]) -> bool:
    """Whether a string of another source names the edited file (its path or module name)."""
    t = text.strip()
    return t in modules or t.endswith(Path(code_file).name) and len(t) < 300


def _module_of(n: ast.ImportFrom) -> str:
    return n.module or ""


def imported_names(code_file: str, code: str, sources: dict[str, str]) -> list[str]:
    """The definitions of `code` (the edited file) that other sources (path -> text) take from it:
    `from strategy import next_move`, `strategy.next_move(...)` after `import strategy` (or a module
    bound by importlib.import_module / __import__ of its name), getattr(module, "next_move"), or,
    in a source that imports nothing of it but names the file (a path it loads in a child process),
    a public top-level name it spells out anywhere, strings included; a method counts when its class is taken and
    the source reads an attribute of that name (`agent.act(obs)`). Sources that do not parse are
    skipped."""
    try:
        defs = _definitions(ast.parse(code))
    except SyntaxError:
        return []
    modules = module_names(code_file)
    found: set[str] = set()
    for path, text in sources.items():
        if Path(path) == Path(code_file):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        taken: set[str] = set()
        aliases: set[str] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                mod = _module_of(n)
                if mod in modules or (n.level and mod.split(".")[-1] in modules):
                    taken.update(a.name for a in n.names)
                else:  # `from pkg import strategy`, `from . import strategy`
                    aliases.update(a.asname or a.name for a in n.names if a.name in modules)
            elif isinstance(n, ast.Import):
                aliases.update(a.asname or a.name.split(".")[0] for a in n.names if a.name in modules)
            elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                    isinstance(a, ast.Constant) and a.value in modules for a in n.value.args):
                aliases.update(t.id for t in n.targets if isinstance(t, ast.Name))  # importlib, __import__
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
                taken.add(n.attr)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr") \
                    and len(n.args) >= 2 and isinstance(n.args[0], ast.Name) and n.args[0].id in aliases \
                    and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
                taken.add(n.args[1].value)
        by_path = not aliases and not taken and any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and _names_module(n.value, code_file, modules)
            for n in ast.walk(tree))
        if by_path:  # loads the file by its path (a child process, importlib in a string): the names it spells out
            taken |= {k for k in defs if "." not in k and not k.startswith("_")
                      and re.search(rf"(?<!\w){re.escape(k)}\b", text)}
        if "*" in taken:  # `from strategy import *`: every public name
            taken |= {k for k in defs if "." not in k and not k.startswith("_")}
        for name in defs:
            top, _, method = name.partition(".")
            if (name in taken) if not method else (top in taken and method in attrs):
                found.add(name)
    return sorted(found)


def runs_directly(code_file: str, command: list[str] | None) -> bool:
    """Whether the run command starts the edited file itself (`python experiment.py`, `python -m
    experiment`); None (unknown) counts as yes."""
    if command is None:
        return True
    modules = module_names(code_file)
    return any(Path(w) == Path(code_file) or Path(w).name == Path(code_file).name or w in modules
               for w in command)


def live_roots(declared: list[str], imported: list[str], code_file: str, command: list[str] | None) -> list[str]:
    """What dead-code analysis keeps as called from outside the file: the declared and imported
    entry points; when there are none and the run command does not start the file itself (an
    evaluator imports it), every public top-level definition (ALL_PUBLIC)."""
    roots = list(dict.fromkeys([*declared, *imported]))
    if not roots and not runs_directly(code_file, command):
        return [ALL_PUBLIC]
    return roots


@dataclass(frozen=True)
class Signature:
    """What a caller relies on: the positional parameters it must pass, in order, and the
    keyword-only ones it must pass; whether more positionals or keywords are taken."""
    required: tuple[str, ...]
    positional: tuple[str, ...]      # every positional parameter, optional ones included
    required_keywords: frozenset[str]
    keywords: frozenset[str]         # every keyword-only parameter
    varargs: bool
    varkw: bool

    def shown(self) -> str:
        parts = list(self.required)
        opt = self.positional[len(self.required):]
        parts += [f"{p}=..." for p in opt]
        if self.varargs:
            parts.append("*args")
        parts += sorted(self.required_keywords)
        if self.varkw:
            parts.append("**kwargs")
        return ", ".join(parts)


def _signature(node: ast.AST, method: bool) -> Signature | None:
    """The signature of a function (or of a class: its __init__), self/cls dropped for methods;
    None for what is not a function (an assigned callable)."""
    if isinstance(node, ast.ClassDef):
        init = next((m for m in node.body if isinstance(m, _FUNCS) and m.name == "__init__"), None)
        return _signature(init, True) if init is not None else Signature((), (), frozenset(), frozenset(), False, False)
    if not isinstance(node, _FUNCS):
        return None
    a = node.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if method and not static and positional:
        positional = positional[1:]
    n_required = len(positional) - len(a.defaults)
    required_kw = frozenset(k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is None)
    return Signature(tuple(positional[:max(n_required, 0)]), tuple(positional), required_kw,
                     frozenset(k.arg for k in a.kwonlyargs), a.vararg is not None, a.kwarg is not None)


def _incompatible(old: Signature, new: Signature) -> str | None:
    """Why a call that fits `old` (its required parameters, by position or by keyword) may not fit
    `new`, or None. A parameter renamed in place is kept: callers pass them by position."""
    k = len(old.required)
    head = new.positional[:k]
    if len(head) < k and not new.varargs:
        gone = [p for p in old.required if p not in new.positional] or list(old.required[len(head):])
        return "no longer takes " + ", ".join(gone)
    if sorted(head) == sorted(old.required) and head != old.required:
        return f"takes its parameters in another order ({', '.join(head)} instead of {', '.join(old.required)})"
    if len(new.required) > k:
        return "adds the required parameter(s) " + ", ".join(new.required[k:])
    if added := new.required_keywords - old.required_keywords:
        return "adds the required keyword(s) " + ", ".join(sorted(added))
    dropped = old.required_keywords - new.keywords - set(new.positional)
    if dropped and not new.varkw:
        return "no longer takes the keyword(s) " + ", ".join(sorted(dropped))
    return None


def broken_interface(names: list[str], before: str, after: str) -> str | None:
    """The reason the edit `before` -> `after` breaks an entry point ('fn' or 'Class.method') that
    `before` defines: it is gone (removed or renamed: the name another definition took is said
    when one appeared), or a call that fits its old signature would not fit the new one (required
    parameters added, removed or reordered). None when every one is kept, or either side does not
    parse (the compile check says why)."""
    try:
        old_defs, new_defs = _definitions(ast.parse(before)), _definitions(ast.parse(after))
        new_tree = ast.parse(after)
    except SyntaxError:
        return None
    assigned = {t.id for n in new_tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    assigned |= {a.asname or a.name for n in new_tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                 for a in n.names}
    problems = []
    for name in dict.fromkeys(names):
        if name not in old_defs:
            continue  # not defined as a function or class before (an assigned name): nothing to compare
        top, _, method = name.partition(".")
        if name not in new_defs:
            if not method and top in assigned:
                continue  # bound another way (an alias, an import): the caller still finds it
            appeared = [n for n in new_defs if n not in old_defs and n.count(".") == name.count(".")
                        and (not method or n.startswith(top + "."))]
            how = f" (renamed to {appeared[0]}?)" if len(appeared) == 1 else ""
            problems.append(f"`{name}` is gone{how}")
            continue
        old_sig = _signature(old_defs[name], bool(method))
        new_sig = _signature(new_defs[name], bool(method))
        if old_sig is None or new_sig is None:
            continue
        if why := _incompatible(old_sig, new_sig):
            problems.append(f"`{name}({old_sig.shown()})` {why}")
    if not problems:
        return None
    return ("the edit breaks what the task's evaluator calls: " + "; ".join(problems)
            + ": keep each entry point's name and its parameters, and change what it does inside")


def python_sources(folder: Path, skip: str) -> dict[str, str]:
    """The topic folder's other Python files (path relative to the folder -> text), bounded: at
    most _MAX_SOURCES files of up to _MAX_SOURCE_BYTES, _MAX_ENTRIES entries looked at (a data
    folder of many files is not walked to its end); hidden folders and links are skipped."""
    out: dict[str, str] = {}
    seen = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        seen += len(dirs) + len(files)
        for name in sorted(files):
            p = Path(root) / name
            rel = p.relative_to(folder).as_posix()
            if not name.endswith(".py") or rel == skip or p.is_symlink() or len(out) >= _MAX_SOURCES:
                continue
            try:
                if p.stat().st_size <= _MAX_SOURCE_BYTES:
                    out[rel] = p.read_text(errors="replace")
            except OSError:
                continue
        if seen > _MAX_ENTRIES or len(out) >= _MAX_SOURCES:
            break
    return out


def topic_roots(folder: Path, code_file: str, code: str, entry_points: list[str]) -> tuple[list[str], list[str]]:
    """(declared and imported entry points of `code`, as names) for a topic folder: the one function
    here that reads files (the folder's other Python files, `python_sources`)."""
    declared = entry_names(entry_points, code_file)
    imported = imported_names(code_file, code, python_sources(Path(folder), code_file))
    return declared, imported
