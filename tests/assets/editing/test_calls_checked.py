"""Library calls checked before a run (assets/editing/calls.py through `mend`): a keyword the
callee's installed signature does not take is renamed to the close parameter or dropped, a name
imported from the wrong module of a library moves to the module that exports it, and anything
not named statically is left alone. The signatures are read in the real isolated interpreter
(scikit-learn and the standard library are installed with the project). Also: the repair prompt's
API notes, and the repair rules as a registry that gives the same suggestions as before."""
from __future__ import annotations

import pkgutil
import textwrap

import pytest

from assets.editing import lookup, repairs
from assets.editing.calls import api_notes, check_calls
from assets.editing.mending import mend
from assets.editing.prompts import API_HEAD, system_prompt
from assets.editing.suggestions import suggested_fix
from schemas.records import Attempt, TraceFrame

SKLEARN = textwrap.dedent("""\
    import numpy as np
    from sklearn.linear_model import Ridge, RandomForestRegressor
    from sklearn.model_selection import train_test_split

    x, y = np.zeros((20, 2)), np.arange(20.0)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_ratio=0.2, random_sate=0)
    forest = RandomForestRegressor(n_estimator=10, alpha=1.0)
    ridge = Ridge(n_estimators=100, alpha=2.0)
    again = Ridge(1.0, alpah=3.0)
    """)


@pytest.fixture(scope="module")
def mended():
    return mend(SKLEARN)


def test_a_wrong_keyword_is_renamed_to_the_close_parameter_before_a_run(mended):
    code, notes = mended
    assert "train_test_split(x, y, random_state=0)" in code
    assert "RandomForestRegressor(n_estimators=10)" in code
    assert any("random_sate= -> random_state=" in n and "train_test_split" in n for n in notes)
    assert any("n_estimator= -> n_estimators=" in n for n in notes)


def test_a_keyword_with_no_close_parameter_is_dropped(mended):
    code, notes = mended
    assert "ridge = Ridge(alpha=2.0)\n" in code  # Ridge has no n_estimators
    assert "test_ratio" not in code and any("dropped the argument test_ratio=" in n for n in notes)
    # RandomForestRegressor's ccp_alpha shares a word with alpha but is no typo of it: dropped, not renamed
    assert "ccp_alpha" not in code and any("dropped the argument alpha=" in n for n in notes)
    # alpha is given by position already: the misspelt keyword cannot become it
    assert "again = Ridge(1.0)\n" in code


def test_a_name_imported_from_the_wrong_module_of_its_library_is_moved(mended):
    code, notes = mended
    assert code.splitlines()[1:3] == ["from sklearn.linear_model import Ridge",
                                      "from sklearn.ensemble import RandomForestRegressor"]
    assert any("RandomForestRegressor imported from sklearn.ensemble instead of sklearn.linear_model" in n
               for n in notes)
    assert mend(code) == (code, [])  # nothing left to change


def test_what_is_not_named_statically_is_left_alone(tmp_path):
    code = textwrap.dedent("""\
        import logging
        from functools import partial
        from sklearn.linear_model import Ridge
        from helpers import build


        def show(value, colour=None):
            return value


        params = {"alpha": 1.0}
        logging.basicConfig(levle=20)
        say = partial(show, colour="red")
        a = Ridge(alpah=1.0, **params)
        b = build(n_estimator=3)
        make = Ridge
        if params:
            make = dict
        c = make(alpah=2.0)
        """)
    (tmp_path / "helpers.py").write_text("def build(n_estimator):\n    return n_estimator\n")
    # basicConfig and partial take **kwargs; the Ridge call passes **params; `make` is bound twice;
    # helpers is a module of the script's folder (an installed package of that name is not it)
    assert check_calls(code, tmp_path) == (code, [])
    # a module that acts when imported (opens a browser) is never looked up
    browser = "import webbrowser\nwebbrowser.open(urll='about:blank')\n"
    assert check_calls(browser) == (browser, [])


def test_a_failed_lookup_changes_nothing(monkeypatch):
    monkeypatch.setattr(lookup, "_ANSWERS", {})
    monkeypatch.setattr(lookup, "_stored", lambda key: None)  # nothing kept on disk either
    monkeypatch.setattr(lookup, "_run_isolated", lambda command, arguments: None)
    assert check_calls(SKLEARN) == (SKLEARN, [])
    assert api_notes(SKLEARN) == ""


def test_api_notes_name_the_signatures_of_the_library_calls():
    notes = api_notes(SKLEARN)
    lines = notes.splitlines()
    assert any(n.startswith("sklearn.linear_model.Ridge(alpha=1.0") for n in lines)
    assert any(n.startswith("sklearn.model_selection.train_test_split(*arrays, test_size=") for n in lines)
    assert lines[0].startswith("numpy.zeros(")  # in the order of the first call
    assert all(len(n) <= 300 for n in lines) and len(api_notes(SKLEARN, limit=2).splitlines()) == 2
    assert api_notes("x = [1, 2]\nprint(len(x))\n") == ""  # no library call
    assert api_notes("def f(:\n") == ""


def test_the_system_prompt_follows_the_task_code():
    prompt = system_prompt(SKLEARN, "experiment.py", api=True)
    assert "PyTorch" not in prompt and "Python with NumPy and scikit-learn" in prompt
    assert API_HEAD in prompt and "sklearn.linear_model.Ridge(alpha=1.0" in prompt
    assert API_HEAD not in system_prompt(SKLEARN, "experiment.py")  # the patch prompt: no lookup
    assert "Python with PyTorch" in system_prompt("import torch.nn as nn\n", "train.py")
    assert "```python\n" in system_prompt("x = 1\n", "run.py")


def test_the_registry_lists_every_rule():
    names = [r.name for r in repairs.RULES]
    modules = {m.name for m in pkgutil.iter_modules(repairs.__path__)} - {"base", "renaming"}
    assert set(names) == modules and len(set(names)) == len(names)
    assert names.index("missing_import") < names.index("interpreter") < names.index("closest_name") \
        < names.index("parameter_value")
    assert all(r.description and "\n" not in r.description and callable(r.apply) for r in repairs.RULES)
    assert repairs.rule("keyword").name == "keyword"
    with pytest.raises(ValueError, match="unknown repair rule"):
        repairs.rule("nope")


def _failed(error: str, line: int, function: str = "<module>") -> Attempt:
    return Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
                   frames=[TraceFrame(file="x.py", line=line, function=function)])


# (code, error, line, function) -> (rule, the fixed code, sure) as suggested_fix gave them before the
# registry (checked against that version; the interpreter's "Did you forget to import" was then
# recorded as rule "interpreter"); None: no suggestion
SAME_AS_BEFORE = [
    (("factor = 2\nprint(factr)\n", "NameError: name 'factr' is not defined. Did you mean: 'factor'?", 2, "<module>"),
     ("interpreter", "factor = 2\nprint(factor)\n", True)),
    (("factor = 2\nprint(Factor)\n", "NameError: name 'Factor' is not defined", 2, "<module>"),
     ("closest_name", "factor = 2\nprint(factor)\n", False)),
    (("print(math.pi)\n", "NameError: name 'math' is not defined. Did you forget to import 'math'?", 1, "<module>"),
     ("forgotten_import", "import math\nprint(math.pi)\n", True)),
    (("import os\nopen('out/x.json', 'w').write('1')\n",
      "FileNotFoundError: [Errno 2] No such file or directory: 'out/x.json'", 2, "<module>"),
     ("missing_folder", "import os\nos.makedirs(os.path.dirname('out/x.json') or '.', exist_ok=True)\n"
                        "open('out/x.json', 'w').write('1')\n", True)),
    (("from statistics import mean\n\ndef mean(xs):\n    return mean(xs) * 1\n\nprint(mean([1]))\n",
      "RecursionError: maximum recursion depth exceeded", 4, "mean"),
     ("shadowed_import", "from statistics import mean as _imported_mean\nfrom statistics import mean\n\n"
                         "def mean(xs):\n    return _imported_mean(xs) * 1\n\nprint(mean([1]))\n", True)),
    (("class M:\n    def __init__(self, num_epochs=4):\n        pass\n\nfor e in range(num_epochs):\n    pass\n",
      "NameError: name 'num_epochs' is not defined", 5, "<module>"),
     ("parameter_value", "class M:\n    def __init__(self, num_epochs=4):\n        pass\n\nnum_epochs = 4\n"
                         "for e in range(num_epochs):\n    pass\n", False)),
    (("class Net:\n    def forward(self):\n        pass\n\nNet().forwrd()\n",
      "AttributeError: 'Net' object has no attribute 'forwrd'", 5, "<module>"),
     ("closest_name", "class Net:\n    def forward(self):\n        pass\n\nNet().forward()\n", False)),
    (("import json\nprint(json.dumps({}, colour=True))\n",
      "TypeError: JSONEncoder.__init__() got an unexpected keyword argument 'colour'", 2, "<module>"),
     ("keyword", "import json\nprint(json.dumps({}))\n", False)),
    (("x = 1\nprint(y)\n", "NameError: name 'y' is not defined", 2, "<module>"), None),
    (("x = 1\n", "TypeError: f() got an unexpected keyword argument 'zz'. Did you mean: 'z'?", 1, "<module>"), None),
]


@pytest.mark.parametrize(("case", "expected"), SAME_AS_BEFORE, ids=[e[0] if e else "none" for _, e in SAME_AS_BEFORE])
def test_suggested_fix_gives_the_same_results_as_before(case, expected):
    code, error, line, function = case
    s = suggested_fix(code, _failed(error, line, function), "x.py")
    assert (s.rule, s.code, s.sure) == expected if expected else s is None


TRAIN_STEP = textwrap.dedent("""\
    import torch.nn.functional as F
    def step(model, xb, yb, criterion):
        out = model(xb)
        loss = criterion(out, yb)
        total = F.cross_entropy(model(xb), yb[:, 0] * 1, reduction="sum").item()
        return loss, total
""")


@pytest.mark.parametrize("line, error, changed", [
    (4, "RuntimeError: expected target dtype to be Long or Byte, but got Float", "loss = criterion(out, yb.long())"),
    (5, "RuntimeError: expected scalar type Long but found Double",
     'total = F.cross_entropy(model(xb), (yb[:, 0] * 1).long(), reduction="sum").item()'),
    (4, "RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Float'",
     "loss = criterion(out, yb.long())"),
])
def test_float_class_targets_of_a_loss_are_made_long(line, error, changed):
    s = suggested_fix(TRAIN_STEP, _failed(error, line, "step"), "x.py")
    assert s is not None and s.rule == "target_dtype" and s.sure
    assert changed in s.code and s.code.count(".long()") == 1


def test_the_target_rule_leaves_other_dtype_errors_and_unclear_lines_alone():
    assert suggested_fix(TRAIN_STEP, _failed("RuntimeError: expected scalar type Float but found Double", 4, "step"),
                         "x.py") is None
    # the failing line has no call with two arguments (the error came from elsewhere)
    assert suggested_fix(TRAIN_STEP, _failed("RuntimeError: expected target dtype to be Long or Byte, but got Float",
                                             3, "step"), "x.py") is None
    done = TRAIN_STEP.replace("criterion(out, yb)", "criterion(out, yb.long())")
    assert suggested_fix(done, _failed("RuntimeError: expected target dtype to be Long or Byte, but got Float", 4,
                                       "step"), "x.py") is None


LAYERS = textwrap.dedent("""\
    import torch
    from torch import nn
    class Net(nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = [nn.Linear(a, b)
                           for a, b in zip(dims[:-1], dims[1:])]
            self.heads = {"a": nn.Linear(2, 1)}
            self.sizes = [1, 2]
        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x
    model = Net([4, 3, 2])
    opt = torch.optim.Adam(model.parameters())
""")


def test_layers_kept_in_a_plain_list_are_registered_when_the_optimizer_gets_none():
    s = suggested_fix(LAYERS, _failed("ValueError: optimizer got an empty parameter list", 15), "x.py")
    assert s is not None and s.rule == "module_list" and s.sure
    assert "self.layers = nn.ModuleList([nn.Linear(a, b)\n" in s.code
    assert "for a, b in zip(dims[:-1], dims[1:])])\n" in s.code
    assert 'self.heads = nn.ModuleDict({"a": nn.Linear(2, 1)})' in s.code
    assert "self.sizes = [1, 2]" in s.code  # not layers: left as it is
    namespace: dict = {}
    exec(compile(s.code, "x.py", "exec"), namespace)  # the optimizer now gets the parameters
    assert len(list(namespace["model"].parameters())) == 6
    # the message, but no list of layers on a module: no suggestion
    plain = LAYERS.replace("self.layers = [nn.Linear(a, b)\n", "self.layers = nn.ModuleList([nn.Linear(a, b)\n")
    plain = plain.replace("dims[1:])]\n", "dims[1:])])\n").replace('{"a": nn.Linear(2, 1)}', "None")
    assert suggested_fix(plain, _failed("ValueError: optimizer got an empty parameter list", 15), "x.py") is None


COUNTS = textwrap.dedent("""\
    import numpy as np
    y_all = np.arange(10)
    NUM_CLASSES = int(y_all.max())
    HIDDEN = 9
    model = make(64, NUM_CLASSES)
    loss = criterion(model(x), y)
""")
VALUES = ("- The values the run saw where it failed (innermost frame first):\n  x.py:6 in <module>\n"
          "    model = Net (torch module), 585 parameters; layers: fc=Linear(in=64, out=9)\n"
          "    NUM_CLASSES = 9\n    HIDDEN = 9\n")


def test_a_class_count_one_short_is_guessed_one_more_from_the_values_at_the_crash():
    failed = _failed("IndexError: Target 9 is out of bounds.", 6).model_copy(update={"error_notes": VALUES})
    s = suggested_fix(COUNTS, failed, "x.py")
    assert s is not None and s.rule == "class_count" and not s.sure
    assert "NUM_CLASSES = int(y_all.max()) + 1\n" in s.code and "HIDDEN = 9\n" in s.code
    # without the values there is nothing to go on
    assert suggested_fix(COUNTS, _failed("IndexError: Target 9 is out of bounds.", 6), "x.py") is None
    literal = COUNTS.replace("int(y_all.max())", "9")
    assert "NUM_CLASSES = 10\n" in suggested_fix(literal, failed, "x.py").code


DOUBLES = textwrap.dedent("""\
    import numpy as np
    import torch
    X = np.random.rand(8, 4)
    y = np.arange(8) % 2
    x_train, y_train = torch.from_numpy(X), torch.from_numpy(y)
    x_test = torch.tensor(X)
    x_ok = torch.tensor(X, dtype=torch.float64)
    out = model(x_train)
""")
DOUBLE_VALUES = ("- The values the run saw where it failed (innermost frame first):\n  x.py:8 in <module>\n"
                 "    x_train = torch tensor, shape [8, 4], float64, min 0.01, max 0.98\n"
                 "    y_train = torch tensor, shape [8], int64, min 0, max 1\n"
                 "    x_test = torch tensor, shape [8, 4], float64, min 0.01, max 0.98\n"
                 "    x_ok = torch tensor, shape [8, 4], float64, min 0.01, max 0.98\n")


@pytest.mark.parametrize("error", ["RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float",
                                   "RuntimeError: Input type (double) and bias type (float) should be the same"])
def test_float64_data_made_from_numpy_is_made_float32(error):
    failed = _failed(error, 8).model_copy(update={"error_notes": DOUBLE_VALUES})
    s = suggested_fix(DOUBLES, failed, "x.py")
    assert s is not None and s.rule == "input_dtype" and s.sure
    assert "x_train, y_train = torch.from_numpy(X).float(), torch.from_numpy(y)\n" in s.code  # labels stay int64
    assert "x_test = torch.tensor(X).float()\n" in s.code
    assert "x_ok = torch.tensor(X, dtype=torch.float64)\n" in s.code  # an explicit dtype is the author's choice
    assert suggested_fix(DOUBLES, _failed(error, 8), "x.py") is None  # no values: no guess at which tensors


VIEWS = textwrap.dedent("""\
    BATCH_SIZE = 64
    def forward(self, x):
        h = x.view(BATCH_SIZE, 1, self.window)
        return h.reshape((h.size(0), 32))
""")


def test_a_view_that_no_longer_fits_gets_the_size_it_can_infer():
    err = "RuntimeError: shape '[64, 1, 32]' is invalid for input of size 1216"
    s = suggested_fix(VIEWS, _failed(err, 3, "forward"), "x.py")
    assert s is not None and s.rule == "view_size" and not s.sure
    assert "h = x.view(-1, 1, self.window)\n" in s.code
    # a tuple of sizes; 1216 elements are no whole number of 33s: the second size is inferred
    s2 = suggested_fix(VIEWS, _failed("RuntimeError: shape '[38, 33]' is invalid for input of size 1216", 4,
                                      "forward"), "x.py")
    assert s2 is not None and "return h.reshape((-1, 32))" not in s2.code and "reshape((h.size(0), -1))" in s2.code
    assert suggested_fix(VIEWS, _failed("RuntimeError: shape '[64, 1, 32]' is invalid for input of size 1217", 3,
                                        "forward"), "x.py") is None  # nothing divides it


FEATURES = textwrap.dedent("""\
    baseline = LogisticRegression(max_iter=200)
    baseline.fit(train_df["proline"], y_train)
    score = baseline.score(X_test[:, 0], y_test)
""")


def test_one_feature_given_as_a_column_is_made_a_matrix():
    s = suggested_fix(FEATURES, _failed("ValueError: Expected a 2-dimensional container but got <class "
                                        "'pandas.core.series.Series'> instead. Pass a DataFrame", 2), "x.py")
    assert s is not None and s.rule == "feature_matrix" and s.sure
    assert "baseline.fit(train_df[['proline']], y_train)" in s.code
    s = suggested_fix(FEATURES, _failed("ValueError: Expected 2D array, got 1D array instead:", 3), "x.py")
    assert "baseline.score(X_test[:, 0].reshape(-1, 1), y_test)" in s.code


RIDGE_TO_TREES = textwrap.dedent("""\
    from sklearn.ensemble import GradientBoostingRegressor

    ALPHAS = [0.1, 1.0]


    def model():
        # the edit: boosted trees need no penalty
        return GradientBoostingRegressor(n_estimators=10)


    scores = {a: model(a) for a in ALPHAS}
    """)


def test_a_function_the_edit_left_without_a_parameter_its_callers_pass_takes_the_extra_ones():
    error = "TypeError: model() takes 0 positional arguments but 1 was given"
    s = suggested_fix(RIDGE_TO_TREES, _failed(error, 11), "x.py")
    assert s is not None and s.rule == "extra_positional" and s.sure
    assert "def model(*_unused):\n    # the edit: boosted trees need no penalty\n" in s.code
    namespace: dict = {}
    exec(compile(s.code, "x.py", "exec"), namespace)  # the callers' alpha is accepted and ignored
    assert set(namespace["scores"]) == {0.1, 1.0}
    # a method, a signature over several lines, annotations and keyword-only parameters
    method = ("class Net:\n    def forward(self,\n                x: int = 1, *, y=2) -> int:\n"
              "        return x\n\n\nNet().forward(1, 2)\n")
    s = suggested_fix(method, _failed("TypeError: Net.forward() takes from 1 to 2 positional arguments but 3 were "
                                      "given", 7), "x.py")
    assert s is None  # "from 1 to 2" is another wording: not read
    s = suggested_fix(method.replace("x: int = 1, ", ""), _failed(
        "TypeError: Net.forward() takes 1 positional argument but 2 were given", 7), "x.py")
    assert s is not None and "    def forward(self, *_unused, y=2) -> int:\n        return x\n" in s.code
    # nothing to do: fewer given than taken, the function already takes *args, or it is not defined here
    assert suggested_fix(RIDGE_TO_TREES, _failed("TypeError: model() takes 2 positional arguments but 1 was given",
                                                 11), "x.py") is None
    assert suggested_fix(RIDGE_TO_TREES.replace("def model():", "def model(*a):"), _failed(error, 11), "x.py") is None
    assert suggested_fix(RIDGE_TO_TREES, _failed(error.replace("model", "other"), 11), "x.py") is None


HEADS = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self, hidden=64):
            super().__init__()
            self.fc1 = nn.Linear(8, hidden)
            self.fc2 = nn.Linear(hidden, hidden // 2)
            self.out = nn.Linear(hidden, 2)
        def forward(self, x):
            h = self.fc2(self.fc1(x))
            return self.out(h)
    model = Net()
    y = model(torch.zeros(4, 8))
""")


def test_a_linear_layer_fed_another_width_takes_the_width_it_gets():
    err = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x32 and 64x2)"
    s = suggested_fix(HEADS, _failed(err, 11, "forward"), "x.py")
    assert s is not None and s.rule == "linear_in" and not s.sure and s.early
    assert "self.out = nn.Linear(32, 2)\n" in s.code and "self.fc2 = nn.Linear(hidden, hidden // 2)\n" in s.code
    namespace: dict = {}
    exec(compile(s.code, "x.py", "exec"), namespace)
    assert tuple(namespace["y"].shape) == (4, 2)
    # a container of layers on the failing line: the one layer built with the sizes the message shows
    seq = ("import torch.nn as nn\nnet = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(32, 3))\n"
           "out = net(x)\n")
    s = suggested_fix(seq, _failed("RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x16 and 32x3)", 3),
                      "x.py")
    assert s is not None and "nn.Linear(16, 3))" in s.code and "nn.Linear(8, 16)" in s.code
    # two layers could be meant: no guess
    two = seq.replace("nn.Linear(8, 16)", "nn.Linear(32, 16)").replace("nn.Linear(32, 3)", "nn.Linear(32, 3)")
    assert suggested_fix(two.replace("(32, 3)", "(32, 16)"),
                         _failed("RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x16 and 32x16)", 3),
                         "x.py") is None


JOINS = textwrap.dedent("""\
    import numpy as np
    import torch
    def forward(h, stats):
        return torch.cat([h, stats], dim=0)
    a, b = np.zeros((4, 2)), np.ones((4, 3))
    x = np.concatenate([a, b])
""")


def test_parts_joined_along_the_wrong_dimension_are_joined_along_the_one_they_differ_in():
    notes = ("- The values the run saw where it failed (innermost frame first):\n  x.py:4 in forward\n"
             "    h = torch tensor, shape [64, 8, 32], float32\n    stats = torch tensor, shape [64, 8, 3], float32\n")
    err = "RuntimeError: Sizes of tensors must match except in dimension 0. Expected size 8 but got size 8"
    failed = _failed(err, 4, "forward").model_copy(update={"error_notes": notes})
    s = suggested_fix(JOINS, failed, "x.py")
    assert s is not None and s.rule == "concat_dim" and s.early
    assert "torch.cat([h, stats], dim=2)" in s.code  # the shapes differ only in their last dimension
    # no shapes seen: the other of the first two dimensions
    assert "torch.cat([h, stats], dim=1)" in suggested_fix(JOINS, _failed(err, 4, "forward"), "x.py").code
    # NumPy's message, its default axis: the keyword is added
    err = ("ValueError: all the input array dimensions except for the concatenation axis must match exactly, but "
           "along dimension 1, the array at index 0 has size 2 and the array at index 1 has size 3")
    s = suggested_fix(JOINS, _failed(err, 6), "x.py")
    assert s is not None and "x = np.concatenate([a, b], axis=1)\n" in s.code
    namespace: dict = {}
    exec(compile(s.code, "x.py", "exec"), namespace)
    assert namespace["x"].shape == (4, 5)


SPLITS = textwrap.dedent("""\
    X_train, X_val, y_train, y_val = split(X, y)
    for epoch in range(3):
        val_loss = criterion(model(X_val), y_train).item()
    model.fit(X_train, y_val)
    score = model.score(X_TEST, y_val)
""")


def test_data_of_two_splits_in_one_call_get_one_split():
    err = "ValueError: Expected input batch_size (150) to match target batch_size (600)."
    s = suggested_fix(SPLITS, _failed(err, 3), "x.py")
    assert s is not None and s.rule == "split_names" and s.early
    assert "val_loss = criterion(model(X_val), y_val).item()\n" in s.code  # the target votes with X_val
    # a tie: the split named first wins
    s = suggested_fix(SPLITS, _failed("ValueError: Found input variables with inconsistent numbers of samples: "
                                      "[600, 150]", 4), "x.py")
    assert s is not None and "model.fit(X_train, y_train)\n" in s.code
    # no sibling of the other split defined (X_TEST has no y_TEST, y_val no y_test): nothing to change to
    assert suggested_fix(SPLITS, _failed("ValueError: Found input variables with inconsistent numbers of samples: "
                                         "[10, 150]", 5), "x.py") is None


FILLED = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
    class Net(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.layers = []
            self.blocks = list()
            self.names = []
            for a, b in zip(sizes[:-1], sizes[1:]):
                layer = nn.Linear(a, b)
                self.layers.append(layer)
                self.blocks += [Block()]
                self.names.append(str(a))
    model = Net([4, 3, 2])
    opt = torch.optim.Adam(model.parameters())
""")


def test_layers_appended_to_an_empty_list_are_registered():
    s = suggested_fix(FILLED, _failed("ValueError: optimizer got an empty parameter list", 19), "x.py")
    assert s is not None and s.rule == "module_list" and s.sure
    assert "self.layers = nn.ModuleList([])\n" in s.code and "self.blocks = nn.ModuleList(list())\n" in s.code
    assert "self.names = []\n" in s.code  # strings: left a list
    namespace: dict = {}
    exec(compile(s.code, "x.py", "exec"), namespace)
    assert len(list(namespace["model"].parameters())) == 8


ONE_HOT = textwrap.dedent("""\
    import torch.nn.functional as F
    NUM_CLASSES = 2
    targets = F.one_hot(y, num_classes=NUM_CLASSES)
    other = F.one_hot(y, 2)
""")


@pytest.mark.parametrize("line, expected", [(3, "NUM_CLASSES = 3\n"), (4, "other = F.one_hot(y, 3)\n")])
def test_a_one_hot_count_below_the_labels_becomes_their_largest_value_plus_one(line, expected):
    notes = ("- The values the run saw where it failed (innermost frame first):\n  x.py:3 in <module>\n"
             "    y = torch tensor, shape [30], int64, min 0, max 2\n    NUM_CLASSES = 2\n")
    failed = _failed("RuntimeError: Class values must be smaller than num_classes.", line).model_copy(
        update={"error_notes": notes})
    s = suggested_fix(ONE_HOT, failed, "x.py")
    assert s is not None and s.rule == "class_count" and s.early and expected in s.code


def test_a_one_hot_count_several_short_gets_the_labels_count_not_one_more():
    notes = ("- The values the run saw where it failed (innermost frame first):\n  x.py:3 in <module>\n"
             "    y = torch tensor, shape [30], int64, min 0, max 4\n    NUM_CLASSES = 2\n")
    failed = _failed("RuntimeError: Class values must be smaller than num_classes.", 3).model_copy(
        update={"error_notes": notes})
    s = suggested_fix(ONE_HOT, failed, "x.py")
    assert s is not None and "NUM_CLASSES = 5\n" in s.code and "NUM_CLASSES 2 -> 5" in s.what
    # a count computed by an expression: not guessed
    computed = ONE_HOT.replace("NUM_CLASSES = 2", "NUM_CLASSES = len(names)")
    assert suggested_fix(computed, failed, "x.py") is None


def _notes(line: int, function: str, *values: str) -> str:
    return ("- The values the run saw where it failed (innermost frame first):\n"
            f"  x.py:{line} in {function}\n" + "".join(f"    {v}\n" for v in values))


def _runs(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "x.py", "exec"), namespace)
    return namespace


FLATTENED = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(12, 3)
        def forward(self, x):
            x = torch.flatten(x)
            return self.fc(x)
    y = Net()(torch.zeros(5, 3, 4))
""")


@pytest.mark.parametrize("flatten, kept", [("torch.flatten(x)", "torch.flatten(x, 1)"),
                                           ("x.view(-1)", "x.view(x.size(0), -1)"),
                                           ("x.reshape(1, -1)", "x.reshape(x.size(0), -1)"),
                                           ("x.flatten()", "x.flatten(1)")])
def test_a_flatten_over_the_batch_keeps_the_first_dimension(flatten, kept):
    code = FLATTENED.replace("torch.flatten(x)", flatten)
    error = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x60 and 12x3)"
    s = suggested_fix(code, _failed(error, 9, "forward"), "x.py")
    assert s is not None and s.rule == "flatten_batch" and s.early and f"x = {kept}\n" in s.code
    assert tuple(_runs(s.code)["y"].shape) == (5, 3)
    # a width that is no multiple of the layer's, or more than one row: the layer's width is the question
    other = _failed("RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x61 and 12x3)", 9, "forward")
    assert (s2 := suggested_fix(code, other, "x.py")) is None or s2.rule != "flatten_batch"
    rows = _failed("RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x24 and 12x3)", 9, "forward")
    assert (s3 := suggested_fix(code, rows, "x.py")) is None or s3.rule != "flatten_batch"


def test_a_loss_class_given_the_tensors_is_built_first_then_called():
    code = ("import torch\nimport torch.nn as nn\nout, y = torch.randn(4, 3), torch.tensor([0, 1, 2, 0])\n"
            "loss = nn.CrossEntropyLoss(out, y)\n")
    s = suggested_fix(code, _failed("RuntimeError: Boolean value of Tensor with more than one value is ambiguous",
                                    4), "x.py")
    assert s is not None and s.rule == "module_call" and s.sure
    assert "loss = nn.CrossEntropyLoss()(out, y)\n" in s.code and _runs(s.code)["loss"].ndim == 0
    # another module class is moved only when the values show it was given tensors
    relu = "import torch\nimport torch.nn as nn\nx = torch.randn(4)\nh = nn.ReLU(x)\n"
    failed = _failed("RuntimeError: Boolean value of Tensor with more than one value is ambiguous", 4)
    assert suggested_fix(relu, failed, "x.py") is None
    shown = failed.model_copy(update={"error_notes": _notes(4, "<module>", "x = torch tensor, shape [4], float32")})
    s = suggested_fix(relu, shown, "x.py")
    assert s is not None and "h = nn.ReLU()(x)\n" in s.code


GRU = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 4)
            self.gru = nn.GRU(4, 8)
            self.head = nn.Linear(8, 2)
        def forward(self, tokens):
            x = self.emb(tokens)
            h = torch.tanh(self.head.weight.new_zeros(1))
            _, h_n = self.gru(x)
            last = h_n[-1]
            last += h
            return self.head(last)
    VOCAB, LEN = 10, 7
    tokens = torch.randint(1, VOCAB + 1, (5, LEN))
""")


def test_a_recurrent_layer_fed_batch_first_input_gets_batch_first():
    error = "ValueError: Expected input batch_size (7) to match target batch_size (5)."
    s = suggested_fix(GRU, _failed(error, 20), "x.py")
    assert s is not None and s.rule == "batch_first" and s.early
    assert "self.gru = nn.GRU(4, 8, batch_first=True)\n" in s.code
    # code that puts time first on purpose is left alone
    assert suggested_fix(GRU.replace("x = self.emb(tokens)", "x = self.emb(tokens).transpose(0, 1)"),
                         _failed(error, 20), "x.py") is None


def test_an_embedding_smaller_than_its_ids_gets_the_largest_id_plus_one_rows():
    failed = _failed("IndexError: index out of range in self", 10, "forward").model_copy(update={"error_notes": _notes(
        10, "forward", "tokens = torch tensor, shape [5, 7], int64, min 1, max 10", "VOCAB = 10")})
    s = suggested_fix(GRU.replace("VOCAB, LEN = 10, 7", "VOCAB = 10\nLEN = 7"), failed, "x.py")
    assert s is not None and s.rule == "embedding_size" and s.early
    assert "self.emb = nn.Embedding(VOCAB + 1, 4)\n" in s.code
    # the name assigned in a tuple: its value read from the values at the crash
    s = suggested_fix(GRU, failed, "x.py")
    assert s is not None and "nn.Embedding(VOCAB + 1, 4)" in s.code
    # ids the table already covers: not this
    inside = failed.model_copy(update={"error_notes": failed.error_notes.replace("max 10", "max 9")})
    assert suggested_fix(GRU, inside, "x.py") is None


def test_in_place_tensor_operations_in_forward_become_new_tensors():
    code = GRU.replace("self.gru = nn.GRU(4, 8)", "self.gru = nn.GRU(4, 8, batch_first=True)").replace(
        "nn.Embedding(VOCAB, 4)", "nn.Embedding(VOCAB + 1, 4)") + "Net()(tokens).sum().backward()\n"
    code = code.replace("        return self.head(last)\n",
                        "        last.mul_(2)\n        return self.head(nn.ReLU(inplace=True)(last))\n")
    error = ("RuntimeError: one of the variables needed for gradient computation has been modified by an inplace "
             "operation: [torch.FloatTensor [5, 8]], which is output 0 of SelectBackward0, is at version 1")
    s = suggested_fix(code, _failed(error, 19), "x.py")
    assert s is not None and s.rule == "inplace_grad" and s.sure
    assert "last = last + (h)\n" in s.code and "last = last.mul(2)\n" in s.code and "inplace=False" in s.code
    _runs(s.code)  # backward runs
    assert suggested_fix(code.replace("last += h", "last = last + h").replace("last.mul_(2)", "pass").replace(
        "inplace=True", ""), _failed(error, 19), "x.py") is None


@pytest.mark.parametrize("library, error, keyword", [
    ("numpy", "ValueError: operands could not be broadcast together with shapes (6,3) (6,) ", "keepdims"),
    ("torch", "RuntimeError: The size of tensor a (3) must match the size of tensor b (6) at non-singleton "
              "dimension 1", "keepdim")])
def test_a_reduction_that_lost_its_axis_keeps_it(library, error, keyword):
    make = "np.ones((6, 3))" if library == "numpy" else "torch.ones(6, 3)"
    code = (f"import numpy as np\nimport torch\ndef softmax(z):\n    e = np.exp(z) if isinstance(z, np.ndarray) "
            f"else torch.exp(z)\n    return e / e.sum(axis=1)\np = softmax({make})\n")
    if library == "torch":
        code = code.replace("e.sum(axis=1)", "e.sum(dim=1)")
    s = suggested_fix(code, _failed(error, 5, "softmax"), "x.py")
    assert s is not None and s.rule == "keep_dims" and s.early and f"{keyword}=True)" in s.code
    p = _runs(s.code)["p"]
    assert tuple(p.shape) == (6, 3) and abs(float(p.sum()) - 6.0) < 1e-5
    # shapes that differ by more than a lost axis: not this
    wide = _failed("ValueError: operands could not be broadcast together with shapes (6,3) (4,) ", 5, "softmax")
    assert suggested_fix(code, wide, "x.py") is None or suggested_fix(code, wide, "x.py").rule != "keep_dims"


def test_a_tensor_that_requires_grad_is_detached_before_numpy():
    error = "RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
    code = ("import numpy as np\nimport torch\nw = torch.ones(3, requires_grad=True)\npred = w * 2\n"
            "scores = pred.numpy()\nkept = pred.detach().numpy()\n")
    s = suggested_fix(code, _failed(error, 5), "x.py")
    assert s is not None and s.rule == "detach_numpy" and s.sure and "scores = pred.detach().numpy()\n" in s.code
    assert list(_runs(s.code)["scores"]) == [2.0, 2.0, 2.0]
    # handed to NumPy: the tensor the values show requiring grad is detached there
    handed = code.replace("scores = pred.numpy()", "scores = np.asarray(pred)")
    failed = _failed(error, 5).model_copy(update={"error_notes": _notes(
        5, "<module>", "pred = torch tensor, shape [3], float32, requires grad, min 2, max 2")})
    s = suggested_fix(handed, failed, "x.py")
    assert s is not None and "scores = np.asarray(pred.detach())\n" in s.code
    assert suggested_fix(handed, _failed(error, 5), "x.py") is None  # without the values: not told which


def test_a_method_passed_where_its_result_was_meant_is_called():
    code = ("import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 1)\n"
            "opt = torch.optim.SGD(model.parameters, lr=0.1)\n")
    s = suggested_fix(code, _failed("TypeError: 'method' object is not iterable", 4), "x.py")
    assert s is not None and s.rule == "uncalled_method" and s.sure
    assert "torch.optim.SGD(model.parameters(), lr=0.1)" in s.code and _runs(s.code)["opt"] is not None
    loop = "d = {'a': 1}\nfor k, v in d.items:\n    print(k, v)\n"
    s = suggested_fix(loop, _failed("TypeError: 'builtin_function_or_method' object is not iterable", 2), "x.py")
    assert s is not None and "for k, v in d.items():" in s.code
    # two candidates on the line: not told which
    two = "d = {'a': 1}\npairs = list(zip(d.keys, d.values))\n"
    assert suggested_fix(two, _failed("TypeError: 'method' object is not iterable", 2), "x.py") is None


def test_a_loss_class_kept_where_its_module_was_meant_is_built():
    code = ("import torch\nimport torch.nn as nn\nloss_fn = nn.MSELoss\npred, y = torch.zeros(4), torch.ones(4)\n"
            "loss = loss_fn(pred, y)\n")
    s = suggested_fix(code, _failed("RuntimeError: Boolean value of Tensor with more than one value is ambiguous",
                                    5), "x.py")
    assert s is not None and s.rule == "module_call" and "loss_fn = nn.MSELoss()\n" in s.code
    assert float(_runs(s.code)["loss"]) == 1.0


CONV = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(1, 4, 3)
        def forward(self, x):
            return self.conv(x)
    y = Net()(torch.zeros(8, 20))
""")


def test_a_convolution_given_another_channel_count_gets_the_dimension_or_the_count():
    error = ("RuntimeError: Given groups=1, weight of size [4, 1, 3], expected input[1, 8, 20] to have 1 channels, "
             "but got 8 channels instead")
    failed = _failed(error, 8, "forward").model_copy(update={"error_notes": _notes(
        8, "forward", "x = torch tensor, shape [8, 20], float32")})
    s = suggested_fix(CONV, failed, "x.py")
    assert s is not None and s.rule == "conv_channels" and s.early and "return self.conv(x.unsqueeze(1))" in s.code
    assert tuple(_runs(s.code)["y"].shape) == (8, 4, 18)
    # a batched input with more channels than the layer was built for: its in_channels
    wide = CONV.replace("torch.zeros(8, 20)", "torch.zeros(8, 2, 20)")
    error2 = ("RuntimeError: Given groups=1, weight of size [4, 1, 3], expected input[8, 2, 20] to have 1 channels, "
              "but got 2 channels instead")
    s = suggested_fix(wide, _failed(error2, 8, "forward"), "x.py")
    assert s is not None and "nn.Conv1d(2, 4, 3)" in s.code and tuple(_runs(s.code)["y"].shape) == (8, 4, 18)


def test_a_standard_library_class_used_by_name_gets_its_import():
    code = "labels = [1, 2, 2]\ncounts = Counter(labels)\n"
    s = suggested_fix(code, _failed("NameError: name 'Counter' is not defined", 2), "x.py")
    assert s is not None and s.rule == "missing_import" and "from collections import Counter\n" in s.code
    assert _runs(s.code)["counts"][2] == 2
