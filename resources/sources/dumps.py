"""Reading a paper file: the format detected (JSON lines, Parquet, or the arXiv metadata
snapshot), every format normalised lazily with polars to one frame of papers (paper_id, title,
abstract, year, venue, authors, arxiv_id; the arXiv snapshot streamed, never read whole, and
filtered by category), and a broken JSON line named in the error."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import polars as pl

from schemas.records import Paper

DumpFormat = Literal["auto", "jsonl", "parquet", "arxiv"]


def detect_format(path: Path) -> DumpFormat:
    """parquet by extension; JSON lines whose first record has arXiv's `id` + `categories`
    (and no `paper_id`) are the arXiv snapshot; other JSON lines are a plain dump."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    with path.open("rb") as f:
        first = b""
        for line in f:
            if line.strip():
                first = line
                break
    try:
        rec = json.loads(first) if first else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:1: not JSON: {e}") from e
    if isinstance(rec, dict) and {"id", "categories", "abstract"} <= rec.keys() and "paper_id" not in rec:
        return "arxiv"
    return "jsonl"


def _clean(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.String).str.replace_all(r"\s+", " ").str.strip_chars()


def _title_id(title: str) -> str:
    """A stable id for a paper that has none: a hash of its normalised title."""
    return "t-" + hashlib.sha1(" ".join(title.lower().split()).encode()).hexdigest()[:12]


def _category_filter(categories: Sequence[str]) -> pl.Expr:
    """arXiv `categories` is space-separated ("cs.CV cs.LG"); "cs.CV" matches exactly and an
    archive name ("cs") matches all of its categories."""
    alts = "|".join(re.escape(c) + (r"(\.\S+)?" if "." not in c else "") for c in categories)
    return pl.col("categories").str.contains(rf"(^|\s)({alts})(\s|$)")


def _scan_arxiv(path: Path, categories: Sequence[str]) -> pl.LazyFrame:
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "id": pl.String, "title": pl.String, "abstract": pl.String, "categories": pl.String,
        "update_date": pl.String, "journal-ref": pl.String, "authors": pl.String,
        "authors_parsed": pl.List(pl.List(pl.String))}
    lf = pl.scan_ndjson(path, schema=schema)
    if categories:
        lf = lf.filter(_category_filter(categories))
    # new-style ids (YYMM.NNNNN) and old-style ones (archive/YYMMNNN) carry the first version's date
    yy = pl.coalesce(pl.col("id").str.extract(r"^(\d{2})\d{2}\.", 1),
                     pl.col("id").str.extract(r"/(\d{2})\d{2}", 1)).cast(pl.Int64, strict=False)
    parsed = pl.col("authors_parsed").list.eval(pl.concat_str(
        [pl.element().list.get(1, null_on_oob=True), pl.element().list.get(0, null_on_oob=True)],
        separator=" ", ignore_nulls=True).str.strip_chars())
    split = pl.col("authors").str.replace_all(r"\s+and\s+", ", ").str.split(", ")
    return lf.select(
        paper_id=pl.col("id"), title=_clean("title"), abstract=_clean("abstract"),
        year=pl.coalesce(pl.when(yy >= 91).then(1900 + yy).otherwise(2000 + yy),
                         pl.col("update_date").str.slice(0, 4).cast(pl.Int64, strict=False)),
        venue=pl.coalesce(_clean("journal-ref"), pl.lit("arXiv")),
        authors=pl.coalesce(parsed, split),
        arxiv_id=pl.col("id"),
    )


def _scan_plain(path: Path, fmt: str) -> pl.LazyFrame:
    lf = pl.scan_parquet(path) if fmt == "parquet" else pl.scan_ndjson(path, infer_schema_length=10_000)
    schema = lf.collect_schema()
    cols = set(schema.names())
    text_cols = [c for c in ("abstract", "summary") if c in cols]
    if "title" not in cols or not text_cols:
        raise ValueError(f"{path}: a dump needs 'title' and 'abstract' (or 'summary') fields; "
                         f"found {sorted(cols)}")

    def opt(name: str, dtype) -> pl.Expr:
        return pl.col(name).cast(dtype, strict=False) if name in cols else pl.lit(None, dtype=dtype)

    ids = [pl.col(c).cast(pl.String) for c in ("paper_id", "id", "arxiv_id", "doi") if c in cols]
    title_id = pl.col("title").cast(pl.String).map_elements(_title_id, return_dtype=pl.String)
    if "authors" not in cols:
        authors = pl.lit([], dtype=pl.List(pl.String))
    elif schema["authors"] == pl.String:
        authors = pl.col("authors").str.replace_all(r"\s+and\s+", ", ").str.split(", ")
    else:
        authors = pl.col("authors").cast(pl.List(pl.String), strict=False)
    return lf.select(
        paper_id=pl.coalesce(*ids, title_id), title=_clean("title"),
        abstract=pl.coalesce(*[_clean(c) for c in text_cols]),
        year=opt("year", pl.Int64), venue=opt("venue", pl.String), authors=authors,
        arxiv_id=opt("arxiv_id", pl.String),
    )


def scan_dump(path: str | Path, fmt: DumpFormat = "auto", categories: Sequence[str] = ()) -> pl.LazyFrame:
    """A lazy frame of normalised papers (paper_id, title, abstract, year, venue, authors,
    arxiv_id): papers without title or abstract dropped, the first of duplicate ids kept."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"literature dump not found: {path}")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "arxiv":
        lf = _scan_arxiv(path, categories)
    elif categories:
        raise ValueError(f"{path}: a category filter needs the arXiv snapshot format (got {fmt})")
    else:
        lf = _scan_plain(path, fmt)
    return (lf.filter(pl.col("title").str.len_chars() > 0, pl.col("abstract").str.len_chars() > 0)
            .unique(subset="paper_id", keep="first", maintain_order=True))


def _first_bad_line(path: Path) -> str:
    """Polars names no line when JSON is broken: find it, streaming, for the error message."""
    with path.open("rb") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except json.JSONDecodeError as e:
                return f"{path}:{i}: not JSON: {e}"
    return str(path)


def naming_bad_line(path: Path, action):
    """`action()` (a polars read of `path`); a polars error becomes a ValueError naming the first
    line of `path` that is not JSON."""
    try:
        return action()
    except pl.exceptions.PolarsError as e:
        raise ValueError(f"{_first_bad_line(path)} ({type(e).__name__}: {e})") from e


def to_papers(rows, source: str) -> list[Paper]:
    """Papers from normalised rows (dicts, e.g. a frame's `iter_rows(named=True)`)."""
    return [Paper(**{**r, "authors": [a for a in (r["authors"] or []) if a]}, source=source) for r in rows]


def load_papers(path: str | Path, fmt: DumpFormat = "auto", categories: Sequence[str] = (),
                source: str = "dump") -> list[Paper]:
    """A (small) paper file read whole, e.g. a paper list to rank."""
    path = Path(path)
    frame = naming_bad_line(path, lambda: scan_dump(path, fmt, categories).collect())
    return to_papers(frame.iter_rows(named=True), source)
