"""A function of the edited file called with more positional arguments than it now takes ("model()
takes 0 positional arguments but 1 was given"): an edit rewrote the function for a new method and
dropped a parameter its callers still pass (a ridge `model(alpha)` turned into boosted trees that
need no alpha). The function's signature gains `*_unused`, so the callers' extra arguments are
accepted and ignored and nothing else changes. The message names the function and the counts,
and only a function defined once in the file, without `*args` already, is changed: it is sure."""
from __future__ import annotations

import ast
import re

from assets.editing.repairs.base import Candidate, Failure, Rule

TAKES = re.compile(r"^TypeError: (?:[\w.]+\.)?(\w+)\(\) takes (\d+) positional arguments? but (\d+) (?:was|were) given")
SPARE = "_unused"


def accepted_extra(code: str, error: str) -> tuple[str, str] | None:
    """The code with the named function taking `*_unused`, and what changed; None when the message
    is another one, the function is not defined exactly once here or already takes `*args`."""
    m = TAKES.match(error)
    if m is None or int(m.group(3)) <= int(m.group(2)):
        return None
    name = m.group(1)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if len(defs) != 1 or defs[0].args.vararg is not None:
        return None
    node = defs[0]
    if node.body[0].lineno == node.lineno:  # `def f(): return x` on one line: the signature has no line of its own
        return None
    lines = code.splitlines(keepends=True)
    first, body = node.lineno - 1, node.body[0].lineno - 1
    # the signature's lines end at the first line holding its closing colon; comments or a docstring
    # between it and the body stay as they are
    end = next((k for k in range(first, body) if lines[k].rstrip().endswith(":")), None)
    if end is None:
        return None
    args = node.args
    args.vararg = ast.arg(arg=SPARE)
    indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    kind = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    signature = f"{indent}{kind} {name}({ast.unparse(args)}){returns}:\n"
    new = "".join(lines[:first]) + signature + "".join(lines[end + 1:])
    try:
        ast.parse(new)
    except SyntaxError:
        return None
    return new, (f"line {node.lineno}: {name}() takes *{SPARE} (its callers pass {m.group(3)} positional "
                 f"argument(s), it took {m.group(2)}; the extra ones are ignored)")


def apply(f: Failure) -> Candidate | None:
    found = accepted_extra(f.code, f.error)
    return Candidate(found[0], found[1]) if found else None


RULE = Rule("extra_positional",
            "a function of the file called with more positional arguments than it takes: it takes *_unused",
            apply)
