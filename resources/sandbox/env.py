"""The environment of a sandboxed command: a minimal one, with anything secret-looking dropped
whatever the caller passes, and the host dirs it must not see (hidden) or needs (interpreter)."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from resources.settings import settings

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
# put first on every sandboxed program's PYTHONPATH (and bound read-only into the sandbox): its
# sitecustomize prints the values at the crash before a traceback (crash_hook/sitecustomize.py)
CRASH_HOOK = Path(__file__).resolve().parent / "crash_hook"
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def _is_secret(name: str) -> bool:
    up = name.upper()
    return any(m in up for m in _SECRET_MARKERS)


def build_env(workdir: Path, python: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The minimal environment of a sandboxed command (no secrets, whatever the caller passes)."""
    venv_bin = str(Path(python).absolute().parent)
    base = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": "/tmp",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "XDG_CACHE_HOME": "/tmp/.cache",
        "MPLCONFIGDIR": "/tmp/.matplotlib",
    }
    for k, v in (env or {}).items():
        if _is_secret(k):
            log.warning("runner: not passing %s to the sandboxed command (looks like a secret)", k)
            continue
        base[str(k)] = str(v)
    base["PYTHONPATH"] = os.pathsep.join([str(CRASH_HOOK), *filter(None, [base.get("PYTHONPATH", "")])])
    return {k: v for k, v in base.items() if not _is_secret(k)}


def default_hidden_paths() -> list[Path]:
    """Dirs replaced by an empty tmpfs in the sandbox: $HOME, /root, DAGSTER_HOME(s)."""
    out = [Path.home(), Path("/root"), REPO_ROOT / "dagster_home"]
    if home := settings().dagster_home:
        out.append(Path(home))
    return out


def interpreter_roots(python: str) -> list[Path]:
    """Dirs an interpreter needs (venv + its base install), to re-expose if hidden."""
    roots: list[Path] = []
    p = Path(python).absolute()
    roots.append(p.parent.parent)  # the venv (or install) prefix
    roots.append(p.resolve().parent.parent)  # the real install prefix
    cfg = p.parent.parent / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(errors="replace").splitlines():
            k, _, v = line.partition("=")
            if k.strip() == "home" and v.strip():
                roots.append(Path(v.strip()).resolve().parent)
    if p.resolve() == Path(sys.executable).resolve() or str(p) == sys.executable:
        roots += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                  Path(sys.base_exec_prefix)]
    return roots
