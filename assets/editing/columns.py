"""Columns an edit reads that the data does not have, caught before a run is spent on them.

A small model that has not looked at the data writes `df["Feature1"]`. The prompts show the data
(assets/shared/data_profile.py), and this check holds an edit to it: when the topic's folder has
tables with named columns, a column the edited code reads from a table must be one of them, one the
code creates itself, or one the code before the edit already named. An edit that reads another is
refused with the real columns, so the model's next answer can use them.

What counts as a table: a name bound to a `read_csv`-like call or a `DataFrame(...)`, a name bound
to an expression over a table (`X = df.drop(columns=[...])`), and a name the code already indexes
with one of the data's columns. What counts as reading a column: a string (or a list of strings)
indexing a table (`df["a"]`, `df[["a", "b"]]`, `df.loc[:, "a"]`) and the column keywords of a
table's methods and of pandas' functions (`columns=`, `subset=`, `on=`, `by=`, ...). Only what the
edit brings in is judged: a string the code before the edit already held is never refused.

Pure: code and column names in, names out.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

# calls whose result is a table
TABLE_MAKERS = {"read_csv", "read_table", "read_parquet", "read_json", "read_excel", "read_feather", "read_pickle",
                "DataFrame", "read_fwf", "read_sql"}
# keywords whose strings name columns, on a table's methods and on pandas' functions
COLUMN_KEYWORDS = {"columns", "usecols", "subset", "on", "left_on", "right_on", "by", "id_vars", "value_vars",
                   "index_col"}
# accessors between a table and its index: df.loc[...], df.at[...]
ACCESSORS = {"loc", "at"}
PANDAS = {"pd", "pandas"}
SHOWN = 30  # real columns named in a refusal


def data_columns(folder: Path, exclude: Iterable[str] = ()) -> set[str]:
    """The column names of the tables among a folder's data files (those the data profile reads),
    `exclude` (the scorer's hidden files, the code file) left out."""
    from assets.shared.data_profile import data_files, file_profile

    folder = Path(folder)
    if not folder.is_dir():
        return set()
    files, _ = data_files(folder, exclude)
    seen: dict[str, list[str]] = {}  # file -> columns (a table with an earlier one's columns is not filed again)
    for path in files:
        file_profile(path, path.relative_to(folder).as_posix(), seen)
    return {str(n) for cols in seen.values() for n in cols if str(n).strip()}


def _root(node: ast.AST) -> str | None:
    """The name an expression starts from: df for df, df.loc, df["a"], df.loc[...]."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _strings(node: ast.AST | None) -> list[str]:
    """The string constants of an index or a keyword's value: "a", ["a", "b"], ("a", "b"), and the
    column part of a .loc index (`:, "a"`)."""
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _made_tables(tree: ast.AST) -> set[str]:
    """Names bound to a table maker's result or to an expression over a table (to a fixed point)."""
    assigns = [(t, n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets]
    assigns += [(n.target, n.value) for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and n.value is not None]
    tables: set[str] = set()
    for _ in range(8):
        grew = False
        for target, value in assigns:
            made = any(isinstance(c, ast.Call) and _callee(c) in TABLE_MAKERS for c in ast.walk(value))
            over = any(isinstance(c, ast.Name) and c.id in tables for c in ast.walk(value))
            for t in ast.walk(target):
                if isinstance(t, ast.Name) and (made or over) and t.id not in tables:
                    tables.add(t.id)
                    grew = True
        if not grew:
            break
    return tables


def _column_reads(tree: ast.AST) -> list[tuple[str | None, list[str]]]:
    """(the table's name or None for a pandas function, the strings read as its columns) per place."""
    out: list[tuple[str | None, list[str]]] = []
    for n in sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Subscript, ast.Call))),
                    key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
            index = n.slice
            if isinstance(n.value, ast.Attribute) and n.value.attr in ACCESSORS:
                index = index.elts[-1] if isinstance(index, ast.Tuple) and len(index.elts) > 1 else None
            elif isinstance(n.value, ast.Attribute) and n.value.attr == "iloc":
                continue
            if strings := _strings(index):
                out.append((_root(n.value), strings))
        elif isinstance(n, ast.Call):
            strings = [s for k in n.keywords if k.arg in COLUMN_KEYWORDS for s in _strings(k.value)]
            if not strings:
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in PANDAS:
                out.append((None, strings))
            elif isinstance(f, ast.Attribute):
                out.append((_root(f.value), strings))
    return out


def _created(tree: ast.AST) -> set[str]:
    """Strings the code makes into columns or keys: assigned by index (df["new"] = ...), dictionary
    keys and values (rename maps), `.assign(new=...)` and `insert(i, "new", ...)`."""
    made: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            made.update(_strings(n.slice))
        elif isinstance(n, ast.Dict):
            made.update(s for part in (*n.keys, *n.values) if part is not None for s in _strings(part))
        elif isinstance(n, ast.Call) and _callee(n) == "assign":
            made.update(k.arg for k in n.keywords if k.arg)
        elif isinstance(n, ast.Call) and _callee(n) == "insert" and len(n.args) >= 2:
            made.update(_strings(n.args[1]))
    return made


def _all_strings(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def invented_columns(before: str, after: str, columns: Iterable[str]) -> list[str]:
    """The columns the code `after` reads from a table that the data (`columns`) does not have, that
    the code does not create and that `before` (the code before the edit) never named, in the order
    they appear; [] when `columns` is empty or `after` does not parse."""
    known = set(columns)
    if not known:
        return []
    try:
        tree = ast.parse(after)
    except SyntaxError:
        return []
    reads = _column_reads(tree)
    tables = _made_tables(tree) | {t for t, strings in reads if t and any(s in known for s in strings)}
    allowed = known | _created(tree) | _all_strings(before)
    out: list[str] = []
    for table, strings in reads:
        if table is not None and table not in tables:
            continue
        for s in strings:
            derived = any(s.startswith(f"{c}_") for c in known)  # one-hot columns: colour_pale of colour
            if s not in allowed and not derived and s not in out:
                out.append(s)
    return out


def column_refusal(invented: list[str], columns: Iterable[str]) -> str:
    """The reason an edit reading `invented` columns is refused, with the data's columns."""
    real = sorted(columns)
    shown = ", ".join(real[:SHOWN]) + (f", ... ({len(real) - SHOWN} more)" if len(real) > SHOWN else "")
    return (f"the code reads column{'s' if len(invented) > 1 else ''} "
            f"{', '.join(repr(c) for c in invented)} that the data does not have (its columns: {shown}): "
            "use only these columns, or create a new column before reading it")
