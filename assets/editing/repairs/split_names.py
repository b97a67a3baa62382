"""Data of two splits met in one call ("Expected input batch_size (150) to match target batch_size
(600)", "Found input variables with inconsistent numbers of samples: [150, 600]"): the validation
predictions scored against the training labels. The names a statement uses carry their split
(`X_val`, `y_train`, `test_loader`); when the failing statement mixes splits, the name of the
minority split is replaced by its sibling of the majority split (`y_train` -> `y_val`) where the
code defines that sibling. The statement's own targets vote (`val_loss = ...`); on a tie the
split named first wins. A guess: either side may be the wrong one."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule, replace_on_line

SIZES = re.compile(r"Expected input batch_size \(\d+\) to match target batch_size \(\d+\)|inconsistent numbers of "
                   r"samples|The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton "
                   r"dimension 0")
SPLITS = {"train": "train", "tr": "train", "trn": "train", "val": "val", "valid": "val", "validation": "val",
          "va": "val", "dev": "val", "test": "test", "te": "test", "tst": "test"}
TOKEN = re.compile(r"(?<![a-z])(" + "|".join(sorted(SPLITS, key=len, reverse=True)) + r")(?![a-z])")


def split_of(name: str) -> tuple[str, re.Match] | None:
    """The split a name carries (`X_val` -> val) and where; None for names without one."""
    m = TOKEN.search(name.lower().replace("_", " "))
    return (SPLITS[m.group(1)], m) if m else None


def _statement(tree: ast.Module, line: int) -> ast.stmt | None:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return min(found, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if found else None


def matched_split(code: str, line: int) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    stmt = _statement(tree, line)
    if stmt is None:
        return None
    defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names = sorted((n for n in ast.walk(stmt) if isinstance(n, ast.Name)), key=lambda n: (n.lineno, n.col_offset))
    targets = [n for n in names if isinstance(n.ctx, ast.Store)]
    used = [n for n in names if isinstance(n.ctx, ast.Load)]
    votes: dict[str, int] = {}
    for n in targets + used:
        if (s := split_of(n.id)) is not None:
            votes[s[0]] = votes.get(s[0], 0) + 1
    if len(votes) < 2:
        return None
    first = next((s[0] for n in used if (s := split_of(n.id)) is not None), None)
    majority = max(votes, key=lambda s: (votes[s], s == first))
    wrong = [n for n in used if (s := split_of(n.id)) is not None and s[0] != majority]
    if not wrong:
        return None
    renames: dict[str, str] = {}
    for name in dict.fromkeys(n.id for n in wrong):
        m = split_of(name)[1]
        spelled = name[m.start(1):m.end(1)]
        for word in (w for w, s in SPLITS.items() if s == majority):
            form = word.upper() if spelled.isupper() else word.capitalize() if spelled[0].isupper() else word
            sibling = name[:m.start(1)] + form + name[m.end(1):]
            if sibling in defined:
                renames.setdefault(name, sibling)
        if name not in renames:
            return None
    fixed = code
    for n in sorted(wrong, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        fixed = replace_on_line(fixed, n, renames[n.id])
    what = ", ".join(f"{old} -> {new}" for old, new in renames.items())
    return fixed, f"line {stmt.lineno}: {what} (the statement's other names are of the {majority} split)"


def apply(f: Failure) -> Candidate | None:
    if not SIZES.search(f.error) or f.frame is None:
        return None
    found = matched_split(f.code, f.frame.line)
    return Candidate(*found, sure=False, early=True) if found is not None else None


RULE = Rule("split_names", "data of two splits in one call: the odd name made its sibling of the others' split "
            "(a guess)", apply)
