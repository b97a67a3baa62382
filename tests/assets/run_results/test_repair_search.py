"""Repairs are a search: several candidate fixes per failure, each checked by running it, the
one that gets furthest kept; the interpreter's own "Did you mean" suggestion is a candidate
made without the LLM (assets/editing/suggestions.py); an answer that cannot be placed is
asked again while the budget lasts. Sandboxed runs are real; the LLM is a scripted fake."""
from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from assets.editing.suggestions import suggested_fix
from assets.run_results.repair_search import RepairPolicy, run_with_repair
from resources.paths import REPO_ROOT
from resources.runner import Runner
from schemas.records import Attempt, TraceFrame
from tests.support.debugging import BROKEN, FIX, SAME_ERROR, CountingRunner, FakeLLM, _debug, _env, target
from tests.support.fake_llm import FakeLLMServer

TYPO = REPO_ROOT / "tests" / "fixtures" / "typo_method" / "train.py"
# what the small model answered for the typo: the corrected line alone, which the functions
# format cannot place (it is neither a definition nor a top-level block)
UNPLACEABLE = "```python\n            model.train_step(x, y)\n```"
# the fix as a changed definition: the fixture's main() with the method name corrected
WHOLE_MAIN = ("```python\n" + TYPO.read_text().split("\n\n\nif __name__")[0].split("\n\n\n")[-1]
              .replace("train_stepp", "train_step") + "\n```")
# a fix that rewrites the faulty line without fixing it: the same error again
KEYWORD = textwrap.dedent("""\
    import json


    def report(values):
        text = json.dumps({"n": len(values)}, colour=True)
        print("report", text)


    if __name__ == "__main__":
        report([1, 2, 3])
    """)


@pytest.fixture
def typo(tmp_path) -> Path:
    folder = tmp_path / "typo"
    folder.mkdir()
    shutil.copy(TYPO, folder / "train.py")
    return folder / "train.py"


@pytest.fixture
def calc(tmp_path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "calc.py").write_text(BROKEN)
    return folder / "calc.py"


def search(script: Path, llm, tmp_path: Path, *, runner=None, workdir: Path | None = None, **policy):
    """The repair search on `script`; `policy`: RepairPolicy fields (default: 5 repairs, functions format)."""
    return run_with_repair(target(script), script.read_text(), runner=runner or Runner(), llm=llm,
                           workdir=workdir or tmp_path / "work", idea_id=script.stem, log=lambda s: None,
                           policy=RepairPolicy(**{"max_repairs": 5, "edit_format": "functions", **policy}))


def failure(error: str, line: int, file: str = "x.py") -> Attempt:
    return Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
                   frames=[TraceFrame(file="other.py", line=1, function="f"),
                           TraceFrame(file=file, line=line, function="g")])


# -- the interpreter's suggestion, as an edit -----------------------------------------------

def test_suggested_fix_applies_the_message_at_the_failing_line(tmp_path):
    code = "import json\nx = 1\nvalue = x + 1\nprint(valu)\nprint(valu, value)\n"
    s = suggested_fix(code, failure("NameError: name 'valu' is not defined. Did you mean: 'value'?", 4), "x.py")
    assert s is not None and s.code.splitlines()[3] == "print(value)"
    assert s.code.splitlines()[4] == "print(valu, value)"  # only the failing line changes
    assert "-print(valu)" in s.diff and "valu -> value" in s.what
    assert not s.sure  # a short name: Python suggests any near one (`best` -> `test`), a guess
    s = suggested_fix("factor = 2\nprint(factr)\n",
                      failure("NameError: name 'factr' is not defined. Did you mean: 'factor'?", 2), "x.py")
    assert s.sure and s.code.endswith("print(factor)\n")
    # an attribute: only after a dot; the name alone elsewhere on the line stays
    code = "def f(m, train_stepp):\n    return m.train_stepp(train_stepp)\n"
    s = suggested_fix(code, failure("AttributeError: 'Model' object has no attribute 'train_stepp'. "
                                    "Did you mean: 'train_step'?", 2), "x.py")
    assert s.code.splitlines()[1] == "    return m.train_step(train_stepp)"
    # a keyword argument
    code = "def f(lr=1):\n    return lr\nf(lrr=2)\n"
    s = suggested_fix(code, failure("TypeError: f() got an unexpected keyword argument 'lrr'. "
                                    "Did you mean 'lr'?", 3), "x.py")
    assert s.code.splitlines()[2] == "f(lr=2)"
    # a forgotten import goes before the first import, after the docstring
    code = '"""doc"""\nfrom __future__ import annotations\nimport json\nprint(math.pi)\n'
    s = suggested_fix(code, failure("NameError: name 'math' is not defined. Did you forget to import 'math'?", 4),
                      "x.py")
    assert s.code.splitlines()[:4] == ['"""doc"""', "from __future__ import annotations", "import math",
                                       "import json"]
    # Python 3.11 suggests nothing for "cannot import name": a module of the folder is read with ast
    (tmp_path / "helpers.py").write_text("def load_data():\n    return 1\nSCALE = 2\n")
    code = "from helpers import load_dat, SCALE\nprint(load_dat())\n"
    s = suggested_fix(code, failure("ImportError: cannot import name 'load_dat' from 'helpers' (/ws/helpers.py)", 1),
                      "x.py", tmp_path)
    assert s.code.splitlines()[0] == "from helpers import load_data, SCALE"


def test_where_python_names_nothing_the_closest_defined_name_is_suggested():
    # torch's nn.Module raises its own AttributeError, without "Did you mean"
    code = textwrap.dedent("""\
        class Net:
            def __init__(self):
                self.dropout = 0.5
                self.head = 1

            def forward(self, x):
                return self.drop * x
        """)
    s = suggested_fix(code, failure("AttributeError: 'Net' object has no attribute 'drop'", 7), "x.py")
    assert s.code.splitlines()[6] == "        return self.dropout * x" and "closest name the code defines" in s.what
    assert suggested_fix(code.replace("self.drop *", "self.classifier *"),
                         failure("AttributeError: 'Net' object has no attribute 'classifier'", 7), "x.py") is None
    # a name that differs by case (too far for Python's own suggestion), or by a few letters
    code = "BATCH_SIZE = 4\nEMBED_DIM = 8\nfor i in range(0, 10, batch_size):\n    print(i, EMBEDDING_DIM)\n"
    s = suggested_fix(code, failure("NameError: name 'batch_size' is not defined", 3), "x.py")
    assert s.code.splitlines()[2] == "for i in range(0, 10, BATCH_SIZE):"
    s = suggested_fix(code, failure("NameError: name 'EMBEDDING_DIM' is not defined", 4), "x.py")
    assert s.code.splitlines()[3] == "    print(i, EMBED_DIM)"


def test_no_suggestion_no_candidate():
    code = "x = 1\nprint(y)\n"
    assert suggested_fix(code, failure("NameError: name 'y' is not defined", 2), "x.py") is None  # nothing named
    assert suggested_fix(code, failure("ZeroDivisionError: division by zero", 2), "x.py") is None
    # the wrong name is not on the failing line (built with getattr): nothing to place
    code = "m = object()\ngetattr(m, 'a' + 'b')\n"
    assert suggested_fix(code, failure("AttributeError: 'object' object has no attribute 'ab'. Did you mean: 'a'?",
                                       2), "x.py") is None
    # the error's frame is in another file than the one the loop may edit
    assert suggested_fix("print(valu)\n", failure("NameError: name 'valu' is not defined. Did you mean: 'value'?",
                                                  1, file="lib.py"), "x.py") is None


def test_an_undefined_library_name_gets_its_import():
    """The diabetes run's failures: the model rewrote the imports and the script used KFold and
    Ridge undefined; the module a script already imports from (or a public submodule of its
    package) that exports the name gives the import, placed with the other imports."""
    from assets.editing.suggestions import missing_import

    code = ('"""ridge"""\nimport numpy as np\nfrom sklearn.model_selection import train_test_split\n\n'
            "ridge = Ridge(alpha=1.0)\nfolds = KFold(n_splits=3)\n")
    s = suggested_fix(code, failure("NameError: name 'KFold' is not defined", 6), "x.py")
    assert s is not None and s.code.splitlines()[1] == "from sklearn.model_selection import KFold"
    assert "KFold is not defined" in s.what and s.code.count("KFold(n_splits=3)") == 1
    # Ridge: not the variable `ridge` (equal ignoring case) but sklearn.linear_model's class
    s = suggested_fix(code, failure("NameError: name 'Ridge' is not defined", 5), "x.py")
    assert s is not None and "from sklearn.linear_model import Ridge" in s.code.splitlines()
    assert "ridge = Ridge(alpha=1.0)" in s.code
    # two levels below an imported package, and the conventional aliases
    assert missing_import("TensorDataset", "import torch\n") == "from torch.utils.data import TensorDataset"
    assert missing_import("np", "import torch\n") == "import numpy as np"
    assert missing_import("json", "import torch\n") == "import json"  # a standard module used by its name
    # a module, or a name no imported library exports as a class or function: no candidate
    assert missing_import("optimizer", "import torch\n") is None
    assert suggested_fix("import json\nprint(frobnicate(1))\n",
                         failure("NameError: name 'frobnicate' is not defined", 2), "x.py") is None


def test_the_import_lookup_never_runs_code_of_the_workspace(tmp_path, monkeypatch):
    """The lookup imports installed packages in an isolated interpreter: a module the model
    wrote into the workspace (here one that would leave a marker and exports the name) is not
    imported even when the step runs from the workspace folder."""
    from assets.editing.suggestions import missing_import

    marker = tmp_path / "ran"
    (tmp_path / "helpers_mod.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass Thing:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert missing_import("Thing", "import helpers_mod\nprint(Thing())\n") is None
    assert not marker.exists()


def test_undefined_names_are_read_conservatively():
    from assets.editing.suggestions import undefined_names

    code = textwrap.dedent("""\
        import numpy as np
        from sklearn.linear_model import Ridge as R

        LIMIT = 3


        def fit(x, *rest, scale=1, **kw):
            global counter
            total = [v for v in x if v < LIMIT]
            try:
                model = R(alpha=scale)
            except ValueError as err:
                print(err, counter, __file__, len(rest), kw)
            return make_pipeline(StandardScaler(), model), np.mean(total)
        """)
    assert undefined_names(code) == ["make_pipeline", "StandardScaler"]
    assert undefined_names("print(x)\nx = 1\n") == []  # bound anywhere counts as defined
    assert undefined_names("from helpers import *\nprint(thing)\n") == []  # a star import may define it
    assert undefined_names("exec('y = 1')\nprint(y)\n") == []
    assert undefined_names("def f(:\n") == []


def test_complete_imports_adds_every_missing_library_import_at_once():
    """The diabetes run's first idea failed three times in a row on make_pipeline, GridSearchCV
    and Ridge, one NameError per run; all three are added before any run."""
    from assets.editing.suggestions import complete_imports

    code = ('"""ridge"""\nimport numpy as np\nfrom sklearn.model_selection import train_test_split\n\n'
            "pipe = make_pipeline(StandardScaler(), Ridge())\nsearch = GridSearchCV(pipe, {})\n"
            "print(np.pi, not_a_library_name)\n")
    new, added = complete_imports(code)
    assert added == ["from sklearn.pipeline import make_pipeline", "from sklearn.preprocessing import StandardScaler",
                     "from sklearn.linear_model import Ridge", "from sklearn.model_selection import GridSearchCV"]
    assert new.splitlines()[1:5] == added and new.splitlines()[0] == '"""ridge"""'
    assert new.endswith(code.split("\n", 1)[1])  # the rest unchanged
    assert complete_imports(new) == (new, [])  # nothing left that a library defines
    assert complete_imports("import json\nprint(json.dumps(1))\n") == ("import json\nprint(json.dumps(1))\n", [])


def test_a_misplaced_top_level_block_is_moved_below_what_it_reads():
    """diabetes r1: the functions format put a new top-level block among the imports, above the
    constants and data it reads; it moves (with the statement that uses it) below their lines."""
    from assets.editing.suggestions import mend, reorder_top_level

    code = textwrap.dedent("""\
        import numpy as np
        search = make_search(ALPHAS, cv=folds)
        search.fit(x)
        from helpers import make_search

        ALPHAS = [0.1, 1.0]


        def f():
            return later_name  # read when called: not a reason to move


        x = np.ones(3)
        folds = 5
        print(search.best, f)
        """)
    new, notes = reorder_top_level(code)
    assert len(notes) == 1 and "moved lines 2, 3 below line 14" in notes[0]
    lines = new.splitlines()
    assert lines[11:15] == ["folds = 5", "search = make_search(ALPHAS, cv=folds)", "search.fit(x)",
                            "print(search.best, f)"]
    assert sorted(new.splitlines()) == sorted(code.splitlines())  # moved, nothing lost or added
    assert reorder_top_level(new) == (new, [])
    # the statement waited for reads what the moved one binds: a cycle, nothing moves
    cyc = "a = b + 1\nb = a * 2\n"
    assert reorder_top_level(cyc) == (cyc, [])
    # names made at run time: nothing can be read from the text, nothing moves
    dyn = "print(thing)\nglobals()['thing'] = 1\nthing = 2\n"
    assert reorder_top_level(dyn) == (dyn, [])
    # two statements on one line: not moved
    semi = "y = z; w = 1\nz = 2\n"
    assert reorder_top_level(semi) == (semi, [])
    # mend: moved, then the imports completed
    code = "from sklearn.linear_model import Ridge\nm = make_pipeline(Ridge(alpha=A))\nA = 1.0\n"
    fixed, notes = mend(code)
    assert fixed.splitlines() == ["from sklearn.pipeline import make_pipeline",
                                  "from sklearn.linear_model import Ridge", "A = 1.0",
                                  "m = make_pipeline(Ridge(alpha=A))"]
    assert len(notes) == 2 and notes[1] == "added `from sklearn.pipeline import make_pipeline`"


def test_a_wrong_keyword_is_renamed_to_the_callees_parameter_or_dropped():
    """The diabetes run's RidgeCV(alpha=...) (RidgeCV takes `alphas`): the callee's signature,
    read in the isolated interpreter, names the parameter; a keyword nothing resembles is
    dropped, a guess that goes after the LLM's fix."""
    code = ("from sklearn.linear_model import RidgeCV\nimport sklearn.linear_model as lm\n\n"
            "model = RidgeCV(alpha=1.0,\n                cv=3)\nother = lm.Ridge(fit_intercept=True, colour=2)\n")
    err = "TypeError: _BaseRidgeCV.__init__() got an unexpected keyword argument 'alpha'"
    s = suggested_fix(code, failure(err, 4), "x.py")
    assert s is not None and s.sure and s.code.splitlines()[3] == "model = RidgeCV(alphas=1.0,"
    assert "a parameter of sklearn.linear_model.RidgeCV" in s.what
    s = suggested_fix(code, failure("TypeError: Ridge.__init__() got an unexpected keyword argument 'colour'", 6),
                      "x.py")
    assert s is not None and not s.sure and s.code.splitlines()[5] == "other = lm.Ridge(fit_intercept=True)"
    # a keyword of a call the script defines itself, not on the failing line: no candidate
    assert suggested_fix("def f(a):\n    return a\nf(b=1)\n",
                         failure("TypeError: f() got an unexpected keyword argument 'b'", 1), "x.py") is None
    # an undefined name a library exports wins over Python's suggestion of a close imported name
    code = "from sklearn.linear_model import Ridge\nmodel = RidgeCV(alphas=(1.0,))\n"
    s = suggested_fix(code, failure("NameError: name 'RidgeCV' is not defined. Did you mean: 'Ridge'?", 2), "x.py")
    assert s.sure and "from sklearn.linear_model import RidgeCV" in s.code and "RidgeCV(alphas" in s.code


def test_a_repair_that_leaves_out_an_import_gets_it(tmp_path):
    """The LLM's fix uses a library name it did not import: the import is added before the run."""
    folder = tmp_path / "fit"
    folder.mkdir()
    (folder / "fit.py").write_text("import json\nfrom sklearn.model_selection import train_test_split\n\n"
                                   "def folds():\n    return KFold(n_splits=2, shufle=True)\n\n\n"
                                   "print('splits', folds().get_n_splits())\n")
    fix = "```python\ndef folds():\n    return StratifiedKFold(n_splits=2)\n```"
    res = search(folder / "fit.py", FakeLLM(fix=fix), tmp_path, mode="traceback", suggestions=False)
    assert res.status == "success" and res.n_attempts == 2, res.reason
    assert "from sklearn.model_selection import StratifiedKFold" in res.final_code
    assert "+from sklearn.model_selection import StratifiedKFold" in res.attempts[1].applied_diff


# -- the search in the repair loop ------------------------------------------------------------

def test_the_typo_is_fixed_with_no_llm_at_all(typo, tmp_path):
    res = search(typo, None, tmp_path, suggestions=True)
    assert res.status == "success" and res.n_attempts == 2
    first, second = res.attempts
    assert "has no attribute 'train_stepp'. Did you mean: 'train_step'?" in first.error
    assert second.parent == 1 and second.fix_source == "suggestion" and second.outcome == "success"
    assert "+            model.train_step(x, y)" in second.applied_diff
    assert "model.train_step(x, y)" in res.final_code and "train_stepp" not in res.final_code
    assert "mse 0.0000" in second.stdout_tail
    # with suggestions off and no LLM there is no candidate: the first failure stands
    res = search(typo, None, tmp_path, suggestions=False, workdir=tmp_path / "off")
    assert res.status == "failed" and res.n_attempts == 1 and "train_stepp" in res.reason


def test_a_sure_suggestion_goes_before_the_llm(typo, tmp_path):
    """The reported failure: the model answers the corrected line alone, which cannot be placed.
    The interpreter names the fix ("Did you mean: 'train_step'?"), so that candidate is run
    first and the model is not asked at all."""
    llm = FakeLLM(fix=UNPLACEABLE, local=True, edit_format="auto")
    res = search(typo, llm, tmp_path, mode="structure", suggestions=True)
    assert res.status == "success" and res.n_attempts == 2
    first, second = res.attempts
    assert first.fix_rounds == 0 and second.fix_source == "suggestion" and second.parent == 1
    assert llm.stages() == []
    # without suggestions the same answers exhaust the budget: asked again (sampled) each time, never run
    llm = FakeLLM(fix=UNPLACEABLE, local=True, edit_format="auto")
    res = search(typo, llm, tmp_path, mode="structure", suggestions=False, workdir=tmp_path / "llm-only")
    assert res.status == "failed" and res.n_attempts == 1 and res.attempts[0].fix_rounds == 5
    assert llm.stages().count("debug") == 5 and "the repair failed" in res.reason


def test_a_guessed_suggestion_follows_an_unplaceable_answer(tmp_path):
    """A keyword no parameter of the callee resembles: dropping it is a guess, so the LLM is
    asked first; its answer cannot be placed and the search goes on with the guess."""
    folder = tmp_path / "kw"
    folder.mkdir()
    (folder / "report.py").write_text(KEYWORD)
    llm = FakeLLM(fix="The colour argument is wrong.", local=True, edit_format="auto")
    res = search(folder / "report.py", llm, tmp_path, mode="traceback", suggestions=True)
    assert res.status == "success" and [a.fix_source for a in res.attempts] == ["", "suggestion"]
    assert res.attempts[0].fix_status != "ok" and res.attempts[0].fix_rounds == 1
    assert llm.stages() == ["debug"]
    assert 'json.dumps({"n": len(values)})' in res.final_code and 'report {"n": 3}' in res.attempts[1].stdout_tail


RENAMED = ('```python\ndef report(values):\n    text = json.dumps({"n": len(values)}, color=True)\n'
           '    print("report", text)\n```')


def test_a_fix_that_only_renames_the_bad_keyword_leaves_the_same_error(tmp_path):
    """Recorded (1.5B, friedman3 probe r2): for "unexpected keyword argument 'dropout'" the model
    renamed it `dropout_rate`, then back; each rename counted as progress and spent the budget of 2
    before the guess that drops the keyword was tried. A rename at the line the fix wrote that
    fails the same way is the same error: the guess comes next and the budget of 2 suffices."""
    folder = tmp_path / "kw"
    folder.mkdir()
    (folder / "report.py").write_text(KEYWORD)
    llm = FakeLLM(fix=RENAMED, local=True, edit_format="auto")
    res = search(folder / "report.py", llm, tmp_path, mode="traceback", suggestions=True, max_repairs=2)
    assert [a.fix_source for a in res.attempts] == ["", "llm", "suggestion"]
    assert "'color'" in res.attempts[1].error and res.attempts[1].outcome == "same_error"
    assert res.status == "success" and res.attempts[2].parent == 1 and "colour" not in res.final_code
    # the same message about another name at a line the fix did not write is the next mistake: progress
    from assets.run_results.repair_search import renamed_only

    def failed(error: str, line: int) -> Attempt:
        return Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
                       frames=[TraceFrame(file="x.py", line=line, function="<module>")])

    old, new = "x = 1\ny = alpha\nz = beta\n", "x = 1\nalpha = 2\ny = alpha\nz = beta\n"
    assert not renamed_only(failed("NameError: name 'alpha' is not defined", 2),
                            failed("NameError: name 'beta' is not defined", 4), old, new, "x.py")
    assert renamed_only(failed("TypeError: f() got an unexpected keyword argument 'dropout'", 1),
                        failed("TypeError: f() got an unexpected keyword argument 'dropout_rate'", 1),
                        "y = f(dropout=1)\n", "y = f(dropout_rate=1)\n", "x.py")


def test_an_unplaceable_answer_is_asked_again(typo, tmp_path):
    llm = FakeLLM(fix=[UNPLACEABLE, WHOLE_MAIN])
    res = search(typo, llm, tmp_path, mode="traceback", suggestions=False)
    assert res.status == "success" and res.n_attempts == 2
    assert res.attempts[0].fix_rounds == 2 and res.attempts[1].fix_source == "llm"
    assert llm.sampling[0] == (None, None) and llm.sampling[1][0] is not None  # the re-ask is sampled


def test_a_fix_that_leaves_the_same_error_is_set_aside(calc, tmp_path):
    llm = FakeLLM(fix=[SAME_ERROR, FIX])
    res = search(calc, llm, tmp_path, mode="traceback", suggestions=False)
    assert res.status == "success" and res.n_attempts == 3
    first, second, third = res.attempts
    assert second.outcome == "same_error" and not second.reverted and second.error == first.error
    assert third.parent == 1 and third.outcome == "success"  # the next candidate started from the original
    asked = [m for s, m in llm.requests if s == "debug"][1]
    assert "sum(list(values))" not in asked[0]["content"]  # the code shown is the original's
    assert "still failed with the same error" in asked[-1]["content"]
    assert "sum(list(values)) * factr" in asked[-1]["content"]  # the fix set aside, shown
    # with suggestions on, the interpreter's suggestion (it names the fix) is the first candidate
    llm = FakeLLM(fix=SAME_ERROR)
    res = search(calc, llm, tmp_path, mode="traceback", suggestions=True, workdir=tmp_path / "suggest")
    assert res.status == "success" and [a.fix_source for a in res.attempts] == ["", "suggestion"]
    assert res.attempts[1].parent == 1 and llm.stages() == []
    assert "return sum(values) * factor" in res.final_code


def test_a_missing_import_is_repaired_in_the_sandbox_with_no_llm(tmp_path):
    folder = tmp_path / "imp"
    folder.mkdir()
    (folder / "cv.py").write_text("import json\nfrom sklearn.model_selection import train_test_split\n\n"
                                  "folds = KFold(n_splits=2)\nprint('splits', folds.get_n_splits())\n")
    res = search(folder / "cv.py", None, tmp_path, suggestions=True)
    assert res.status == "success" and [a.fix_source for a in res.attempts] == ["", "suggestion"]
    assert "from sklearn.model_selection import KFold" in res.final_code
    assert "splits 2" in res.attempts[1].stdout_tail


def test_the_furthest_version_is_kept(tmp_path):
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "two.py").write_text("import json\nvalues = [1, 2]\ntotal = sum(valus)\nprint(total / 0)\n")
    res = search(folder / "two.py", None, tmp_path, suggestions=True)
    assert res.status == "failed" and res.n_attempts == 2
    assert res.attempts[1].outcome == "progress" and res.reason.startswith("ZeroDivisionError")
    assert "sum(values)" in res.final_code  # the version that got further, not the original


def test_the_budget_counts_candidates(tmp_path):
    folder = tmp_path / "kw"
    folder.mkdir()
    (folder / "report.py").write_text(KEYWORD)
    res = search(folder / "report.py", FakeLLM(fix=UNPLACEABLE), tmp_path, mode="traceback", suggestions=True,
                 max_repairs=1)
    assert res.status == "failed" and res.n_attempts == 1  # the one candidate was the LLM's answer
    res = search(folder / "report.py", FakeLLM(fix=UNPLACEABLE), tmp_path, mode="traceback", suggestions=True,
                 max_repairs=2, workdir=tmp_path / "two")
    assert res.status == "success" and res.n_attempts == 2
    res = search(folder / "report.py", None, tmp_path, suggestions=True, max_repairs=0, workdir=tmp_path / "zero")
    assert res.status == "failed" and res.n_attempts == 1


def test_the_result_memo_still_works(typo, tmp_path):
    runner = CountingRunner()
    first = search(typo, None, tmp_path, runner=runner, suggestions=True, memo=True)
    assert first.status == "success" and runner.runs == 2
    again = search(typo, None, tmp_path, runner=runner, suggestions=True, memo=True)
    assert runner.runs == 2 and again == first  # read from the memo: nothing ran
    search(typo, None, tmp_path, runner=runner, suggestions=False, memo=True)
    assert runner.runs == 3  # other settings, another memo


# -- researchloop debug -----------------------------------------------------------------------

class UnplaceableScript:
    """The model of the report: an analysis, then the corrected line alone, every time."""

    def __init__(self):
        self.requests: list[str] = []

    def answer(self, req: dict) -> str:
        user = req["messages"][-1]["content"]
        self.requests.append(user)
        if "Do not write code yet" in user:
            return "main() calls model.train_stepp, but Model defines train_step."
        return UNPLACEABLE


def test_debug_cli_fixes_the_typo_without_asking_the_model(typo, tmp_path):
    with FakeLLMServer(UnplaceableScript()) as server:
        r = _debug(str(typo), "--max-attempts", "5", "--json", env=_env(tmp_path, server))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["fixed"] is True and out["attempts"] == 2 and out["repairs"] == 1 and out["asked"] == 1
    first, second = out["per_attempt"]
    assert first["fix_rounds"] == 0 and second["fix_source"] == "suggestion"
    assert second["parent"] == 1 and second["outcome"] == "success"
    assert "model.train_step(x, y)" in typo.with_name("train.fixed.py").read_text()
    assert server.script.requests == []  # the message named the fix: the model was never asked


def test_debug_cli_no_llm(typo, tmp_path):
    r = _debug(str(typo), "--no-llm", "--json", env=_env(tmp_path))  # nothing listens at the LLM address
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["fixed"] is True and out["repairs"] == 1 and out["llm"]["llm_calls"] == 0
    assert out["per_attempt"][1]["fix_source"] == "suggestion"
    r = _debug(str(typo), "--no-llm", "--no-suggestions", env=_env(tmp_path))
    assert r.returncode == 2 and "leave no way to repair" in r.stderr


def test_a_lookup_is_asked_once_per_process(monkeypatch, tmp_path):
    """The repair note and the keyword fix of one failure read the same signature: one
    isolated interpreter, not two; another process (its memory empty) reads the answer kept on
    disk, and a changed set of installed packages asks again."""
    from assets.editing import lookup, suggestions

    runs = []
    real = subprocess.run
    monkeypatch.setenv("RESEARCHLOOP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(lookup, "_ANSWERS", {})
    monkeypatch.setattr(lookup.subprocess, "run", lambda *a, **kw: runs.append(a) or real(*a, **kw))
    code = "from sklearn.linear_model import RidgeCV\nm = RidgeCV(alpha=1.0)\n"
    first = suggestions.callee_parameters(code, "alpha", 2)
    assert first is not None and "alphas" in first[1] and len(runs) == 1
    assert suggestions.keyword_fix(code, "alpha", 2)[0] == code.replace("alpha=", "alphas=") and len(runs) == 1
    monkeypatch.setattr(lookup, "_ANSWERS", {})  # as in a new process
    assert suggestions.callee_parameters(code, "alpha", 2) == first and len(runs) == 1
    assert len(list((tmp_path / "cache" / "lookups").rglob("*.json"))) == 1
    monkeypatch.setattr(lookup, "_ANSWERS", {})
    monkeypatch.setattr(lookup, "_environment_key", lambda: "another-install")
    assert suggestions.callee_parameters(code, "alpha", 2) == first and len(runs) == 2


def test_a_run_whose_repairs_undid_the_idea_is_no_evidence_about_it():
    """A repair that drops the idea's only change (a wrong keyword removed) runs the round's
    reference code: that run is failed (the next draft gets its full run), not the idea's result."""
    from assets.run_results.running import UNDONE, undone
    from schemas.records import RunResult

    ref = "import json\nx = 1\njson.dump({'m': x}, open('f.json', 'w'))\n"
    repaired_back = RunResult(idea_id="t/r1/i", status="success", n_attempts=2, metric_value=0.5,
                              final_code="import json\nx = 1  # the idea's keyword, dropped\n"
                                         "json.dump({'m': x}, open('f.json', 'w'))\n")
    got = undone(repaired_back, ref)
    assert (got.status, got.reason) == ("failed", UNDONE)
    kept = repaired_back.model_copy(update={"final_code": ref.replace("x = 1", "x = 2")})
    assert undone(kept, ref).status == "success"  # the repair kept a change: the run is the idea's
    assert undone(repaired_back, None).status == "success"  # no reference known: nothing to compare
    failed = repaired_back.model_copy(update={"status": "failed", "reason": "boom"})
    assert undone(failed, ref).reason == "boom"


def test_a_library_name_imported_from_the_wrong_module_of_that_library_is_moved():
    """The diabetes sources run: the model wrote `from sklearn.preprocessing import ...,
    RandomizedSearchCV`; the module of sklearn that exports it takes that name, the other names
    and any alias stay as written, and the fix counts as sure (the library names it)."""
    code = ("import numpy as np\nfrom sklearn.preprocessing import StandardScaler, RandomizedSearchCV as RS  # tools\n"
            "from sklearn.linear_model import Ridge\n\nsearch = RS(Ridge(), {'alpha': [1.0]})\n")
    error = ("ImportError: cannot import name 'RandomizedSearchCV' from 'sklearn.preprocessing' "
             "(/x/site-packages/sklearn/preprocessing/__init__.py)")
    s = suggested_fix(code, failure(error, 2), "x.py")
    assert s is not None and s.sure
    assert s.code.splitlines()[1:3] == ["from sklearn.preprocessing import StandardScaler",
                                        "from sklearn.model_selection import RandomizedSearchCV as RS  # tools"]
    assert "instead of sklearn.preprocessing" in s.what
    alone = "from sklearn.feature_extraction import PolynomialFeatures\nprint(PolynomialFeatures)\n"
    s = suggested_fix(alone, failure("ImportError: cannot import name 'PolynomialFeatures' from "
                                     "'sklearn.feature_extraction' (/x/__init__.py)", 1), "x.py")
    assert s is not None and s.code.splitlines()[0] == "from sklearn.preprocessing import PolynomialFeatures"
    # a name no module of that library exports: no candidate
    assert suggested_fix("from sklearn.linear_model import Rigde\n", failure(
        "ImportError: cannot import name 'Rigde' from 'sklearn.linear_model' (/x/__init__.py)", 1), "x.py") is None


def test_regressors_given_to_a_classifier_ensemble_get_its_regressor_sibling():
    """The diabetes sources run: "The estimator Ridge should be a classifier." from a
    VotingClassifier of regressors; the ensemble becomes its Regressor sibling everywhere."""
    code = ("from sklearn.ensemble import VotingClassifier\nfrom sklearn.linear_model import Ridge, Lasso\n\n"
            "model = VotingClassifier([('r', Ridge()), ('l', Lasso())])\nmodel.fit(x, y)\n")
    s = suggested_fix(code, failure("ValueError: The estimator Ridge should be a classifier.", 5), "x.py")
    assert s is not None and s.sure and "VotingClassifier" not in s.code
    assert s.code.count("VotingRegressor") == 2 and "VotingClassifier -> VotingRegressor" in s.what
    # no imported name of that kind: nothing to rename
    assert suggested_fix("import sklearn\nm.fit(x, y)\n", failure(
        "ValueError: The estimator Ridge should be a classifier.", 2), "x.py") is None


def test_a_wrong_keyword_is_fixed_in_every_call_of_that_callee():
    """The chains source's diabetes draft: RandomForestRegressor(alpha=a) in the cross-validation
    and RandomForestRegressor(alpha=best) in the final fit; renaming only the failing call's
    keyword gives the same error one line further down."""
    code = ("from sklearn.ensemble import RandomForestRegressor\n"
            "scores = {a: RandomForestRegressor(alpha=a, n_jobs=1) for a in [1.0]}\n"
            "model = RandomForestRegressor(alpha=2.0)\nother = dict(alpha=3)\n")
    s = suggested_fix(code, failure("TypeError: RandomForestRegressor.__init__() got an unexpected keyword "
                                    "argument 'alpha'", 2), "x.py")
    assert s is not None and s.sure and s.what.startswith("line 2, 3: keyword alpha= -> ccp_alpha=")
    assert s.code.count("RandomForestRegressor(ccp_alpha=") == 2 and "dict(alpha=3)" in s.code


def test_a_file_written_into_a_folder_that_does_not_exist_gets_the_folder_made():
    """The diabetes sources drafts wrote 'out/final_info.json' into a folder nothing made."""
    code = ('"""x"""\nimport json\n\ninfo = {"r2": 0.5}\nif info:\n'
            '    with open("out/final_info.json", "w") as f:\n        json.dump(info, f)\n')
    s = suggested_fix(code, failure("FileNotFoundError: [Errno 2] No such file or directory: 'out/final_info.json'",
                                    6), "x.py")
    assert s is not None and s.sure and "made the folder" in s.what
    assert s.code.splitlines()[1] == "import os"
    assert '    os.makedirs(os.path.dirname("out/final_info.json") or \'.\', exist_ok=True)\n    with open(' in s.code
    # a file read, not written, that is missing: nothing to make
    assert suggested_fix("import os\ndata = open('data/x.csv').read()\n", failure(
        "FileNotFoundError: [Errno 2] No such file or directory: 'data/x.csv'", 2), "x.py") is None


def test_a_missing_output_folder_is_made_in_the_sandbox_with_no_llm(tmp_path):
    folder = tmp_path / "out_dir"
    folder.mkdir()
    (folder / "w.py").write_text("import numpy as np\nnp.save('results/arr.npy', np.arange(3))\nprint('saved')\n")
    res = search(folder / "w.py", None, tmp_path, suggestions=True)
    assert res.status == "success" and [a.fix_source for a in res.attempts] == ["", "suggestion"]
    assert "saved" in res.attempts[1].stdout_tail


# -- a wrapper that calls itself under the name it wraps; a setting that is only a parameter --------

def _fixed_by_one_suggestion(code: str, tmp_path: Path) -> str:
    """Run `code` in the sandbox with suggestions and no LLM: it must succeed on the first
    suggestion; returns that run's output."""
    folder = tmp_path / "script"
    folder.mkdir()
    (folder / "x.py").write_text(code)
    res = search(folder / "x.py", None, tmp_path, suggestions=True)
    assert res.status == "success" and [a.fix_source for a in res.attempts] == ["", "suggestion"]
    return res.attempts[1].stdout_tail


SHADOW = textwrap.dedent("""\
    import json
    from statistics import mean


    def mean(values):  # the small model's wrapper: rounds the library's mean
        return round(mean(values), 2)


    print(json.dumps({"m": mean([1, 2, 4])}))
    """)


def test_a_wrapper_calling_itself_under_the_imported_name_calls_the_original(tmp_path):
    frames = [TraceFrame(file="x.py", line=6, function="mean")] * 3
    error = "RecursionError: maximum recursion depth exceeded"
    s = suggested_fix(SHADOW, Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
                                      frames=frames), "x.py")
    assert s is not None and s.sure and "mean" in s.what
    assert "from statistics import mean as _imported_mean\n" in s.code
    assert "    return round(_imported_mean(values), 2)\n" in s.code and "def mean(values):" in s.code
    # a builtin wrapped under its own name: the call inside goes to builtins
    s = suggested_fix("def print(*a):\n    print('>', *a)\nprint(1)\n", Attempt(
        attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
        frames=[TraceFrame(file="x.py", line=2, function="print")]), "x.py")
    assert s is not None and "import builtins\n" in s.code and "    builtins.print('>', *a)\n" in s.code
    # plain recursion that wraps nothing: no candidate
    plain = "def f(n):\n    return f(n + 1)\nf(0)\n"
    assert suggested_fix(plain, Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0,
                                        error=error, frames=[TraceFrame(file="x.py", line=2, function="f")]),
                         "x.py") is None
    # in the sandbox, no LLM: the one suggestion makes it run
    assert '"m": 2.33' in _fixed_by_one_suggestion(SHADOW, tmp_path)


PARAMS = textwrap.dedent("""\
    class Model:
        def __init__(self, n_classes=2, num_epochs=4, batch_size=32):
            self.n_classes = n_classes


    model = Model(n_classes=2, num_epochs=4, batch_size=32)
    for epoch in range(num_epochs):
        for i in range(0, 100, batch_size):
            pass
    print("epochs", epoch + 1)
    """)


def test_a_top_level_name_given_only_as_a_parameter_gets_that_value(tmp_path):
    """Recorded (1.5B, sentiment r1): the patch made EPOCHS and BATCH_SIZE parameters of the model
    class and the training loop read them as names nothing defines."""
    def failed(code: str, name: str, line: int) -> Attempt:
        return Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0,
                       error=f"NameError: name '{name}' is not defined",
                       frames=[TraceFrame(file="x.py", line=line, function="<module>")])

    s = suggested_fix(PARAMS, failed(PARAMS, "num_epochs", 7), "x.py")
    assert s is not None and not s.sure  # a guess: tried after the LLM's first fix
    assert "\nnum_epochs = 4\nbatch_size = 32\nfor epoch in range(num_epochs):\n" in s.code
    # two different values given: which one was meant is unknown
    two = PARAMS.replace("model = Model(n_classes=2, num_epochs=4", "model = Model(n_classes=2, num_epochs=8")
    assert suggested_fix(two, failed(two, "num_epochs", 7), "x.py") is None
    # inside a function the name is a parameter: not this case
    inside = "def f(num_epochs=4):\n    return num_epochs\n\ndef g():\n    return num_epochs\n\ng()\n"
    assert suggested_fix(inside, Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0,
                                         error="NameError: name 'num_epochs' is not defined",
                                         frames=[TraceFrame(file="x.py", line=5, function="g")]), "x.py") is None
    assert "epochs 4" in _fixed_by_one_suggestion(PARAMS, tmp_path)


def test_each_candidate_names_its_rule():
    error = "RecursionError: maximum recursion depth exceeded"
    s = suggested_fix(SHADOW, Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0, error=error,
                                      frames=[TraceFrame(file="x.py", line=6, function="mean")]), "x.py")
    assert s.rule == "shadowed_import"
    s = suggested_fix(PARAMS, Attempt(attempt=1, command=[], exit_code=1, timed_out=False, duration_s=0,
                                      error="NameError: name 'num_epochs' is not defined",
                                      frames=[TraceFrame(file="x.py", line=7, function="<module>")]), "x.py")
    assert s.rule == "parameter_value"
    s = suggested_fix("factor = 2\nprint(factr)\n", failure(
        "NameError: name 'factr' is not defined. Did you mean: 'factor'?", 2), "x.py")
    assert s.rule == "interpreter"
    s = suggested_fix("factor = 2\nprint(Factor)\n", failure("NameError: name 'Factor' is not defined", 2), "x.py")
    assert s.rule == "closest_name"


JOINED = textwrap.dedent("""\
    import numpy as np

    a, b = np.zeros((4, 2)), np.ones((4, 3))
    x = np.concatenate([a, b])
    print("width", x.shape[1])
    """)


def test_an_early_guess_is_run_before_the_llm_is_asked(tmp_path):
    """Parts joined along the wrong axis: the guess only makes the sizes agree, so it runs before
    the LLM's fix (one run of seconds against an answer's minute); the LLM is never asked."""
    folder = tmp_path / "join"
    folder.mkdir()
    (folder / "x.py").write_text(JOINED)
    llm = FakeLLM(fix="The arrays should be joined differently.", local=True, edit_format="auto")
    res = search(folder / "x.py", llm, tmp_path, mode="traceback", suggestions=True, max_repairs=2)
    assert res.status == "success" and [a.fix_source for a in res.attempts] == ["", "suggestion"]
    assert llm.stages() == [] and "width 5" in res.attempts[1].stdout_tail
