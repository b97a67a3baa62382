"""The "search_replace" edit format (aider's): SEARCH/REPLACE blocks; each SEARCH text must match
the file exactly, or else line by line ignoring surrounding whitespace. The default for
remote models; the small local model follows it only with the worked example below."""

from __future__ import annotations

import re

from assets.editing.edit_formats.base import EditError, _indent

NAME = "search_replace"
MAX_TOKENS = 900

SR_EXAMPLE = '''Example. To change the learning rate and add dropout:
<<<<<<< SEARCH
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
=======
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
>>>>>>> REPLACE
<<<<<<< SEARCH
        self.head = nn.Linear(128, n_classes)
=======
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(128, n_classes)
>>>>>>> REPLACE
Remember: if you add a layer in __init__, also use it in forward (and the other way round).'''

BLOCK_RE = re.compile(
    r"^[ \t]*<{5,}[ \t]*SEARCH[^\n]*\n(.*?)\n?^[ \t]*={5,}[ \t]*\n(.*?)\n?^[ \t]*>{5,}[ \t]*REPLACE", re.S | re.M)


def instructions(filename: str) -> str:
    return ("Return only SEARCH/REPLACE blocks. Each SEARCH part must copy lines exactly from the "
            "file; the REPLACE part holds the new lines.\n" + SR_EXAMPLE)


def parse_search_replace(text: str) -> list[tuple[str, str]]:
    blocks = BLOCK_RE.findall(text)
    if not blocks:
        raise EditError("not_applied", "no SEARCH/REPLACE block was found "
                        "(<<<<<<< SEARCH ... ======= ... >>>>>>> REPLACE)")
    return [(s, r) for s, r in blocks]


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


def apply(source: str, answer: str, filename: str = "experiment.py") -> str:
    return apply_search_replace(source, parse_search_replace(answer))
