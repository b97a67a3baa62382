"""The values at the crash: the sandbox's sitecustomize prints the locals of the program's own
innermost frames before a traceback, the host parses them out and the repair prompt's notes carry
them (resources/sandbox/crash_hook/sitecustomize.py, assets/editing/tracebacks.py crash_values)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from assets.editing.error_notes import error_notes
from assets.editing.tracebacks import crash_values, error_line, own_frames
from resources.sandbox import build_env, run_sandboxed
from resources.sandbox.crash_hook.sitecustomize import BEGIN, END, describe
from resources.sandbox.env import CRASH_HOOK
from tests.support.sandbox_fixtures import needs_bwrap

CRASHING = """
    import numpy as np
    N_CLASSES = 3
    def check(labels, n_classes):
        counts = [0] * n_classes
        for y in labels:
            counts[int(y)] += 1
        return counts
    labels = np.array([0, 1, 2, 3], dtype=np.int64)
    check(labels, N_CLASSES)
"""


def _run(ws: Path, body: str, pythonpath: str) -> subprocess.CompletedProcess:
    (ws / "s.py").write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, "s.py"], cwd=ws, env=env, capture_output=True, text=True, timeout=120)


def test_a_crash_prints_the_values_of_its_own_frames_before_the_traceback(tmp_path: Path):
    p = _run(tmp_path, CRASHING, str(CRASH_HOOK))
    assert p.returncode == 1
    err = p.stderr
    assert err.index(BEGIN) < err.index(END) < err.index("Traceback (most recent call last):")
    values = crash_values(err)
    lines = values.splitlines()
    # the innermost frame first, the names of its failing line first
    assert lines[0].strip() == "s.py:7 in check"
    assert lines[1].strip().startswith("counts = list of 3")
    assert "y = numpy int64 scalar 3" in values
    assert "labels = numpy array, shape [4], int64, min 0, max 3" in values
    assert "s.py:10 in <module>" in values and "N_CLASSES = 3" in values
    assert "np =" not in values and "check =" not in values  # modules and functions are left out
    # the traceback's own parsers do not see the block
    assert error_line(err) == "IndexError: list index out of range"
    assert [f.line for f in own_frames(err, tmp_path)] == [10, 7]


def test_a_program_that_does_not_crash_prints_nothing_more(tmp_path: Path):
    p = _run(tmp_path, "import sys\nprint('ok')\nsys.exit(3)\n", str(CRASH_HOOK))
    assert p.returncode == 3 and p.stdout == "ok\n" and p.stderr == ""
    assert sorted(p.name for p in CRASH_HOOK.iterdir() if p.suffix == ".py") == ["__init__.py", "sitecustomize.py"]


def test_the_next_sitecustomize_on_the_path_still_runs(tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("print('the next sitecustomize ran')\n")
    p = _run(tmp_path, CRASHING, os.pathsep.join([str(CRASH_HOOK), str(other)]))
    assert "the next sitecustomize ran" in p.stdout
    assert BEGIN in p.stderr


def test_tensors_modules_and_optimizers_are_described_by_shape_dtype_and_size():
    torch = __import__("torch")
    y = torch.tensor([0.0, 2.0, 9.0])
    assert describe(y) == "torch tensor, shape [3], float32, min 0, max 9"
    assert describe(torch.tensor([1, 4])) == "torch tensor, shape [2], int64, min 1, max 4"
    net = torch.nn.Sequential(torch.nn.Linear(4, 2))
    assert describe(net) == "Sequential (torch module), 10 parameters; layers: 0=Linear(in=4, out=2)"

    class Empty(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [torch.nn.Linear(4, 2)]  # a plain list: not registered

    assert describe(Empty()) == "Empty (torch module), 0 parameters; no layers registered"
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    assert describe(opt) == "SGD (torch optimizer), 2 parameter tensors"
    assert describe(torch) is None and describe(describe) is None and describe(Empty) is None


def test_a_block_not_followed_by_its_traceback_is_not_taken():
    block = f"{BEGIN}\n  s.py:1 in <module>\n    x = 1\n{END}\n"
    taken = crash_values(block + "Traceback (most recent call last):\nValueError: x\n")
    assert taken == "  s.py:1 in <module>\n    x = 1"
    assert crash_values(block + "a child's crash, caught; the parent then exits 1 on its own\n") == ""
    assert crash_values("Traceback (most recent call last):\nValueError: x\n") == ""


def test_the_values_reach_the_repair_notes(tmp_path: Path):
    notes = error_notes("IndexError: Target 9 is out of bounds.", [], tmp_path,
                        "  s.py:3 in train\n    y = torch tensor, shape [4], int64, min 0, max 9")
    assert "the number of classes the model outputs" in notes
    assert notes.endswith("The values the run saw where it failed (innermost frame first):\n"
                          "  s.py:3 in train\n    y = torch tensor, shape [4], int64, min 0, max 9")


def test_the_sandbox_environment_puts_the_hook_first(tmp_path: Path):
    env = build_env(tmp_path, sys.executable, {"PYTHONPATH": "/opt/mine"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(CRASH_HOOK), "/opt/mine"]


@needs_bwrap
def test_a_sandboxed_crash_carries_its_values(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "s.py").write_text(textwrap.dedent(CRASHING))
    r = run_sandboxed(["python", "s.py"], ws, timeout_s=120, memory_mb=2048)
    assert r.exit_code == 1
    stderr = Path(r.stderr_path).read_text()
    assert "labels = numpy array, shape [4], int64, min 0, max 3" in crash_values(stderr)


def test_the_values_a_failing_line_was_built_from_come_next(tmp_path: Path):
    body = """
        from sklearn.datasets import load_iris
        data = load_iris()
        A = B = C = D = E = F = G = H = I = J = K = L = M = O = P = Q = R = 0
        N_BINS = 3
        def build(n):
            return [0] * n
        counts = build(N_BINS)
        label = int(data.target.max()) + 1
        total = counts[label]
    """
    values = crash_values(_run(tmp_path, body, str(CRASH_HOOK)).stderr)
    names = [line.split(" = ")[0].strip() for line in values.splitlines()[1:]]
    # the failing line's names, then what `counts` was built from (two hops reach data)
    assert names[:4] == ["counts", "label", "N_BINS", "data"], values  # total: not bound yet
    assert "data = Bunch (dict) of 8; first value" in values  # a dict subclass, not its repr


def test_a_function_frame_shows_the_globals_and_attributes_its_failing_line_reads(tmp_path: Path):
    body = """
        LIMIT = 5
        UNUSED = 7
        class Box:
            def __init__(self):
                self.items = [1, 2, 3]
            def pick(self):
                return self.items[LIMIT]
        Box().pick()
    """
    values = crash_values(_run(tmp_path, body, str(CRASH_HOOK)).stderr)
    inner = values.split("  s.py:9 in <module>")[0]
    assert "self.items = list of 3; first item: 1" in inner and "LIMIT = 5" in inner
    assert "UNUSED" not in inner  # other globals stay out of a function's frame
