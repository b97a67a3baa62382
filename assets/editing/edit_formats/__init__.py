"""Edit formats as a registry (the shape of aider's coders: one module per format with its
instructions, its applier and its answer budget). Adding a format is one module here plus its
line in FORMATS; the patching and repair prompts, the appliers and the token budgets all read it.

- "whole": the complete new file in one fenced block (the local model's patches);
- "search_replace": SEARCH/REPLACE blocks (remote models);
- "functions": only the changed statements and definitions, applied by name (the local model's repairs).

An answer that cannot be used raises `EditError`, whose status the patch or repair records:
"not_applied", "no_op", "syntax_error" (or "dishonest", raised by the repair loop's honesty
check, see assets/editing/honesty.py). The LLM resource hands that status back as the
result's `error_kind`; `edit_status(result)` turns it into the recorded status."""
from __future__ import annotations

from types import ModuleType

from assets.editing.edit_formats import functions, search_replace, whole
from assets.editing.edit_formats.base import (
    EDIT_STATUSES,
    WHOLE_FILE_RETRIES,
    EditError,
    EditResult,
    _code_only,
    check_compiles,
    edit_status,
    unified_diff,
)

FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (whole, search_replace, functions)}
EDIT_FORMATS = tuple(FORMATS)

__all__ = ["EDIT_FORMATS", "EDIT_STATUSES", "FORMATS", "WHOLE_FILE_RETRIES", "EditError", "EditResult", "apply_edit",
           "check_compiles", "edit_format", "edit_status", "instructions", "max_tokens", "unified_diff"]


def edit_format(name: str) -> ModuleType:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown edit format {name!r} (known: {', '.join(FORMATS)})") from None


def instructions(name: str, filename: str) -> str:
    """How the model must lay out its answer in this format."""
    return edit_format(name).instructions(filename)


def max_tokens(name: str) -> int:
    """The answer budget of one edit in this format."""
    return edit_format(name).MAX_TOKENS


def apply_edit(source: str, answer: str, name: str, filename: str = "experiment.py") -> EditResult:
    """Apply an LLM answer in the given format; raise EditError if it cannot be used."""
    new = edit_format(name).apply(source, answer, filename)
    if new.strip() == source.strip():
        raise EditError("no_op", "the edit leaves the file unchanged")
    before = _code_only(source)
    if before is not None and before == _code_only(new):
        raise EditError("no_op", "the edit changes only comments, docstrings or formatting, not the program")
    err = check_compiles(new, filename)
    if err:
        raise EditError("syntax_error", f"the edited file does not compile: {err}")
    return EditResult(new, unified_diff(source, new, filename))
