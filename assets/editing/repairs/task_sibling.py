"""scikit-learn's "The estimator Ridge should be a classifier." (its ensembles check their members'
task): the names ending in the ensemble's kind become their siblings of the members' kind."""
from __future__ import annotations

import ast
import re

from assets.editing.code_reading import NAME
from assets.editing.lookup import exporting
from assets.editing.repairs.base import Candidate, Failure, Rule

_TASK_KIND = re.compile(rf"^ValueError: The estimator {NAME} should be a (classifier|regressor)\.")
_KINDS = {"classifier": ("Classifier", "Regressor"), "regressor": ("Regressor", "Classifier")}  # (ensemble, members)


def task_sibling(code: str, error: str) -> tuple[str, str] | None:
    """"The estimator Ridge should be a classifier." (scikit-learn's ensembles check their members'
    task): the script gave regressors to a classifier ensemble (or the reverse), so every name it
    imports from a module whose name ends in Classifier (Regressor) and whose sibling ending in
    Regressor (Classifier) that module also exports is renamed to the sibling, in the imports and
    wherever the code uses it. None when no such name is imported."""
    m = _TASK_KIND.match(error)
    if m is None:
        return None
    wrong, right = _KINDS[m.group(1)]
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    names = {a.name: n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level
             for a in n.names if a.name.endswith(wrong) and a.asname is None}
    if not names:
        return None
    siblings = {old: old[:-len(wrong)] + right for old in names}
    found = exporting(list(siblings.values()), sorted(set(names.values())))
    swap = {old: new for old, new in siblings.items() if names[old] in found.get(new, [])}
    if not swap:
        return None
    new_code = re.sub(r"\b(" + "|".join(map(re.escape, swap)) + r")\b", lambda h: swap[h.group(1)], code)
    return new_code, ", ".join(f"{a} -> {b}" for a, b in swap.items()) + (
        f" (the ensemble's members are {right.lower()}s: its {right} sibling)")


def apply(f: Failure) -> Candidate | None:
    found = task_sibling(f.code, f.error)
    return Candidate(*found) if found is not None else None


RULE = Rule("task_sibling", "an ensemble given members of the other task: it becomes its sibling of their task", apply)
