"""Repeated seeds: mean and spread, and verdicts that need to beat the spread as well as the
tolerance."""

import pytest

from assets.feedback_summary.feedback import summarise
from assets.shared.verdicts import judge, seed_summary
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


def _idea(name="a"):
    return FilteredIdea(idea_id=f"t/r1/{name}", topic="t", round="r1", name=name, title=name.upper(), experiment="e",
                        summary="s", max_similarity=0.0, independent=True, kept=True)


def test_summarise_records_the_test_on_every_verdict():
    base = [0.75, 0.756, 0.759]
    runs = [RunResult(idea_id="t/r1/a", status="success", metric_value=0.77, seed_values=[0.768, 0.770, 0.772]),
            RunResult(idea_id="t/r1/b", status="success", metric_value=0.78, seed_values=[0.78]),  # not repeated
            RunResult(idea_id="t/r1/c", status="failed", reason="boom")]
    rows = summarise([_idea("a"), _idea("b"), _idea("c")], runs, 0.755, "maximize", 0.005, baseline_values=base)
    a, b, c = rows
    assert a.verdict == "improvement" and a.effective and (a.n_seeds, a.n_baseline_seeds) == (3, 3)
    assert a.delta == pytest.approx(0.77 - sum(base) / 3) and a.ci_low < a.delta < a.ci_high and a.ci_low > 0
    assert a.p_value < 0.05 and a.test == "welch_t_one_sided"
    assert b.verdict == "maintenance" and b.n_seeds == 1 and "not repeated" in b.reason  # one lucky seed is not enough
    assert c.verdict == "failed" and c.n_seeds == 0 and c.p_value is None
    # without the baseline's seeds there is one value on that side: no improvement can be shown
    alone = summarise([_idea("a")], runs[:1], 0.755, "maximize", 0.005)[0]
    assert alone.verdict == "maintenance" and alone.n_baseline_seeds == 1


def test_the_verdict_table_shows_the_difference_its_interval_and_the_seeds():
    from assets.feedback_summary.feedback import verdict_cells, verdict_table

    rows = summarise([_idea("a")], [RunResult(idea_id="t/r1/a", status="success", metric_value=0.77,
                                              seed_values=[0.768, 0.770, 0.772])],
                     0.755, "maximize", 0.005, baseline_values=[0.75, 0.756, 0.759])
    cells = verdict_cells(rows[0])
    assert cells["seeds"] == "3 vs 3" and cells["mean_diff"] == f"{rows[0].delta:+.4f}"
    assert cells["interval_95"] == f"[{rows[0].ci_low:+.4f}, {rows[0].ci_high:+.4f}]"
    table = verdict_table(rows)
    assert "| mean_diff | interval_95 | seeds | p_value |" in table and cells["interval_95"] in table


def test_seeds_need_the_placeholder():
    base = {"name": "t", "title": "T", "description": "d", "metric": {"name": "accuracy", "goal": "maximize"}}
    with pytest.raises(ValueError, match=r"\{seed\}"):
        TopicSpec(run="python e.py --out_dir {out_dir}", budget={"seeds": 3}, **base)
    spec = TopicSpec(run="python e.py --seed {seed} --out_dir {out_dir}", budget={"seeds": 3}, **base)
    assert spec.run_command("out", seed=2) == ["python", "e.py", "--seed", "2", "--out_dir", "out"]


def test_repeat_seeds_runs_the_final_code_per_seed(tmp_path, monkeypatch):
    """Real sandboxed runs of a tiny script whose metric depends on the seed."""
    from assets.run_results.repair_search import run_with_repair
    from assets.run_results.seeds import repeat_seeds
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
    first = run_with_repair(spec, (topic / "exp.py").read_text(), runner=runner, workdir=work,
                            idea_id="seedy/r1/x", title="x")
    assert first.status == "success" and first.metric_value == pytest.approx(0.80)
    # seed 0 does not beat the reference: not repeated, one seed recorded
    kept = repeat_seeds(spec, first, runner, work, reference=0.85)
    assert kept.seed_values == pytest.approx([0.80]) and kept.metric_value == pytest.approx(0.80)
    r = repeat_seeds(spec, first, runner, work, reference=0.79)
    assert r.seed_values == pytest.approx([0.80, 0.81, 0.82])
    assert r.metric_value == pytest.approx(0.81) and r.metric_spread == pytest.approx(0.01)
    assert r.metrics["accuracy_seed0"] == pytest.approx(0.80)
    assert repeat_seeds(spec, r, runner, work) is r  # already repeated: nothing runs again


def test_candidates_repeat_only_when_seed_zero_beats_the_memoised_baseline(tmp_path, monkeypatch):
    """Real sandboxed runs: the baseline's seeds run once (memoised under DAGSTER_HOME) and are
    shared; a candidate is repeated only when its seed 0 beats their mean."""
    from assets.run_results.repair_search import run_with_repair
    from assets.run_results.seeds import baseline_values, repeat_seeds
    from resources.runner import Runner
    from schemas.topic import load_topic

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    topic = tmp_path / "seedy"
    topic.mkdir()
    (topic / "topic.yaml").write_text(
        "name: seedy\ntitle: T\ndescription: d\ncode: exp.py\nrun: python exp.py --seed {seed} --out_dir {out_dir}\n"
        "metric: {name: accuracy, goal: maximize, tolerance: 0.001}\nbudget: {run_timeout_s: 60}\n")
    script = ("import argparse, json, os\np = argparse.ArgumentParser(); p.add_argument('--seed', type=int)\n"
              "p.add_argument('--out_dir')\na = p.parse_args(); os.makedirs(a.out_dir, exist_ok=True)\nBONUS = 0.0\n"
              "json.dump({'accuracy': 0.80 + 0.01 * a.seed + BONUS}, "
              "open(os.path.join(a.out_dir, 'final_info.json'), 'w'))\n")
    (topic / "exp.py").write_text(script)
    spec = load_topic(topic)
    assert spec.budget.seeds == 3  # the default when the run takes {seed}

    class Counting(Runner):
        def run(self, *a, **kw):
            calls.append(a[0])
            return super().run(*a, **kw)

    calls: list = []
    runner = Counting()
    assert baseline_values(spec, runner) == pytest.approx([0.80, 0.81, 0.82]) and len(calls) == 3
    assert baseline_values(spec, runner) == pytest.approx([0.80, 0.81, 0.82]) and len(calls) == 3  # memoised
    for bonus, values in ((0.05, [0.85, 0.86, 0.87]), (-0.005, [0.795])):
        code = script.replace("BONUS = 0.0", f"BONUS = {bonus}")
        work = tmp_path / f"idea{bonus}"
        first = run_with_repair(spec, code, runner=runner, workdir=work, idea_id="seedy/r1/x", title="x")
        assert repeat_seeds(spec, first, runner, work).seed_values == pytest.approx(values)
    assert len(calls) == 3 + 3 + 1
