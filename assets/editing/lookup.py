"""The isolated library lookup: what installed packages export, and the signatures of their
callables, read by importing them in a separate interpreter (assets/editing/lookup_script.py)
that never sees the workspace, so no code the model wrote runs outside the sandbox. Every
answer is JSON; a failure or a timeout is None and the callers then change nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).with_name("lookup_script.py")
LOOKUP_TIMEOUT_S = 60
LOOKUP_MODULES = 400  # modules imported at most by one lookup (torch.utils.data is within the first 400)

_ANSWERS: dict[tuple[str, ...], object] = {}  # lookups answered in this process: installed packages do not change


def isolated(command: str, *args: object):
    """The answer of one command of the lookup script (its JSON, None when it fails or times
    out). An answer is kept for the process: the repair note and the keyword fix of one failure,
    and the drafts of one idea, ask the same lookups (seconds each); a failure is asked again."""
    key = (command, json.dumps(args))
    if key not in _ANSWERS and (answer := _run_isolated(command, key[1])) is not None:
        _ANSWERS[key] = answer
    return _ANSWERS.get(key)


def _run_isolated(command: str, arguments: str):
    """Run the lookup script under `python -I` (no script folder, no PYTHONPATH, no user site on
    sys.path) from an empty folder with a minimal environment; its last output line is the JSON."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory(prefix="import-lookup-") as empty:
        try:
            out = subprocess.run([sys.executable, "-I", str(SCRIPT), command, arguments], cwd=empty,
                                 env={**env, "HOME": empty}, capture_output=True, text=True,
                                 timeout=LOOKUP_TIMEOUT_S, stdin=subprocess.DEVNULL)
            return json.loads(out.stdout.strip().splitlines()[-1]) \
                if out.returncode == 0 and out.stdout.strip() else None
        except (subprocess.TimeoutExpired, OSError, ValueError, IndexError):
            return None


def exporting(names: list[str], modules: list[str]) -> dict[str, list[str]]:
    """For each name, which of `modules` (and the public submodules of the non-stdlib packages
    among them) export it as a public class or function; [] for a name when the lookup fails."""
    found = isolated("exported", names, modules, LOOKUP_MODULES) if names and modules else None
    found = found if isinstance(found, dict) else {}
    return {n: [m for m in found.get(n, []) if isinstance(m, str)] for n in names}


def exporting_modules(name: str, modules: list[str]) -> list[str]:
    """`exporting` for one name."""
    return exporting([name], modules)[name]


def parameters(module: str, path: str) -> list[str] | None:
    """The keyword parameters of `module`'s attribute path (a class: its constructor's); None when
    it cannot be imported or has no signature."""
    params = isolated("parameters", module, path)
    return [p for p in params if isinstance(p, str)] if isinstance(params, list) else None


def checked(imports: list[tuple[str, str]], calls: list[tuple[str, str]]) -> dict | None:
    """One lookup for a whole script (see the script's `check`): {"missing": {"module:name":
    [modules that export it]}, "calls": {"module:path": signature or None}}; None on failure."""
    if not imports and not calls:
        return {"missing": {}, "calls": {}}
    answer = isolated("check", [list(i) for i in imports], [list(c) for c in calls], LOOKUP_MODULES)
    if not (isinstance(answer, dict) and isinstance(answer.get("missing"), dict)
            and isinstance(answer.get("calls"), dict)):
        return None
    return answer
