"""Exception-traceback-guided debugging (DOLPHIN 3.2), pure parts: find the frames in the
experiment's own code and extract their local code structure with `ast`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from resources.safe_io import safe_read_text
from schemas.records import TraceFrame

SOURCE_BYTES = 2 << 20  # a traceback's source file read by the host, at most

FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\s*$')


def last_traceback(stderr: str) -> str:
    i = stderr.rfind("Traceback (most recent call last):")
    return stderr[i:] if i >= 0 else ""


def error_line(stderr: str) -> str:
    """The final 'ExceptionType: message' line (or the last non-empty line)."""
    tb = last_traceback(stderr) or stderr
    lines = [l for l in tb.strip().splitlines() if l.strip()]
    for l in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b", l.strip()):
            return l.strip()
    return lines[-1].strip() if lines else ""


def own_frames(stderr: str, workspace: str | Path) -> list[TraceFrame]:
    """Frames whose file lies inside the workspace (not the stdlib or site-packages)."""
    ws = Path(workspace).resolve()
    lines = last_traceback(stderr).splitlines()
    frames = []
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
                                 function=m["func"], code=code))
    return frames


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
    for fr in frames:
        try:  # the run could have replaced the file by a link, a FIFO, ...: read it safely
            src = safe_read_text(fr.file, ws, SOURCE_BYTES)
            tree = ast.parse(src)
        except (OSError, SyntaxError, ValueError):
            continue
        lines = src.splitlines()
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
