"""Shared by the benchmark scripts: the machine line, the raw record each benchmark writes
(bench/records/<name>.json: what its section's figures are computed from), the provenance lines
every section starts with, and writing a named section of bench/RESULTS.md (between
`<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->`), so each benchmark rewrites only its
own section."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"
RECORDS = ROOT / "bench" / "records"


def machine() -> str:
    cpuinfo, meminfo = Path("/proc/cpuinfo").read_text().splitlines(), Path("/proc/meminfo").read_text().splitlines()
    cpu = next((l.split(":", 1)[1].strip() for l in cpuinfo if l.startswith("model name")), "?")
    mem = int(next(l.split()[1] for l in meminfo if l.startswith("MemTotal"))) / 2**20
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


def repo_path(path: Path) -> str:
    """`path` as a section names a record: relative to the repository when inside it, else as given."""
    p = Path(path).resolve()
    return p.relative_to(ROOT).as_posix() if p.is_relative_to(ROOT) else str(path)


def write_record(name: str, data: dict, records: Path = RECORDS) -> Path:
    """Write a benchmark's raw record (bench/records/<name>.json) and return its path."""
    records.mkdir(parents=True, exist_ok=True)
    path = records / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return path


def read_record(name: str, records: Path = RECORDS) -> dict:
    return json.loads((records / f"{name}.json").read_text())


def rerender(record: str, section: str, render) -> int:
    """A section rendered again from its committed record (no measuring): the record rewritten in the
    canonical form, the section replaced; returns 0 (a main's exit status)."""
    rec = read_record(record)
    body = render(rec)
    write_record(record, rec)
    print(write_section(section, body))
    return 0


def publish(record: str, section: str, rec: dict, render, write: bool = True) -> int:
    """A fresh measurement's section printed and, unless `write` is false, its record and section
    written; returns 0 (a main's exit status)."""
    body = render(rec)
    print(body)
    if write:
        write_record(record, rec)
        write_section(section, body)
    return 0


def provenance(script: str, record: str, measured: str, sample: str) -> str:
    """The lines every section of RESULTS.md starts with (tests/test_bench_records.py checks them):
    the script that made its figures, the committed raw record they come from, when and on what
    machine, and whether the figures are in-sample (anything was tuned on this data) or held-out."""
    return "\n".join([f"- Script: `{script}`", f"- Record: `{record}`", f"- Measured: {measured}",
                      f"- Sample: {sample}"])


def stores_cli(doc: str, argv: list[str] | None, record: str, section: str, render) -> tuple[list[str], bool] | int:
    """The command line of the benches that read the folders of earlier loops: `--stores A,B` (loop work
    folders or record stores) and `--no-write`, or FROM_RECORD=1 to re-render the section. Returns
    (stores, write), or a main's exit status when there is nothing to measure."""
    import argparse
    import os
    import sys

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--stores", default="", help="comma-separated folders: loop work folders or record stores")
    ap.add_argument("--no-write", action="store_true", help="print the section, write neither record nor section")
    args = ap.parse_args(argv)
    if os.environ.get("FROM_RECORD"):
        return rerender(record, section, render)
    if not args.stores:
        print("--stores is required (or FROM_RECORD=1 to re-render)", file=sys.stderr)
        return 2
    return args.stores.split(","), not args.no_write
