"""A recurrent layer that reads a (batch, time, features) input as (time, batch, features): built
without `batch_first=True`, its outputs come back with the sequence length where the batch size
should be, and the run fails on a batch mismatch further on ("Expected input batch_size (16) to
match target batch_size (64)", "The size of tensor a (16) must match the size of tensor b (64)").
When the code builds an nn.RNN, nn.GRU or nn.LSTM without batch_first and transposes nothing into
time-first order, each such layer gets `batch_first=True`. A guess (early: it only changes which
dimension is the batch)."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, torch_class

MISMATCH = (re.compile(r"Expected input batch_size \((?P<a>\d+)\) to match target batch_size \((?P<b>\d+)\)"),
            re.compile(r"The size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\)"),
            re.compile(r"Found input variables with inconsistent numbers of samples: \[(?P<a>\d+), (?P<b>\d+)\]"))
RECURRENT = ("RNN", "GRU", "LSTM")
TIME_FIRST = (".transpose(0, 1)", ".permute(1, 0", ".transpose(1, 0)", ".t()")


def batch_first(code: str) -> tuple[str, str] | None:
    """The code with every recurrent layer built without batch_first given batch_first=True; None
    when there is none, or when the code itself puts time first (it means the default order)."""
    if any(t in code for t in TIME_FIRST):
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    layers = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and torch_class(c, *RECURRENT)
              and not any(k.arg == "batch_first" for k in c.keywords) and c.end_col_offset is not None]
    if not layers:
        return None
    lines = code.splitlines(keepends=True)
    for call in sorted(layers, key=lambda c: (c.end_lineno, c.end_col_offset), reverse=True):
        raw = lines[call.end_lineno - 1].encode()
        close = call.end_col_offset - 1  # the closing parenthesis
        sep = ", " if call.args or call.keywords else ""
        lines[call.end_lineno - 1] = (raw[:close] + f"{sep}batch_first=True".encode() + raw[close:]).decode()
    where = ", ".join(f"line {c.lineno}" for c in sorted(layers, key=lambda c: c.lineno))
    return "".join(lines), (f"{where}: batch_first=True (the inputs are batch-first; without it the layer reads "
                            "the batch as time)")


def apply(f: Failure) -> Candidate | None:
    m = next((m for p in MISMATCH if (m := p.search(f.error)) is not None), None)
    if m is None or m["a"] == m["b"]:
        return None
    found = batch_first(f.code)
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("batch_first", "a batch mismatch in code with recurrent layers built time-first: batch_first=True "
            "(a guess)", apply)
