"""A torch.nn module class given the tensors instead of being built first
(`loss = nn.CrossEntropyLoss(logits, y)`: the tensors land in the constructor's options, and the
run fails with "Boolean value of Tensor with more than one value is ambiguous" or a type error):
the module is built without arguments and then called with them (`nn.CrossEntropyLoss()(logits,
y)`); where the class itself was kept under a name that the failing line calls
(`loss_fn = nn.MSELoss`), the assignment builds it (`nn.MSELoss()`). A loss class never takes
tensors when it is built; another module class is moved only when the values at the crash show
every positional argument is a tensor. Sure: a module class called with tensors has no other
reading."""
from __future__ import annotations

import ast

from assets.editing.repairs.base import (
    Candidate,
    Failure,
    Rule,
    attribute_name,
    calls_on_line,
    frame_values,
    replace_on_line,
)

SIGNS = ("Boolean value of Tensor with more than one value is ambiguous", "__init__() takes",
         "__init__() got multiple values", "got an unexpected keyword argument", "must be bool, not Tensor",
         "not Tensor")


def _class_name(node: ast.expr) -> str | None:
    """The class name when `node` names a torch.nn class (`nn.MSELoss`, `torch.nn.ReLU`)."""
    func = ast.unparse(node)
    for prefix in ("nn.", "torch.nn."):
        if func.startswith(prefix) and "." not in func[len(prefix):] and func[len(prefix):][:1].isupper():
            return func[len(prefix):]
    return None


def built_then_called(code: str, line: int, values: dict[str, str]) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for call in calls_on_line(tree, line):
        name = _class_name(call.func)
        if name is None or not call.args or call.keywords or call.lineno != call.end_lineno:
            continue
        tensors = all(isinstance(a, ast.Name) and "tensor" in values.get(a.id, "") for a in call.args)
        if not name.endswith("Loss") and not tensors:
            continue
        args = ", ".join(ast.unparse(a) for a in call.args)
        new = f"{ast.unparse(call.func)}()({args})"
        return replace_on_line(code, call, new), (f"line {call.lineno}: {ast.unparse(call)} -> {new} (the module "
                                                  "is built first, then called with the tensors)")
    return kept_class(tree, code, line)


def kept_class(tree: ast.Module, code: str, line: int) -> tuple[str, str] | None:
    """The class itself kept where a module was meant (`loss_fn = nn.MSELoss`, then `loss_fn(pred, y)`
    on the failing line): the assignment builds it (`nn.MSELoss()`)."""
    kept: dict[str, ast.expr] = {}  # the name a value is kept under -> the torch.nn class it was given
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and (name := attribute_name(node.targets[0]))
                and _class_name(node.value) is not None and node.value.end_col_offset is not None):
            kept[name] = node.value
    for call in calls_on_line(tree, line):
        value = kept.get(attribute_name(call.func) or "")
        if value is None or not call.args:
            continue
        new = f"{ast.unparse(value)}()"
        return replace_on_line(code, value, new), (f"line {value.lineno}: {ast.unparse(value)} -> {new} (the class "
                                                   "was kept where its module was meant: built here)")
    return None


def apply(f: Failure) -> Candidate | None:
    if f.frame is None or not any(s in f.error for s in SIGNS):
        return None
    found = built_then_called(f.code, f.frame.line, frame_values(f.failed.error_notes))
    return Candidate(*found, sure=True) if found is not None else None


RULE = Rule("module_call", "a torch.nn module class given the tensors: built first, then called with them", apply)
