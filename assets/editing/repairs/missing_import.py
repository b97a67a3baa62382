"""A name that is not defined at all but is a public class or function of a library the script
already imports ("NameError: name 'KFold' is not defined" in a script importing from
sklearn.model_selection, after the model rewrote the imports) gets its import. It comes before
any close defined name: `Ridge` is not the variable `ridge`, and `RidgeCV` is sklearn's class
even where Python suggests the `Ridge` the script imports."""
from __future__ import annotations

import re

from assets.editing.code_reading import NAME, with_import
from assets.editing.imports import missing_import
from assets.editing.repairs.base import Candidate, Failure, Rule

_UNDEFINED = re.compile(rf"^NameError: name '({NAME})' is not defined")


def apply(f: Failure) -> Candidate | None:
    if f.frame is None or (undefined := _UNDEFINED.match(f.error)) is None:
        return None
    if (statement := missing_import(undefined.group(1), f.code)) is None:
        return None
    return Candidate(with_import(f.lines, statement),
                     f"added `{statement}` ({undefined.group(1)} is not defined; that module exports it)")


RULE = Rule("missing_import", "an undefined name a library the script imports exports: its import is added", apply)
