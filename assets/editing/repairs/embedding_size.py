"""An embedding table too small for the token ids it is given ("IndexError: index out of range in
self", raised in the embedding lookup): the embedding the failing line calls, found where it is
built (`self.emb = nn.Embedding(VOCAB, EMB)`), gets as many rows as the largest id the values at
the crash show + 1 (`VOCAB` -> `VOCAB + 1` when VOCAB is that id). A guess (the ids could as
well be the thing to change), but an early one: it only makes a count agree with the data."""
from __future__ import annotations

import ast

from assets.editing.repairs.base import (
    INT_RANGE,
    Candidate,
    Failure,
    Rule,
    calls_on_line,
    frame_values,
    int_literal,
    last_value,
    layers_called,
    replace_on_line,
    torch_class,
)

SIGN = "index out of range in self"


def _is_embedding(call: ast.Call) -> bool:
    return torch_class(call, "Embedding", "EmbeddingBag")


def _value(tree: ast.Module, node: ast.expr, values: dict[str, str]) -> int | None:
    """The value of a size given as a constant, a name assigned a constant in a line, or a name
    whose value the values at the crash show (`VOCAB, EMB = 20, 16`)."""
    if (v := int_literal(node)) is not None:
        return v
    if not isinstance(node, ast.Name):
        return None
    if (assigned := last_value(tree, node.id)) is not None and (v := int_literal(assigned)) is not None:
        return v
    shown = values.get(node.id, "")
    return int(shown) if shown.lstrip("-").isdigit() else None


def grown_table(code: str, line: int, values: dict[str, str]) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    tables = layers_called(tree, line, _is_embedding)
    if len(tables) != 1:
        return None
    # the ids: the largest integer value among the arguments of the calls on the failing line
    tops = [int(m["max"]) for c in calls_on_line(tree, line) for a in c.args
            if (m := INT_RANGE.search(values.get(ast.unparse(a), ""))) is not None]
    rows = tables[0].args[0] if tables[0].args else next((k.value for k in tables[0].keywords
                                                          if k.arg == "num_embeddings"), None)
    if not tops or rows is None or rows.lineno != rows.end_lineno or rows.end_col_offset is None:
        return None
    needed, now = max(tops) + 1, _value(tree, rows, values)
    if now is None or now >= needed:
        return None
    new = str(needed) if isinstance(rows, ast.Constant) else f"{ast.unparse(rows)} + {needed - now}"
    what = (f"line {rows.lineno}: nn.Embedding rows {ast.unparse(rows)} -> {new} (the ids reach {needed - 1}; "
            f"a table needs the largest id + 1 rows)")
    return replace_on_line(code, rows, new), what


def apply(f: Failure) -> Candidate | None:
    if SIGN not in f.error or f.frame is None:
        return None
    found = grown_table(f.code, f.frame.line, frame_values(f.failed.error_notes))
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("embedding_size", "an embedding table smaller than its ids: as many rows as the largest id + 1 "
            "(a guess)", apply)
