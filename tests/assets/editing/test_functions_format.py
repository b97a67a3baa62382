"""The "functions" edit format (assets/editing/edit_formats/): complete definitions applied by name."""
from __future__ import annotations

import textwrap

import pytest

from assets.editing.edit_formats import EditError, apply_edit
from assets.editing.edit_formats.functions import (
    apply_definitions,
    extract_definitions,
)
from bench.broken_suite import variant_code
from resources.paths import REPO_ROOT

SOURCE = textwrap.dedent('''\
    """A tiny experiment."""
    import json

    import numpy as np

    LR = 0.05
    EPOCHS = 30


    def make_data(n):
        rng = np.random.default_rng(0)
        return rng.normal(size=(n, 2)), rng.integers(0, 2, n)


    class Model:
        """Linear model."""

        scale = 1.0

        def __init__(self, dim):
            self.w = np.zeros(dim)

        @staticmethod
        def act(z):
            return 1 / (1 + np.exp(-z))

        def step(self, x, y):
            p = self.act(x @ self.w)
            self.w -= LR * x.T @ (p - y)
            return p


    class Other:
        def step(self):
            return 0


    x, y = make_data(100)
    m = Model(2)
    for epoch in range(EPOCHS):
        m.step(x, y)

    if __name__ == "__main__":
        print(json.dumps({"w": m.w.tolist()}))
    ''')


def fence(code: str) -> str:
    return "Here is the fix:\n```python\n" + textwrap.dedent(code).strip("\n") + "\n```\nDone."


def apply(code: str) -> str:
    return apply_edit(SOURCE, fence(code), "functions").code


# -- extraction ---------------------------------------------------------------------------

def test_extract_joins_blocks_and_dedents():
    text = "First:\n```python\n    def f():\n        return 1\n```\nand\n```\nimport os\n```"
    assert extract_definitions(text) == "def f():\n    return 1\n\nimport os\n"


def test_extract_bare_definition_and_no_code():
    assert extract_definitions("def f():\n    return 2\n") == "def f():\n    return 2\n"
    with pytest.raises(EditError) as e:
        extract_definitions("The bug is in line 3, change it.")
    assert e.value.status == "not_applied"


# -- functions and classes -----------------------------------------------------------------

def test_replaces_top_level_function_by_name_only():
    out = apply('''
        def make_data(n):
            rng = np.random.default_rng(1)
            return rng.normal(size=(n, 2)), rng.integers(0, 2, n)
        ''')
    assert "default_rng(1)" in out and "default_rng(0)" not in out
    assert out.replace("default_rng(1)", "default_rng(0)") == SOURCE  # nothing else moved


def test_class_with_one_method_keeps_the_others_and_decorators():
    out = apply('''
        class Model:
            def step(self, x, y):
                p = self.act(x @ self.w)
                self.w -= 2 * LR * x.T @ (p - y)
                return p
        ''')
    assert "self.w -= 2 * LR" in out
    assert "    def __init__(self, dim):\n        self.w = np.zeros(dim)" in out
    assert "    @staticmethod\n    def act(z):" in out
    assert '    """Linear model."""' in out and "    scale = 1.0" in out
    assert "class Other:\n    def step(self):\n        return 0" in out  # the other class's step is untouched


def test_class_header_change_and_new_method_at_the_end_of_the_class():
    out = apply('''
        class Model(object):
            def reset(self):
                self.w[:] = 0
        ''')
    assert "class Model(object):" in out
    body = out[out.index("class Model(object):"):out.index("class Other")]
    assert body.rstrip().endswith("def reset(self):\n        self.w[:] = 0")
    assert "def step(self, x, y)" in body


def test_decorated_method_replaced_with_its_decorator():
    out = apply('''
        class Model:
            @staticmethod
            def act(z):
                return np.tanh(z)
        ''')
    assert out.count("@staticmethod") == 1 and "return np.tanh(z)" in out and "np.exp(-z)" not in out


def test_lone_method_at_top_level_replaces_the_unique_method():
    out = apply('''
        def __init__(self, dim):
            self.w = np.ones(dim)
        ''')
    assert "        self.w = np.ones(dim)" in out and "np.zeros(dim)" not in out


def test_lone_method_with_ambiguous_name_is_not_applied():
    with pytest.raises(EditError) as e:
        apply('''
            def step(self):
                return 1
            ''')
    assert e.value.status == "not_applied" and "inside its class" in str(e.value)


def test_new_function_goes_before_its_first_use():
    out = apply('''
        def normalise(x):
            return (x - x.mean(0)) / x.std(0)

        x, y = make_data(100)
        x = normalise(x)
        ''')
    i_def, i_use = out.index("def normalise"), out.index("x = normalise(x)")
    assert out.index("x, y = make_data(100)") < i_def < i_use
    compile(out, "e.py", "exec")


def test_new_unused_function_goes_before_the_main_block():
    out = apply('''
        def report(w):
            return float(w.sum())
        ''')
    assert out.index("def report") < out.index('if __name__ == "__main__":')
    assert out.index("def report") > out.index("for epoch in range(EPOCHS):")


def test_imports_added_after_the_imports_and_same_name_import_replaced():
    out = apply('''
        import math
        from numpy import random as npr
        ''')
    lines = out.splitlines()
    assert lines.index("import math") == lines.index("import numpy as np") + 1
    assert "from numpy import random as npr" in out
    out = apply("import json as js\n")  # binds another name: added, the old stays
    assert "import json as js" in out and "import json\n" in out
    src = "from shapes import load_dataset\nx = load_dataset()\n"
    fixed = apply_edit(src, fence("from shapes import make_dataset\n"), "functions").code
    assert fixed == "from shapes import make_dataset\nx = load_dataset()\n"  # same module: replaced


def test_assignment_and_loop_replaced_by_target_and_first_line():
    out = apply('''
        LR = 0.01
        for epoch in range(EPOCHS):
            m.step(x, y)
            print(epoch)
        ''')
    assert "LR = 0.01" in out and "LR = 0.05" not in out
    assert "    m.step(x, y)\n    print(epoch)" in out and out.count("for epoch") == 1


def test_loop_with_changed_first_line_replaces_the_similar_loop():
    out = apply('''
        for epoch in range(EPOCHS * 2):
            m.step(x, y)
        ''')
    assert out.count("for epoch") == 1 and "range(EPOCHS * 2)" in out


def test_new_statement_goes_after_its_matched_neighbour():
    out = apply('''
        m = Model(2)
        m.w += 0.1
        ''')
    assert "m = Model(2)\nm.w += 0.1\nfor epoch" in out


def test_unmatched_lone_statement_is_not_applied():
    with pytest.raises(EditError) as e:
        apply("print('hello')\n")
    assert e.value.status == "not_applied" and "matches nothing" in str(e.value)


def test_placeholder_bodies_mean_unchanged():
    out = apply('''
        class Model:
            def __init__(self, dim):
                ...

            def step(self, x, y):
                return None
        ''')
    assert "self.w = np.zeros(dim)" in out and "            return None" not in out
    assert "    def step(self, x, y):\n        return None" in out


def test_same_definition_twice_the_last_one_counts():
    text = ("The bug:\n```python\ndef make_data(n):\n    return 1\n```\nThe fix:\n"
            "```python\ndef make_data(n):\n    return 2\n```")
    out = apply_edit(SOURCE, text, "functions").code
    assert "    return 2" in out and "    return 1\n" not in out


def test_whole_file_in_functions_format_applies():
    new = SOURCE.replace("LR = 0.05", "LR = 0.02").replace("np.zeros(dim)", "np.ones(dim)")
    assert apply_edit(SOURCE, fence(new), "functions").code == new


def test_unchanged_definition_is_a_no_op():
    with pytest.raises(EditError) as e:
        apply('''
            def make_data(n):
                rng = np.random.default_rng(0)
                return rng.normal(size=(n, 2)), rng.integers(0, 2, n)
            ''')
    assert e.value.status == "no_op"


def test_answer_or_file_that_does_not_parse():
    with pytest.raises(EditError) as e:
        apply("def build_everything_anew(n, [m]:\n    return 1\n")
    assert e.value.status == "not_applied" and "does not parse" in str(e.value)
    # the same slip in a line the file has (its header) is the file's line, copied: restored
    assert "return 1" in apply("def make_data(n:\n    return 1\n")
    with pytest.raises(EditError) as e:
        apply_definitions("def f(:\n", "def f():\n    return 1\n")
    assert "rewrite the whole file" in str(e.value)


def test_edit_that_breaks_indentation_elsewhere_is_a_syntax_error():
    with pytest.raises(EditError) as e:  # a `yield` placed at the top level cannot compile
        apply("def make_data(n):\n    return n\nyield 3\n")
    assert e.value.status in ("not_applied", "syntax_error")


def test_pointcloud_reference_method_fix():
    src = variant_code("missing_transpose")
    out = apply_edit(src, fence('''
        class PointNet(nn.Module):
            def forward(self, x):  # x: [B, P, 3]
                x = self.features(x.transpose(1, 2))  # [B, C, P]
                x = x.max(dim=2).values               # symmetric max pool over points
                return self.head(x)
        '''), "functions").code
    assert out == (REPO_ROOT / "experiments/pointcloud_classification/experiment.py").read_text()


# -- answers laid out like the local code structure ("# FILE, lines A-B" segments) ---------

def test_structure_style_segments_replace_their_lines():
    src = variant_code("missing_attribute")
    answer = fence('''
        # experiment.py, lines 36-44 (class PointNet)
            def __init__(self, n_classes, width=(64, 128, 256)):
                super().__init__()
                layers, c_in = [], 3
                for c in width:  # shared per-point MLP as 1x1 convolutions
                    layers += [nn.Conv1d(c_in, c, 1, bias=False), nn.BatchNorm1d(c), nn.ReLU()]
                    c_in = c
                self.features = nn.Sequential(*layers)
                self.classifier = nn.Sequential(nn.Linear(c_in, 128, bias=False), nn.BatchNorm1d(128), nn.ReLU(),
                                                nn.Linear(128, n_classes))

        # experiment.py, lines 46-49 (class PointNet)
            def forward(self, x):  # x: [B, P, 3]
                x = self.features(x.transpose(1, 2))  # [B, C, P]
                x = x.max(dim=2).values               # symmetric max pool over points
                return self.classifier(x)
        ''')
    out = apply_edit(src, answer, "functions").code
    assert "        self.classifier = nn.Sequential(" in out and "self.head" not in out
    assert out.count("def forward") == 1 and "# experiment.py" not in out
    compile(out, "experiment.py", "exec")


def test_structure_style_segment_reindented_and_module_window():
    src = "import os\n\nfor i in range(3):\n    x = i\n    print(x)\nprint('done')\n"
    answer = "```python\n# experiment.py, lines 3-5\nfor i in range(3):\n    x = i * 2\n    print(x)\n```"
    assert apply_edit(src, answer, "functions").code == src.replace("x = i\n", "x = i * 2\n")
    shifted = "```python\n# experiment.py, lines 4-5\nx = i + 1\nprint(x)\n```"  # the model dropped the indent
    assert "    x = i + 1\n    print(x)\n" in apply_edit(src, shifted, "functions").code


def test_structure_style_segments_that_cannot_apply():
    src = "import os\n\nfor i in range(3):\n    x = i\n    print(x)\nprint('done')\n"
    answer = "```python\n# util.py, lines 3-5\nfor i in range(3):\n    x = i * 2\n    print(x)\n```"
    with pytest.raises(EditError) as e:
        apply_edit(src, answer, "functions")
    assert e.value.status == "not_applied" and "only experiment.py can be edited" in str(e.value)
    # a header naming lines that do not hold that code: the code is applied by its names instead
    for header in ("# experiment.py, lines 30-40", "# experiment.py, lines 1-2"):
        answer = f"```python\n{header}\nfor i in range(3):\n    x = i * 2\n    print(x)\n```"
        assert apply_edit(src, answer, "functions").code == src.replace("x = i\n", "x = i * 2\n")
    with pytest.raises(EditError, match="does not resemble"):  # nor by names: the segment's own error
        apply_edit(src, "```python\n# experiment.py, lines 1-2\nwhile True:\n    break\n```", "functions")


def test_definitions_before_the_first_segment_apply_too():
    src = "import os\n\nLR = 1\n\nfor i in range(3):\n    x = i\n"
    answer = "```python\nLR = 2\n\n# experiment.py, lines 5-6\nfor i in range(3):\n    x = i + LR\n```"
    assert apply_edit(src, answer, "functions").code == "import os\n\nLR = 2\n\nfor i in range(3):\n    x = i + LR\n"


# -- a lone changed line inside a loop or a function ----------------------------------------

def test_lone_statement_replaces_the_matching_line_inside_a_block():
    ref = (REPO_ROOT / "experiments/pointcloud_classification/experiment.py").read_text()
    broken = variant_code("dtype_float_labels")
    fixed = apply_edit(broken, fence("loss = F.cross_entropy(model(x_train[idx]), y_train[idx])"), "functions").code
    assert fixed == ref  # re-indented into the inner training loop
    broken = variant_code("loss_tensor_in_numpy")
    assert apply_edit(broken, fence("losses.append(loss.item())"), "functions").code == ref  # by the call
    broken = variant_code("missing_attribute")
    assert apply_edit(broken, fence("return self.head(x)"), "functions").code == ref  # a similar return


def test_lone_statement_inside_a_block_the_answer_replaces_is_not_applied_twice():
    out = apply('''
        for epoch in range(EPOCHS):
            m.step(x, y)
            print(epoch)
        m.step(x, y)
        ''')
    # the loop is replaced as a whole; the lone line is then a new statement after it (no overlap)
    assert "for epoch in range(EPOCHS):\n    m.step(x, y)\n    print(epoch)\nm.step(x, y)\n" in out
    compile(out, "e.py", "exec")


def test_lone_statement_unlike_any_line_is_not_applied():
    with pytest.raises(EditError) as e:
        apply("totally_new_name = compute_something_else(42)\n")
    assert e.value.status == "not_applied"


def test_annotated_lone_line_still_finds_its_line_in_a_method():
    """Recorded (1.5B, max_without_values): a trailing comment made the line look unlike the one
    it fixes; similarity ignores comments."""
    code = variant_code("max_without_values")
    answer = "```python\nx = x.max(dim=2)[0]  # <-- fix the error by taking the max value only\n```"
    new = apply_edit(code, answer, "functions").code
    assert "        x = x.max(dim=2)[0]  # <-- fix the error by taking the max value only\n" in new
    assert "x = x.max(dim=2)                      #" not in new
    assert new.count("x = x.max(") == 1


def test_lone_line_prefers_the_loop_line_it_resembles_over_a_top_level_one_with_its_target():
    """Recorded (1.5B, loss_tensor_in_numpy): the fix of the in-loop `train_loss = ...` went to the
    top-level `train_loss = float("nan")` because top-level targets were matched first."""
    code = variant_code("loss_tensor_in_numpy")
    answer = "```python\ntrain_loss = float(np.mean([l.item() for l in losses]))\n```"
    new = apply_edit(code, answer, "functions").code
    assert 'train_loss = float("nan")\n' in new
    assert "    train_loss = float(np.mean([l.item() for l in losses]))\n" in new
    assert "train_loss = float(np.mean(losses))" not in new


def test_lone_line_like_the_top_level_one_stays_top_level():
    code = variant_code("loss_tensor_in_numpy")
    new = apply_edit(code, '```python\ntrain_loss = float("inf")\n```', "functions").code
    assert 'train_loss = float("inf")\n' in new and "    train_loss = float(np.mean(losses))" in new


def test_lone_self_attribute_goes_into_the_init_of_the_class_that_reads_it():
    """Recorded (1.5B, missing_attribute): forward calls self.classifier, which __init__ never sets;
    the model answered with the missing assignment alone."""
    code = variant_code("missing_attribute")
    new = apply_edit(code, "```python\nself.classifier = nn.Linear(c_in, n_classes)\n```", "functions").code
    lines = new.splitlines()
    i = lines.index("        self.classifier = nn.Linear(c_in, n_classes)")
    assert lines[i - 1].strip() == "nn.Linear(128, n_classes))"  # the last statement of __init__ ends there
    assert "def forward" in lines[i + 2]
    compile(new, "experiment.py", "exec")


def test_lone_self_attribute_nobody_reads_is_still_not_applied():
    code = variant_code("missing_attribute")
    with pytest.raises(EditError, match="not_applied"):
        apply_edit(code, "```python\nself.unused = 3\n```", "functions")


TRAIN = textwrap.dedent("""\
    EPOCHS = 4
    model = Model(num_epochs=4)
    t0 = 0
    for epoch in range(num_epochs):
        step()
    print(epoch)
    """)


def test_a_lone_new_assignment_goes_above_the_first_statement_that_reads_it():
    """Recorded (1.5B, sentiment r1 repair): for "name 'num_epochs' is not defined" raised by the
    training loop, the model answered `num_epochs = 4` alone; nothing in the file assigns it."""
    new = apply_edit(TRAIN, "```python\nnum_epochs = 4\n```", "functions").code
    assert "t0 = 0\nnum_epochs = 4\nfor epoch in range(num_epochs):\n" in new
    with pytest.raises(EditError, match="not_applied"):  # a name nothing reads: where it goes is unknown
        apply_edit(TRAIN, "```python\nunused = 4\n```", "functions")


def test_a_lone_block_header_replaces_the_most_similar_header():
    """Recorded (1.5B, sentiment r1 repair): the answer was the loop's first line alone, which does
    not parse by itself."""
    new = apply_edit(TRAIN, "```python\nfor epoch in range(EPOCHS):\n```", "functions").code
    assert new == TRAIN.replace("range(num_epochs)", "range(EPOCHS)")
    nested = "def f(xs):\n    for x in xs:\n        print(x)\n"
    assert apply_edit(nested, "```python\nfor x in sorted(xs):\n```", "functions").code == \
        nested.replace("in xs", "in sorted(xs)")  # indentation kept
    with pytest.raises(EditError, match="not_applied"):  # no loop like it
        apply_edit(TRAIN, "```python\nwhile not converged(model, tolerance=1e-6):\n```", "functions")


def test_segments_that_do_not_fit_their_lines_are_applied_by_names():
    """Recorded (1.5B, diabetes repair): a header "# experiment.py, lines 27-30" above a whole new
    version of read() and the statements after it, which are not those lines."""
    code = textwrap.dedent("""\
        import csv


        def read(path):
            with open(path) as f:
                rows = list(csv.DictReader(f))
            return rows


        train = read("train.csv")
        print(len(train))
        """)
    answer = textwrap.dedent("""\
        ```python
        # experiment.py, lines 7-9
        def read(path):
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
            return rows
        ```""")
    new = apply_edit(code, answer, "functions").code
    assert 'with open(path, newline="") as f:' in new and new.count("def read") == 1
    assert new.endswith('train = read("train.csv")\nprint(len(train))\n')


def test_an_answer_cut_off_inside_its_code_block_says_so():
    with pytest.raises(EditError, match="cut off"):
        apply_edit("x = 1\n", "Here is the file:\n```python\nimport os\nx = 2\nfor i in range(", "functions")


def test_a_slip_in_a_line_copied_from_the_file_is_undone():
    """Recorded (1.5B, diabetes repairs, 15 answers): the answer copies the file's unchanged
    `w.writerows(...)` line with one bracket too many, so it does not parse; that line is the file's."""
    code = textwrap.dedent("""\
        import csv
        pred = [0.5, 1.5]
        test = [{"id": 1}, {"id": 2}]
        with open("p.csv", "w") as f:
            w = csv.writer(f)
            w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, pred))
        """)
    answer = textwrap.dedent("""\
        ```python
        pred = [round(p, 2) for p in [0.5, 1.5]]
        with open("p.csv", "w") as f:
            w = csv.writer(f)
            w.writerows([r["id"], f"{p:.6f}"] for r, p in zip(test, pred)])
        ```""")
    new = apply_edit(code, answer, "functions").code
    assert new == code.replace("pred = [0.5, 1.5]", "pred = [round(p, 2) for p in [0.5, 1.5]]")
    with pytest.raises(EditError, match="does not parse"):  # a broken line like nothing in the file stays refused
        apply_edit(code, "```python\nwhile (True:\n    pass\n```", "functions")
