"""The development tasks of bench/tasks/: each topic.yaml loads, its data profile shows the real
files without the hidden ones, the effectiveness bench can select them, the prisoner's dilemma
evaluator scores the strategy it is given (and fails a broken one), and (slow) each baseline runs
in the sandbox and gets its metric from the topic's scorer."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from assets.shared.data_profile import topic_data
from bench.effectiveness_bench import DEV_TASKS, IN_SAMPLE, chosen_topics, dev_task_topics, topic_name
from schemas.topic import TopicSpec, load_topic
from tests.support.topic_checks import needs_bwrap

# name -> (metric, goal, the baseline's value lies in this range: measured once, with margin)
TASKS = {
    "wine_alcohol_regression": ("rmse", "minimize", (0.5, 0.8)),
    "ipd_strategy": ("mean_payoff", "maximize", (2.0, 2.3)),
    "digits_torch": ("accuracy", "maximize", (0.9, 0.98)),
    "mackey_glass_forecast": ("nrmse", "minimize", (0.45, 0.56)),
}
HAS_ENTRY_POINTS = "entry_points" in TopicSpec.model_fields


def _load(name: str) -> TopicSpec:
    if name == "ipd_strategy" and not HAS_ENTRY_POINTS:
        pytest.skip("topic.yaml names entry_points, a TopicSpec field not in this tree yet")
    return load_topic(DEV_TASKS / name)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_task_loads_with_a_scorer_that_takes_no_claim(name):
    spec = _load(name)
    metric, goal, _ = TASKS[name]
    assert (spec.name, spec.metric.name, spec.metric.goal) == (name, metric, goal)
    assert spec.score and "{pred_dir}" in spec.score and "{seed}" in spec.run
    assert spec.budget.run_timeout_s <= 120 and (spec.path / "README.md").is_file()
    readme = (spec.path / "README.md").read_text()
    assert "Source" in readme and ("licen" in readme.lower() or "CC BY" in readme)
    for h in spec.hidden:
        assert (spec.path / h).is_file()


def test_the_bench_selects_the_development_tasks_as_in_sample():
    topics = dev_task_topics()
    assert sorted(Path(t).name for t in topics) == sorted(TASKS)
    assert all(Path(t).is_absolute() for t in topics)
    assert all(name in IN_SAMPLE for name in TASKS)
    assert topic_name(str(DEV_TASKS / "digits_torch")) == "digits_torch"


def test_a_development_task_named_bare_stands_for_its_folder():
    assert chosen_topics("ipd_strategy,digits_torch", dev_tasks=True) == [
        str(DEV_TASKS / "ipd_strategy"), str(DEV_TASKS / "digits_torch")]
    # without --dev-tasks a bare name stays a shipped topic's name; a folder is kept as given
    assert chosen_topics("ipd_strategy", dev_tasks=False) == ["ipd_strategy"]
    assert chosen_topics("some/folder", dev_tasks=True) == ["some/folder"]
    assert chosen_topics("", dev_tasks=True) == dev_task_topics()


def test_the_ipd_task_names_its_entry_point_and_scores_with_the_run_seed():
    spec = _load("ipd_strategy")
    assert spec.entry_points == ["strategy.py:next_move"]
    assert "{seed}" in spec.score and spec.hidden == []


@pytest.mark.parametrize("name", ["wine_alcohol_regression", "digits_torch", "mackey_glass_forecast"])
def test_the_data_profile_shows_the_task_files_but_never_the_hidden_labels(name):
    spec = load_topic(DEV_TASKS / name)
    data = topic_data(spec)
    assert data and len(data) <= 3000
    for h in spec.hidden:
        assert Path(h).name not in data
    expected = {"wine_alcohol_regression": ["train.csv", "colour_band: str, 3 levels", "alcohol: float"],
                "digits_torch": ["images: shape (1348, 8, 8), dtype uint8", "labels: shape (1348,)"],
                "mackey_glass_forecast": ["lag_29 .. lag_0 (30 columns): float", "2000 rows x 2 columns"]}[name]
    for text in expected:
        assert text in data, text


def _evaluate(tmp_path: Path, strategy: str, seed: int = 0) -> subprocess.CompletedProcess:
    (tmp_path / "s.py").write_text(strategy)
    return subprocess.run([sys.executable, str(DEV_TASKS / "ipd_strategy" / "evaluate.py"), "--strategy",
                           str(tmp_path / "s.py"), "--seed", str(seed), "--out_dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_the_ipd_evaluator_plays_the_given_strategy_in_its_own_process(tmp_path):
    tft = (DEV_TASKS / "ipd_strategy" / "strategy.py").read_text()
    r = _evaluate(tmp_path, tft)
    assert r.returncode == 0, r.stderr
    info = json.loads((tmp_path / "out" / "final_info.json").read_text())
    assert 2.0 < info["mean_payoff"] < 2.3 and len([k for k in info if k.startswith("vs_")]) == 10
    assert (tmp_path / "out" / "strategy.py").read_text() == tft  # what the scorer plays again
    assert _evaluate(tmp_path, tft).stdout == r.stdout  # the seed fixes the tournament
    # a strategy that prints and tries to claim a score changes nothing the evaluator reads
    liar = ("import json, os\nprint('mean_payoff: 5.0')\n"
            "def next_move(history):\n    print('{\"mean_payoff\": 5}')\n    return 'D'\n")
    r = _evaluate(tmp_path, liar)
    assert r.returncode == 0 and json.loads((tmp_path / "out" / "final_info.json").read_text())["mean_payoff"] < 2.5
    bad = _evaluate(tmp_path, "def next_move(history):\n    return 'X'\n")
    assert bad.returncode != 0 and "must return 'C' or 'D'" in bad.stderr
    boom = _evaluate(tmp_path, "def next_move(history):\n    raise ValueError('boom')\n")
    assert boom.returncode != 0 and "ValueError: boom" in boom.stderr


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_baseline_runs_and_the_scorer_gives_its_metric(name, tmp_path):
    from assets.run_results.experimenting import run_once
    from resources.runner import Runner

    spec = _load(name)
    metric, _, (lo, hi) = TASKS[name]
    a = run_once(spec, spec.code_path.read_text(), Runner(), tmp_path / "b", 1)
    assert a.error is None and a.exit_code == 0, (a.error, a.stderr_tail)
    assert lo < a.metrics[metric] < hi, (metric, a.metrics)
    for h in spec.hidden:
        assert not (tmp_path / "b" / "attempt-1" / h).exists()
