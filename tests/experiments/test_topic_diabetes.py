"""The shipped diabetes_regression topic: predictions from the experiment, R2 from a scorer that
alone sees the held-out targets (real sandboxed runs)."""
import csv
import json

import pytest

from assets.run_results.experimenting import OUT_DIR
from assets.run_results.repair_search import RepairPolicy, run_with_repair
from resources.runner import Runner
from tests.support.topic_checks import needs_bwrap, topic

NAME = "diabetes_regression"


def test_topic_loads_with_a_scorer_and_hidden_labels():
    spec = topic(NAME)
    assert (spec.metric.name, spec.metric.goal, spec.metric.bounds) == ("r2", "maximize", (float("-inf"), 1.0))
    assert spec.hidden == ["test_labels.csv"] and "{pred_dir}" in spec.score and spec.budget.seeds == 3
    with open(spec.path / "test_features.csv") as f:
        test_ids = [r["id"] for r in csv.DictReader(f)]
    with open(spec.path / "test_labels.csv") as f:
        assert [r["id"] for r in csv.DictReader(f)] == test_ids and len(test_ids) == 88
    with open(spec.path / "train.csv") as f:
        train_ids = {r["id"] for r in csv.DictReader(f)}
    assert len(train_ids) == 354 and not train_ids & set(test_ids)


@needs_bwrap
def test_baseline_is_scored_from_the_hidden_labels(tmp_path):
    spec = topic(NAME)
    code = spec.code_path.read_text()
    r = run_with_repair(spec, code, runner=Runner(), workdir=tmp_path / "b", idea_id="b", title="b",
                        policy=RepairPolicy(memo=False))
    assert r.status == "success", r.reason
    assert 0.4 < r.metric_value < 0.65 and r.metrics["mae"] > 0  # ridge on this split: R2 0.53 when measured
    ws = tmp_path / "b" / "attempt-1"
    assert not (ws / "test_labels.csv").exists() and (ws / OUT_DIR / "predictions.csv").is_file()
    # an experiment that claims a perfect score and drops its predictions fails: the scorer has nothing to score
    liar = code.replace('with open(os.path.join(args.out_dir, "predictions.csv"), "w", newline="") as f:',
                        'with open(os.path.join(args.out_dir, "final_info.json"), "w") as g:\n'
                        '    json.dump({"r2": 1.0}, g)\nwith open(os.devnull, "w", newline="") as f:')
    liar = liar.replace("import argparse\n", "import argparse\nimport json\n")
    assert liar.count("json.dump") == 1
    bad = run_with_repair(spec, liar, runner=Runner(), workdir=tmp_path / "l", idea_id="l", title="l",
                          policy=RepairPolicy(memo=False))
    assert bad.status == "failed" and "no predictions.csv" in bad.reason
    assert json.loads((tmp_path / "l" / "attempt-1" / OUT_DIR / "final_info.by_experiment.json").read_text()) == {
        "r2": pytest.approx(1.0)}
