"""JSON that an experiment wrote (final_info.json, a scorer's printed line), parsed with bounds.

`json.loads` on such text can fail in ways its JSONDecodeError does not cover: an integer of
more digits than Python converts raises a plain ValueError, deep nesting a RecursionError, and
an integer too large for a float passes the parse and fails later where it meets float
arithmetic (OverflowError). `loads_bounded` refuses all of them up front, and any other
failure, with one exception type (`BadJSON`) whose message says why in plain words, so the
caller records a failed attempt instead of crashing the step."""
from __future__ import annotations

import json
import math
import re

MAX_DEPTH = 64           # arrays and objects inside each other; a metrics file needs two or three
MAX_NUMBER_DIGITS = 308  # digits of an integer: beyond them it is no finite float

# the characters that matter for nesting: an escape pair (its quote does not end a string), a
# quote, a bracket; one fixed-length token per match, so the scan is linear in the text
_TOKEN = re.compile(r'\\.|["\[\]{}]', re.S)


class BadJSON(ValueError):
    """Text refused by `loads_bounded`; str() says why."""


def nesting_depth(text: str, stop_at: int | None = None) -> int:
    """How deep arrays and objects nest in `text` (brackets inside strings do not count); the
    count stops once it passes `stop_at`."""
    depth = deepest = 0
    in_string = False
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token == '"':
            in_string = not in_string
            continue
        if in_string or token[0] == "\\":
            continue
        depth += 1 if token in "[{" else -1
        if depth > deepest:
            deepest = depth
            if stop_at is not None and deepest > stop_at:
                break
    return deepest


def _short(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:12]}...({len(literal)} characters)"


def _int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise BadJSON(f"number too large: {_short(literal)}")
    value = int(literal)
    try:
        float(value)
    except OverflowError:
        raise BadJSON(f"number too large: {_short(literal)}") from None
    return value


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e999: an overflow, not the NaN / Infinity a script may write
        raise BadJSON(f"number too large: {_short(literal)}")
    return value


def loads_bounded(text: str, max_depth: int = MAX_DEPTH) -> object:
    """`text` parsed as JSON, or BadJSON saying why not: nesting deeper than `max_depth`, a
    number too large for a finite float, or not valid JSON. NaN and Infinity literals stay
    floats, as json.loads reads them (the caller decides what a non-finite metric means)."""
    if nesting_depth(text, stop_at=max_depth) > max_depth:
        raise BadJSON(f"nesting deeper than {max_depth}")
    try:
        return json.loads(text, parse_int=_int, parse_float=_float)
    except BadJSON:
        raise
    except json.JSONDecodeError as e:
        raise BadJSON(f"not valid JSON: {e}") from None
    except (ValueError, RecursionError, MemoryError) as e:  # what the bounds above did not foresee
        raise BadJSON(f"not valid JSON: {type(e).__name__}: {str(e)[:200]}") from None
