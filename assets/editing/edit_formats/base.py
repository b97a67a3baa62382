"""What every edit format shares: the error an unusable answer raises (its status is what the
patch or repair records), fenced-code extraction, and the checks after applying an edit."""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from resources.llm import RejectedAnswer

FENCE_RE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


# Edits are the longest answers (a whole file is ~1000 tokens, ~100 s on the local model) and a
# model that repeats an unusable edit tends to repeat it again (measured: three identical no-op
# "fixes" in a row), so edit calls get one retry instead of the default two.
WHOLE_FILE_RETRIES = 1

EDIT_STATUSES = ("not_applied", "no_op", "syntax_error", "dishonest")


class EditError(RejectedAnswer):
    """An answer that cannot be used as an edit; `status` (one of EDIT_STATUSES) reaches the
    caller as the LLM result's `error_kind`."""

    def __init__(self, status: str, detail: str):
        super().__init__(status, detail)
        self.status = status


def edit_status(res) -> str:
    """The status a patch or repair records for an LLM result: "ok", the edit's own kind of
    failure (one of EDIT_STATUSES, from the EditError its parser raised), or "llm_failed"."""
    if res.ok:
        return "ok"
    return res.error_kind if res.error_kind in EDIT_STATUSES else "llm_failed"


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(block: list[str], have: int, want: str) -> list[str]:
    return [want + l[have:] if l[:have].strip() == "" and l.strip() else (want + l.lstrip() if l.strip() else "")
            for l in block]


def _code_only(code: str) -> str | None:
    """The program without comments, docstrings and formatting (None if it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


def check_compiles(code: str, filename: str = "experiment.py") -> str | None:
    try:
        compile(code, filename, "exec")
    except SyntaxError as e:
        return f"line {e.lineno}: {e.msg}"
    return None


def unified_diff(old: str, new: str, name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


@dataclass
class EditResult:
    code: str
    diff: str
