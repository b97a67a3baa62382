"""Leases: every process that uses the server holds one (``<cache>/leases/<pid>.json``, its pid
and start time), so the server is stopped only when no other live process uses it."""
from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

from resources.processes import live_process

_LEASES = "leases"


def _me() -> tuple[int, float]:
    return os.getpid(), psutil.Process().create_time()


def lease_path(cache: Path, pid: int) -> Path:
    return cache / _LEASES / f"{pid}.json"


def take_lease(cache: Path) -> None:
    pid, created = _me()
    path = lease_path(cache, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid, "create_time": created}))
    os.replace(tmp, path)


def live_leases(cache: Path) -> list[int]:
    """Pids of the live processes holding a lease; leases of dead processes (a killed loop) are
    dropped on the way."""
    alive = []
    for f in sorted((cache / _LEASES).glob("*.json")) if (cache / _LEASES).is_dir() else []:
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            rec = {}
        if live_process(rec.get("pid"), rec.get("create_time")) is not None:
            alive.append(rec["pid"])
        else:
            f.unlink(missing_ok=True)
    return alive


