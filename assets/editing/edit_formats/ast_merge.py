"""Complete definitions and statements of an answer merged into the file by name, with `ast`
(`apply_definitions`, the heart of the "functions" edit format, functions.py): a function or class
replaces the one of the same name (a class member by member), imports join the file's, other
statements replace the statement they match (same target, same first line, or a similar one,
also inside a loop or a function); new code goes where it is first used. Two repairs of an
answer that does not parse come first: a lone block header (`apply_header`) and lines copied
from the file with a slip (`restore_copied_lines`)."""

from __future__ import annotations

import ast
import difflib
import io
import re
import textwrap
import tokenize

from assets.editing.edit_formats.base import EditError, _indent, _reindent

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If, ast.Try)

_SIMILAR = 0.6  # a top-level block whose first line changed still replaces its old version
# a lone statement this like a statement nested in a block replaces it (and a segment's code, this like
# the lines its header names, replaces them: functions.py)
LOOSE_SIMILAR = 0.5


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line range of a statement, decorators included."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return first - 1, node.end_lineno


def _is_doc(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_placeholder(node: ast.stmt) -> bool:
    """`...` / `pass`, or a def whose body is only that (and a docstring): "unchanged"."""
    def empty(s: ast.stmt) -> bool:
        return isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                           and s.value.value is Ellipsis)
    if isinstance(node, _DEFS):
        return all(empty(s) or _is_doc(s) for s in node.body)
    return empty(node)


def _bound_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    return {a.asname or a.name.split(".")[0] for a in node.names}


def _key(node: ast.stmt, lines: list[str]) -> tuple:
    if isinstance(node, _DEFS):
        return ("def", node.name)
    if isinstance(node, ast.Assign):
        return ("assign", tuple(ast.unparse(t) for t in node.targets))
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return ("assign", (ast.unparse(node.target),))
    return (type(node).__name__, " ".join(lines[node.lineno - 1].split()))


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


def _nested_key(node: ast.stmt, lines: list[str]) -> tuple | None:
    """What a lone simple statement must share with a statement nested in a block to replace it."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return _key(node, lines)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return ("call", ast.unparse(node.value.func))
    if isinstance(node, ast.Return):
        return ("return",)
    return None


def _text(node: ast.stmt, lines: list[str]) -> str:
    a, b = _span(node)
    return "\n".join(lines[a:b])


def _bare(text: str) -> str:
    """`text` without comments, blank lines and indentation: what similarity is measured on
    (the small model annotates its fixes, "x = x.max(dim=2)[0]  # <-- fix", and a comment can
    outweigh the code it sits on)."""
    lines = textwrap.dedent(text).splitlines()
    try:
        for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, SyntaxError):  # a fragment tokenize cannot finish: keep what was cut so far
        pass
    return "\n".join(l.strip() for l in lines if l.strip())


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, _bare(a), _bare(b)).ratio()


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _self_targets(node: ast.stmt) -> list[str]:
    """The attributes `self.X = ...` sets (empty unless every target is one)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    attrs = [t.attr for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
             and t.value.id == "self"]
    return attrs if targets and len(attrs) == len(targets) else []


def _init_reading(node: ast.stmt, src_body: list[ast.stmt]) -> ast.FunctionDef | None:
    """For a lone `self.X = ...`: the __init__ of the one class that reads self.X without setting it."""
    attrs = set(_self_targets(node))
    if not attrs:
        return None
    found = []
    for cls in (c for c in src_body if isinstance(c, ast.ClassDef)):
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        reads = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                 and isinstance(n.value, ast.Name) and n.value.id == "self"}
        sets = {a for m in ast.walk(cls) if isinstance(m, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                for a in _self_targets(m)}
        if init is not None and attrs <= reads and not attrs & sets:
            found.append(init)
    return found[0] if len(found) == 1 else None


def _first_reader(node: ast.stmt, src_body: list[ast.stmt]) -> ast.stmt | None:
    """For a new top-level assignment to plain names: the first top-level statement of the file
    that reads one of them (a definition only if no other statement does); None if none does."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
        else []
    names = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    if not names or not all(isinstance(n, ast.Name) for n in names):  # `self.x = ...`, `d[k] = ...`: no new name
        return None
    bound = {n.id for n in names}
    readers = [s for s in src_body if not isinstance(s, (ast.Import, ast.ImportFrom)) and bound & {
        n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}]
    return next((s for s in readers if not isinstance(s, _DEFS)), readers[0] if readers else None)


# a block's first line returned alone ("for epoch in range(EPOCHS):"): the small model's way of
# changing just that line
_HEADER = re.compile(r"^(async\s+)?(for|while|if|elif|with|def|class)\b.*:\s*(#.*)?$")


def apply_header(source: str, code: str) -> str | None:
    """Replace the file's block header most like the lone header line `code` (same keyword,
    similar text, indentation kept); None when `code` is not one such line or nothing is like it."""
    line = code.strip()
    if "\n" in line or not (m := _HEADER.match(line)):
        return None
    lines = source.splitlines()
    word = m.group(2)
    scored = [(_similarity(l, line), i) for i, l in enumerate(lines) if re.match(rf"\s*(async\s+)?{word}\b", l)]
    best = max(scored, default=None)
    if best is None or best[0] < _SIMILAR or [r for r, _ in scored].count(best[0]) > 1:
        return None
    i = best[1]
    lines[i] = _indent(lines[i]) + line
    return "\n".join(lines) + "\n"


_COPIED = 0.85  # an answer's line this like a line of the file is that line, copied (with a slip)
_MAX_RESTORED = 5


def restore_copied_lines(source: str, code: str) -> tuple[str, ast.Module] | None:
    """An answer that does not parse because lines it copied from the file came out garbled (the
    small model writes `w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, pred)])`, one
    bracket too many, for the file's unchanged line): each line a syntax error points at that is
    nearly a line of the file (difflib ratio >= 0.85, indentation ignored) becomes that line of the
    file, its indentation kept, until the answer parses (at most 5 lines). Returns the answer and its
    tree, or None when it still does not parse."""
    file_lines = [l.strip() for l in source.splitlines() if l.strip()]
    lines = code.splitlines()
    for _ in range(_MAX_RESTORED):
        try:
            return "\n".join(lines) + "\n", ast.parse("\n".join(lines) + "\n")
        except SyntaxError as e:
            i = (e.lineno or 0) - 1
            if not 0 <= i < len(lines) or not lines[i].strip():
                return None
            bad = lines[i].strip()
            best = max(file_lines, default="", key=lambda l: difflib.SequenceMatcher(None, l, bad).ratio())
            if best == bad or difflib.SequenceMatcher(None, best, bad).ratio() < _COPIED:
                return None
            lines[i] = _indent(lines[i]) + best
    return None


class _Merge:
    """Edits (non-overlapping line-range replacements and insertions) of the source."""

    def __init__(self, src_lines: list[str], new_lines: list[str]):
        self.src, self.new = src_lines, new_lines
        # (start, kind, order, new lines, end), applied from the end of the file backwards; at one
        # line a replacement goes first, then insertions, then new definitions (so they end up on top)
        self.ops: list[tuple[int, int, int, list[str], int]] = []

    def block(self, node: ast.stmt, indent: str) -> list[str]:
        a, b = _span(node)
        return _reindent(self.new[a:b], node.col_offset, indent)

    def replace(self, target: ast.stmt, lines: list[str]) -> None:
        a, b = _span(target)
        self.ops.append((a, 2, len(self.ops), lines, b))

    def insert(self, at: int, lines: list[str], kind: int = 1) -> None:
        self.ops.append((at, kind, len(self.ops), lines, at))

    def result(self) -> str:
        out = list(self.src)
        for start, _, _, lines, end in sorted(self.ops, key=lambda o: (o[0], o[1], o[2]), reverse=True):
            out[start:end] = lines
        return "\n".join(out) + "\n"

    # -- matching ------------------------------------------------------------------------
    def _pick(self, node: ast.stmt, candidates: list[ast.stmt]) -> ast.stmt | None:
        if not candidates:
            return None
        return max(candidates, key=lambda c: self.similarity(node, c))

    def similarity(self, node: ast.stmt, old: ast.stmt) -> float:
        """How alike a statement of the answer and one of the file are (comments ignored)."""
        return _similarity(_text(node, self.new), _text(old, self.src))

    def match(self, node: ast.stmt, pool: list[ast.stmt], used: set[int]) -> ast.stmt | None:
        free = [s for s in pool if id(s) not in used]
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            same = [s for s in free if isinstance(s, (ast.Import, ast.ImportFrom)) and (
                _bound_names(s) & _bound_names(node) or (isinstance(s, ast.ImportFrom) and isinstance(
                    node, ast.ImportFrom) and (s.module, s.level) == (node.module, node.level)))]
            return self._pick(node, same)
        key = _key(node, self.new)
        hit = self._pick(node, [s for s in free if _key(s, self.src) == key])
        if hit is None and isinstance(node, _COMPOUND):
            scored = [(self.similarity(node, s), i, s) for i, s in enumerate(free) if type(s) is type(node)]
            best = max(scored, default=None, key=lambda t: (t[0], -t[1]))
            hit = best[2] if best and best[0] >= _SIMILAR else None
        return hit

    def nested(self, node: ast.stmt, src_body: list[ast.stmt], taken: list[tuple[int, int]],
               used: set[int]) -> ast.stmt | None:
        """The statement inside a block (a loop, a function) that a lone simple statement
        replaces: same assignment target or called function, similar text; never inside a
        top-level statement the answer replaces as a whole."""
        key = _nested_key(node, self.new)
        if key is None:
            return None
        cands = []
        for top in src_body:
            a, b = _span(top)
            if any(a < tb and ta < b for ta, tb in taken):
                continue
            cands += [n for n in ast.walk(top) if n is not top and type(n) is type(node) and id(n) not in used
                      and _nested_key(n, self.src) == key]
        best = self._pick(node, cands)
        if best is None:
            return None
        ratio = self.similarity(node, best)
        return best if ratio >= (_SIMILAR if key == ("return",) else LOOSE_SIMILAR) else None

    def body(self, src_body: list[ast.stmt], new_body: list[ast.stmt], indent: str, *, module: bool,
             end_at: int) -> None:
        """Merge `new_body` into `src_body` (the module, or one class's body)."""
        used: set[int] = set()
        matched: list[ast.stmt | None] = []
        for node in new_body:
            if _is_placeholder(node) or _is_doc(node):
                matched.append(None)
                continue
            hit = self.match(node, src_body, used)
            if hit is not None:
                used.add(id(hit))
            matched.append(hit)
        if module:  # lone simple statements that match a line inside a loop or a function
            taken = [_span(s) for s in src_body if id(s) in used]
            inner: set[int] = set()
            for i, node in enumerate(new_body):
                top = matched[i]
                if not isinstance(node, _SIMPLE) or _is_placeholder(node) or _is_doc(node) \
                        or (top is not None and not isinstance(top, _SIMPLE)):
                    continue
                hit = self.nested(node, src_body, taken, inner)
                # `train_loss = ...` may match a top-level line by its target and a line inside the
                # training loop as well: the one the answer resembles more is meant
                if hit is None or (top is not None and self.similarity(node, top) >= self.similarity(node, hit)):
                    continue
                if top is not None:
                    used.discard(id(top))
                inner.add(id(hit))
                matched[i] = hit
        methods = {}  # a method returned alone at the top level: its class's method of that name
        if module:
            for c in src_body:
                if isinstance(c, ast.ClassDef):
                    for m in c.body:
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            methods.setdefault(m.name, []).append(m)
        placed: list[tuple[int, ast.stmt]] = []  # (line, new code) of everything placed so far
        new_defs = []
        for i, (node, hit) in enumerate(zip(new_body, matched)):
            if _is_placeholder(node) or _is_doc(node):
                continue
            if hit is not None:
                placed.append((_span(hit)[0], node))
                if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) == ast.dump(hit):
                    continue
                if isinstance(node, ast.ClassDef) and isinstance(hit, ast.ClassDef):
                    self.klass(hit, node)
                else:
                    self.replace(hit, self.block(node, " " * hit.col_offset))
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in methods:
                if len(methods[node.name]) > 1:
                    raise EditError("not_applied", f"several classes have a method {node.name}(): "
                                                   "return it inside its class")
                m = methods[node.name][0]
                self.replace(m, self.block(node, " " * m.col_offset))
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports = [s for s in src_body if isinstance(s, (ast.Import, ast.ImportFrom))]
                at = _span(imports[-1])[1] if imports else (
                    _span(src_body[0])[1] if src_body and _is_doc(src_body[0]) else 0)
                self.insert(at, self.block(node, indent))
                continue
            if isinstance(node, _DEFS):
                new_defs.append(node)
                continue
            # a new plain statement: next to its neighbour in the answer that matched the file
            prev = next((matched[j] for j in range(i - 1, -1, -1) if matched[j] is not None), None)
            nxt = next((matched[j] for j in range(i + 1, len(matched)) if matched[j] is not None), None)
            if prev is not None:
                at, indent_here = _span(prev)[1], " " * prev.col_offset
            elif nxt is not None:
                at, indent_here = _span(nxt)[0], " " * nxt.col_offset
            elif not module and src_body:
                at, indent_here = _span(src_body[1] if _is_doc(src_body[0]) and len(src_body) > 1
                                        else src_body[0])[0], indent
            elif module and (init := _init_reading(node, src_body)) is not None:
                # `self.classifier = nn.Linear(...)` alone: the attribute a class uses but never sets
                last = init.body[-1]
                at, indent_here = _span(last)[1], " " * last.col_offset
            elif module and (reader := _first_reader(node, src_body)) is not None:
                # `num_epochs = 4` alone, for the NameError of a loop that reads it: just above that loop
                at, indent_here = _span(reader)[0], indent
            else:
                line = self.new[node.lineno - 1].strip()
                raise EditError("not_applied", f"the top-level statement {line[:80]!r} matches nothing in the "
                                "file: return whole functions or classes, or a whole top-level block "
                                "starting with its unchanged first line")
            self.insert(at, self.block(node, indent_here))
            placed.append((at, node))
        for node in new_defs:
            lines = self.block(node, indent)
            if not module:  # a new method: at the end of its class
                self.insert(end_at, [""] + lines)
                continue
            # before the first top-level statement that uses it (as it was or as edited), else
            # before the `if __name__ == "__main__":` block, else at the end
            uses = [_span(s)[0] for s in src_body if not isinstance(s, (ast.Import, ast.ImportFrom))
                    and not _is_doc(s) and node.name in _names(s)]
            uses += [at for at, n in placed if node.name in _names(n)]
            main = [_span(s)[0] for s in src_body if isinstance(s, ast.If) and "__name__" in ast.unparse(s.test)]
            at = min(uses or main or [len(self.src)])
            self.insert(at, lines + ["", ""] if at < len(self.src) else ["", ""] + lines, kind=0)
            placed.append((at, node))

    def klass(self, old: ast.ClassDef, new: ast.ClassDef) -> None:
        """Replace the header, merge the body member by member (members not returned stay)."""
        head_old = _span(old.body[0])[0]
        head_new = _span(new.body[0])[0]
        a = _span(old)[0]
        header = _reindent(self.new[_span(new)[0]:head_new], new.col_offset, " " * old.col_offset)
        self.ops.append((a, 2, len(self.ops), header, head_old))
        indent = " " * old.body[0].col_offset
        self.body(old.body, new.body, indent, module=False, end_at=old.end_lineno)


def apply_definitions(source: str, code: str) -> str:
    """Apply complete definitions to `source` by name:

    - a top-level function or class replaces the one of the same name (a class is merged
      member by member: its header and the methods given replace theirs, the others stay);
      a function that matches no top-level name but exactly one class's method replaces it;
    - a new function or class goes before the first top-level statement that uses it, else
      before the `if __name__ == "__main__":` block, else at the end; a new method at the end
      of its class;
    - imports are added after the file's imports, or replace the import binding the same name
      (or from the same module);
    - other top-level statements replace the one with the same target (assignments) or the
      same first line (loops, `with`, `if` blocks; or a similar one of the same kind);
    - a lone simple statement that matches no top-level one replaces the similar statement
      with the same assignment target / called function inside a loop or a function (the
      small model likes to return just the changed line); otherwise it is new and goes next to
      its neighbour in the answer that matched, or (a new assignment) just above the first
      top-level statement that reads what it assigns;
    - an answer that is one block header alone (`for epoch in range(EPOCHS):`) replaces the
      most similar header of the same keyword (`apply_header`);
    - an answer that does not parse because of a slip in a line copied from the file gets that
      line of the file back (`restore_copied_lines`);
    - a body of only `...`/`pass` means "unchanged". Nothing is deleted."""
    try:
        new_tree = ast.parse(code)
    except SyntaxError as e:
        if (header := apply_header(source, code)) is not None:
            return header
        if (restored := restore_copied_lines(source, code)) is None:
            raise EditError("not_applied", f"the returned code does not parse (line {e.lineno}: {e.msg})") from None
        code, new_tree = restored
    try:
        src_tree = ast.parse(source)
    except SyntaxError as e:
        raise EditError("not_applied", f"the file does not parse (line {e.lineno}: {e.msg}): "
                        "definitions cannot be applied, rewrite the whole file") from None
    if not new_tree.body:
        raise EditError("not_applied", "the code block is empty")
    # the same name returned twice (e.g. "before" and "after"): the last one counts
    last: dict[tuple, int] = {}
    new_lines = code.splitlines()
    for i, node in enumerate(new_tree.body):
        if isinstance(node, _DEFS):
            last[_key(node, new_lines)] = i
    body = [n for i, n in enumerate(new_tree.body) if not isinstance(n, _DEFS) or last[_key(n, new_lines)] == i]
    merge = _Merge(source.splitlines(), new_lines)
    merge.body(src_tree.body, body, "", module=True, end_at=len(merge.src))
    return merge.result()
