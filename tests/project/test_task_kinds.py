"""Tasks of any kind: a file the task's own evaluator imports and calls (entry points: live code,
an interface kept), a scorer seeded like its run, and the baseline on its own
(`researchloop baseline`, `researchloop status` before any round)."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from schemas.topic import TopicSpecError, load_topic

STRATEGY = textwrap.dedent('''\
    """A move function; the evaluator imports it."""


    def _opening():
        return "C"


    def next_move(history):
        if not history:
            return _opening()
        return history[-1][1]
''')

EVALUATOR = textwrap.dedent('''\
    import argparse, json, os, random

    from strategy import next_move

    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out_dir", required=True)
    a = p.parse_args()
    rng = random.Random(a.seed)
    history, total = [], 0
    for _ in range(50):
        mine, theirs = next_move(list(history)), rng.choice("CD")
        total += {("C", "C"): 3, ("C", "D"): 0, ("D", "C"): 5, ("D", "D"): 1}[(mine, theirs)]
        history.append((mine, theirs))
    os.makedirs(a.out_dir, exist_ok=True)
    json.dump({"mean_payoff": total / 50}, open(os.path.join(a.out_dir, "final_info.json"), "w"))
''')


def strategy_topic(root: Path, entry_points: str | None = '["strategy.py:next_move"]',
                   evaluator: str = EVALUATOR, name: str = "strategy_task") -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "strategy.py").write_text(STRATEGY)
    (d / "evaluate.py").write_text(evaluator)
    (d / "topic.yaml").write_text(textwrap.dedent(f"""\
        name: {name}
        title: a move function
        description: return the next move of a repeated game
        code: strategy.py
        run: python evaluate.py --seed {{seed}} --out_dir {{out_dir}}
        metric: {{name: mean_payoff, goal: maximize}}
        """) + (f"entry_points: {entry_points}\n" if entry_points else ""))
    return d


# -- entry points: validated -----------------------------------------------------------------

def test_entry_points_are_validated_against_the_topic_folder(tmp_path):
    spec = load_topic(strategy_topic(tmp_path / "a"))
    assert spec.entry_points == ["strategy.py:next_move"]
    assert load_topic(strategy_topic(tmp_path / "b", entry_points=None)).entry_points == []
    for bad, says in [('["next_move"]', "path/inside/the/topic.py:function_name"),
                      ('["strategy.py:next-move"]', "must be a function name"),
                      ('["strategy.py:a.b.c"]', "must be a function name"),
                      ('["../strategy.py:next_move"]', "without '..'"),
                      ('["/abs/strategy.py:next_move"]', "without '..'"),
                      ('["strategy.txt:next_move"]', ".py file"),
                      ('["strategy.py:next_move", "strategy.py:next_move"]', "more than once"),
                      ('["missing.py:next_move"]', "missing.py not found"),
                      ('["strategy.py:choose_move"]', "defines no choose_move"),
                      ('["strategy.py:next_move.inner"]', "defines no next_move.inner")]:
        d = strategy_topic(tmp_path / f"bad{len(list(tmp_path.iterdir()))}", entry_points=bad)
        with pytest.raises(TopicSpecError, match="entry_points") as e:
            load_topic(d)
        assert says in str(e.value), (bad, str(e.value))
    # a method of a class, and a string for one item
    d = strategy_topic(tmp_path / "c", entry_points="strategy.py:Player.act")
    (d / "strategy.py").write_text("class Player:\n    def act(self, history):\n        return 'C'\n")
    assert load_topic(d).entry_points == ["strategy.py:Player.act"]


# -- an edit inside an entry point is live code ------------------------------------------------

def _spec(tmp_path, **kw):
    return load_topic(strategy_topic(tmp_path, **kw))


def test_an_edit_inside_what_only_the_evaluator_calls_is_live(tmp_path):
    from types import SimpleNamespace

    from assets.editing.edit_formats import EditError
    from assets.patched_code.dead_code import dead_code_only
    from assets.patched_code.patching import check_edit

    edited = STRATEGY.replace('return "C"', 'return "D"')  # inside _opening, which next_move calls
    cmd = "python evaluate.py --seed 0 --out_dir out"
    # without knowing who calls it, the file alone says nothing runs it
    assert "which nothing calls" in dead_code_only(STRATEGY, edited, cmd)
    assert dead_code_only(STRATEGY, edited, cmd, roots=["next_move"]) is None
    # declared in topic.yaml, found from the evaluator's import, or (nothing known, the run command
    # starts another file) every public definition: a live edit each time
    for kw in ({}, {"entry_points": None}):
        spec = _spec(tmp_path / str(len(kw)), **kw)
        assert check_edit(STRATEGY, SimpleNamespace(code=edited), spec).code == edited
    spec = _spec(tmp_path / "dyn", entry_points=None,
                 evaluator="import subprocess, sys\nsubprocess.run([sys.executable, '-c', "
                           "'import importlib.util as u; s = u.spec_from_file_location(\"s\", \"strategy.py\"); "
                           "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.next_move([]))'])\n")
    assert check_edit(STRATEGY, SimpleNamespace(code=edited), spec).code == edited
    # a helper nothing calls stays dead code, entry points or not
    unused = STRATEGY + "\n\ndef _mixed(history):\n    return 'D'\n"
    with pytest.raises(EditError) as e:
        check_edit(STRATEGY, SimpleNamespace(code=unused), _spec(tmp_path / "dead"))
    assert e.value.status == "no_op" and "_mixed" in str(e.value)


def test_a_class_method_entry_point_keeps_its_class_and_helpers_live():
    from assets.patched_code.dead_code import dead_code_only

    src = ("class Player:\n    def act(self, h):\n        return self._pick(h)\n\n"
           "    def _pick(self, h):\n        return 'C'\n")
    edited = src.replace("return 'C'", "return 'D'")
    assert dead_code_only(src, edited, ["python", "evaluate.py"], roots=["Player.act"]) is None
    assert dead_code_only(src, edited, ["python", "evaluate.py"]) is not None


def test_what_other_files_of_the_topic_take_from_the_edited_file():
    from assets.editing.entry_points import imported_names, live_roots

    code = STRATEGY + "\n\nclass Player:\n    def act(self, h):\n        return 'C'\n\n    def other(self):\n" \
                      "        return 1\n\n\ndef unused(h):\n    return h\n"

    def found(source):
        return imported_names("strategy.py", code, {"evaluate.py": source, "strategy.py": "import strategy\n"})

    assert found("from strategy import next_move\n") == ["next_move"]
    assert found("import strategy as s\ns.next_move([])\n") == ["next_move"]
    assert found("import importlib\nm = importlib.import_module('strategy')\ngetattr(m, 'next_move')([])\n") \
        == ["next_move"]
    assert found("from strategy import Player\nPlayer().act([])\n") == ["Player", "Player.act"]
    assert found("from strategy import *\n") == ["Player", "next_move", "unused"]
    assert found("import subprocess\nsubprocess.run(['python', '-c', 'import x; x.next_move([])', "
                 "'strategy.py'])\n") == ["next_move"]  # loaded by path in a child process
    assert found("import numpy\nprint('next_move')\n") == []  # names no file of the topic: not a caller
    assert found("def broken(:\n") == []
    # what dead-code analysis keeps: the known entry points; none known and the run starts another
    # file: every public definition; the file run itself: nothing more
    assert live_roots(["next_move"], ["next_move"], "strategy.py", ["python", "evaluate.py"]) == ["next_move"]
    assert live_roots([], [], "strategy.py", ["python", "evaluate.py"]) == ["*"]
    assert live_roots([], [], "strategy.py", ["python", "strategy.py", "--seed", "0"]) == []
    assert live_roots([], [], "pkg/strategy.py", ["python", "-m", "pkg.strategy"]) == []


# -- the interface the evaluator imports is kept -------------------------------------------------

@pytest.mark.parametrize("edited, says", [
    (STRATEGY.replace("def next_move(history)", "def choose_move(history)"), "`next_move` is gone (renamed to "
                                                                              "choose_move?)"),
    (STRATEGY.replace("def next_move(history)", "def next_move(history, rng)"), "adds the required parameter(s) rng"),
    (STRATEGY.replace("def next_move(history)", "def next_move()").replace("if not history", "if True")
     .replace("history[-1][1]", "'C'"), "no longer takes history"),
    (STRATEGY.replace("def next_move(history)", "def next_move(history, *, opponent)"), "adds the required keyword"),
])
def test_an_edit_that_breaks_an_entry_point_is_refused_with_the_reason(tmp_path, edited, says):
    from types import SimpleNamespace

    from assets.editing.edit_formats import EditError
    from assets.patched_code.patching import check_edit

    for kw in ({}, {"entry_points": None}):  # declared, or found from the evaluator's import
        with pytest.raises(EditError) as e:
            check_edit(STRATEGY, SimpleNamespace(code=edited), _spec(tmp_path / str(len(kw)), **kw))
        assert e.value.status == "not_applied"
        assert "breaks what the task's evaluator calls" in str(e.value) and says in str(e.value)


def test_compatible_signature_changes_are_kept():
    from assets.editing.entry_points import broken_interface

    old = "def f(a, b):\n    return a\n\nclass P:\n    def act(self, h):\n        return h\n"
    for new in (old.replace("f(a, b)", "f(a, b, c=1)"), old.replace("f(a, b)", "f(a, b, *, k=None)"),
                old.replace("f(a, b)", "f(x, y)"),  # renamed in place: positional callers still fit
                old.replace("f(a, b)", "f(*args)"), old.replace("act(self, h)", "act(self, h, t=0)"),
                old + "\nf = f\n"):
        assert broken_interface(["f", "P.act"], old, new) is None, new
    assert "another order" in broken_interface(["f"], old, old.replace("f(a, b)", "f(b, a)"))
    assert "P.act" in broken_interface(["P.act"], old, old.replace("act(self, h)", "act(self, h, t)"))
    assert "`P` is gone" in broken_interface(["P"], old, old.replace("class P", "class Q"))
    assert broken_interface(["f"], old, "def f(:\n") is None  # the compile check says why


def test_a_broken_interface_is_recorded_on_the_draft_and_no_run_is_spent(tmp_path):
    from assets.patched_code.patching import make_patch
    from schemas.records import ExperimentPlan, FilteredIdea
    from tests.support.patching import ScriptedLLM, _whole

    spec = _spec(tmp_path)
    spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"drafts": 1})})
    idea = FilteredIdea(idea_id=f"{spec.name}/r1/x", topic=spec.name, round="r1", name="x", title="x",
                        experiment="x", summary="x", max_similarity=0.0, independent=True, novel=True, kept=True)
    plan = ExperimentPlan(idea_id=idea.idea_id, name="x", changes=["defect first"], location="",
                          evaluation="mean_payoff", expected_effect="")
    renamed = STRATEGY.replace("next_move", "choose_move").replace('return "C"', 'return "D"')
    p = make_patch(spec, STRATEGY, idea, plan, ScriptedLLM(_whole(renamed)), runner=None)
    assert p.status == "not_applied" and not p.code  # nothing viable: run_results runs nothing
    assert "`next_move` is gone" in p.drafts[0].reason


# -- a seeded scorer ---------------------------------------------------------------------------

SCORED = {
    "predict.py": "import argparse, os\np = argparse.ArgumentParser()\np.add_argument('--seed', type=int)\n"
                  "p.add_argument('--out_dir')\na = p.parse_args()\nos.makedirs(a.out_dir, exist_ok=True)\n"
                  "open(os.path.join(a.out_dir, 'pred.txt'), 'w').write(str(a.seed))\n",
    "score.py": "import argparse, json, os\np = argparse.ArgumentParser()\np.add_argument('--pred')\n"
                "p.add_argument('--seed', type=int)\np.add_argument('--out_dir')\na = p.parse_args()\n"
                "ran = int(open(os.path.join(a.pred, 'pred.txt')).read())\nos.makedirs(a.out_dir, exist_ok=True)\n"
                "json.dump({'scorer_seed': a.seed + 10 * (ran != a.seed)}, "
                "open(os.path.join(a.out_dir, 'final_info.json'), 'w'))\n",
    "topic.yaml": "name: seeded_scorer\ntitle: t\ndescription: d\ncode: predict.py\n"
                  "run: python predict.py --seed {seed} --out_dir {out_dir}\n"
                  "score: python score.py --pred {pred_dir} --seed {seed} --out_dir {out_dir}\n"
                  "metric: {name: scorer_seed, goal: maximize}\nbudget: {seeds: 3, run_timeout_s: 60}\n",
}


def test_the_scorer_of_each_seed_gets_that_seed_and_baseline_prints_them(home, capsys):
    from pipelines import cli

    d = home / "experiments" / "seeded_scorer"
    d.mkdir()
    for name, text in SCORED.items():
        (d / name).write_text(text)
    assert cli.main(["baseline", "--topic", "seeded_scorer"]) == 0
    out = capsys.readouterr().out
    # the scorer wrote the seed it got (+10 had it scored another seed's predictions)
    assert [float(v) for v in re.findall(r"  seed \d: (\S+)", out)] == [0.0, 1.0, 2.0]
    assert "scorer_seed = 1 (maximize), mean of 3 seeds, std 1," in out


# -- researchloop baseline / status ---------------------------------------------------------------

def test_baseline_prints_the_reference_codes_metric_over_seeds(home, capsys):
    from pipelines import cli

    d = home / "experiments" / "toy_classification"
    y = d / "topic.yaml"
    y.write_text(y.read_text().replace("--out_dir {out_dir}", "--seed {seed} --out_dir {out_dir}", 1))
    code = d / "experiment.py"  # a seed that draws another data set
    code.write_text(code.read_text().replace('ap.add_argument("--dry_run"', 'ap.add_argument("--seed", type=int, '
                                             'default=0)\n    ap.add_argument("--dry_run"')
                    .replace("make_data(0)", "make_data(args.seed)"))
    assert cli.main(["baseline", "--topic", "toy_classification", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"accuracy = (\S+) \(maximize\), mean of 2 seeds, std (\S+), 95% interval of the mean "
                  r"\[(\S+), (\S+)\]", out)
    assert m, out
    mean, low, high = float(m.group(1)), float(m.group(3)), float(m.group(4).rstrip("]"))
    seeds = [float(v) for v in re.findall(r"  seed \d: (\S+)", out)]
    assert len(seeds) == 2 and abs(sum(seeds) / 2 - mean) < 1e-4 and low <= mean <= high
    assert re.search(r"time \d+\.\d s", out)
    # the runs are memoised like the set-up's: asked again, nothing runs
    assert cli.main(["baseline", "--topic", "toy_classification", "--seeds", "2"]) == 0
    assert f"accuracy = {m.group(1)}" in capsys.readouterr().out
    assert len(set(seeds)) == 2  # two data sets: two values
    assert cli.main(["baseline", "--topic", "no_such_topic"]) == 2
    assert "no topic.yaml" in capsys.readouterr().out


def test_baseline_of_a_script_without_a_seed_is_one_run_and_a_crash_fails(home, capsys):
    from pipelines import cli

    assert cli.main(["baseline", "--topic", "toy_classification"]) == 0
    out = capsys.readouterr().out
    assert "mean of 1 seed: one run, no spread" in out and re.search(r"  seed 0: 0\.\d+", out)
    assert cli.main(["baseline", "--topic", "toy_classification", "--seeds", "3"]) == 2
    assert "needs at least 1, and {seed}" in capsys.readouterr().out
    code = home / "experiments" / "toy_classification" / "experiment.py"
    code.write_text("raise SystemExit('broken reference')\n" + code.read_text())
    assert cli.main(["baseline", "--topic", "toy_classification"]) == 1
    assert "baseline of toy_classification FAILED" in capsys.readouterr().out


def test_status_shows_the_stored_baseline_before_any_round(home, capsys):
    from pipelines import cli
    from resources.store import Store
    from schemas.frames import to_frame
    from schemas.records import RunResult
    from schemas.topic import load_topic as load
    from tests.support.briefs import store_brief

    spec = load(home / "experiments" / "toy_classification")
    store_brief(spec)
    assert cli.main(["status"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "toy_classification" in line)
    assert row.split("│")[6].strip() == ""  # set up, no baseline yet
    base = RunResult(idea_id="toy_classification/baseline", status="success", metric_value=0.8512,
                     seed_values=[0.84, 0.85, 0.8636], metric_spread=0.0118, metrics={"accuracy": 0.8512})
    Store().write(to_frame([base], RunResult), "baseline_results", spec.name)
    assert cli.main(["status"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "toy_classification" in line)
    assert row.split("│")[6].strip() == "0.8512 ± 0.0118 (3 seeds)"
    assert row.split("│")[2].strip() == "0"  # no round finished


def test_status_baseline_cell_of_a_failed_baseline():
    from pipelines.cli.status import baseline_cell
    from schemas.frames import to_frame
    from schemas.records import RunResult

    class OneRecord:  # a store holding one baseline_results record, or none
        def __init__(self, df):
            self.df = df

        def read(self, asset, topic, round_key=None):
            return self.df if asset == "baseline_results" else None

    failed = to_frame([RunResult(idea_id="t/baseline", status="failed", reason="boom")], RunResult)
    assert baseline_cell(OneRecord(failed), "t", []) == "failed"
    one = to_frame([RunResult(idea_id="t/baseline", status="success", metric_value=0.5)], RunResult)
    assert baseline_cell(OneRecord(one), "t", []) == "0.5000"
    assert baseline_cell(OneRecord(None), "t", [{"baseline": 0.25}]) == "0.2500"  # a round's record
    assert baseline_cell(OneRecord(None), "t", []) == ""
