"""The interpreter's "Did you forget to import 'math'?" (3.12+): the import is added."""
from __future__ import annotations

import re

from assets.editing.code_reading import NAME, with_import
from assets.editing.repairs.base import Candidate, Failure, Rule

_FORGOT_IMPORT = re.compile(rf"Did you forget to import '({NAME})'\?")


def apply(f: Failure) -> Candidate | None:
    if (forgot := _FORGOT_IMPORT.search(f.error)) is None:
        return None
    return Candidate(with_import(f.lines, f"import {forgot.group(1)}"),
                     f"added `import {forgot.group(1)}` (the interpreter's suggestion)")


RULE = Rule("forgotten_import", "'Did you forget to import' a module: that import is added", apply)
