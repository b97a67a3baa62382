"""assets/editing/tracebacks.py on REAL tracebacks from scripts run with this interpreter."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assets.editing.tracebacks import (
    error_line,
    last_traceback,
    local_structure,
    own_frames,
)
from schemas.records import TraceFrame

EXPERIMENT = textwrap.dedent("""\
    import json

    from util import parse_config


    class Model:
        def __init__(self, scale):
            self.scale = scale
            self.cfg = None

        def other(self):
            return 0

        def forward(self, x):
            cfg = parse_config(x)
            return cfg["value"] * self.scale


    if __name__ == "__main__":
        m = Model(2)
        print(m.forward("{not json"))
    """)

UTIL = textwrap.dedent("""\
    import json


    def unrelated():
        return 1


    def parse_config(text):
        text = text.strip()
        return json.loads(text)
    """)

CHAINED = textwrap.dedent("""\
    def load(x):
        try:
            return int(x)
        except ValueError:
            raise RuntimeError("bad config value")


    load("abc")
    """)

MODULE_LEVEL = textwrap.dedent("""\
    a = 1
    b = 2
    c = 3
    d = 4
    e = 5
    f = 1 / 0
    g = 7
    h = 8
    i = 9
    j = 10
    """)


def _run(ws: Path, script: str) -> str:
    p = subprocess.run([sys.executable, script], cwd=ws, capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    return p.stderr


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    ws = tmp_path_factory.mktemp("ws")
    (ws / "experiment.py").write_text(EXPERIMENT)
    (ws / "util.py").write_text(UTIL)
    return ws, _run(ws, "experiment.py")


def test_real_traceback_has_stdlib_frames(buggy):
    _, stderr = buggy
    assert "/json/__init__.py" in stderr  # the frames inside the stdlib json package are really there
    assert "decoder.py" in stderr


def test_own_frames_only_workspace_in_order(buggy):
    ws, stderr = buggy
    frames = own_frames(stderr, ws)
    assert [(f.file, f.function) for f in frames] == [
        ("experiment.py", "<module>"), ("experiment.py", "forward"), ("util.py", "parse_config")]
    assert [f.line for f in frames] == [21, 15, 10]
    assert [f.code for f in frames] == [
        'print(m.forward("{not json"))', "cfg = parse_config(x)", "return json.loads(text)"]
    assert all(isinstance(f, TraceFrame) for f in frames)


def test_own_frames_other_workspace_is_empty(buggy, tmp_path):
    _, stderr = buggy
    assert own_frames(stderr, tmp_path) == []


def test_own_frames_relative_paths_resolve_against_workspace(buggy):
    ws, stderr = buggy
    rel = stderr.replace(str(ws.resolve()) + "/", "").replace(str(ws) + "/", "")
    assert 'File "experiment.py"' in rel
    frames = own_frames(rel, ws)
    assert [f.file for f in frames] == ["experiment.py", "experiment.py", "util.py"]


def test_own_frames_skips_site_packages_inside_workspace(tmp_path):
    ws = tmp_path
    stderr = ("Traceback (most recent call last):\n"
              f'  File "{ws}/experiment.py", line 3, in <module>\n    torch.zeros(1)\n'
              f'  File "{ws}/.venv/lib/python3.11/site-packages/torch/x.py", line 9, in zeros\n'
              "    raise ValueError('no')\nValueError: no\n")
    frames = own_frames(stderr, ws)
    assert [(f.file, f.line, f.code) for f in frames] == [("experiment.py", 3, "torch.zeros(1)")]


def test_own_frames_no_traceback():
    assert own_frames("Killed\n", "/tmp") == []


def test_error_line_real(buggy):
    _, stderr = buggy
    assert error_line(stderr) == ("json.decoder.JSONDecodeError: Expecting property name enclosed in "
                                  "double quotes: line 1 column 2 (char 1)")


def test_error_line_multiline_message(tmp_path):
    (tmp_path / "s.py").write_text('raise ValueError("first line\\nsecond line")\n')
    assert error_line(_run(tmp_path, "s.py")) == "ValueError: first line"


def test_error_line_without_traceback():
    assert error_line("some output\nKilled\n\n") == "Killed"
    assert error_line("") == ""


def test_local_structure_method_and_init(buggy):
    ws, stderr = buggy
    s = local_structure(own_frames(stderr, ws), ws)
    # the class's __init__ and the failing method, headed with the class name
    assert "# experiment.py, lines 7-9 (class Model)\n    def __init__(self, scale):" in s
    assert "# experiment.py, lines 14-16 (class Model)\n    def forward(self, x):" in s
    assert 'return cfg["value"] * self.scale' in s
    # the helper function in the other file, whole
    assert "# util.py, lines 8-10\ndef parse_config(text):\n    text = text.strip()\n    return json.loads(text)" in s
    # only the functions the error passed through
    assert "def other" not in s and "def unrelated" not in s
    # __init__ comes before the method; the module-level frame is a window around line 21
    assert s.index("def __init__") < s.index("def forward")
    # (clipped at the file's last line, 21)
    assert s.startswith('# experiment.py, lines 17-21\n\n\nif __name__ == "__main__":\n')


def test_local_structure_dedupes_repeated_frames(buggy):
    ws, stderr = buggy
    frames = own_frames(stderr, ws)
    once = local_structure(frames, ws)
    assert local_structure(frames + frames, ws) == once
    assert once.count("def __init__") == 1


def test_local_structure_module_level_window(tmp_path):
    (tmp_path / "m.py").write_text(MODULE_LEVEL)
    stderr = _run(tmp_path, "m.py")
    frames = own_frames(stderr, tmp_path)
    assert [(f.file, f.line, f.function) for f in frames] == [("m.py", 6, "<module>")]
    assert error_line(stderr) == "ZeroDivisionError: division by zero"
    s = local_structure(frames, tmp_path, context_lines=2)
    assert s == "# m.py, lines 4-8\nd = 4\ne = 5\nf = 1 / 0\ng = 7\nh = 8"


def test_local_structure_skips_missing_or_unparsable_files(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n")
    frames = [TraceFrame(file="gone.py", line=1, function="f"), TraceFrame(file="broken.py", line=1, function="f")]
    assert local_structure(frames, tmp_path) == ""


def test_chained_exception_uses_last_traceback(tmp_path):
    (tmp_path / "c.py").write_text(CHAINED)
    stderr = _run(tmp_path, "c.py")
    assert "During handling of the above exception" in stderr
    assert last_traceback(stderr).count("Traceback (most recent call last):") == 1
    assert "ValueError" not in last_traceback(stderr)
    assert error_line(stderr) == "RuntimeError: bad config value"
    frames = own_frames(stderr, tmp_path)
    assert [(f.line, f.function, f.code) for f in frames] == [
        (8, "<module>", 'load("abc")'), (5, "load", 'raise RuntimeError("bad config value")')]
    s = local_structure(frames, tmp_path)
    assert "# c.py, lines 1-5\ndef load(x):" in s


CLASS_BODY = textwrap.dedent("""\
    class Net:
        def __init__(self):
            self.a = 1

        scale = 1 / 0


    Net()
    """)


def test_class_body_error_frames(tmp_path):
    (tmp_path / "e.py").write_text(CLASS_BODY)
    frames = own_frames(_run(tmp_path, "e.py"), tmp_path)
    assert [(f.line, f.function, f.code) for f in frames] == [
        (1, "<module>", "class Net:"), (5, "Net", "scale = 1 / 0")]


def test_local_structure_class_body_error_shows_failing_line(tmp_path):
    (tmp_path / "e.py").write_text(CLASS_BODY)
    frames = own_frames(_run(tmp_path, "e.py"), tmp_path)
    assert "scale = 1 / 0" in local_structure(frames, tmp_path)
