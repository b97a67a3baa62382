"""Keeping repairs honest (pure): a "fix" that makes a script run by deleting its training or
its evaluation, hard-coding the metric or silencing the error is a failed repair.

`essentials(code)` counts what an experiment is made of (with `ast`); `honesty_problems`
compares a repaired file with the code the repair loop started from: everything the original
had must still be there, and nothing that hides failures may appear. It is deliberately
conservative (presence, not semantics): it flags deletions, not subtle sabotage."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

# what an experiment must keep, if the original had it: name -> what the message calls it
KEPT = {
    "backward": "the backward pass (loss.backward())",
    "optimizer_step": "the optimizer step (optimizer.step())",
    "training_loop": "the training loop (a loop around the backward pass or optimizer step)",
    "evaluation": "the evaluation (model.eval() / torch.no_grad())",
    "writes_results": "the writing of the results (json.dump / final_info.json)",
    "metric": "the metric in the results",
}


# what must not appear (more often than in the original)
ADDED = {
    "silenced_errors": "a try/except that silences errors (except ...: pass)",
    "constant_metric": "a constant written as the metric",
}


_SAVE_CALLS = {"json.dump", "json.dumps", "np.save", "numpy.save", "torch.save", "np.savez", "pickle.dump"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _calls(tree: ast.AST) -> list[str]:
    """Dotted names of every call, e.g. 'loss.backward', 'json.dump', 'model.eval'."""
    return [_dotted(n.func) or getattr(n.func, "attr", "") for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _is_training_call(name: str) -> bool:
    return _last(name) == "backward" or (_last(name) == "step" and "sched" not in name)


def _silences(h: ast.ExceptHandler) -> bool:
    broad = h.type is None or _dotted(h.type) in ("Exception", "BaseException")
    quiet = all(isinstance(s, (ast.Pass, ast.Continue, ast.Break)) or
                (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in h.body)
    return broad and quiet


def _number(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def essentials(code: str, metric: str | None = None) -> dict[str, int] | None:
    """Counts of each feature in KEPT and ADDED; None if the code does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = _calls(tree)
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings, bare strings
    strings = [n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
    out = {
        "backward": sum(_last(c) == "backward" for c in calls),
        "optimizer_step": sum(_is_training_call(c) and _last(c) == "step" for c in calls),
        "training_loop": sum(any(_is_training_call(c) for c in _calls(loop)) for loop in loops),
        "evaluation": sum(_last(c) in ("eval", "no_grad", "inference_mode") for c in calls),
        "writes_results": sum(c in _SAVE_CALLS for c in calls) + sum("final_info.json" in s for s in strings),
        "metric": sum(s == metric for s in strings) if metric else 0,
        "silenced_errors": sum(_silences(h) for n in ast.walk(tree) if isinstance(n, ast.Try) for h in n.handlers),
        "constant_metric": 0,
    }
    if metric:
        for n in ast.walk(tree):
            if isinstance(n, ast.Dict):
                out["constant_metric"] += sum(isinstance(k, ast.Constant) and k.value == metric and _number(v)
                                              for k, v in zip(n.keys, n.values))
            elif isinstance(n, ast.Assign) and _number(n.value):
                out["constant_metric"] += sum(isinstance(t, ast.Name) and t.id == metric for t in n.targets)
    return out


def _has_call(code: str, name: str) -> bool:
    """Whether `code` calls `name` (a dotted suffix: 'backward', 'optimizer.step', 'json.dump')."""
    try:
        calls = _calls(ast.parse(code))
    except SyntaxError:
        return re.search(rf"\b{re.escape(name)}\s*\(", code) is not None
    return any(c == name or c.endswith("." + name) for c in calls)


def honesty_problems(original: str, repaired: str, metric: str | None = None,
                     required_calls: Sequence[str] = ()) -> list[str]:
    """What the repair removed or added that makes its result untrustworthy ([] = honest).

    `required_calls` (e.g. a topic's ["loss.backward", "json.dump"]) must be called in the
    repaired file whenever the original called them."""
    before, after = essentials(original, metric), essentials(repaired, metric)
    problems = []
    if after is not None:
        if before is None:  # the original did not parse: judge what is plainly there
            before = {k: int(_has_call(original, call)) for k, call in
                      (("backward", "backward"), ("optimizer_step", "step"))}
        for k, what in KEPT.items():
            if before.get(k, 0) > 0 and after[k] == 0:
                problems.append(f"removes {what}")
        for k, what in ADDED.items():
            if after[k] > before.get(k, 0):
                problems.append(f"adds {what}")
    for name in required_calls:
        if _has_call(original, name) and not _has_call(repaired, name):
            problems.append(f"no longer calls {name}()")
    return problems
