"""The "whole" edit format: the model returns the complete new file in one fenced code block.
The most output tokens (a whole file is ~1000 tokens), but the short files of the shipped
topics are rewritten reliably even by the small local model."""

from __future__ import annotations

from assets.editing.edit_formats.base import FENCE_RE, EditError

NAME = "whole"
MAX_TOKENS = 2500


def instructions(filename: str) -> str:
    return (f"Return the complete new {filename} in one ```python code block, "
            "with every line of the file, and nothing else.")


def extract_whole_file(text: str) -> str:
    blocks = FENCE_RE.findall(text)
    code = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")] or \
           [body for lang, body in blocks if not lang]
    if code:
        return max(code, key=len).strip("\n") + "\n"
    if text.lstrip().startswith(("import ", "from ", '"""', "#")):
        return text.strip("\n") + "\n"
    raise EditError("not_applied", "no ```python fenced code block with the whole file was found")


def apply(source: str, answer: str, filename: str = "experiment.py") -> str:
    return extract_whole_file(answer)
