"""What the isolated interpreter runs: assets/editing/lookup.py starts it as
`python -I lookup_script.py <command> <json arguments>` from an empty folder with a minimal
environment, so only installed packages are importable (never a module of the workspace). It
imports what it is asked about, reads names and signatures, never calls what it finds, and
prints its answer as one JSON line (the last line of its output; a module that prints while
imported does not disturb it). Standard library only: nothing of the project is on its path.

Commands (each argument list is one JSON array):
- exported [names, modules, limit]: {name: [modules]}, which of the modules, and of the public
  submodules of the packages among them (not the standard library's, two levels down), export
  each name as a public class or function; at most `limit` modules are imported;
- parameters [module, path]: the keyword parameters of that attribute path of the module (a
  class: its constructor's), or null;
- check [imports, calls, limit]: for the `from module import name` pairs, the modules of the
  same package that export each name the module does not have ("missing"); for the calls'
  (module, path) pairs, their signatures ("calls", see `described`), a path whose first part is
  a missing import resolved through the modules that export it."""
from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import sys
from collections.abc import Callable

ACTS = {"antigravity", "this", "turtle", "turtledemo", "tkinter", "idlelib", "webbrowser"}  # act when imported
TEXT = 160  # characters kept of a signature and of a docstring's first line


def public(module: str) -> bool:
    return module.split(".")[0] not in ACTS and not any(
        p.startswith("_") or p in ("tests", "testing", "conftest") for p in module.split("."))


def exported(names: list[str], wanted: list[str], limit: int) -> dict[str, list[str]]:
    mods = list(dict.fromkeys(m for m in wanted if public(m)))
    packages = [m for m in mods if "." not in m and m not in sys.stdlib_module_names]
    for _ in range(2):  # two levels below each top package: torch.utils.data, sklearn.linear_model
        below = []
        for m in packages:
            try:
                pkg = importlib.import_module(m)
            except BaseException:
                continue
            below += [f"{m}.{i.name}" for i in pkgutil.iter_modules(getattr(pkg, "__path__", []) or [])
                      if public(i.name)]
        mods += [m for m in below if m not in mods]
        packages = below
    found: dict[str, list[str]] = {n: [] for n in names}
    for m in mods[:limit]:
        try:
            mod = importlib.import_module(m)
        except BaseException:
            continue
        listed = getattr(mod, "__all__", None)
        for name in names:
            obj = getattr(mod, name, None)
            if (inspect.isclass(obj) or inspect.isroutine(obj)) and (listed is None or name in listed):
                found[name].append(m)
    return found


def resolve(module: str, path: str) -> object:
    """The object at the attribute path of the module, importing a submodule its package does
    not import itself (`from sklearn import linear_model`); raises when there is none."""
    if module.split(".")[0] in ACTS:
        raise ImportError(module)
    obj = importlib.import_module(module)
    parts = path.split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            importlib.import_module(module + "." + ".".join(parts[:i + 1]))
        obj = getattr(obj, part)
    return obj


def keyword_names(obj: object) -> list[str]:
    params = inspect.signature(obj).parameters.values()  # type: ignore[arg-type]
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def parameters(module: str, path: str) -> list[str] | None:
    try:
        return keyword_names(resolve(module, path))
    except BaseException:
        return None


def _short(text: str) -> str:
    return text if len(text) <= TEXT else text[:TEXT - 3] + "..."


def described(obj: object) -> dict | None:
    """A callable's signature as data: its parameters in order ([name, kind], kind one of
    positional_only, positional, var_positional, keyword_only, var_keyword), the signature as
    text and the first line of its docstring (both cut to TEXT characters); None without one."""
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except BaseException:
        return None
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional_only", inspect.Parameter.POSITIONAL_OR_KEYWORD:
             "positional", inspect.Parameter.VAR_POSITIONAL: "var_positional",
             inspect.Parameter.KEYWORD_ONLY: "keyword_only", inspect.Parameter.VAR_KEYWORD: "var_keyword"}
    name = getattr(obj, "__name__", "")
    lines = [ln.strip() for ln in (inspect.getdoc(obj) or "").splitlines()]
    # a compiled function's docstring starts with its signature (numpy.zeros): the text after it
    lines = [ln for ln in lines if ln and not (name and ln.startswith(name + "("))]
    doc = lines[0] if lines else ""
    try:
        text = str(sig)
    except BaseException:
        text = "(...)"
    return {"params": [[p.name, kinds[p.kind]] for p in sig.parameters.values()], "text": _short(text),
            "doc": _short(doc), "class": inspect.isclass(obj)}


def check(imports: list[list[str]], calls: list[list[str]], limit: int) -> dict:
    absent: list[tuple[str, str]] = []
    for module, name in imports:
        try:
            mod = importlib.import_module(module) if public(module) else None
        except BaseException:
            continue  # not installed (a module of the workspace, say): nothing known about it
        if mod is None or hasattr(mod, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
            continue
        except BaseException:
            absent.append((module, name))
    missing: dict[str, list[str]] = {}
    for top in dict.fromkeys(module.split(".")[0] for module, _ in absent):  # one walk per package
        found = exported(list(dict.fromkeys(n for m, n in absent if m.split(".")[0] == top)), [top], limit)
        missing.update({f"{m}:{n}": [x for x in found[n] if x != m] for m, n in absent if m.split(".")[0] == top})
    signatures: dict[str, dict | None] = {}
    for module, path in calls:
        head = path.split(".")[0]
        for where in [module, *missing.get(f"{module}:{head}", [])]:
            try:
                signatures[f"{module}:{path}"] = described(resolve(where, path))
                break
            except BaseException:
                signatures[f"{module}:{path}"] = None
    return {"missing": missing, "calls": signatures}


COMMANDS: dict[str, Callable[..., object]] = {"exported": exported, "parameters": parameters, "check": check}


def main(argv: list[str]) -> None:
    answer = COMMANDS[argv[1]](*json.loads(argv[2]))
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    main(sys.argv)
