"""Edit formats and their application, as pure functions.

- "whole": the model returns the complete new file in one fenced code block;
- "search_replace": the model returns SEARCH/REPLACE blocks; each SEARCH text must match the
  file exactly, or else line by line ignoring surrounding whitespace.
Errors raise `EditError` whose message starts with the status the patch gets if every
retry fails: "not_applied", "no_op" or "syntax_error"."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

FENCE_RE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
BLOCK_RE = re.compile(
    r"^[ \t]*<{5,}[ \t]*SEARCH[^\n]*\n(.*?)\n?^[ \t]*={5,}[ \t]*\n(.*?)\n?^[ \t]*>{5,}[ \t]*REPLACE", re.S | re.M)


# Edits are the longest answers (a whole file is ~1000 tokens, ~100 s on the local model) and a
# model that repeats an unusable edit tends to repeat it again (measured: three identical no-op
# "fixes" in a row), so edit calls get one retry instead of the default two.
WHOLE_FILE_RETRIES = 1


class EditError(ValueError):
    def __init__(self, status: str, detail: str):
        super().__init__(f"{status}: {detail}")
        self.status = status


def status_of(error: str | None) -> str:
    """The patch status an error message (from EditError) stands for."""
    if not error:
        return "ok"
    for s in ("not_applied", "no_op", "syntax_error"):
        if error.startswith(s) or f": {s}:" in error or f"): {s}:" in error:
            return s
    return "llm_failed"


def extract_whole_file(text: str) -> str:
    blocks = FENCE_RE.findall(text)
    code = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")] or \
           [body for lang, body in blocks if not lang]
    if code:
        return max(code, key=len).strip("\n") + "\n"
    if text.lstrip().startswith(("import ", "from ", '"""', "#")):
        return text.strip("\n") + "\n"
    raise EditError("not_applied", "no ```python fenced code block with the whole file was found")


def parse_search_replace(text: str) -> list[tuple[str, str]]:
    blocks = BLOCK_RE.findall(text)
    if not blocks:
        raise EditError("not_applied", "no SEARCH/REPLACE block was found "
                        "(<<<<<<< SEARCH ... ======= ... >>>>>>> REPLACE)")
    return [(s, r) for s, r in blocks]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _replace_tolerant(source: str, search: str, replace: str) -> str | None:
    """Match `search` line by line ignoring leading/trailing whitespace; re-indent the
    replacement by the indentation difference of the first matched line."""
    src = source.splitlines()
    pat = [l for l in search.splitlines()]
    while pat and not pat[0].strip():
        pat.pop(0)
    while pat and not pat[-1].strip():
        pat.pop()
    if not pat:
        return None
    stripped = [l.strip() for l in pat]
    for i in range(len(src) - len(pat) + 1):
        if all(src[i + k].strip() == stripped[k] for k in range(len(pat))):
            have, want = _indent(src[i]), _indent(pat[0])
            new = []
            for l in replace.splitlines():
                if l.startswith(want):
                    l = have + l[len(want):]
                elif l.strip():
                    l = have + l.lstrip()
                new.append(l)
            out = src[:i] + new + src[i + len(pat):]
            return "\n".join(out) + ("\n" if source.endswith("\n") else "")
    return None


def _replace_exact_lines(source: str, search: str, replace: str) -> str | None:
    """Replace `search` where it matches whole lines exactly (never inside a line)."""
    start = 0
    while (i := source.find(search, start)) >= 0:
        j = i + len(search)
        if (i == 0 or source[i - 1] == "\n") and (j == len(source) or source[j] == "\n" or search.endswith("\n")):
            return source[:i] + replace + source[j:]
        start = i + 1
    return None


def apply_search_replace(source: str, blocks: list[tuple[str, str]]) -> str:
    out = source
    for n, (search, replace) in enumerate(blocks, 1):
        if search and (exact := _replace_exact_lines(out, search, replace)) is not None:
            out = exact
            continue
        if not search.strip():  # empty SEARCH: append
            out = out.rstrip("\n") + "\n" + replace + "\n"
            continue
        tolerant = _replace_tolerant(out, search, replace)
        if tolerant is None:
            first = next((l.strip() for l in search.splitlines() if l.strip()), "")
            raise EditError("not_applied", f"SEARCH block {n} does not match the file "
                            f"(first line: {first[:80]!r}); copy the lines exactly from the file")
        out = tolerant
    return out


def _code_only(code: str) -> str | None:
    """The program without comments, docstrings and formatting (None if it does not parse)."""
    import ast

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


def apply_edit(source: str, answer: str, edit_format: str, filename: str = "experiment.py") -> EditResult:
    """Apply an LLM answer in the given format; raise EditError if it cannot be used."""
    if edit_format == "whole":
        new = extract_whole_file(answer)
    elif edit_format == "search_replace":
        new = apply_search_replace(source, parse_search_replace(answer))
    else:
        raise ValueError(f"unknown edit format {edit_format!r}")
    if new.strip() == source.strip():
        raise EditError("no_op", "the edit leaves the file unchanged")
    before = _code_only(source)
    if before is not None and before == _code_only(new):
        raise EditError("no_op", "the edit changes only comments, docstrings or formatting, not the program")
    err = check_compiles(new, filename)
    if err:
        raise EditError("syntax_error", f"the edited file does not compile: {err}")
    return EditResult(new, unified_diff(source, new, filename))
