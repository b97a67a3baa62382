"""Shared by the benchmark scripts: the machine line, the raw record each benchmark writes
(bench/records/<name>.json: what its section's figures are computed from), the provenance lines
every section starts with, and writing a named section of a benchmark's page
(bench/results/<benchmark>.md, between `<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->`),
so each benchmark rewrites only its own sections."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path

from bench.pages import PAGES, ROOT, marks
from bench.pages import RESULTS as RESULTS  # the page layout, imported from here by the benches
from bench.pages import find_section as find_section
from bench.results import page_header, write_index

RECORDS = ROOT / "bench" / "records"


def machine() -> str:
    cpuinfo, meminfo = Path("/proc/cpuinfo").read_text().splitlines(), Path("/proc/meminfo").read_text().splitlines()
    cpu = next((l.split(":", 1)[1].strip() for l in cpuinfo if l.startswith("model name")), "?")
    mem = int(next(l.split()[1] for l in meminfo if l.startswith("MemTotal"))) / 2**20
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}"


def today() -> str:
    return dt.date.today().isoformat()


def page_path(page: str | Path) -> Path:
    """A page by its benchmark's name (bench/results/NAME.md), or a file given as a path."""
    return page if isinstance(page, Path) else PAGES / f"{page}.md"


def _without(text: str, name: str) -> str:
    begin, end = marks(name)
    head, _, rest = text.partition(begin)
    return head.rstrip() + "\n\n" + rest.split(end, 1)[1].lstrip() if begin in text else text


def write_section(name: str, body: str, page: str | Path) -> str:
    """Replace (or append) the section `name` of a page with `body`; returns the section. A page of
    bench/results/ gets its header from the registry, loses the section from any other page there
    (a section measured again is current: it leaves the archive), and bench/RESULTS.md is rewritten
    (bench/results.py)."""
    path = page_path(page)
    begin, end = marks(name)
    section = f"{begin}\n{body.rstrip()}\n{end}"
    ours = path.resolve().parent == PAGES.resolve()
    if ours:
        for other in sorted(PAGES.glob("*.md")):
            if other.resolve() != path.resolve() and begin in (t := other.read_text()):
                other.write_text(_without(t, name).rstrip() + "\n")
    text = path.read_text() if path.exists() else page_header(path.stem) + "\n"
    if begin in text and end in text:
        text = text.split(begin)[0] + section + text.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    if ours:  # the header (everything before the first section) is the registry's
        text = page_header(path.stem) + "\n\n" + text[text.index("<!-- bench:"):]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if ours:
        write_index()
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


def rerender(record: str, section: str, render, page: str) -> int:
    """A section rendered again from its committed record (no measuring): the record rewritten in the
    canonical form, the section replaced; returns 0 (a main's exit status)."""
    rec = read_record(record)
    body = render(rec)
    write_record(record, rec)
    print(write_section(section, body, page))
    return 0


def publish(record: str, section: str, rec: dict, render, page: str, write: bool = True) -> int:
    """A fresh measurement's section printed and, unless `write` is false, its record and section
    written; returns 0 (a main's exit status)."""
    body = render(rec)
    print(body)
    if write:
        write_record(record, rec)
        write_section(section, body, page)
    return 0


def provenance(script: str, record: str, measured: str, sample: str) -> str:
    """The lines every section of a page starts with (tests/bench/test_bench_records.py checks them):
    the script that made its figures, the committed raw record they come from, when and on what
    machine, and whether the figures are in-sample (anything was tuned on this data) or held-out."""
    return "\n".join([f"- Script: `{script}`", f"- Record: `{record}`", f"- Measured: {measured}",
                      f"- Sample: {sample}"])
