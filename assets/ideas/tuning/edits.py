"""Moves as code edits: `apply_move` sets a knob (and its paired knob) to the move's value in
the code, byte-exact at the literal's offsets (a swap renames every call and adds its import; an
unwritten library default is written into every call), and checks that the knob then holds the
new value; `knob_changes` reads two versions of the code back as the moves between them."""
from __future__ import annotations

import ast
import re

from assets.ideas.tuning.knobs import SWAPS, Knob, as_literal, find_knobs, same_value, source_lines
from schemas.records import TuningMove


def apply_move(code: str, move: TuningMove) -> str:
    """`code` with the move's knob set to its new value, then its paired knob's (a compensating pair).
    Raises ValueError when a knob is not in `code` at its old value (the code changed since the move
    was proposed)."""
    new = _apply_one(code, move)
    return _apply_one(new, move.paired) if move.paired is not None else new


def _apply_one(code: str, move: TuningMove) -> str:
    knob = next((k for k in find_knobs(code) if k.key == move.key), None)
    if knob is None or not same_value(knob.value, move.old):
        raise ValueError(f"the knob {move.key} is not in the code at {move.old_text}")
    lines = source_lines(code)
    if knob.kind == "swap":
        return _apply_swap(code, lines, knob, move)
    sites = knob.sites or ((knob.line, knob.col, knob.end_col),)
    commas = knob.commas or (False,) * len(sites)
    for (line, col, end), comma in sorted(zip(sites, commas), reverse=True):  # later sites first: offsets hold
        raw = lines[line - 1].encode()
        text = f"{', ' if comma else ''}{knob.name}={move.new_text}" if knob.implicit else move.new_text
        lines[line - 1] = (raw[:col] + text.encode() + raw[end:]).decode()
    new = "".join(lines)
    after = next((k for k in find_knobs(new) if k.key == move.key), None)
    if after is None or not same_value(after.value, move.new):
        raise ValueError(f"setting {move.key} to {move.new_text} did not take")
    return new


def _apply_swap(code: str, lines: list[str], knob: Knob, move: TuningMove) -> str:
    """Every call of the swap knob's member renamed to the new member; a name imported with
    `from M import name` gets `from M import new` on the line after that import."""
    for line, col, end in sorted(knob.sites, reverse=True):
        raw = lines[line - 1].encode()
        lines[line - 1] = (raw[:col] + move.new_text.encode() + raw[end:]).decode()
    if knob.module:
        tree = ast.parse(code)
        imp = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == knob.module
                   and any((a.asname or a.name) == knob.text for a in n.names))
        indent = re.match(r"[ \t]*", lines[imp.lineno - 1]).group(0)
        at = imp.end_lineno
        if at == len(lines) and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += "\n"
        lines.insert(at, f"{indent}from {knob.module} import {move.new_text}\n")
    new = "".join(lines)
    after = next((k for k in find_knobs(new) if k.key == move.key), None)
    if after is None or not same_value(after.value, move.new):
        raise ValueError(f"swapping {move.old_text} for {move.new_text} did not take")
    return new


def move_of(knob: Knob, direction: str, value: float | int) -> TuningMove:
    """The move setting `knob` to `value` (a swap: to its family's member number `value`)."""
    text = SWAPS[knob.key[:-2]][1][int(value)] if knob.kind == "swap" else as_literal(value, value)
    return TuningMove(key=knob.key, name=knob.name, kind=knob.kind, where=knob.where, function=knob.function,
                      direction=direction, old=knob.value, new=value, old_text=knob.text, new_text=text)


def knob_changes(old: str, new: str) -> list[TuningMove] | None:
    """The moves that turn `old` into `new` when the two differ only in knob values (and swaps): the
    program the moves make from `old` has the same syntax tree as `new`. None when anything else
    differs, or when `new` does not parse; [] for the same program."""
    try:
        target = ast.dump(ast.parse(new))
    except SyntaxError:
        return None
    after = {k.key: k for k in find_knobs(new)}
    out = [move_of(k, "up" if a.value > k.value else "down", a.value) for k in find_knobs(old)
           if (a := after.get(k.key)) is not None and a.kind == k.kind and not same_value(a.value, k.value)]
    code = old
    try:
        for m in out:
            code = _apply_one(code, m)
    except ValueError:
        return None
    return out if ast.dump(ast.parse(code)) == target else None
