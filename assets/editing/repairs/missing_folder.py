"""A file written into a folder that does not exist ("No such file or directory: 'out/x.json'"
raised by the call that writes it) gets the folder made first; no lookup."""
from __future__ import annotations

import ast
import os
import re

from assets.editing.code_reading import import_bindings, with_import
from assets.editing.repairs.base import Candidate, Failure, Rule

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
    if "os" not in import_bindings(tree):
        new = with_import(new.splitlines(keepends=True), "import os")
    return new, f"line {stmt.lineno}: made the folder of {m.group(1)!r} before writing it (os.makedirs)"


def apply(f: Failure) -> Candidate | None:
    if f.frame is None:
        return None
    found = missing_folder(f.code, f.error, f.frame.line)
    return Candidate(*found) if found is not None else None


RULE = Rule("missing_folder", "a file written into a missing folder: the folder is made just before", apply)
