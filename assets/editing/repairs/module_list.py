"""An optimizer given no parameters ("optimizer got an empty parameter list") because a module
keeps its layers in a plain Python list or dict (`self.layers = [nn.Linear(...) for ...]`, or
`self.layers = []` filled by `self.layers.append(nn.Linear(...))`), which PyTorch does not
register: that list becomes `nn.ModuleList(...)` (a dict `nn.ModuleDict(...)`). Only attributes
of classes whose bases name a Module, and only lists whose items build layers (calls into `nn` /
`torch.nn` or into a Module class of the file, directly or through a name the class binds) are
changed; the message and the shape of the code name the fix,
so it is sure."""
from __future__ import annotations

import ast

from assets.editing.repairs.base import Candidate, Failure, Rule

EMPTY = "optimizer got an empty parameter list"


def _is_module_class(node: ast.ClassDef) -> bool:
    return any("Module" in ast.unparse(b) or ast.unparse(b).startswith("nn.") for b in node.bases)


def _builds_layers(value: ast.expr) -> bool:
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    return any(ast.unparse(c.func).startswith(("nn.", "torch.nn.")) for c in calls)


FILLS = ("append", "extend", "insert", "update", "setdefault")


def _filled_with_layers(cls: ast.ClassDef, attr: str, modules: set[str]) -> bool:
    """Whether the class puts layers into `self.<attr>` after making it (append, extend, insert,
    update, item assignment or +=)."""
    def held(node: ast.expr) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name)
                and node.value.id == "self")

    bound: dict[str, list[ast.expr]] = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(node.value)

    def layers(value: ast.expr) -> bool:
        if _builds_layers(value) or any(isinstance(c, ast.Call) and ast.unparse(c.func) in modules
                                        for c in ast.walk(value)):
            return True
        return isinstance(value, ast.Name) and any(layers(v) for v in bound.get(value.id, []) if v is not value)

    for node in ast.walk(cls):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FILLS
                and held(node.func.value) and any(layers(a) for a in node.args)):
            return True
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and held(t.value) for t in node.targets)
                and layers(node.value)):
            return True
        if isinstance(node, ast.AugAssign) and held(node.target) and layers(node.value):
            return True
    return False


def _nn_name(tree: ast.Module) -> str:
    """How the code reaches torch.nn: `nn` when it imports it so, else `torch.nn`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch" and any(
                a.name == "nn" and a.asname in (None, "nn") for a in node.names):
            return "nn"
        if isinstance(node, ast.Import) and any(a.name == "torch.nn" and a.asname == "nn" for a in node.names):
            return "nn"
    return "torch.nn"


def registered_layers(code: str) -> tuple[str, str] | None:
    """The code with every plain list (or dict) of layers kept on `self` in a Module class wrapped
    in nn.ModuleList (nn.ModuleDict), and what changed; None when there is none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    nn = _nn_name(tree)
    found: list[tuple[ast.expr, str, str]] = []
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and _is_module_class(n)]
    modules = {c.name for c in classes}
    for cls in classes:
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            t, v = node.targets[0], node.value
            if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
                continue
            maker = ast.unparse(v.func) if isinstance(v, ast.Call) and not v.args and not v.keywords else ""
            wrapper = "ModuleList" if isinstance(v, (ast.List, ast.ListComp)) or maker == "list" else (
                "ModuleDict" if isinstance(v, (ast.Dict, ast.DictComp)) or maker == "dict" else None)
            if (wrapper and (_builds_layers(v) or _filled_with_layers(cls, t.attr, modules))
                    and v.end_col_offset is not None):
                found.append((v, f"self.{t.attr}", wrapper))
    if not found:
        return None
    lines = code.splitlines(keepends=True)
    for v, _, wrapper in sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset), reverse=True):
        first, last = v.lineno - 1, (v.end_lineno or v.lineno) - 1
        end = lines[last].encode()
        lines[last] = (end[:v.end_col_offset] + b")" + end[v.end_col_offset:]).decode()
        start = lines[first].encode()
        lines[first] = (start[:v.col_offset] + f"{nn}.{wrapper}(".encode() + start[v.col_offset:]).decode()
    what = ", ".join(f"line {v.lineno}: {name} wrapped in {nn}.{w}" for v, name, w in found)
    return "".join(lines), what + " (layers in a plain list or dict are not registered, so not optimized)"


def apply(f: Failure) -> Candidate | None:
    if EMPTY not in f.error:
        return None
    found = registered_layers(f.code)
    return Candidate(*found) if found is not None else None


RULE = Rule("module_list", "an optimizer with no parameters: a module's plain list of layers made nn.ModuleList",
            apply)
