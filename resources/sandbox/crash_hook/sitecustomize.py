"""Values at the crash: printed to stderr, just before the traceback, when a sandboxed Python
program dies of an uncaught exception.

The runner puts this folder first on the program's PYTHONPATH (and binds it read-only into the
sandbox), so Python imports this file at start-up as ``sitecustomize``. It installs an excepthook
and runs the next ``sitecustomize`` on the path, if any.
Nothing else happens unless the program crashes; then, for the innermost frames of the program's
own code (files under its working folder), it prints what a person debugging would look at
first: each local's shape and dtype (tensors, arrays, tables), a module's layers and parameter
count, an optimizer's parameter count, small numbers and strings, the sizes of containers,
and the integer range of label-like tensors. The names used on the failing line come first.

It imports nothing: third-party objects are recognised by their type's module and attributes,
and any error while describing a value is swallowed (the program's own traceback still follows).
The block is parsed on the host by assets/editing/crash_values.py (its markers are shared)."""
import os
import sys

BEGIN = "[values at the crash: innermost frames of the program's own code]"
END = "[end of values at the crash]"
MAX_FRAMES = 3
MAX_NAMES = 16
MAX_LINE = 160
MAX_STATS_ELEMENTS = 10_000_000  # min/max are computed only below this size

_HERE = os.path.dirname(os.path.abspath(__file__))


def _clip(text, limit=MAX_LINE):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_of(v):
    t = type(v)
    return (t.__module__ or "").split(".")[0], t.__name__


def _range(v, integer):
    """'min a, max b' of a tensor or array small enough to scan."""
    try:
        n = v.numel() if hasattr(v, "numel") else int(v.size)
        if n == 0 or n > MAX_STATS_ELEMENTS:
            return ""
        if hasattr(v, "detach"):
            v = v.detach()
        lo, hi = v.min(), v.max()
        lo, hi = (lo.item(), hi.item()) if hasattr(lo, "item") else (lo, hi)
        fmt = (lambda x: str(int(x))) if integer else (lambda x: f"{float(x):.4g}")
        return f", min {fmt(lo)}, max {fmt(hi)}"
    except Exception:
        return ""


def _tensor(v):
    shape = list(v.shape)
    dtype = str(v.dtype).replace("torch.", "")
    extra = ""
    if str(getattr(v, "device", "cpu")) != "cpu":
        extra += f", on {v.device}"
    if getattr(v, "requires_grad", False):
        extra += ", requires grad"
    numeric = dtype != "bool" and not dtype.startswith("complex")
    extra += _range(v, not dtype.startswith(("float", "bfloat", "half", "double"))) if numeric else ""
    return f"torch tensor, shape {shape}, {dtype}{extra}"


def _array(v):
    kind = getattr(v.dtype, "kind", "")
    extra = _range(v, kind in "iu") if kind in "iuf" else ""
    return f"numpy array, shape {list(v.shape)}, {v.dtype}{extra}"


def _module(v):
    try:
        n = sum(p.numel() for p in v.parameters())
    except Exception:
        n = "?"
    parts = []
    try:
        for name, child in list(v.named_children())[:8]:
            parts.append(f"{name}={_clip(_compact(child), 60)}")
    except Exception:
        pass
    if parts:
        return f"{type(v).__name__} (torch module), {n} parameters; layers: {', '.join(parts)}"
    if (type(v).__module__ or "").startswith("torch"):  # a library layer or loss: its own repr says it
        return f"{_clip(_compact(v), 80)} (torch module), {n} parameters"
    return f"{type(v).__name__} (torch module), {n} parameters; no layers registered"


def _compact(module):
    text = repr(module).replace("in_features=", "in=").replace("out_features=", "out=")
    return text.replace(", bias=True", "")


def _optimizer(v):
    try:
        n = sum(len(g["params"]) for g in v.param_groups)
        return f"{type(v).__name__} (torch optimizer), {n} parameter tensors"
    except Exception:
        return f"{type(v).__name__} (torch optimizer)"


def describe(v):
    """One short line about a value, or None for what is not worth a line (modules, functions,
    classes)."""
    if isinstance(v, type) or type(v).__name__ in ("module", "function", "builtin_function_or_method", "method"):
        return None
    top, name = _type_of(v)
    if top == "torch":
        if hasattr(v, "shape") and hasattr(v, "dtype") and hasattr(v, "numel"):
            return _tensor(v)
        if hasattr(v, "param_groups"):
            return _optimizer(v)
        if hasattr(v, "named_children") and hasattr(v, "parameters"):
            return _module(v)
    if hasattr(v, "named_children") and hasattr(v, "parameters") and hasattr(v, "forward"):
        return _module(v)  # a subclass of torch.nn.Module defined in the program
    if hasattr(v, "param_groups") and hasattr(v, "step"):
        return _optimizer(v)
    if top == "numpy" and name == "ndarray":
        return _array(v)
    if top == "numpy" and hasattr(v, "dtype") and hasattr(v, "item"):
        return f"numpy {v.dtype} scalar {_clip(repr(v.item()), 60)}"
    if top == "pandas" and name == "DataFrame":
        cols = ", ".join(f"{c}:{t}" for c, t in list(v.dtypes.astype(str).items())[:12])
        more = f" (+{v.shape[1] - 12} more)" if v.shape[1] > 12 else ""
        return f"pandas DataFrame, shape {list(v.shape)}, columns {cols}{more}"
    if top == "pandas" and name == "Series":
        return f"pandas Series {v.name!r}, length {len(v)}, {v.dtype}"
    if hasattr(v, "get_params") and hasattr(v, "fit"):
        return "scikit-learn " + _clip(repr(v), 120)
    if isinstance(v, (bool, int, float, complex, type(None))):
        return repr(v)
    if isinstance(v, (str, bytes)):
        return _clip(repr(v), 100)
    if isinstance(v, (list, tuple, set, frozenset, dict)):
        kind = type(v).__name__
        if type(v).__module__ != "builtins":  # a subclass: named with the container it is
            kind += f" ({type(v).__bases__[0].__name__})"
        if not v:
            return f"empty {kind}"
        first = next(iter(v.values() if isinstance(v, dict) else v))
        about = describe(first) if not isinstance(first, (list, tuple, dict, set)) else type(first).__name__
        what = "first value" if isinstance(v, dict) else "first item"
        return _clip(f"{kind} of {len(v)}; {what}: {about or type(first).__name__}")
    if callable(v):
        return None
    return _clip(f"{type(v).__name__} object")


def _identifiers(line):
    names, word = [], ""
    for ch in line + " ":
        if ch.isalnum() or ch == "_":
            word += ch
        else:
            if word and not word[0].isdigit() and word not in names:
                names.append(word)
            word = ""
    return names


def _assigns(line, name):
    """Does `line` assign `name` (`name = ...`, `self.name = ...`, `name: T = ...`, `a, name = ...`)?"""
    head, eq, rest = line.partition("=")
    if not eq or rest.startswith("=") or head.rstrip().endswith(("!", "<", ">", "=")):
        return False
    return name in _identifiers(head.split(":")[0]) and "(" not in head


def _line_names(filename, lineno, hops=2):
    """The names of the failing line, then those of the lines that last assigned them above it
    (`logits = model(x)` -> model, x; `model = Net(N_CLASSES)` -> N_CLASSES), `hops` deep: the
    values a wrong shape or count comes from."""
    try:
        import linecache

        lines = linecache.getlines(filename)
    except Exception:
        return []
    if not 1 <= lineno <= len(lines):
        return []
    names = _identifiers(lines[lineno - 1])
    frontier = list(names)
    for _ in range(hops):
        found = []
        for name in frontier:
            for i in range(lineno - 2, -1, -1):
                if _assigns(lines[i], name):
                    found += [n for n in _identifiers(lines[i]) if n not in names and n not in found]
                    break
        names += found
        frontier = found
    return names


def _own(filename, root):
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return path.startswith(root + os.sep) and "site-packages" not in path


def _self_attributes(frame, lineno, scope):
    """`self.name` for each attribute of `self` the failing line reads (`self.window`)."""
    if "self" not in scope:
        return []
    try:
        import linecache

        line = linecache.getline(frame.f_code.co_filename, lineno)
    except Exception:
        return []
    out = []
    for part in line.split("self.")[1:]:
        attr = _identifiers(part)[:1]
        if attr and f"self.{attr[0]}" not in out:
            out.append(f"self.{attr[0]}")
    return out


def _lookup(scope, name):
    if name.startswith("self."):
        return getattr(scope["self"], name[5:])
    return scope[name]


def frame_lines(tb, root):
    frames = []
    while tb is not None:
        if _own(tb.tb_frame.f_code.co_filename, root):
            frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    out = []
    for frame, lineno in frames[-MAX_FRAMES:][::-1]:
        rel = os.path.relpath(frame.f_code.co_filename, root)
        out.append(f"  {rel}:{lineno} in {frame.f_code.co_name}")
        on_line = _line_names(frame.f_code.co_filename, lineno)
        # the line's names wherever they live (a global read in a function too), then the frame's locals
        scope = {**{n: frame.f_globals[n] for n in on_line if n in frame.f_globals}, **frame.f_locals}
        names = [n for n in on_line if n in scope] + [n for n in frame.f_locals if n not in on_line]
        names[1:1] = _self_attributes(frame, lineno, scope)
        shown = 0
        for n in names:
            if shown >= MAX_NAMES or n.startswith("__"):
                continue
            try:
                about = describe(_lookup(scope, n))
            except Exception:
                about = None
            if about is None:
                continue
            out.append(f"    {n} = " + _clip(about, MAX_LINE - len(n) - 7))
            shown += 1
    return out


def _hook(etype, value, tb):
    try:
        lines = frame_lines(tb, os.path.abspath(os.getcwd()))
        if lines:
            sys.stderr.write("\n".join([BEGIN, *lines, END]) + "\n")
            sys.stderr.flush()
    except Exception:
        pass
    sys.__excepthook__(etype, value, tb)


def _install():
    sys.excepthook = _hook
    try:  # the next sitecustomize on the path (the system's), if any, runs as it would have
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec

        spec = PathFinder.find_spec("sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _HERE])
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module(module_from_spec(spec))
    except Exception:
        pass


if __name__ == "sitecustomize":
    _install()
