"""What the code works on, for the prompts that change it: the data files of a topic folder as they
are (columns and their types, a few rows, array shapes and dtypes), so the model writes against
the real columns and shapes instead of inventing 'Feature1'.

`data_profile` is pure and bounded: it reads files only, in sorted order, never follows a symbolic
link, walks at most MAX_DEPTH folders deep and MAX_ENTRIES entries, profiles at most MAX_FILES
files, reads at most READ_BYTES of a text file's head (a file over MAX_BYTES is named, not read),
loads an array's values only when its header says they are small, and cuts its answer at
`limit_chars`. Data the code loads from a package (e.g. scikit-learn's bundled sets) is not in the
folder and is not described: nothing is invented. Files the scorer alone may read (topic.yaml
`hidden`) are passed as `exclude` and never read.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DATA_SUFFIXES = (".csv", ".tsv", ".parquet", ".json", ".jsonl", ".npy", ".npz")
LIMIT_CHARS = 3000         # the whole profile
MAX_FILES = 8              # data files profiled; the rest are counted
MAX_DEPTH = 3              # folders below the topic folder
MAX_ENTRIES = 2000         # directory entries looked at in all
MAX_BYTES = 512 * 2 ** 20  # a larger file is named, not read
READ_BYTES = 256 * 2 ** 10  # the head of a text file that is read
COUNT_BYTES = 32 * 2 ** 20  # rows are counted (one pass over the file) only up to this size
JSON_BYTES = 4 * 2 ** 20    # a JSON document is parsed only up to this size
ARRAY_BYTES = 8 * 2 ** 20   # an array's values are read (min, max, levels) only up to this size
SAMPLE_ROWS = 1000         # rows the column types and ranges are read from
SHOW_ROWS = 3              # rows shown
SHOW_COLUMNS = 40          # column lines per table before the rest are only named
CELL_CHARS = 20            # a shown value is cut to this
ROW_CHARS = 200            # a shown row is cut to this
LEVELS = 12                # distinct values up to which a column (or an integer array) lists them
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "venv", "wandb", "mlruns", "lightning_logs"}
MISSING = {"", "na", "nan", "null", "none", "?", "n/a", "#n/a"}


# -- walking the folder --------------------------------------------------------------------------

def data_files(folder: Path, exclude: Iterable[str] = ()) -> tuple[list[Path], int]:
    """(the first MAX_FILES data files under `folder` by name, the largest first; how many more there are);
    symbolic links, hidden names, skipped folders and `exclude` (paths relative to the folder,
    files or folders) are left out."""
    excluded = {Path(e).as_posix().strip("/") for e in exclude}
    found: list[Path] = []
    seen = 0

    def walk(d: Path, depth: int) -> None:
        nonlocal seen
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                return
            rel = Path(e.path).relative_to(folder).as_posix()
            if e.name.startswith(".") or rel in excluded or e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH and e.name not in SKIP_DIRS:
                    walk(Path(e.path), depth + 1)
            elif e.is_file(follow_symlinks=False) and e.name.lower().endswith(DATA_SUFFIXES):
                found.append(Path(e.path))

    walk(folder, 0)
    # the largest first (the training table before the held-out features that repeat its columns)
    kept = sorted(found[:MAX_FILES], key=lambda p: (-p.stat().st_size, p.as_posix()))
    return kept, max(0, len(found) - MAX_FILES)


# -- values and columns ----------------------------------------------------------------------------

def _cut(text: str, n: int = CELL_CHARS) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[:n - 1] + "…"


def _num(v: float) -> str:
    return f"{v:.4g}"


def _parse(v: str) -> int | float | None:
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str)
                                                                       and v.strip().lower() in MISSING)


def column_summary(values: list, typed: str | None = None) -> tuple[str, str]:
    """(kind, detail) of one column from its sampled values: kind int, float, bool or str (or the
    file's own type, `typed`); detail its range or its levels, and the missing count."""
    present = [v for v in values if not _is_missing(v)]
    missing = len(values) - len(present)
    kind = typed
    nums: list[float] = []
    if all(isinstance(v, bool) or (isinstance(v, str) and v.strip().lower() in ("true", "false"))
           for v in present) and present:
        kind = kind or "bool"
    else:
        parsed = [v if isinstance(v, (int, float)) else _parse(str(v)) for v in present]
        if present and all(p is not None for p in parsed):
            nums = [float(p) for p in parsed if p is not None]
            kind = kind or ("int" if all(isinstance(p, int) for p in parsed) else "float")
        else:
            kind = kind or "str"
    levels = sorted({str(v) for v in present})
    if nums:
        detail = f"{_num(min(nums))}..{_num(max(nums))}"
        if len(levels) <= 5 and kind == "int":
            detail += f" ({len(levels)} values)"
    elif not present:
        detail = "all missing"
    elif len(levels) == len(present) > LEVELS:
        detail = "unique, e.g. " + ", ".join(_cut(v, 16) for v in levels[:3])
    elif len(levels) <= LEVELS:
        detail = f"{len(levels)} levels: " + ", ".join(_cut(v, 16) for v in levels)
    else:
        detail = f"{len(levels)} distinct in {len(present)}, e.g. " + ", ".join(_cut(v, 16) for v in levels[:3])
    if missing:
        detail += f", {missing} missing"
    return kind, detail


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _column_lines(names: list[str], summaries: list[tuple[str, str]]) -> list[str]:
    """One line per column; a run of 4 or more numbered columns of one kind (pixel_0..pixel_63,
    lag_29..lag_0) is one line with the range over the run."""
    lines: list[str] = []
    i = 0
    while i < len(names):
        m = _NUMBERED.match(names[i])
        j = i + 1
        if m:
            while (j < len(names) and (m2 := _NUMBERED.match(names[j])) and m2.group(1) == m.group(1)
                   and summaries[j][0] == summaries[i][0]):
                j += 1
        if j - i >= 4:
            kind = summaries[i][0]
            ranges = [s[1].split(" ")[0].split(",")[0] for s in summaries[i:j]]
            lows = [_parse(r.split("..")[0]) for r in ranges if ".." in r]
            highs = [_parse(r.split("..")[1]) for r in ranges if ".." in r]
            span = (f", {_num(min(x for x in lows if x is not None))}..{_num(max(x for x in highs if x is not None))}"
                    if lows and highs and None not in lows and None not in highs else "")
            lines.append(f"  {names[i]} .. {names[j - 1]} ({j - i} columns): {kind}{span}")
        else:
            j = i + 1
            lines.append(f"  {names[i]}: {summaries[i][0]}, {summaries[i][1]}")
        i = j
    if len(lines) > SHOW_COLUMNS:
        rest = lines[SHOW_COLUMNS:]
        lines = lines[:SHOW_COLUMNS] + [f"  ... {len(rest)} more: "
                                        + ", ".join(r.strip().split(":")[0] for r in rest[:30])]
    return lines


def _table(names: list[str], rows: list[list], n_rows: str, seen: dict[str, list[str]],
           types: list[str] | None = None) -> list[str]:
    """A table's lines: its size, one line per column, its first rows; a table whose columns are
    those of an earlier one (`seen`: file -> its columns), or all but a few, says so instead."""
    for other, cols in seen.items():
        if set(names) <= set(cols) and len(cols) - len(names) <= 3 and names:
            left = [c for c in cols if c not in names]
            return [f"  {n_rows} rows x {len(names)} columns: those of {other}"
                    + (f" without {', '.join(left)}" if left else "")]
    seen[""] = names  # this file's columns, filed under its name by file_profile
    columns = [[r[k] if k < len(r) else None for r in rows[:SAMPLE_ROWS]] for k in range(len(names))]
    summaries = [column_summary(c, types[k] if types else None) for k, c in enumerate(columns)]
    sample = f" (types and ranges from the first {len(rows)} rows)" if len(rows) >= SAMPLE_ROWS else ""
    out = [f"  {n_rows} rows x {len(names)} columns{sample}:"]
    out += _column_lines(names, summaries)
    if rows:
        out.append("  first rows:")
        out.append("    " + _cut(",".join(_cut(n) for n in names), ROW_CHARS))
        for r in rows[:SHOW_ROWS]:
            out.append("    " + _cut(",".join("" if _is_missing(v) else _cut(str(v)) for v in r), ROW_CHARS))
    return out


# -- formats ---------------------------------------------------------------------------------------

def _head_text(path: Path) -> tuple[str, bool]:
    """The file's first READ_BYTES as text (up to its last whole line), and whether that is all of it."""
    with open(path, "rb") as f:
        raw = f.read(READ_BYTES + 1)
    whole = len(raw) <= READ_BYTES
    raw = raw[:READ_BYTES]
    if not whole and b"\n" in raw:
        raw = raw[:raw.rindex(b"\n") + 1]
    return raw.decode("utf-8", errors="replace"), whole


def _count_lines(path: Path, size: int) -> int | None:
    if size > COUNT_BYTES:
        return None
    n = 0
    last = b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(2 ** 20):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def _delimited(path: Path, size: int, seen: dict[str, list[str]], delimiter: str) -> list[str]:
    text, whole = _head_text(path)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return ["  empty"]
    rows: list[list] = []
    try:
        for r in reader:
            if r:
                rows.append(r)
            if len(rows) >= SAMPLE_ROWS:
                break
    except csv.Error as e:
        return [f"  not read as a table: {e}"]
    if whole:
        n_rows = str(len(rows)) if len(rows) < SAMPLE_ROWS else str(sum(1 for r in reader if r) + len(rows))
    else:  # lines after the header (a quoted value spanning lines counts more than once)
        lines = _count_lines(path, size)
        n_rows = f"about {lines - 1}" if lines is not None else "(not counted)"
    return _table(header, rows, n_rows, seen)


def _json(path: Path, size: int, seen: dict[str, list[str]]) -> list[str]:
    if size > JSON_BYTES:
        return ["  not parsed (over the size cap for JSON documents)"]
    try:
        doc = json.loads(path.read_text(errors="replace"))
    except ValueError as e:
        return [f"  not valid JSON: {_cut(str(e), 80)}"]
    if isinstance(doc, list) and doc and all(isinstance(r, dict) for r in doc[:SAMPLE_ROWS]):
        return _records([r for r in doc[:SAMPLE_ROWS] if isinstance(r, dict)], str(len(doc)), seen)
    return ["  " + _shape(doc, 0)]


def _shape(v, depth: int) -> str:
    """A JSON value's structure: keys with the shape of their values, lists with their length."""
    if isinstance(v, dict):
        if depth >= 2:
            return f"object with {len(v)} keys"
        items = list(v.items())
        inner = ", ".join(f"{_cut(str(k), 24)}: {_shape(x, depth + 1)}" for k, x in items[:12])
        return "{" + inner + (f", ... {len(items) - 12} more keys" if len(items) > 12 else "") + "}"
    if isinstance(v, list):
        return f"list of {len(v)}" + (f" x {_shape(v[0], depth + 1)}" if v and depth < 2 else "")
    if isinstance(v, str):
        return f"str {json.dumps(_cut(v))}"
    return f"{type(v).__name__} {v}" if v is None or isinstance(v, (bool, int, float)) else type(v).__name__


def _records(records: list[dict], n_rows: str, seen: dict[str, list[str]]) -> list[str]:
    names = list(dict.fromkeys(k for r in records for k in r))
    rows = [[r.get(k) if not isinstance(r.get(k), (dict, list)) else json.dumps(r.get(k)) for k in names]
            for r in records]
    return _table([str(n) for n in names], rows, n_rows, seen)


def _jsonl(path: Path, size: int, seen: dict[str, list[str]]) -> list[str]:
    text, whole = _head_text(path)
    records: list[dict] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError:
            return [f"  line {len(records) + 1} is not valid JSON"]
        if not isinstance(r, dict):
            return [f"  lines of {_shape(r, 1)}"]
        records.append(r)
        if len(records) >= SAMPLE_ROWS:
            break
    lines = _count_lines(path, size)
    return _records(records, str(lines) if lines is not None else "(not counted)", seen)


def _array_header(f) -> tuple[tuple[int, ...], Any, bool]:
    import numpy as np

    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    return tuple(shape), dtype, fortran


def _array_line(name: str, shape: tuple[int, ...], dtype, values) -> str:
    import numpy as np

    line = f"  {name}: shape {shape}, dtype {dtype}"
    if values is None:
        return line + (" (objects: not read)" if dtype.hasobject else "")
    flat = np.asarray(values).reshape(-1)
    if flat.size == 0:
        return line
    if dtype.kind in "iub":
        levels = np.unique(flat)
        if len(levels) <= LEVELS:
            return line + f", values {', '.join(str(x) for x in levels.tolist())}"
        return line + f", {_num(float(flat.min()))}..{_num(float(flat.max()))}"
    if dtype.kind == "f":
        finite = flat[np.isfinite(flat)]
        nan = flat.size - finite.size
        rng = f", {_num(float(finite.min()))}..{_num(float(finite.max()))}" if finite.size else ", all non-finite"
        return line + rng + (f", {nan} non-finite" if nan else "")
    if dtype.kind in "US":
        return line + ", e.g. " + ", ".join(_cut(str(x), 16) for x in flat[:3].tolist())
    return line


def _npy(path: Path, size: int, seen: dict[str, list[str]]) -> list[str]:
    import numpy as np

    with open(path, "rb") as f:
        shape, dtype, _ = _array_header(f)
    small = not dtype.hasobject and math.prod(shape) * dtype.itemsize <= ARRAY_BYTES
    values = np.load(path, allow_pickle=False) if small else None
    return [_array_line("array", shape, dtype, values)]


def _npz(path: Path, size: int, seen: dict[str, list[str]]) -> list[str]:
    import numpy as np

    out = []
    with zipfile.ZipFile(path) as z:
        members = [m for m in z.infolist() if m.filename.endswith(".npy")]
        for m in members[:SHOW_COLUMNS]:
            with z.open(m) as f:
                shape, dtype, fortran = _array_header(f)
                small = not dtype.hasobject and math.prod(shape) * dtype.itemsize <= ARRAY_BYTES
                values = None
                if small:  # the header's size bounds what is read
                    raw = f.read(math.prod(shape) * dtype.itemsize)
                    values = np.frombuffer(raw, dtype=dtype)
            out.append(_array_line(m.filename[:-4], shape, dtype, values))
        if len(members) > SHOW_COLUMNS:
            out.append(f"  ... {len(members) - SHOW_COLUMNS} more arrays")
    return out or ["  no arrays"]


def _parquet(path: Path, size: int, seen: dict[str, list[str]]) -> list[str]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return ["  not read (pyarrow is not installed)"]
    pf = pq.ParquetFile(path)
    schema = pf.schema_arrow
    names = schema.names
    rows: list[list] = []
    # rows come from the first row group, which may be the whole file: read only from a file that is small
    if size <= COUNT_BYTES:
        for batch in pf.iter_batches(batch_size=SAMPLE_ROWS, columns=names[:SHOW_COLUMNS * 4]):
            rows = [list(r.values()) for r in batch.to_pylist()]
            break
    types = [str(schema.field(n).type) for n in names]
    rows = [r + [None] * (len(names) - len(r)) for r in rows]
    return _table(names, rows, str(pf.metadata.num_rows), seen, types)


READERS = {".csv": lambda p, s, seen: _delimited(p, s, seen, ","),
           ".tsv": lambda p, s, seen: _delimited(p, s, seen, "\t"),
           ".json": _json, ".jsonl": _jsonl, ".npy": _npy, ".npz": _npz, ".parquet": _parquet}


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def file_profile(path: Path, rel: str, seen: dict[str, list[str]] | None = None) -> str:
    """One data file's section: its name, size and what it holds (or why it was not read).
    `seen`: the columns of the tables profiled before (file -> columns); this file's are added."""
    seen = {} if seen is None else seen
    size = path.stat().st_size
    head = f"{rel} ({_size(size)})"
    if size > MAX_BYTES:
        return f"{head}: not read (over the {_size(MAX_BYTES)} cap)"
    try:
        body = READERS[path.suffix.lower()](path, size, seen)
        if "" in seen:
            seen[rel] = seen.pop("")
    except Exception as e:  # a broken or hostile file is described, never raised: the profile is advice
        body = [f"  not read: {type(e).__name__}: {_cut(str(e), 80)}"]
    return "\n".join([head + ":", *body])


def data_profile(folder: Path, limit_chars: int = LIMIT_CHARS, exclude: Iterable[str] = ()) -> str:
    """The data files of a topic folder as they are, at most `limit_chars` characters; "" when it
    holds none. `exclude`: paths relative to the folder never read (the scorer's hidden files)."""
    folder = Path(folder)
    if not folder.is_dir():
        return ""
    files, more = data_files(folder, exclude)
    seen: dict[str, list[str]] = {}
    out = ""
    for k, path in enumerate(files):
        section = file_profile(path, path.relative_to(folder).as_posix(), seen)
        room = limit_chars - len(out) - 60
        if len(section) + 1 > room:
            if room > 200:  # the part that fits, cut at a line
                cut = section[:room]
                out += cut[:cut.rfind("\n")] + "\n  ... (cut)\n" if "\n" in cut else ""
            more += len(files) - k - (1 if room > 200 else 0)
            break
        out += section + "\n"
    if more > 0:
        out += f"({more} more data file{'s' if more > 1 else ''} not shown)\n"
    return out.strip()[:limit_chars]


def topic_data(spec) -> str:
    """The data profile of a topic (a TopicSpec): its folder without the scorer's hidden files and
    without the code file itself."""
    return data_profile(spec.path, exclude=[*spec.hidden, spec.code])


def data_section(data: str) -> str:
    """The "Data" section of a prompt (the patch and plan prompts) from a `data_profile`; "" when
    the profile is empty."""
    if not data.strip():
        return ""
    return ("Data: the files in the folder the code runs in, as they are (use these file names, columns and "
            f"shapes; do not invent others):\n{data.strip()}\n")
