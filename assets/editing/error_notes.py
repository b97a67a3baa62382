"""Notes that go with a failed run's error into a "structure" repair prompt, as pure functions:

- what a common PyTorch / Python error message means, in plain words with its numbers put in
  place (`explain`): a small model reads "mat1 and mat2 shapes cannot be multiplied (32x256 and
  128x128)" but does not work out that a Linear layer built for 128 inputs received 256;
- the definitions of the names the error is about (`name_notes`): the names a module in the
  workspace really defines (for "cannot import name"), the names visible where a NameError
  happened, a class's attributes or the script's command-line arguments (for an
  AttributeError). The model otherwise guesses them (measured: `args.lr` for an undefined
  `learning_rate` although the config calls it `lr`).

Only the experiment's own files are read (`ast`, never imported): nothing here runs the code."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable
from pathlib import Path

from assets.editing.suggestions import callee_parameters  # reads a library signature in a subprocess
from assets.editing.tracebacks import SOURCE_BYTES, _enclosing, clip, parse_source
from resources.safe_io import safe_read_text
from schemas.records import TraceFrame

MAX_NAMES = 40  # names listed per scope; the config of an experiment script has about 20
MAX_FILES = 50  # workspace modules read for one note (the run may have written many)


def _ints(m: re.Match) -> dict[str, int]:
    return {k: int(v) for k, v in m.groupdict().items() if v is not None and v.lstrip("-").isdigit()}


def _linear(m: re.Match) -> str:
    g = _ints(m)
    return (f"A Linear layer (or a matrix product) whose weight expects {g['k']} input features received "
            f"inputs with {g['n']} features (batch {g['b']}): make that layer's in_features {g['n']}, or fix "
            f"the code that produces its input (the layer before it, a flatten, a pooling).")


def _conv(m: re.Match) -> str:
    g = _ints(m)
    shape = [int(x) for x in m["shape"].split(",")]
    w = [int(x) for x in m["weight"].split(",")]
    swapped = len(shape) >= 3 and shape[-1] == g["want"]
    text = (f"A convolution with in_channels={g['want']} (weight {w}) received an input of shape {shape}; "
            f"convolutions read dimension 1 as the channels ([batch, channels, length...]), here {g['got']}.")
    if swapped:
        text += (f" The input's last dimension is {g['want']}: the channels are last, so the input needs its "
                 "dimensions swapped (e.g. transpose(1, 2)) before this layer - or it was swapped twice.")
    else:
        text += (f" The layer before produces {g['got']} channels: this layer's in_channels must be {g['got']} "
                 "(check how the channel count is carried from one layer to the next).")
    return text


def _norm(m: re.Match) -> str:
    g = _ints(m)
    return (f"A BatchNorm layer built for {g['have']} features received an input with {g['want']} channels: "
            f"its num_features must equal the output channels of the layer before it ({g['want']}).")


def _view(m: re.Match) -> str:
    dims = [d.strip() for d in m["shape"].split(",")]
    return (f"A view/reshape to [{', '.join(dims)}] does not fit a tensor of {m['size']} elements: one of the "
            "sizes used in that reshape is wrong (compare them with the tensor's real shape).")


# (pattern, explanation or a function of the match); the first match wins, so specific first
HINTS: list[tuple[re.Pattern, str | Callable[[re.Match], str]]] = [(re.compile(p, re.I), h) for p, h in [
    (r"mat1 and mat2 shapes cannot be multiplied \((?P<b>\d+)x(?P<n>\d+) and (?P<k>\d+)x(?P<o>\d+)\)", _linear),
    (r"weight of size \[(?P<weight>[\d, ]+)\], expected input\[(?P<shape>[\d, ]+)\] to have (?P<want>\d+) "
     r"channels, but got (?P<got>\d+) channels", _conv),
    (r"running_mean should contain (?P<want>\d+) elements not (?P<have>\d+)", _norm),
    (r"shape '\[(?P<shape>[-\d, ]+)\]' is invalid for input of size (?P<size>\d+)", _view),
    (r"Expected input batch_size \((?P<a>\d+)\) to match target batch_size \((?P<b>\d+)\)",
     "The loss received {a} predictions but {b} targets: the targets must be the same batch as the inputs "
     "(index them with the same indices)."),
    # "Long" is taken at its first place after "expected" (the gap before it cannot hold it) and
    # the gaps stop at a newline or a quote: one way to match from each start, where two free
    # gaps (".*Long.*") would try every pair of places
    (r"expected scalar type Long but found (?P<t>\w+)|expected (?:[^L\n]|L(?!ong))*Long[^\n]*? but (?:found|got) "
     r"(?P<u>\w+)|\"nll_loss[^\"\n]*\" not implemented for '(?P<v>\w+)'",
     "Class-index targets of a classification loss must be integer (int64, .long()), not floating point."),
    (r"expected (m1 and m2|mat1 and mat2) to have the same dtype|expected scalar type (?P<a>\w+) but found "
     r"(?P<b>\w+)|Input type \((?P<c>[\w.]+)\) and (weight|bias) type \((?P<d>[\w.]+)\) should be the same",
     "Two tensors with different dtypes meet in one operation: the model's weights are float32, so the data "
     "fed to it must be float32 too (convert it with .float() where it is created); class labels stay int64."),
    (r"Target (?P<t>-?\d+) is out of bounds",
     "A class index in the targets ({t}) is not below the number of classes the model outputs: the output "
     "layer needs as many units as there are classes (the largest label + 1), or the labels must be mapped "
     "to 0 .. classes - 1."),
    (r"optimizer got an empty parameter list",
     "The model had no registered parameters when the optimizer was built: layers kept in a plain Python "
     "list or dict are not registered (use nn.ModuleList / nn.ModuleDict), and layers created after the "
     "optimizer are not in it (build the model first, then the optimizer on model.parameters())."),
    (r"Expected a 2-dimensional container but got|Expected 2D array, got 1D array instead",
     "A scikit-learn estimator takes a matrix of features (rows x columns), and got one 1-D column: give "
     "df[[\"col\"]] instead of df[\"col\"], or array.reshape(-1, 1)."),
    (r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|no CUDA GPUs are available|"
     r"CUDA driver initialization failed",
     "There is no GPU on this machine: keep the model and the data on the CPU (or pick the device with "
     "torch.cuda.is_available())."),
    (r"torch\.return_types\.(?P<f>\w+)",
     "{f}(dim=...) returns a pair (values, indices), not a tensor: take .values (or [0]) of it."),
    (r"Can't call numpy\(\) on Tensor that requires grad",
     "A tensor still attached to the autograd graph reached numpy: store plain numbers (loss.item()) or "
     "detach it first."),
    (r"Object of type (?P<t>\w+) is not JSON serializable",
     "json cannot write a {t}: convert it to a plain Python number or list first (.item() / .tolist() / float())."),
    (r"Dimension out of range \(expected to be in range of \[(?P<lo>-?\d+), (?P<hi>\d+)\], but got (?P<d>-?\d+)\)",
     "The tensor has only {n_dims} dimensions, so dimension {d} does not exist: check which dimension is meant "
     "(e.g. the classes of [batch, classes] logits are dimension 1)."),
    (r"too many values to unpack \(expected (?P<n>\d+)\)",
     "The right-hand side gives more values than the {n} names on the left (or a tensor is unpacked along its "
     "first dimension): give as many values as names."),
    (r"not enough values to unpack \(expected (?P<n>\d+), got (?P<g>\d+)\)",
     "The right-hand side gives {g} values for {n} names on the left: give as many values as names."),
    (r"got an unexpected keyword argument '(?P<k>\w+)'",
     "The function called here has no parameter named {k}: use the name of its real parameter."),
    (r"'(?P<t>\w+)' object is not callable",
     "Something that is a {t}, not a function or a module, is being called: a name is bound to the wrong thing."),
    (r"'(?P<t>list|tuple|dict)' object has no attribute '(?P<a>\w+)'",
     "A plain Python {t} is used as if it were a tensor or another object ({a}): convert it, or use the "
     "object that has {a}."),
    (r"\b(?P<t>\w+)\(\) received an invalid combination of arguments|argument '(?P<a>\w+)' \(position (?P<p>\d+)\) "
     r"must be (?P<w>[\w.]+), not (?P<g>[\w.]+)",
     "A function received an argument of the wrong type: check what is passed to it, and what each value "
     "used there really is (a tuple, a list, a tensor, a number)."),
    (r"NotFittedError|This (?P<t>\w+) instance is not fitted yet",
     "A scikit-learn object is used before it was fitted: call its fit(...) on the training data before "
     "transform/predict (a wrapper such as SelectFromModel with prefit=True needs an estimator fitted "
     "beforehand; with prefit=False it fits the estimator itself)."),
    (r"maximum recursion depth exceeded",
     "A function calls itself without end - often a method (like forward) that calls itself or the module "
     "itself instead of its layers."),
]]


def explain(error: str) -> list[str]:
    """Plain-language notes on the error line (empty if it is not a known kind). The run wrote
    the line: it is clipped (tracebacks.clip) before any pattern sees it."""
    error = clip(error or "")
    for pattern, hint in HINTS:
        m = pattern.search(error)
        if not m:
            continue
        if callable(hint):
            return [hint(m)]
        fields = {k: v for k, v in m.groupdict().items() if v is not None}
        if "hi" in fields:
            fields["n_dims"] = str(int(fields["hi"]) + 1)
        try:
            return [hint.format(**fields)]
        except (KeyError, IndexError):
            return [re.sub(r"\{\w+\}", "?", hint)]
    return []


# -- the names the error is about ----------------------------------------------------------

def _parse(path: Path, workspace: Path) -> ast.Module | None:
    """The module at `path` inside the workspace, read safely (the run may have turned it into a
    link, a FIFO, ...), or None (tracebacks.parse_source)."""
    parsed = parse_source(path, workspace)
    return parsed[1] if parsed else None


def _py_files(workspace: Path) -> list[str]:
    """Names of the workspace's top-level modules, sorted, at most MAX_FILES."""
    return sorted(p.name for p in workspace.glob("*.py"))[:MAX_FILES]


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for e in node.elts for n in _targets(e)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return []


def _bound(body: list[ast.stmt]) -> list[str]:
    """Names a block binds at its own level, in order (assignments, loops, with, imports, defs)."""
    out: list[str] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Assign):
            out += [n for t in node.targets for n in _targets(t)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            out += _targets(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            out += _targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            out += [n for it in node.items if it.optional_vars is not None for n in _targets(it.optional_vars)]
        for field in ("body", "orelse", "finalbody"):  # blocks that do not open a scope
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                  ast.ClassDef)):
                out += _bound(inner)
        if isinstance(node, ast.Try):
            for h in node.handlers:
                out += ([h.name] if h.name else []) + _bound(h.body)
    return list(dict.fromkeys(out))


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return f"{fn.name}({ast.unparse(fn.args)})"


def _describe(node: ast.stmt) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _signature(node)
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        return f"class {node.name}" + (f"({ast.unparse(init.args)})" if init else "")
    return ""


def _listing(names: list[str], wanted: str | None = None) -> str:
    shown = names[:MAX_NAMES] + (["..."] if len(names) > MAX_NAMES else [])
    text = ", ".join(shown)
    if wanted:
        close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
        if close:
            text += f" (closest to {wanted}: {', '.join(close)})"
    return text


def _module_file(module: str, workspace: Path) -> Path | None:
    p = workspace / (module.replace(".", "/") + ".py")
    return p if p.is_file() else None


def module_definitions(module: str, workspace: Path) -> list[str] | None:
    """What a module of the workspace defines at its top level: functions with their parameters,
    classes, then other names; None if the module is not a file of the workspace."""
    path = _module_file(module, workspace)
    tree = _parse(path, workspace) if path else None
    if tree is None:
        return None
    described = [_describe(n) for n in tree.body if _describe(n) and not n.name.startswith("_")]
    others = [n for n in _bound(tree.body) if not n.startswith("_")
              and not any(d.startswith((n + "(", "class " + n)) for d in described)]
    return described + others


def _command_line_arguments(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)),
                        None)
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            longest = max(flags, key=len, default=None)
            if dest or longest:
                out.append(dest or longest.lstrip("-").replace("-", "_"))
    return out


def _class_members(cls: ast.ClassDef) -> list[str]:
    attrs = []
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        attrs.append(e.attr)
    methods = [f"{n.name}()" for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return list(dict.fromkeys(attrs)) + methods


def _function_at(tree: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next((n for n in reversed(_enclosing(tree, line)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                None)


def _workspace_files(frames: list[TraceFrame], workspace: Path) -> list[tuple[str, ast.Module]]:
    files = list(dict.fromkeys(f.file for f in frames))[-MAX_FILES:]
    out = []
    for f in files + [n for n in _py_files(workspace) if n not in files][:MAX_FILES - len(files)]:
        tree = _parse(workspace / f, workspace)
        if tree is not None:
            out.append((f, tree))
    return out


def name_notes(error: str, frames: list[TraceFrame], workspace: str | Path) -> list[str]:
    """The definitions of the names an import, name or attribute error is about."""
    ws = Path(workspace)
    error = clip(error)
    notes: list[str] = []
    if m := re.search(r"cannot import name '(?P<name>\w+)' from '(?P<mod>[\w.]+)'", error):
        defs = module_definitions(m["mod"], ws)
        if defs is not None:
            names = [d.removeprefix("class ").split("(")[0] for d in defs]
            close = difflib.get_close_matches(m["name"], names, n=3, cutoff=0.5)
            notes.append(f"{m['mod']} ({_module_file(m['mod'], ws).name}) has no {m['name']}; it defines: "
                         + "; ".join(defs[:MAX_NAMES]) + (f" (closest: {', '.join(close)})" if close else ""))
    elif m := re.search(r"No module named '(?P<mod>[\w.]+)'", error):
        mods = [n.removesuffix(".py") for n in _py_files(ws)]
        notes.append(f"There is no module {m['mod']}; the workspace's own modules are: {', '.join(mods)} "
                     "(besides installed packages such as torch and numpy).")
    elif m := re.search(r"(?:name|local variable) '(?P<name>\w+)'(?: is not defined| referenced before| where it)",
                        error):
        if frames and (tree := _parse(ws / frames[-1].file, ws)) is not None:
            line = frames[-1].line
            fn = _function_at(tree, line)
            # at the top level only what was bound before the failing line exists yet
            module_names = [n for n in _bound([s for s in tree.body if fn is not None or s.lineno < line])
                            if not n.startswith("__")]
            if fn is not None:
                local = [a.arg for a in fn.args.args + fn.args.kwonlyargs] + _bound(fn.body)
                notes.append(f"Names defined in {fn.name}() (parameters and locals): "
                             + _listing(list(dict.fromkeys(local)), m["name"]))
            notes.append(f"Names defined at the top level of {frames[-1].file}"
                         + (": " if fn is not None else f" before line {line}: ") + _listing(module_names, m["name"]))
            if args := _command_line_arguments(tree):
                notes.append("Command-line arguments (args.NAME): " + ", ".join(args))
    elif m := re.search(r"'(?P<type>\w+)' object has no attribute '(?P<attr>\w+)'", error):
        for file, tree in _workspace_files(frames, ws):
            if m["type"] == "Namespace" and (args := _command_line_arguments(tree)):
                notes.append(f"The command-line arguments {file} defines (args.NAME): "
                             + _listing(args, m["attr"]))
                break
            cls = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == m["type"]), None)
            if cls is not None:
                notes.append(f"{m['type']} ({file}) has these attributes and methods: "
                             + _listing(_class_members(cls), m["attr"]))
                break
    elif (m := re.search(r"got an unexpected keyword argument '(?P<k>\w+)'", error)) and frames:
        inner = next((f for f in reversed(frames) if not Path(f.file).is_absolute() and (ws / f.file).is_file()),
                     None)
        try:
            code = safe_read_text(ws / inner.file, ws, SOURCE_BYTES) if inner is not None else None
        except (OSError, ValueError):
            code = None
        if code and (found := callee_parameters(code, m["k"], inner.line)) is not None:
            notes.append(f"{found[0]} takes these keyword arguments: " + _listing(found[1], m["k"]))
    elif m := re.search(r"module '(?P<mod>[\w.]+)' has no attribute '(?P<attr>\w+)'", error):
        defs = module_definitions(m["mod"], ws)
        if defs is not None:
            notes.append(f"{m['mod']} defines: " + "; ".join(defs[:MAX_NAMES]))
    return notes


def error_notes(error: str | None, frames: list[TraceFrame], workspace: str | Path, values: str = "") -> str:
    """Both kinds of notes as one text for the prompt ("" when there is nothing to add), then
    `values`: what the run's locals held where it failed (tracebacks.crash_values), the facts a
    shape, dtype or count error is about."""
    if not error:
        return ""
    try:
        names = name_notes(error, frames, workspace)
    except RecursionError:  # a definition nested too deep to print (ast.unparse): no names then
        names = []
    notes = "\n".join(f"- {n}" for n in explain(error) + names)
    if values.strip():
        notes += (("\n" if notes else "") + "- The values the run saw where it failed (innermost frame first):\n"
                  + values)
    return notes
