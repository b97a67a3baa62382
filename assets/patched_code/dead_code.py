"""Does an edit change what the program runs, or only add code that never runs?

A small model asked to implement an idea often writes the new function (a mixup helper, a
scheduler class) and never calls it, or guards the new code with a flag the run command never
passes. The file changed; the experiment did not. `dead_code_only(before, after)` decides it
with `ast` alone: both versions are reduced to their *live* program and compared.

The live program drops, repeatedly until nothing changes:
- branches whose test is a constant (`if False:`, `if 0:`, `while False:`, the `else` of `if True:`),
  including a command-line flag that the run command does not pass and whose default is falsy
  (`parser.add_argument("--use_mixup", action="store_true")` ... `if args.use_mixup:`);
- statements after `return`, `raise`, `break` or `continue` in the same block;
- functions and classes (undecorated, or decorated only with staticmethod/classmethod/property)
  whose name nothing else refers to (a Name, an attribute, or a string such as getattr's);
  methods too, except dunders and the hooks frameworks call by name (`forward`, `step`, ...);
- imports whose names nothing reads, assignments of side-effect-free values (constants,
  names, containers of them) to names nothing reads, and `add_argument` options the run command
  does not pass and nothing reads;
- docstrings.

Entry points (`roots`: 'fn' or 'Class.method', assets/editing/entry_points.py) are never dropped:
the task's evaluator calls them from outside the file, so an edit inside one, or inside anything
it calls, changes what runs. Roots ["*"] keep every public top-level definition (a file that an
evaluator imports, with no entry point known).

Conservative by design: anything that might run (a call, a decorator that registers, an
attribute someone reads) stays, so a real change is never called dead; a dead change the rules
do not cover (e.g. a flag whose default is truthy but whose effect cancels out) is missed."""
from __future__ import annotations

import ast
import copy
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

# methods that frameworks call by name without the file ever naming them
IMPLICIT_METHODS = frozenset({
    "forward", "step", "zero_grad", "get_lr", "reset_parameters", "extra_repr", "training_step",
    "validation_step", "test_step", "configure_optimizers", "setup", "teardown", "run", "fit", "predict",
    "transform", "fit_transform", "score", "call", "build", "get_config", "backward", "state_dict",
    "load_state_dict", "parameters", "train", "eval",
})
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_JUMPS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


@dataclass
class _Live:
    """The live program of one file, with what was dropped on the way (for the reason)."""
    tree: ast.Module
    dropped: list[str] = field(default_factory=list)

    def dump(self) -> str:
        return ast.dump(self.tree, annotate_fields=False, include_attributes=False)


def _decorator_name(d: ast.expr) -> str:
    return d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else ""


def _removable_def(node: ast.stmt) -> bool:
    return isinstance(node, _DEFS) and all(_decorator_name(d) in _PLAIN_DECORATORS for d in node.decorator_list)


def _references(tree: ast.AST, skip: ast.AST | None = None, attributes: bool = True) -> set[str]:
    """Every name the code reads: Name loads, attribute names (unless `attributes` is False),
    identifier-like strings; the subtree `skip` (a definition's own body) is left out."""
    seen: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if node is skip:
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            seen.add(node.id)
        elif isinstance(node, ast.Attribute) and attributes:
            seen.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            seen.add(node.value)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            seen.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return seen


def _pure(e: ast.expr | None) -> bool:
    """A value whose evaluation cannot do anything (no calls, no subscripts of live objects)."""
    if e is None or isinstance(e, (ast.Constant, ast.Name, ast.Lambda)):
        return True
    if isinstance(e, ast.Attribute):
        return _pure(e.value)
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return all(_pure(x) for x in e.elts)
    if isinstance(e, ast.Dict):
        return all(_pure(x) for x in e.keys) and all(_pure(x) for x in e.values)
    if isinstance(e, ast.UnaryOp):
        return _pure(e.operand)
    if isinstance(e, ast.BinOp):
        return _pure(e.left) and _pure(e.right)
    return False


def _option(n: ast.AST) -> tuple[str, list[str], dict[str, ast.expr]] | None:
    """(dest, option strings, keywords) of a `parser.add_argument("--x", ...)` call with options."""
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"):
        return None
    opts = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not opts or not all(o.startswith("-") for o in opts):
        return None  # a positional: always given
    kw = {k.arg: k.value for k in n.keywords if k.arg}
    dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else \
        max(opts, key=lambda o: o.startswith("--")).lstrip("-").replace("-", "_")
    return dest, opts, kw


def _option_dest(s: ast.stmt) -> str | None:
    o = _option(s.value) if isinstance(s, ast.Expr) else None
    return o[0] if o else None


def _unpassed_options(tree: ast.Module, command: list[str] | None) -> dict[str, list[str]]:
    """dest -> option strings of every option the run command does not pass."""
    if command is None:
        return {}
    words = set(command) | {w.split("=", 1)[0] for w in command if w.startswith("-")}
    return {o[0]: o[1] for n in ast.walk(tree) if (o := _option(n)) and not words & set(o[1])}


def _falsy_flags(tree: ast.Module, command: list[str] | None) -> dict[tuple[str, str], bool]:
    """(args variable, attribute) -> its constant value for command-line options the run command
    does not pass: store_true flags (False), store_false flags (True), falsy constant defaults."""
    unpassed = _unpassed_options(tree, command)
    holders = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
               and isinstance(n.value.func, ast.Attribute) and n.value.func.attr in ("parse_args", "parse_known_args")
               for t in n.targets if isinstance(t, ast.Name)} or {"args"}
    values: dict[tuple[str, str], bool] = {}
    for n in ast.walk(tree):
        if (o := _option(n)) is None or o[0] not in unpassed:
            continue  # not an option, or passed by the command
        dest, _, kw = o
        action = kw["action"].value if isinstance(kw.get("action"), ast.Constant) else None
        if "default" in kw:
            if not isinstance(kw["default"], ast.Constant):
                continue
            value = bool(kw["default"].value)
        elif action in ("store_true", "store_false"):
            value = action == "store_false"
        elif action in (None, "store"):
            value = False  # argparse's default: None
        else:
            continue
        for h in holders:
            values[(h, dest)] = value
    return values


def _truth(e: ast.expr, flags: dict[tuple[str, str], bool]) -> bool | None:
    """The test's constant truth value, or None when it depends on the run."""
    if isinstance(e, ast.Constant):
        return bool(e.value)
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        return flags.get((e.value.id, e.attr))
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        t = _truth(e.operand, flags)
        return None if t is None else not t
    if isinstance(e, ast.BoolOp):
        parts = [_truth(v, flags) for v in e.values]
        if isinstance(e.op, ast.And):
            return False if False in parts else (True if all(p is True for p in parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    return None


class _Reducer:
    def __init__(self, flags: dict[tuple[str, str], bool], dropped: list[str]):
        self.flags, self.dropped = flags, dropped

    def block(self, body: list[ast.stmt], in_class: bool = False) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for i, s in enumerate(body):
            if i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) \
                    and isinstance(s.value.value, str):
                continue  # a docstring
            out.extend(self.stmt(s))
            if isinstance(s, _JUMPS):
                if body[i + 1:]:
                    self.dropped.append(f"code after `{type(s).__name__.lower()}`")
                break
        return out or [ast.Pass()]

    def stmt(self, s: ast.stmt) -> list[ast.stmt]:
        if isinstance(s, (ast.If, ast.While)):
            t = _truth(s.test, self.flags)
            if t is False:
                self.dropped.append(f"the branch under `{ast.unparse(s.test)}`, which never runs")
                return self.block(s.orelse) if s.orelse else []
            if t is True and isinstance(s, ast.If):
                if s.orelse:
                    self.dropped.append(f"the `else` of `if {ast.unparse(s.test)}`")
                return self.block(s.body)
        for name in ("body", "orelse", "finalbody"):
            sub = getattr(s, name, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                setattr(s, name, self.block(sub, in_class=isinstance(s, ast.ClassDef)))
        if isinstance(s, ast.Try):
            for h in s.handlers:
                h.body = self.block(h.body)
        return [s]


def _called_from_outside(name: str, prefix: str, roots: frozenset[str]) -> bool:
    """Whether the definition `prefix + name` is an entry point, or a class holding one."""
    qual = prefix + name
    public = not name.startswith("_") and (not prefix or prefix[0] not in "_\0")
    return qual in roots or any(r.startswith(qual + ".") for r in roots) or ("*" in roots and public)


def _drop_unused(tree: ast.Module, dropped: list[str], options: dict[str, list[str]],
                 roots: frozenset[str] = frozenset()) -> bool:
    """One pass over every block: drop definitions (but the entry points `roots`), imports and
    pure assignments nothing reads, and command-line options (`options`: dest -> option strings,
    those the command does not pass) nothing reads."""
    changed = False
    names, everything = _references(tree, attributes=False), _references(tree)

    def visit(body: list[ast.stmt], in_class: bool, prefix: str = "") -> list[ast.stmt]:
        nonlocal changed
        out = []
        for s in body:
            if _removable_def(s):
                implicit = in_class and (s.name.startswith("__") or s.name in IMPLICIT_METHODS) \
                    or _called_from_outside(s.name, prefix, roots)
                if not implicit and s.name not in _references(tree, skip=s):
                    kind = "class" if isinstance(s, ast.ClassDef) else "method" if in_class else "function"
                    dropped.append(f"{kind} `{s.name}`, which nothing calls")
                    changed = True
                    continue
            elif isinstance(s, (ast.Import, ast.ImportFrom)) and not in_class:
                bound = [a.asname or a.name.split(".")[0] for a in s.names]
                if "*" not in bound and not any(n in names for n in bound):
                    dropped.append(f"import of {', '.join(bound)}, which nothing uses")
                    changed = True
                    continue
            elif isinstance(s, (ast.Assign, ast.AnnAssign)) and not in_class:
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                if _pure(s.value) and all(isinstance(t, ast.Name) and t.id not in names for t in targets):
                    dropped.append(f"`{', '.join(t.id for t in targets)}`, which nothing reads")
                    changed = True
                    continue
            elif (dest := _option_dest(s)) is not None and dest in options and dest not in everything:
                dropped.append(f"option {options[dest][0]}, which the command does not pass and nothing reads")
                changed = True
                continue
            # an entry point is a module-level definition (under `if`/`try` too) or a method of a
            # module-level class ('Class.method'); nothing inside a function is one
            if isinstance(s, ast.ClassDef):
                inner = f"{s.name}." if not prefix and not in_class else "\0"
            else:
                inner = "\0" if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) else prefix
            for field_name in ("body", "orelse", "finalbody"):
                sub = getattr(s, field_name, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    setattr(s, field_name, visit(sub, isinstance(s, ast.ClassDef), inner) or [ast.Pass()])
            for h in getattr(s, "handlers", []):
                h.body = visit(h.body, False, prefix) or [ast.Pass()]
            out.append(s)
        return out

    tree.body = visit(tree.body, False)
    return changed


def live_program(code: str, command: list[str] | None = None, roots: Sequence[str] = ()) -> _Live | None:
    """The program without the code that cannot run (see the module docstring); None when
    `code` does not parse. `command`: the run command's words (flags it does not pass keep
    their defaults); None: flags are not folded. `roots`: the entry points something outside
    the file calls."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    tree = copy.deepcopy(tree)
    dropped: list[str] = []
    flags, options = _falsy_flags(tree, command), _unpassed_options(tree, command)
    for _ in range(50):  # fixpoint: dropping a function can leave its helpers unused
        tree.body = _Reducer(flags, dropped).block(tree.body)
        if not _drop_unused(tree, dropped, options, frozenset(roots)):
            break
    return _Live(tree, dropped)


def dead_code_only(before: str, after: str, command: list[str] | str | None = None,
                   roots: Sequence[str] = ()) -> str | None:
    """None when the edit changes the live program (or either side does not parse); else the
    reason, naming what the edit added that never runs. `roots`: the entry points (see the
    module docstring)."""
    if isinstance(command, str):
        command = shlex.split(command)
    old, new = live_program(before, command, roots), live_program(after, command, roots)
    if old is None or new is None or old.dump() != new.dump():
        return None
    added = [d for d in new.dropped if d not in old.dropped] or new.dropped
    what = "; ".join(dict.fromkeys(added)) if added else "code that never runs"
    return f"the edit only adds or changes code that never runs ({what})"
