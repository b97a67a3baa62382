""""cannot import name 'RandomizedSearchCV' from 'sklearn.preprocessing'": a library's name
imported from the wrong module of that library moves to the module that exports it
(assets/editing/imports.py `moved_import`). Not for a module of the script's own folder."""
from __future__ import annotations

from assets.editing.code_reading import module_names
from assets.editing.imports import moved_import
from assets.editing.repairs.base import IMPORT_FROM, Candidate, Failure, Rule


def apply(f: Failure) -> Candidate | None:
    imp = IMPORT_FROM.match(f.error)
    if imp is None or f.wrong is None or f.hint is not None or f.frame is None:
        return None
    if f.folder is not None and module_names(imp.group(1), f.folder):
        return None
    moved = moved_import(f.code, f.wrong[1], imp.group(1), f.frame.line)
    return Candidate(*moved) if moved is not None else None


RULE = Rule("moved_import", "a library's name imported from the wrong module of it: moved to the one exporting it",
            apply)
