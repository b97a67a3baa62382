"""The isolated library lookup: what installed packages export, and the signatures of their
callables, read by importing them in a separate interpreter (assets/editing/lookup_script.py)
that never sees the workspace, so no code the model wrote runs outside the sandbox. Every
answer is JSON; a failure or a timeout is None and the callers then change nothing.

Answers are kept on disk too (the cache folder's lookups/), under a key made of the interpreter,
the installed packages' folders and the lookup script: every Dagster step is its own process,
and the repairs of a round ask the same lookups again. Installing or removing a package changes
its site-packages folder, and so the key; failures are never kept."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from resources.safe_io import atomic_write_text
from resources.settings import settings

SCRIPT = Path(__file__).with_name("lookup_script.py")
LOOKUP_TIMEOUT_S = 60
LOOKUP_MODULES = 400  # modules imported at most by one lookup (torch.utils.data is within the first 400)

_ANSWERS: dict[tuple[str, ...], object] = {}  # lookups answered in this process: installed packages do not change


def isolated(command: str, *args: object):
    """The answer of one command of the lookup script (its JSON, None when it fails or times
    out). An answer is kept for the process: the repair note and the keyword fix of one failure,
    and the drafts of one idea, ask the same lookups (seconds each); a failure is asked again."""
    key = (command, json.dumps(args))
    if key not in _ANSWERS:
        stored = _stored(key)
        answer = stored if stored is not None else _run_isolated(command, key[1])
        if answer is not None:
            _ANSWERS[key] = answer
            if stored is None:
                _store(key, answer)
    return _ANSWERS.get(key)


@functools.cache
def _environment_key() -> str:
    """What a lookup's answer depends on besides its arguments: the interpreter, the installed
    packages (their folders' modification times change with every install or removal) and the
    lookup script itself."""
    paths = sysconfig.get_paths()
    folders = sorted({paths["purelib"], paths["platlib"]})
    parts = [sys.executable, sys.version, str(LOOKUP_MODULES), SCRIPT.read_text()]
    parts += [f"{f}:{os.stat(f).st_mtime_ns}" for f in folders if os.path.isdir(f)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _answer_path(key: tuple[str, str]) -> Path:
    name = hashlib.sha256("\n".join(key).encode()).hexdigest()[:32]
    return settings().cache_dir() / "lookups" / _environment_key() / f"{name}.json"


def _stored(key: tuple[str, str]):
    """The kept answer of this lookup, None when there is none or it does not read back."""
    try:
        record = json.loads(_answer_path(key).read_text())
        return record["answer"] if record.get("key") == list(key) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _store(key: tuple[str, str], answer: object) -> None:
    """Keep an answer for other processes; a folder that cannot be written keeps nothing."""
    path = _answer_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"key": list(key), "answer": answer}))
    except OSError:
        pass


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
