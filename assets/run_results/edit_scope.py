"""What a repair may edit: the code file alone. An answer that edits another file of the
target's folder (the harness, the scorer, the topic's files) is refused before it runs, with
the reason, as the edit status OTHER_FILE.

The edit formats apply an answer to the code file whatever file the answer meant, so the
answer itself is read for the file it names and its result is compared with the folder's
other files:
- a name in a header position: a line holding only a path just before a code fence or a
  SEARCH block (aider's layout), a path in a fence's info string, a diff header
  (`--- a/x`, `+++ b/x`), a first line of a fence that is a comment naming a path, or a
  "# FILE, lines A-B" segment header (the functions format's layout). It counts when it names
  a file of the folder other than the code file, or a path outside the folder;
- the content: a new code file more like another file of the folder (same suffix) than like
  the code it was meant to change is that file, edited."""

from __future__ import annotations

import difflib
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from resources.safe_io import safe_read_text
from resources.sandbox import workspace_bounds
from resources.workspace_walk import WorkspaceLimitError, walk

OTHER_FILE = "other_file"  # the edit status of an answer that edits another file than the code file

_PATH = r"[\w./\\-]+\.[A-Za-z0-9]{1,6}"
_BARE = re.compile(rf"^[ \t]*(?:#+[ \t]*)?(?:(?:file(?:name)?|path)[ \t]*:[ \t]*)?[`*'\"]*(?P<p>{_PATH})[`*'\"]*"
                   r"[ \t]*:?[ \t]*$", re.I)
_FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*(?P<info>[^\n`]*)$")
_SEARCH = re.compile(r"^[ \t]*<{5,}[ \t]*SEARCH\b")
_DIFF_HEAD = re.compile(rf"^(?:---|\+\+\+)[ \t]+(?:[ab]/)?(?P<p>{_PATH})(?:[ \t].*)?$")
_SEGMENT = re.compile(rf"^[ \t]*#[ \t]*(?P<p>{_PATH}),[ \t]*lines?[ \t]+\d+", re.I)
_FIRST_COMMENT = re.compile(rf"^[ \t]*#[ \t]*(?:(?:file(?:name)?|path)[ \t]*:[ \t]*)?(?P<p>{_PATH})[ \t]*$", re.I)

MAX_COMPARED = 20             # other files of the folder compared with a new code file
MAX_COMPARED_BYTES = 200_000  # larger files are not compared
# a new code file counts as another file, edited, when its lines are at least this like that
# file's and clearly more like it than like the code it was meant to change: a repair that turns
# an idea's code back into a copy of the reference kept beside it stays a repair
LIKE_ANOTHER = 0.6
MARGIN = 0.25


def named_paths(answer: str) -> list[str]:
    """The paths `answer` names in a header position (see the module docstring), in order."""
    lines = answer.splitlines()
    found: list[str] = []
    in_fence = False
    for i, line in enumerate(lines):
        opening = _FENCE_OPEN.match(line)
        if opening and not in_fence:
            in_fence = True
            info = re.split(r"[\s:=\"']+", opening["info"])  # ```python harness.py, ```py:harness.py, title="x.py"
            found += [w for w in info if re.fullmatch(_PATH, w) and not w.startswith(".")]
            if i + 1 < len(lines) and (m := _FIRST_COMMENT.match(lines[i + 1])):
                found.append(m["p"])
            if i > 0 and (m := _BARE.match(lines[i - 1])):
                found.append(m["p"])
            continue
        if opening and in_fence and not opening["info"].strip():
            in_fence = False
            continue
        if _SEARCH.match(line) and i > 0 and (m := _BARE.match(lines[i - 1])):
            found.append(m["p"])
        if (m := _DIFF_HEAD.match(line)) or (m := _SEGMENT.match(line)):
            found.append(m["p"])
    return found


@dataclass
class EditScope:
    """The code file of a folder, with the folder's other files read once (on first need) for
    the comparison of contents."""
    folder: Path
    code_file: str
    _others: dict[str, str] | None = field(default=None, repr=False)

    def _is_other(self, name: str) -> bool:
        """Does `name` (from an answer) point at a file other than the code file: a file of the
        folder, or anything outside it?"""
        p = PurePosixPath(name.replace("\\", "/"))
        if p.name == PurePosixPath(self.code_file).name:
            return False
        if p.is_absolute() or ".." in p.parts:
            return True
        try:
            return (self.folder / p).is_file() or (self.folder / p.name).is_file()
        except OSError:
            return False

    def others(self) -> dict[str, str]:
        """The folder's other files with the code file's suffix (bounded: MAX_COMPARED files,
        each under MAX_COMPARED_BYTES; links and dot-files left out), by relative path."""
        if self._others is None:
            self._others = {}
            suffix = PurePosixPath(self.code_file).suffix
            try:
                for e in walk(self.folder, workspace_bounds(), ignore=(".*", "__pycache__")):
                    if len(self._others) >= MAX_COMPARED:
                        break
                    if (e.rel == self.code_file or not e.name.endswith(suffix) or not suffix
                            or not stat.S_ISREG(e.st.st_mode) or e.st.st_size > MAX_COMPARED_BYTES):
                        continue
                    try:
                        self._others[e.rel] = safe_read_text(e.rel, self.folder, MAX_COMPARED_BYTES)
                    except OSError:
                        continue
            except WorkspaceLimitError:
                pass  # a folder past the bounds: no comparison (the run would refuse it anyway)
        return self._others

    def refusal(self, answer: str, current: str, new_code: str | None = None) -> str | None:
        """Why `answer` (turning `current` into `new_code`, when known) edits another file than
        the code file; None when it edits the code file only."""
        named = [n for n in dict.fromkeys(named_paths(answer)) if self._is_other(n)]
        if named:
            return (f"the answer edits {', '.join(named[:3])}: only {self.code_file} may be changed (the other "
                    "files of the folder, the harness and the scorer among them, stay as they are)")
        if new_code is None:
            return None
        new_lines = [ln.strip() for ln in new_code.splitlines() if ln.strip()]
        mine = difflib.SequenceMatcher(None, [ln.strip() for ln in current.splitlines() if ln.strip()], new_lines,
                                       autojunk=False).ratio()
        bar = max(LIKE_ANOTHER, mine + MARGIN)
        for rel, text in self.others().items():
            sm = difflib.SequenceMatcher(None, [ln.strip() for ln in text.splitlines() if ln.strip()], new_lines,
                                         autojunk=False)
            if sm.real_quick_ratio() >= bar and sm.quick_ratio() >= bar and sm.ratio() >= bar:
                return (f"the answer is {rel} of the folder, edited, not {self.code_file}: only {self.code_file} "
                        "may be changed")
        return None
