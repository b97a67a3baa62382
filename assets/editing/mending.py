"""What every draft and every LLM repair gets before it runs (`mend`): misplaced top-level
statements moved below what they read, the imports the code left out added, and its library
calls checked against the installed signatures (assets/editing/calls.py). Each step changes
nothing it cannot read statically; each change comes back as a note."""
from __future__ import annotations

import ast
import builtins
from pathlib import Path

from assets.editing.calls import check_calls
from assets.editing.code_reading import bound_names, dynamic
from assets.editing.imports import complete_imports


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
    return set(bound_names([stmt]))


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
    if dynamic(tree):
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


def mend(code: str, folder: Path | None = None) -> tuple[str, list[str]]:
    """What every draft and every LLM repair gets before it runs: misplaced top-level statements
    moved below what they read (`reorder_top_level`), then missing library imports added
    (`complete_imports`), then wrong keywords of library calls renamed or dropped and names
    imported from the wrong module of a library moved (`check_calls`; `folder`: the script's own
    folder, whose modules are not looked up). Returns the code and one note per change."""
    code, notes = reorder_top_level(code)
    code, added = complete_imports(code)
    code, checked = check_calls(code, folder)
    return code, notes + [f"added `{a}`" for a in added] + checked
