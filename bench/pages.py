"""Where benchmark results live: bench/RESULTS.md (the headline table and the index), one page
per benchmark under bench/results/, and the markers that delimit a section on a page."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"   # the headline table and the index of the pages
PAGES = ROOT / "bench" / "results"        # one page per benchmark, and archive.md


def marks(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def find_section(name: str, pages: Path = PAGES) -> tuple[Path, str] | None:
    """The page holding section `name` and the section's text between its markers, or None."""
    begin, end = marks(name)
    for path in sorted(pages.glob("*.md")):
        if begin in (text := path.read_text()):
            return path, text.split(begin, 1)[1].split(end, 1)[0].strip()
    return None
