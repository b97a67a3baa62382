"""The library calls of a script, read statically and checked against the installed libraries'
signatures (looked up in the isolated interpreter, assets/editing/lookup.py):

- `check_calls`, before a run: a keyword argument the callee does not take is renamed to its
  closest parameter, or dropped when none is close (`RandomForestRegressor(alpha=1.0)`,
  `train_test_split(x, y, test_ratio=0.2)` fail at once otherwise), and a name imported from a
  module of a library that does not export it moves to the module that does;
- `keyword_fix`, after "got an unexpected keyword argument" (the same edit for one keyword);
- `api_notes`: one line per library callable the code calls (signature and the first line of
  its docstring), for the repair prompt.

Only callees named statically are read: an imported name, or an attribute path from an imported
module or class (`nn.Linear`, `torch.optim.Adam`), whose name the script binds nowhere else.
Calls that pass `**kwargs`, and callees that accept `**kwargs`, are left alone; a lookup that
fails changes nothing."""
from __future__ import annotations

import ast
from pathlib import Path

from assets.editing.code_reading import callee, closest, import_bindings, keyword_span
from assets.editing.imports import moved_import
from assets.editing.lookup import checked, parameters

# how close (difflib ratio) a parameter must be to take a wrong keyword's place before any run: a
# typo's (n_estimator, random_sate, alpah), not a parameter that shares a word (alpha is not
# RandomForestRegressor's ccp_alpha, whose 1.0 prunes every tree); below it the keyword is dropped
BEFORE_RUN_CUTOFF = 0.8
MAX_CALLS = 200  # distinct callees (and imported names) looked up for one script
API_LINES = 12  # lines of api_notes by default
API_LINE_CHARS = 300


def _bindings_of(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    return []


def static_bindings(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """`import_bindings` less the names the script also binds otherwise (an assignment, a def, a
    parameter, a second import of something else): what such a name stands for at a call
    depends on the path the run takes."""
    imports = import_bindings(tree)
    seen: dict[str, set[tuple[str, str]]] = {}
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                seen.setdefault(local, set()).add((a.name if a.asname else a.name.split(".")[0], ""))
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if node.level or not node.module or a.name == "*":
                    other.add(a.asname or a.name)
                else:
                    seen.setdefault(a.asname or a.name, set()).add((node.module, a.name))
        other.update(_bindings_of(node))
    return {n: b for n, b in imports.items() if n not in other and len(seen.get(n, ())) == 1}


def _local(module: str, folder: Path | None) -> bool:
    """Is the module's top package a file or folder of the script's own folder?"""
    top = module.split(".")[0]
    return folder is not None and ((folder / f"{top}.py").exists() or (folder / top).is_dir())


def library_calls(tree: ast.Module, folder: Path | None = None) -> list[tuple[ast.Call, tuple[str, str]]]:
    """Each call of the script whose callee is named statically, with (module, attribute path)."""
    bindings = {n: b for n, b in static_bindings(tree).items() if not _local(b[0], folder)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (found := callee(node.func, bindings)) is not None:
            out.append((node, found))
    return sorted(out, key=lambda c: (c[0].lineno, c[0].col_offset))


def _key(found: tuple[str, str]) -> str:
    return f"{found[0]}:{found[1]}"


def _signature(answer: dict, found: tuple[str, str]) -> dict | None:
    sig = answer["calls"].get(_key(found))
    ok = isinstance(sig, dict) and isinstance(sig.get("params"), list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in sig["params"])
    return sig if ok else None


def _keyword_edits(call: ast.Call, sig: dict) -> list[tuple[ast.keyword, str | None]]:
    """The keywords of `call` its callee does not take, each with the parameter it becomes
    (None: dropped). Parameters the call already fills, by keyword or by position, are not
    offered; a callee that takes **kwargs, or a call that passes **kwargs, gets no edit."""
    params = [(str(name), str(kind)) for name, kind in sig["params"]]
    if any(kind == "var_keyword" for _, kind in params) or any(k.arg is None for k in call.keywords):
        return []
    named = [n for n, kind in params if kind in ("positional", "keyword_only")]
    positional = [n for n, kind in params if kind in ("positional_only", "positional")]
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    filled = set(positional) if starred else set(positional[:len(call.args)])
    taken = {k.arg for k in call.keywords} | filled
    edits: list[tuple[ast.keyword, str | None]] = []
    for kw in call.keywords:
        if kw.arg is None or kw.arg in {n for n, _ in params}:
            continue
        right = closest(kw.arg, [n for n in named if n not in taken], BEFORE_RUN_CUTOFF)
        if right is not None:
            taken.add(right)
        edits.append((kw, right))
    return edits


def _said(edits: dict[tuple[str, str | None, str], list[int]]) -> list[str]:
    notes = []
    for (wrong, right, name), lines in edits.items():
        where = ", ".join(str(n) for n in dict.fromkeys(lines))
        notes.append(f"line {where}: keyword {wrong}= -> {right}= (a parameter of {name})" if right is not None
                     else f"line {where}: dropped the argument {wrong}= ({name} takes no such keyword)")
    return notes


def check_calls(code: str, folder: Path | None = None) -> tuple[str, list[str]]:
    """The code with its library calls' wrong keywords renamed or dropped and its names imported
    from the wrong module of a library moved, and one note per change; one isolated lookup for
    the whole script. `folder`: the script's own folder, whose modules are never looked up (an
    installed package of the same name is not what the script imports). Unchanged when the code
    does not parse, the lookup fails or the result would not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    imports = list(dict.fromkeys(
        (n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level
        and n.module != "__future__" and not _local(n.module, folder) for a in n.names if a.name != "*"))[:MAX_CALLS]
    calls = [(c, f) for c, f in library_calls(tree, folder) if c.keywords]
    callees = list(dict.fromkeys(f for _, f in calls))[:MAX_CALLS]
    if not imports and not callees:
        return code, []
    answer = checked(imports, callees)
    if answer is None:
        return code, []
    lines = code.splitlines(keepends=True)
    spans: list[tuple[int, int, str]] = []
    said: dict[tuple[str, str | None, str], list[int]] = {}
    for call, found in calls:
        sig = _signature(answer, found) if found in callees else None
        for kw, right in _keyword_edits(call, sig) if sig is not None else []:
            spans.append(keyword_span(code, lines, kw, right))
            said.setdefault((kw.arg or "", right, ".".join(found)), []).append(kw.lineno)
    new = code
    for start, end, text in sorted(spans, reverse=True):
        new = new[:start] + text + new[end:]
    notes = _said(said)
    for key, found in answer["missing"].items():
        module, _, name = str(key).partition(":")
        modules = [m for m in found if isinstance(m, str)] if isinstance(found, list) else []
        if not modules:
            continue
        try:
            now = ast.parse(new)
        except SyntaxError:
            return code, []
        at = [n.lineno for n in ast.walk(now) if isinstance(n, ast.ImportFrom) and n.module == module
              and not n.level and any(a.name == name for a in n.names)]
        for line in sorted(at, reverse=True):
            if (moved := moved_import(new, name, module, line, modules)) is not None:
                new, what = moved
                notes.append(what)
    try:
        ast.parse(new)
    except SyntaxError:
        return code, []
    return new, notes


def keyword_call(tree: ast.Module, wrong: str, line: int) -> ast.Call | None:
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
    call = keyword_call(tree, wrong, line)
    found = callee(call.func, import_bindings(tree)) if call is not None else None
    params = parameters(*found) if found else None
    return (".".join(found), params) if found and params is not None else None


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
    call = keyword_call(tree, wrong, line)
    if call is None:
        return None
    lines = code.splitlines(keepends=True)
    found = callee_parameters(code, wrong, line)
    taken = {k.arg for k in call.keywords}
    right = closest(wrong, [p for p in found[1] if p not in taken]) if found else None
    name = found[0] if found else ast.unparse(call.func)
    func = ast.unparse(call.func)
    same = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and ast.unparse(c.func) == func
            and any(k.arg == wrong for k in c.keywords) and not any(k.arg == right for k in c.keywords)]
    kws = sorted((next(k for k in c.keywords if k.arg == wrong) for c in same), key=lambda k: (k.lineno, k.col_offset))
    new = code
    for start, end, text in sorted((keyword_span(code, lines, k, right) for k in kws), reverse=True):
        new = new[:start] + text + new[end:]
    where = ", ".join(str(k.lineno) for k in kws)
    if right is not None:
        return new, f"line {where}: keyword {wrong}= -> {right}= (a parameter of {name})", True
    return new, f"line {where}: dropped the argument {wrong}= ({name} takes no such keyword)", False


def api_notes(code: str, limit: int = API_LINES) -> str:
    """For the library callables the code calls (named statically, in the order of their first
    call, at most `limit`): one line each, the qualified name with its signature and the first
    line of its docstring (both cut short), read in the isolated interpreter. Empty when the
    code calls none, does not parse, or the lookup fails."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    callees = list(dict.fromkeys(f for _, f in library_calls(tree)))[:MAX_CALLS]
    answer = checked([], callees) if callees else None
    if answer is None:
        return ""
    out: list[str] = []
    for found in callees:
        sig = _signature(answer, found)
        if sig is None:
            continue
        doc = str(sig.get("doc") or "").strip()
        line = f"{'.'.join(found)}{sig.get('text', '(...)')}" + (f": {doc}" if doc else "")
        out.append(line if len(line) <= API_LINE_CHARS else line[:API_LINE_CHARS - 3] + "...")
        if len(out) >= limit:
            break
    return "\n".join(out)
