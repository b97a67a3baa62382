"""Shared by the benchmark scripts: the machine line and writing a named section of
bench/RESULTS.md (between `<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->`), so each
benchmark rewrites only its own section."""
from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "RESULTS.md"


def machine() -> str:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) / 2**20
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}"


def today() -> str:
    return dt.date.today().isoformat()


def write_section(name: str, body: str, results: Path = RESULTS) -> str:
    """Replace (or append) the section `name` of RESULTS.md with `body`; returns the section."""
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    section = f"{begin}\n{body.rstrip()}\n{end}"
    text = results.read_text() if results.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        text = text.split(begin)[0] + section + text.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    results.write_text(text)
    return section
