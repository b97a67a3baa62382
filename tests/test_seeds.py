"""Repeated seeds: mean and spread, and verdicts that need to beat the spread as well as the
tolerance."""
import math

import pytest

from assets.feedback_summary.feedback import summarise
from assets.feedback_summary.verdicts import judge, seed_summary
from schemas.records import FilteredIdea, RunResult
from schemas.topic import TopicSpec


def test_seed_summary():
    assert seed_summary([]) == (None, 0.0)
    assert seed_summary([0.8]) == (0.8, 0.0)
    mean, sd = seed_summary([0.78, 0.80, 0.82, float("nan")])  # non-finite values are ignored
    assert mean == pytest.approx(0.80) and sd == pytest.approx(0.02)


def test_spread_widens_the_margin():
    # +0.02 beats the tolerance 0.005 but not a seed spread of 0.03
    assert judge(0.82, 0.80, "maximize", 0.005)[0] == "improvement"
    verdict, reason = judge(0.82, 0.80, "maximize", 0.005, spread=0.03)
    assert verdict == "maintenance" and "seed spread 0.03" in reason
    assert judge(0.84, 0.80, "maximize", 0.005, spread=0.03)[0] == "improvement"
    assert judge(0.76, 0.80, "maximize", 0.005, spread=0.03)[0] == "decline"
    # a spread below the tolerance changes nothing
    assert judge(0.803, 0.80, "maximize", 0.005, spread=0.001)[0] == "maintenance"
    # minimise: lower is better
    assert judge(0.30, 0.40, "minimize", 0.01, spread=0.05)[0] == "improvement"


def test_summarise_uses_the_larger_spread():
    idea = FilteredIdea(idea_id="t/r1/a", topic="t", round="r1", name="a", title="A", experiment="e", summary="s",
                        max_similarity=0.0, independent=True, kept=True)
    run = RunResult(idea_id="t/r1/a", status="success", metric_value=0.83, seed_values=[0.82, 0.84],
                    metric_spread=math.sqrt(2) * 0.01)
    assert summarise([idea], [run], 0.80, "maximize", 0.005)[0].verdict == "improvement"
    noisy_baseline = summarise([idea], [run], 0.80, "maximize", 0.005, baseline_spread=0.04)[0]
    assert noisy_baseline.verdict == "maintenance" and "seed spread" in noisy_baseline.reason


def test_seeds_need_the_placeholder():
    base = dict(name="t", title="T", description="d", metric={"name": "accuracy", "goal": "maximize"})
    with pytest.raises(ValueError, match=r"\{seed\}"):
        TopicSpec(run="python e.py --out_dir {out_dir}", budget={"seeds": 3}, **base)
    spec = TopicSpec(run="python e.py --seed {seed} --out_dir {out_dir}", budget={"seeds": 3}, **base)
    assert spec.run_command("out", seed=2) == ["python", "e.py", "--seed", "2", "--out_dir", "out"]


def test_repeat_seeds_runs_the_final_code_per_seed(tmp_path, monkeypatch):
    """Real sandboxed runs of a tiny script whose metric depends on the seed."""
    from assets.run_results.experimenting import repeat_seeds, run_with_repair
    from resources.runner import Runner
    from schemas.topic import load_topic

    topic = tmp_path / "seedy"
    topic.mkdir()
    (topic / "topic.yaml").write_text(
        "name: seedy\ntitle: T\ndescription: d\ncode: exp.py\nrun: python exp.py --seed {seed} --out_dir {out_dir}\n"
        "metric: {name: accuracy, goal: maximize, tolerance: 0.001}\nbudget: {seeds: 3, run_timeout_s: 60}\n")
    (topic / "exp.py").write_text(
        "import argparse, json, os\np = argparse.ArgumentParser(); p.add_argument('--seed', type=int)\n"
        "p.add_argument('--out_dir')\na = p.parse_args(); os.makedirs(a.out_dir, exist_ok=True)\n"
        "json.dump({'accuracy': 0.80 + 0.01 * a.seed}, open(os.path.join(a.out_dir, 'final_info.json'), 'w'))\n")
    spec = load_topic(topic)
    runner, work = Runner(), tmp_path / "work"
    first = run_with_repair(spec, (topic / "exp.py").read_text(), runner=runner, llm=None, workdir=work,
                            idea_id="seedy/r1/x", title="x", max_repairs=0, edit_format="whole")
    assert first.status == "success" and first.metric_value == pytest.approx(0.80)
    r = repeat_seeds(spec, first, runner, work)
    assert r.seed_values == pytest.approx([0.80, 0.81, 0.82])
    assert r.metric_value == pytest.approx(0.81) and r.metric_spread == pytest.approx(0.01)
    assert r.metrics["accuracy_seed0"] == pytest.approx(0.80)
    assert repeat_seeds(spec, r, runner, work) is r  # already repeated: nothing runs again
