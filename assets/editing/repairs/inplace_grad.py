"""A tensor changed in place that autograd still needs ("one of the variables needed for gradient
computation has been modified by an inplace operation"): the error is raised at `backward()`, far
from the change, so the rule rewrites every in-place tensor operation in the model's `forward`
methods as a new tensor: `h += x` -> `h = h + x`, `x.add_(y)` -> `x = x.add(y)`,
`inplace=True` -> `inplace=False`. The values are the same; only the old tensor is kept. Sure: the
message names the cause, and the rewrite changes no value."""
from __future__ import annotations

import ast

from assets.editing.repairs.base import Candidate, Failure, Rule, replace_on_line

SIGN = "modified by an inplace operation"
OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
       ast.FloorDiv: "//", ast.Mod: "%"}
IN_PLACE = {"add_", "sub_", "mul_", "div_", "clamp_", "relu_", "sigmoid_", "tanh_", "exp_", "pow_", "neg_",
            "abs_", "sqrt_", "masked_fill_", "addmm_", "transpose_", "unsqueeze_",
            "squeeze_", "t_"}


def _forwards(tree: ast.AST) -> list[ast.FunctionDef]:
    return [f for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
            if isinstance(f, ast.FunctionDef) and f.name == "forward"]


def out_of_place(code: str) -> tuple[str, str] | None:
    """The code with the in-place tensor operations of its forward methods rewritten; None when
    they have none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    edits: list[tuple[ast.stmt | ast.keyword, str]] = []  # (node, its new source)
    for fn in _forwards(tree):
        for node in ast.walk(fn):
            if (isinstance(node, ast.AugAssign) and type(node.op) in OPS
                    and isinstance(node.target, (ast.Name, ast.Attribute))):
                target = ast.unparse(node.target)
                edits.append((node, f"{target} = {target} {OPS[type(node.op)]} ({ast.unparse(node.value)})"))
            elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                  and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in IN_PLACE
                  and isinstance(node.value.func.value, (ast.Name, ast.Attribute))):
                call = node.value
                target = ast.unparse(call.func.value)
                args = ", ".join(ast.unparse(a) for a in [*call.args, *call.keywords])
                edits.append((node, f"{target} = {target}.{call.func.attr[:-1]}({args})"))
            elif isinstance(node, ast.keyword) and node.arg == "inplace" and ast.unparse(node.value) == "True":
                edits.append((node, "inplace=False"))
    edits = [(n, new) for n, new in edits if n.lineno == n.end_lineno and n.end_col_offset is not None]
    if not edits:
        return None
    for node, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        code = replace_on_line(code, node, new)  # last first: the earlier edits' columns stay valid
    where = ", ".join(f"line {n}" for n in sorted({node.lineno for node, _ in edits}))
    return code, f"{where}: in-place tensor operations in forward made new tensors"


def apply(f: Failure) -> Candidate | None:
    if SIGN not in f.error:
        return None
    found = out_of_place(f.code)
    return Candidate(*found, sure=True) if found is not None else None


RULE = Rule("inplace_grad", "a tensor autograd needs changed in place: forward's in-place operations made new "
            "tensors", apply)
