"""The "functions" edit format: the model returns only the code it changes, each piece complete
(a changed statement, even one inside a loop; a function, class or method; imports), applied
by name and by statement with `ast` (`apply_definitions`: ast_merge.py); answers laid out like
the debugging prompt's local code structure ("# FILE, lines A-B" segments) apply by those line
numbers (`apply_segments`). A fraction of a whole file's output tokens, which is what a
repair costs on a slow local model."""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
from pathlib import Path

from assets.editing.edit_formats.ast_merge import LOOSE_SIMILAR, apply_definitions, apply_header, restore_copied_lines
from assets.editing.edit_formats.base import FENCE_RE, EditError, _indent, _reindent

__all__ = ["MAX_TOKENS", "NAME", "SEGMENT_RE", "apply", "apply_definitions", "apply_functions", "apply_header",
           "apply_segments", "extract_definitions", "instructions", "restore_copied_lines"]

NAME = "functions"
MAX_TOKENS = 1200

FUNCTIONS_EXAMPLE = '''Example (for another file). To fix the loss line inside the training loop and the
model's forward method:
```python
loss = F.mse_loss(net(xb).squeeze(1), yb.float())

class Net(nn.Module):
    def forward(self, x):
        return self.head(self.body(x).flatten(1))
```'''


def instructions(filename: str) -> str:
    return ("Return in one ```python code block only the code you change, each piece complete: "
            "a changed line (a whole statement) on its own, even if it sits inside a loop, or the "
            "complete new version of a function or class (in a class, the changed methods are "
            "enough), and any import you add. Do not repeat unchanged code.\n" + FUNCTIONS_EXAMPLE)


def extract_definitions(text: str) -> str:
    """The code of every python block in the answer (dedented, joined), or a bare answer."""
    blocks = FENCE_RE.findall(text)
    code = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3", "")]
    if code:
        return "\n\n".join(textwrap.dedent(b).strip("\n") for b in code) + "\n"
    bare = textwrap.dedent(text.strip("\n"))
    if re.match(r"(def |class |async def |import |from |@)", bare):
        return bare + "\n"
    if re.search(r"^```[ \t]*(python|py|python3)?[ \t]*$", text, re.M | re.I):  # opened, never closed
        raise EditError("not_applied", "the answer was cut off before its ```python block closed (too long): "
                        "return only the pieces of code you change, not the whole file")
    raise EditError("not_applied", "no ```python code block with the changed definitions was found")


# An answer may also copy the layout of the local code structure the debugging prompt shows:
# "# experiment.py, lines 46-49 (class PointNet)" followed by those lines, edited. The small
# model does this (measured); the header names the exact lines of the current file.
SEGMENT_RE = re.compile(r"^[ \t]*#[ \t]*(?P<file>[\w./-]+\.py),"
                        r"[ \t]*lines?[ \t]+(?P<a>\d+)[ \t]*-[ \t]*(?P<b>\d+)\b.*$", re.M)


def apply_segments(source: str, code: str, filename: str = "experiment.py") -> tuple[str, str]:
    """Replace each "# FILE, lines A-B" segment's lines of `source` by the code under it.
    Returns (new source, the code before the first header, for `apply_definitions`)."""
    heads = list(SEGMENT_RE.finditer(code))
    if not heads:
        return source, code
    lines = source.splitlines()
    edits: list[tuple[int, int, list[str]]] = []
    for h, nxt in zip(heads, heads[1:] + [None]):
        a, b = int(h["a"]), int(h["b"])
        if Path(h["file"]).name != Path(filename).name:
            raise EditError("not_applied", f"only {filename} can be edited, not {h['file']}")
        if not 1 <= a <= b <= len(lines):
            raise EditError("not_applied", f"{h['file']} has no lines {a}-{b}")
        body = code[h.end():nxt.start() if nxt else len(code)].strip("\n").splitlines()
        while body and not body[-1].strip():
            body.pop()
        old = lines[a - 1:b]
        if difflib.SequenceMatcher(None, "\n".join(l.strip() for l in old),
                                   "\n".join(l.strip() for l in body)).ratio() < LOOSE_SIMILAR:
            raise EditError("not_applied", f"the code under '# {h['file']}, lines {a}-{b}' does not resemble "
                            "those lines of the file")
        first_old = next((l for l in old if l.strip()), "")
        first_new = next((l for l in body if l.strip()), "")
        body = _reindent(body, len(_indent(first_new)), _indent(first_old))
        if any(a <= eb and ea <= b for ea, eb, _ in edits):
            raise EditError("not_applied", f"the segments for lines {a}-{b} overlap another segment")
        edits.append((a, b, body))
    for a, b, body in sorted(edits, reverse=True):
        lines[a - 1:b] = body
    return "\n".join(lines) + "\n", code[:heads[0].start()]


def apply_functions(source: str, code: str, filename: str = "experiment.py") -> str:
    """The "functions" format: structure-anchored segments (if any), then definitions by name. When
    the segments do not fit the lines their headers name (the small model copies a header above
    code from elsewhere, or above a whole file), the answer is applied by names alone."""
    try:
        new, rest = apply_segments(source, code, filename)
    except EditError as e:
        if any(Path(h["file"]).name != Path(filename).name for h in SEGMENT_RE.finditer(code)):
            raise  # a header names another file: that is not a misplaced header, nothing to fall back to
        try:
            return apply_definitions(source, SEGMENT_RE.sub("", code))
        except EditError:
            raise e from None
    if rest is code:
        return apply_definitions(source, code)
    try:  # code before the first segment header: definitions as well
        if ast.parse(rest).body:
            new = apply_definitions(new, rest)
    except SyntaxError:
        pass
    return new


def apply(source: str, answer: str, filename: str = "experiment.py") -> str:
    return apply_functions(source, extract_definitions(answer), filename)
