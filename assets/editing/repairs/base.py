"""What every mechanical repair rule shares: the failure it reads (`Failure`: the code, the
bounded error message, the innermost frame in the edited file, the interpreter's "Did you mean"
hint and the wrong name the message is about), the edit it returns (`Candidate`) and its entry
in the registry (`Rule`)."""
from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from assets.editing.code_reading import NAME
from schemas.records import Attempt, TraceFrame

DID_YOU_MEAN = re.compile(rf"Did you mean:? '({NAME})'\?")
# the wrong name in each kind of message, and how it appears in the code
WRONG = (
    (re.compile(rf"^(?:NameError|UnboundLocalError): (?:name|cannot access \w+ variable) '({NAME})'"), "name"),
    (re.compile(rf"^[\w.]*AttributeError: .*has no attribute '({NAME})'"), "attribute"),
    (re.compile(rf"^ImportError: cannot import name '({NAME})'"), "name"),
    (re.compile(rf"^TypeError: .*got an unexpected keyword argument '({NAME})'"), "keyword"),
)
IMPORT_FROM = re.compile(rf"^ImportError: cannot import name '{NAME}' from '([\w.]+)'")


@dataclass(frozen=True)
class Failure:
    """A failed run as the rules read it. `error` is already bounded (tracebacks.clip)."""
    code: str
    error: str
    failed: Attempt
    code_file: str
    folder: Path | None = None
    lines: list[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", self.code.splitlines(keepends=True))

    @cached_property
    def frame(self) -> TraceFrame | None:
        """The innermost frame in the edited file; None when the error arose elsewhere."""
        return next((f for f in reversed(self.failed.frames) if f.file == self.code_file), None)

    @cached_property
    def hint(self) -> str | None:
        """The name the interpreter suggests ("Did you mean: 'factor'?")."""
        m = DID_YOU_MEAN.search(self.error)
        return m.group(1) if m else None

    @cached_property
    def wrong(self) -> tuple[str, str] | None:
        """(kind, name) of the wrong name the message is about, when it has a frame in the
        edited file at a line of the code; kind: name, attribute or keyword."""
        if self.frame is None or not 1 <= self.frame.line <= len(self.lines):
            return None
        for pattern, kind in WRONG:
            if (w := pattern.match(self.error)) is not None:
                return kind, w.group(1)
        return None


@dataclass(frozen=True)
class Candidate:
    code: str
    what: str  # e.g. "line 5: factr -> factor (the interpreter's suggestion)"
    sure: bool = True  # the message or a library names the fix: tried before the LLM's, not after
    # a guess that only makes sizes, counts or names agree with what the run saw, removing nothing an
    # edit added: one run (seconds) checks it, against an LLM answer's minute, and an LLM fix that
    # gets further elsewhere would leave it untried, so it too goes before the LLM's
    early: bool = False


@dataclass(frozen=True)
class Rule:
    name: str
    description: str  # one line: the failure it reads and the edit it makes
    apply: Callable[[Failure], Candidate | None]


def replace_on_line(code: str, node, text: str) -> str:
    """`code` with the source of `node` (an expression on one line) replaced by `text`. AST
    columns count UTF-8 bytes, so the line is cut as bytes."""
    lines = code.splitlines(keepends=True)
    raw = lines[node.lineno - 1].encode()
    lines[node.lineno - 1] = (raw[:node.col_offset] + text.encode() + raw[node.end_col_offset:]).decode()
    return "".join(lines)


FRAME_HEAD = re.compile(r"^  \S+:(?P<line>\d+) in \S+$")
VALUE_LINE = re.compile(r"^    (?P<name>[A-Za-z_][\w.]*) = (?P<about>.*)$")
SHAPE = re.compile(r"shape \[(?P<dims>[\d, ]*)\]")


def frame_values(notes: str) -> dict[str, str]:
    """The innermost frame's locals from the values at the crash (the block the sandbox's hook
    printed, carried in an attempt's error notes): name -> what the hook said about it; {} when
    the notes hold no such block."""
    values: dict[str, str] = {}
    inside = False
    for line in notes.splitlines():
        if FRAME_HEAD.match(line):
            if inside:
                break
            inside = True
        elif inside and (m := VALUE_LINE.match(line)):
            values.setdefault(m["name"], m["about"])
    return values


# an integer tensor's or array's range in its description ("int64, min 0, max 20")
INT_RANGE = re.compile(r"int\d+, min -?\d+, max (?P<max>\d+)")


def dims(text: str) -> list[int]:
    """The sizes of a shape written "64, 32" (as in "[64, 32]" or "(64,32)")."""
    return [int(d) for d in text.split(",") if d.strip()]


def shape_of(about: str) -> list[int] | None:
    """The shape in a tensor's or array's description ("torch tensor, shape [64, 32], float32")."""
    m = SHAPE.search(about)
    return dims(m["dims"]) if m else None


def last_value(tree: ast.Module, name: str) -> ast.expr | None:
    """The value of the last plain one-line assignment to `name` (`NUM_CLASSES = 9`); None without one."""
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]
    if not assigns:
        return None
    v = max(assigns, key=lambda n: n.lineno).value
    return v if v.lineno == v.end_lineno and v.end_col_offset is not None else None


def calls_on_line(tree: ast.AST, line: int) -> list[ast.Call]:
    """The calls whose source spans `line`, innermost (shortest) first."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return sorted(calls, key=lambda c: ((c.end_lineno or c.lineno) - c.lineno, (c.end_col_offset or 0) - c.col_offset))


def attribute_name(node: ast.expr) -> str | None:
    """`self.out` -> "out"; `out` -> "out"; anything else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def built_layers(tree: ast.AST, is_layer: Callable[[ast.Call], bool]) -> dict[str, list[ast.Call]]:
    """The name a value is kept under (`self.out = ...`, `net = ...`) -> the layer constructor calls
    (`is_layer`) in that value, a container's included."""
    built: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and (name := attribute_name(node.targets[0])):
            layers = [c for c in ast.walk(node.value) if isinstance(c, ast.Call) and is_layer(c)]
            if layers:
                built.setdefault(name, []).extend(layers)
    return built


def layers_called(tree: ast.AST, line: int, is_layer: Callable[[ast.Call], bool]) -> list[ast.Call]:
    """The constructor calls of the layers the calls on `line` reach by name (`self.emb(tokens)`
    -> the `nn.Embedding(...)` kept in `self.emb`), innermost call first."""
    built = built_layers(tree, is_layer)
    called = [name for c in calls_on_line(tree, line) if (name := attribute_name(c.func)) in built]
    return [layer for name in dict.fromkeys(called) for layer in built[name]]


def call_arg(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    """The argument at `position` or given as `keyword`; None when absent (or after a *starred one)."""
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def int_literal(node: ast.expr | None) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def torch_class(call: ast.Call, *names: str) -> bool:
    """The call builds one of torch.nn's `names` (`nn.GRU`, `torch.nn.GRU` or an imported `GRU`)."""
    func = ast.unparse(call.func)
    return any(func in (n, f"nn.{n}", f"torch.nn.{n}") for n in names)
