"""Mechanical repair candidates: the interpreter's own suggestion, applied without the LLM.

Python names the fix of many one-word mistakes itself: "NameError: name 'factr' is not
defined. Did you mean: 'factor'?", "Did you forget to import 'math'?" (3.12+). `suggested_fix`
turns such a message into an edit of the failing code through the rules of
assets/editing/repairs/ (a registry, walked in order; the first candidate is kept). Where Python
cannot suggest, the rules compute the suggestion from what the code defines (read with `ast`,
never imported or run) or from what the installed libraries export and accept (read in an
isolated interpreter that never sees the workspace, assets/editing/lookup.py).

`mend` (assets/editing/mending.py) is the step before a run: misplaced statements, left-out
imports, and library calls checked against their signatures (assets/editing/calls.py). This
module keeps the names the rest of the project imports."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from assets.editing.calls import api_notes, callee_parameters, check_calls, keyword_fix
from assets.editing.edit_formats import check_compiles, unified_diff
from assets.editing.imports import (
    ALIASES,
    complete_imports,
    import_statements,
    missing_import,
    moved_import,
    undefined_names,
)
from assets.editing.lookup import exporting, exporting_modules
from assets.editing.mending import mend, reorder_top_level
from assets.editing.repairs import RULES, Failure
from assets.editing.tracebacks import clip
from schemas.records import Attempt

__all__ = ["ALIASES", "RULES", "Suggestion", "api_notes", "callee_parameters", "check_calls", "complete_imports",
           "exporting", "exporting_modules", "import_statements", "keyword_fix", "mend", "missing_import",
           "moved_import", "reorder_top_level", "suggested_fix", "undefined_names"]


@dataclass(frozen=True)
class Suggestion:
    code: str
    diff: str
    what: str  # e.g. "line 5: factr -> factor (the interpreter's suggestion)"
    rule: str  # the name of the rule that made it (assets/editing/repairs/ RULES)
    # the message (or the callee's signature) names this fix: tried before the LLM's, not after
    sure: bool = False
    early: bool = False  # a guess tried before the LLM's fix all the same (repairs.base.Candidate)


def suggested_fix(code: str, failed: Attempt, code_file: str, folder: Path | None = None) -> Suggestion | None:
    """The edit the failure's own message suggests, applied at the failing line of `code_file`;
    None when the message suggests nothing usable. `folder`: where the script's own modules lie
    (for "cannot import name" without a suggestion). `sure` on the result: the message or a
    library names the fix (the interpreter's suggestion, an import a library the script uses
    provides, a keyword the callee's signature has), not a guess from what the code defines.
    The first rule with a candidate decides: a candidate that changes nothing or does not
    compile is no suggestion (the later rules are not asked)."""
    error = clip((failed.error or "").strip())  # the run wrote it: bounded before any pattern sees it
    if not error or failed.timed_out:
        return None
    failure = Failure(code=code, error=error, failed=failed, code_file=code_file, folder=folder)
    for rule in RULES:
        if (found := rule.apply(failure)) is None:
            continue
        if found.code == code or check_compiles(found.code, code_file) is not None:
            return None
        return Suggestion(code=found.code, diff=unified_diff(code, found.code, code_file), what=found.what,
                          sure=found.sure, early=found.early, rule=rule.name)
    return None
