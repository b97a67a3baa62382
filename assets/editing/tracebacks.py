"""Exception-traceback-guided debugging (DOLPHIN 3.2), pure parts: find the frames in the
experiment's own code and extract their local code structure with `ast`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from resources.safe_io import safe_read_text
from resources.sandbox.crash_hook.sitecustomize import BEGIN as VALUES_BEGIN
from resources.sandbox.crash_hook.sitecustomize import END as VALUES_END
from schemas.records import TraceFrame

SOURCE_BYTES = 2 << 20  # a traceback's source file read by the host, at most
# The run writes stderr, so everything parsed from it is cut to a bounded length first: the
# patterns matched against it then cost a bounded time whatever the run printed.
TRACEBACK_CHARS = 20000  # of stderr's end, searched for the last traceback
MAX_ERROR_CHARS = 2000   # of the error line: its head and its end (where "but got X" sits)
MAX_FRAMES = 100         # the innermost frames kept of one traceback
MAX_VALUES_CHARS = 2500  # of the values-at-the-crash block
CUT = " [...] "

FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\s*$')
ERROR_RE = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b")


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`text` if it is at most `limit` characters, else its head and its end joined by CUT."""
    if len(text) <= limit:
        return text
    keep = limit - len(CUT)
    head = keep * 3 // 4
    return text[:head] + CUT + text[len(text) - (keep - head):]


def last_traceback(stderr: str) -> str:
    stderr = stderr[-TRACEBACK_CHARS:]
    i = stderr.rfind("Traceback (most recent call last):")
    return stderr[i:] if i >= 0 else ""


def crash_values(stderr: str) -> str:
    """The last values-at-the-crash block the sandbox's hook printed before a traceback
    (resources/sandbox/crash_hook/sitecustomize.py): the frames of the program's own code with
    their locals' shapes, dtypes and values, without its markers; "" when there is none. The run
    wrote it, so it is clipped like the error line."""
    stderr = stderr[-TRACEBACK_CHARS:]
    end = stderr.rfind(VALUES_END)
    begin = stderr.rfind(VALUES_BEGIN, 0, end) if end >= 0 else -1
    if begin < 0 or not stderr[end + len(VALUES_END):].lstrip().startswith("Traceback"):
        return ""  # a block must come right before its traceback (not a child process's earlier one)
    return clip(stderr[begin + len(VALUES_BEGIN):end].strip("\n"), MAX_VALUES_CHARS)


def error_line(stderr: str) -> str:
    """The final 'ExceptionType: message' line (or the last non-empty line), clipped to
    MAX_ERROR_CHARS."""
    tb = last_traceback(stderr) or stderr[-TRACEBACK_CHARS:]
    lines = [l.strip() for l in tb.splitlines() if l.strip()]
    for l in reversed(lines):
        if ERROR_RE.match(l):
            return clip(l)
    return clip(lines[-1]) if lines else ""


def own_frames(stderr: str, workspace: str | Path) -> list[TraceFrame]:
    """Frames whose file lies inside the workspace (not the stdlib or site-packages), the
    innermost MAX_FRAMES; from the last traceback, or from stderr's end when a traceback longer
    than TRACEBACK_CHARS has lost its header."""
    ws = Path(workspace).resolve()
    lines = (last_traceback(stderr) or stderr[-TRACEBACK_CHARS:]).splitlines()
    frames: list[TraceFrame] = []
    for i, l in enumerate(lines):
        m = FRAME_RE.match(l)
        if not m:
            continue
        f = m["file"]
        p = Path(f) if Path(f).is_absolute() else ws / f
        try:
            p.resolve().relative_to(ws)
        except ValueError:
            continue
        if "site-packages" in f:
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) and not FRAME_RE.match(lines[i + 1]) else ""
        frames.append(TraceFrame(file=str(p.resolve().relative_to(ws)), line=int(m["line"]),
                                 function=m["func"], code=clip(code, 500)))
    return frames[-MAX_FRAMES:]


def parse_source(file: str | Path, workspace: Path) -> tuple[str, ast.Module] | None:
    """(text, tree) of a file of the workspace, or None when it cannot be read safely (the run
    could have replaced it by a link, a FIFO, ...) or parsed (nesting too deep for the parser
    included)."""
    try:
        src = safe_read_text(file, workspace, SOURCE_BYTES)
        return src, ast.parse(src)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _enclosing(tree: ast.AST, line: int) -> list[ast.AST]:
    """Chain of class/function definitions containing `line`, outermost first."""
    chain: list[ast.AST] = []

    def visit(node: ast.AST):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    chain.append(child)
                    visit(child)
                    return

    visit(tree)
    return chain


def format_frames(frames: list[TraceFrame], error: str) -> str:
    """The traceback reduced to the experiment's own frames, then the error line."""
    lines = ["Traceback (the script's own frames, most recent call last):"]
    lines += [f'  File "{f.file}", line {f.line}, in {f.function}' + (f"\n    {f.code}" if f.code else "")
              for f in frames]
    return "\n".join(lines + [error])


MARK = "  # <-- error path"


def local_structure(frames: list[TraceFrame], workspace: str | Path, context_lines: int = 4,
                    mark: bool = False) -> str:
    """Source of the functions (and their classes' __init__) the error passed through; with
    `mark`, the lines the traceback passes through end with MARK (a pointer for the model)."""
    ws = Path(workspace)
    on_path = {(f.file, f.line) for f in frames}

    def show(file: str, lo: int, hi: int, lines: list[str]) -> str:
        return "\n".join(l + (MARK if mark and (file, n) in on_path else "")
                         for n, l in enumerate(lines[lo - 1:hi], lo))

    pieces: list[str] = []
    seen: set[tuple[str, int]] = set()
    parsed: dict[str, tuple[list[str], ast.Module] | None] = {}  # each file read and parsed once
    for fr in frames:
        if fr.file not in parsed:
            source = parse_source(fr.file, ws)
            parsed[fr.file] = (source[0].splitlines(), source[1]) if source else None
        if parsed[fr.file] is None:
            continue
        lines, tree = parsed[fr.file]
        chain = _enclosing(tree, fr.line)
        nodes: list[ast.AST] = []
        cls = next((n for n in reversed(chain) if isinstance(n, ast.ClassDef)), None)
        func = next((n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if cls is not None:
            init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is not None and init is not func:
                nodes.append(init)
        if func is not None:
            nodes.append(func)
        if func is None:  # module-level or class-body code: a window around the line
            lo, hi = max(1, fr.line - context_lines), min(len(lines), fr.line + context_lines)
            key = (fr.file, lo)
            if key not in seen:
                seen.add(key)
                pieces.append(f"# {fr.file}, lines {lo}-{hi}\n" + show(fr.file, lo, hi, lines))
            if not nodes:
                continue
        for n in nodes:
            key = (fr.file, n.lineno)
            if key in seen:
                continue
            seen.add(key)
            header = f"# {fr.file}, lines {n.lineno}-{n.end_lineno}"
            if cls is not None:
                header += f" (class {cls.name})"
            pieces.append(header + "\n" + show(fr.file, n.lineno, n.end_lineno, lines))
    return "\n\n".join(pieces)
