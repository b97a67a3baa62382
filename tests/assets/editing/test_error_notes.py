"""assets/editing/error_notes.py: plain-language notes on an error and the definitions of its names."""
from __future__ import annotations

import textwrap

import pytest

from assets.editing.error_notes import (
    error_notes,
    explain,
    module_definitions,
    name_notes,
)
from assets.run_results import prompts
from schemas.records import TraceFrame

SCRIPT = textwrap.dedent('''\
    import argparse
    import torch.nn as nn
    from helpers import make_data

    parser = argparse.ArgumentParser()
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--num-epochs", type=int, default=3)
    parser.add_argument("-s", "--seed", dest="random_seed", type=int)
    args = parser.parse_args()
    lr, batch_size = 1e-3, 32


    class Net(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.body = nn.Linear(4, width)
            self.head, self.drop = nn.Linear(width, 2), nn.Dropout(0.1)

        def forward(self, x):
            h = self.body(x)
            for k in range(2):
                h = h + k
            return self.head(self.drop(h))


    model = Net(8)
    opt = make_optimizer(model, learning_rate)
    later = 1
''')
HELPERS = textwrap.dedent('''\
    import numpy as np
    SIZE = 10
    _PRIVATE = 2


    def make_data(n, dim=4, *, seed=0):
        return np.zeros((n, dim))


    class Loader:
        def __init__(self, data, batch=8):
            self.data = data
''')


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "experiment.py").write_text(SCRIPT)
    (tmp_path / "helpers.py").write_text(HELPERS)
    return tmp_path


def frame(line: int, function: str = "<module>") -> TraceFrame:
    return TraceFrame(file="experiment.py", line=line, function=function, code="")


@pytest.mark.parametrize("error, expected", [
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x512 and 128x10)",
     "expects 128 input features received inputs with 512 features (batch 16): make that layer's in_features 512"),
    ("RuntimeError: Given groups=1, weight of size [32, 3, 3, 3], expected input[8, 28, 28, 3] to have 3 channels, "
     "but got 28 channels instead", "channels are last"),
    ("RuntimeError: Given groups=1, weight of size [128, 3, 1], expected input[32, 64, 256] to have 3 channels, "
     "but got 64 channels instead", "this layer's in_channels must be 64"),
    ("RuntimeError: running_mean should contain 64 elements not 3", "built for 3 features received an input with 64"),
    ("RuntimeError: shape '[64, -1, 3]' is invalid for input of size 100", "[64, -1, 3] does not fit a tensor of 100"),
    ("ValueError: Expected input batch_size (32) to match target batch_size (64).", "32 predictions but 64 targets"),
    ("RuntimeError: expected scalar type Long but found Float", "must be integer (int64"),
    ("RuntimeError: expected scalar type Double but found Float", "different dtypes"),
    ("RuntimeError: Input type (torch.FloatTensor) and weight type (torch.DoubleTensor) should be the same",
     "different dtypes"),
    ("AssertionError: Torch not compiled with CUDA enabled", "no GPU"),
    ("TypeError: linear(): argument 'input' (position 1) must be Tensor, not torch.return_types.topk",
     "topk(dim=...) returns a pair"),
    ("TypeError: Object of type ndarray is not JSON serializable", "json cannot write a ndarray"),
    ("IndexError: Dimension out of range (expected to be in range of [-3, 2], but got 3)", "only 3 dimensions"),
    ("ValueError: too many values to unpack (expected 2)", "more values than the 2 names"),
    ("TypeError: SGD.__init__() got an unexpected keyword argument 'learning_rate'",
     "no parameter named learning_rate"),
    ("RecursionError: maximum recursion depth exceeded", "calls itself"),
    ("sklearn.exceptions.NotFittedError: When `prefit=True`, `estimator` is expected to be a fitted estimator.",
     "used before it was fitted"),
    ("sklearn.exceptions.NotFittedError: This StandardScaler instance is not fitted yet. Call 'fit' first.",
     "call its fit(...)"),
])
def test_explain_known_errors_with_their_numbers(error, expected):
    notes = explain(error)
    assert len(notes) == 1 and expected in notes[0], notes


def test_explain_unknown_error_adds_nothing():
    assert explain("ZeroDivisionError: division by zero") == [] and explain("") == []


def test_module_definitions_lists_signatures_then_names(ws):
    defs = module_definitions("helpers", ws)
    assert defs[:2] == ["make_data(n, dim=4, *, seed=0)", "class Loader(self, data, batch=8)"]
    assert "SIZE" in defs and "np" in defs and "_PRIVATE" not in defs
    assert module_definitions("torch", ws) is None  # not a file of the workspace: never imported


def test_cannot_import_name_lists_the_module_and_the_closest(ws):
    notes = name_notes("ImportError: cannot import name 'load_data' from 'helpers' (/x/helpers.py)", [frame(3)], ws)
    assert len(notes) == 1
    assert "helpers (helpers.py) has no load_data; it defines: make_data(n, dim=4, *, seed=0)" in notes[0]
    assert notes[0].endswith("(closest: make_data)")


def test_missing_module_lists_the_workspace_modules(ws):
    notes = name_notes("ModuleNotFoundError: No module named 'helper'", [frame(3)], ws)
    assert "experiment, helpers" in notes[0]


def test_name_error_at_top_level_lists_names_bound_before_the_line_and_the_arguments(ws):
    notes = name_notes("NameError: name 'learning_rate' is not defined", [frame(27)], ws)
    top = notes[0]
    assert top.startswith("Names defined at the top level of experiment.py before line 27: ")
    for name in ("argparse", "nn", "make_data", "parser", "args", "lr", "batch_size", "Net", "model"):
        assert name in top.split(": ", 1)[1].split(", "), name
    assert "later" not in top and "opt" not in top  # bound after the failing line
    assert notes[1] == "Command-line arguments (args.NAME): out_dir, num_epochs, random_seed"


def test_name_error_in_a_function_lists_its_locals_and_close_names(ws):
    notes = name_notes("NameError: name 'hh' is not defined", [frame(27), frame(22, "forward")], ws)
    assert notes[0].startswith("Names defined in forward() (parameters and locals): self, x, h, k")
    assert "(closest to hh: h)" in notes[0]
    assert "later" in notes[1]  # a function runs after the whole module was bound


def test_attribute_error_on_a_class_lists_its_members(ws):
    notes = name_notes("AttributeError: 'Net' object has no attribute 'classifier'", [frame(22, "forward")], ws)
    assert notes == ["Net (experiment.py) has these attributes and methods: body, head, drop, __init__(), forward()"]


def test_attribute_error_on_args_lists_the_command_line(ws):
    notes = name_notes("AttributeError: 'Namespace' object has no attribute 'epochs'", [frame(27)], ws)
    assert notes[0].startswith("The command-line arguments experiment.py defines (args.NAME): out_dir, num_epochs")


def test_module_attribute_error_on_a_workspace_module(ws):
    notes = name_notes("AttributeError: module 'helpers' has no attribute 'Loder'", [frame(3)], ws)
    assert "class Loader" in notes[0]


def test_error_notes_joins_both_and_survives_unparsable_files(ws):
    text = error_notes("RuntimeError: running_mean should contain 64 elements not 3", [frame(22, "forward")], ws)
    assert text.startswith("- A BatchNorm layer")
    (ws / "experiment.py").write_text("def broken(:\n")
    assert name_notes("NameError: name 'x' is not defined", [frame(1)], ws) == []
    assert error_notes(None, [], ws) == ""


def test_notes_reach_the_structure_prompts_only():
    notes = "- A BatchNorm layer built for 3 features received 64"
    for mode in prompts.MODES:
        text = prompts.fix("x = 1\n", "experiment.py", "functions", "RuntimeError: e", "# structure", "",
                           mode=mode, notes=notes)[1]["content"]
        assert (notes in text) == (mode == "structure"), mode
    assert notes in prompts.analyse("x = 1\n", "experiment.py", "RuntimeError: e", "# s", notes=notes)[1]["content"]


@pytest.mark.slow
def test_a_real_failed_run_carries_its_notes(tmp_path):
    from assets.run_results.experimenting import RunTarget, run_once
    from bench.broken_suite import variant_code
    from resources.paths import REPO_ROOT
    from resources.runner import Runner
    from schemas.topic import load_topic

    spec = load_topic(REPO_ROOT / "experiments" / "pointcloud_classification")
    a = run_once(RunTarget.of_topic(spec, "check"), variant_code("wrong_import_name"), Runner(), tmp_path, 1)
    assert "cannot import name 'load_dataset'" in a.error
    assert a.error_notes.startswith("- shapes (shapes.py) has no load_dataset; it defines: make_dataset(")


def test_a_wrong_keyword_lists_the_library_callees_parameters(tmp_path):
    """The diabetes run's RidgeCV(alpha=...): the note lists what RidgeCV takes (its signature,
    read in an isolated interpreter), so the LLM need not guess `C` next."""
    (tmp_path / "experiment.py").write_text("from sklearn.linear_model import RidgeCV\n\n"
                                            "model = RidgeCV(alpha=1.0, cv=3)\n")
    err = "TypeError: _BaseRidgeCV.__init__() got an unexpected keyword argument 'alpha'"
    library = TraceFrame(file="/usr/lib/python3/site-packages/sklearn/base.py", line=1, function="f")
    notes = name_notes(err, [frame(3), library], tmp_path)
    assert len(notes) == 1 and notes[0].startswith("sklearn.linear_model.RidgeCV takes these keyword arguments: alphas")
    assert "(closest to alpha: alphas" in notes[0]
    # a callee the script defines itself: no library to read, no note
    (tmp_path / "experiment.py").write_text("def f(a):\n    return a\n\n\nf(alpha=1)\n")
    assert name_notes("TypeError: f() got an unexpected keyword argument 'alpha'", [frame(5)], tmp_path) == []
