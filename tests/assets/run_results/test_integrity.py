"""Metric integrity (issue 13), with real sandboxed runs: a scorer's metric wins over what the
experiment writes, hidden files stay out of the experiment's sight, a metric outside its bounds
and an edited non-code file fail the run, and a benchmark folder used as it is (a baseline that
writes a submission, its own evaluation script) runs with only a topic.yaml."""
from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from assets.run_results.experimenting import OUT_DIR, RunTarget, run_once
from assets.run_results.repair_search import RepairPolicy, run_with_repair
from resources.runner import Runner
from schemas.topic import load_topic
from tests.support import paths
from tests.support.topic_checks import needs_bwrap

WILD = paths.FIXTURES / "wild_benchmark"
LABELS = "answers_hidden_7f3a.csv"

pytestmark = needs_bwrap


def _accuracy_of(submission: Path) -> float:
    with open(WILD / LABELS) as f:
        truth = {r["id"]: r["label"] for r in csv.DictReader(f)}
    with open(submission) as f:
        pred = {r["id"]: r["label"] for r in csv.DictReader(f)}
    return sum(pred[i] == truth[i] for i in truth) / len(truth)


def _run(spec, code: str, tmp_path: Path, name: str = "w"):
    return run_with_repair(spec, code, runner=Runner(), workdir=tmp_path / name, idea_id=name, title=name,
                           policy=RepairPolicy(memo=False))


def test_a_benchmark_folder_runs_with_only_a_topic_yaml(tmp_path):
    spec = load_topic(WILD)
    assert spec.budget.seeds == 1  # its run takes no {seed}: nothing to repeat
    r = _run(spec, (WILD / "baseline.py").read_text(), tmp_path)
    assert r.status == "success", r.reason
    ws = tmp_path / "w" / "attempt-1"
    assert r.metric_value == pytest.approx(_accuracy_of(ws / OUT_DIR / "submission.csv"), abs=1e-6)
    assert 0.5 < r.metric_value <= 1.0  # the nearest-centroid rule beats chance (1/3) on these points
    assert not (ws / LABELS).exists()  # the run's workspace never had the labels
    assert not (tmp_path / "w" / "attempt-1-score" / LABELS).exists()  # removed after scoring
    assert json.loads((ws / OUT_DIR / "final_info.json").read_text()) == {"accuracy": r.metric_value}


def test_the_scorer_wins_over_a_faked_final_info(tmp_path):
    spec = load_topic(WILD)
    fake = (WILD / "baseline.py").read_text() + (
        "\nimport json\njson.dump({'accuracy': 1.0}, open(os.path.join(os.path.dirname(args.submission), "
        "'final_info.json'), 'w'))\n")
    honest, faked = _run(spec, (WILD / "baseline.py").read_text(), tmp_path, "h"), _run(spec, fake, tmp_path, "f")
    assert faked.status == "success" and faked.metric_value == pytest.approx(honest.metric_value)
    assert honest.metric_value < 1.0
    out = tmp_path / "f" / "attempt-1" / OUT_DIR
    assert json.loads((out / "final_info.by_experiment.json").read_text()) == {"accuracy": 1.0}  # kept aside


HOSTILE = '''
import json, os
found = []
skip = {"proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin", "etc", "var", "opt", "boot", "snap"}
for d, dirs, files in os.walk("/"):
    dirs[:] = [x for x in dirs if not (d == "/" and x in skip) and x not in (".venv", ".git", "site-packages",
                                                                           "node_modules", "__pycache__")]
    found += [os.path.join(d, f) for f in files if f == "NAME"]
found += [p for p in ["TEMPLATE/NAME"] if os.path.exists(p)]
os.makedirs("out", exist_ok=True)
json.dump(found, open("out/found.json", "w"))
'''


def test_hidden_files_are_invisible_to_the_experiment(tmp_path):
    """A hostile experiment searches the filesystem (everything but the system folders and
    virtual environments) for the labels file by name, and tries its path in the topic folder.
    Under the sandbox it finds nothing; the same search with nothing hidden finds the file, so
    the search does reach it."""
    target = RunTarget.of_topic(load_topic(WILD))
    assert target.hidden == (LABELS,) and target.score
    code = HOSTILE.replace("NAME", LABELS).replace("TEMPLATE", str(WILD.resolve()))
    run_once(target, code, Runner(), tmp_path / "hidden", 1)
    assert json.loads((tmp_path / "hidden" / "attempt-1" / "out" / "found.json").read_text()) == []
    unhidden = dataclasses.replace(target, hidden=(), score=())
    run_once(unhidden, code, Runner(), tmp_path / "open", 1)
    found = json.loads((tmp_path / "open" / "attempt-1" / "out" / "found.json").read_text())
    assert any(p.endswith("/" + LABELS) for p in found)  # the search reaches it wherever it can be read


def _topic(tmp_path: Path, script: str, metric: str = "{name: accuracy, goal: maximize, tolerance: 0.01, "
           "bounds: [0, 1]}", extra: dict[str, str] | None = None):
    t = tmp_path / "topic"
    t.mkdir()
    (t / "topic.yaml").write_text(f"name: topic\ntitle: T\ndescription: d\ncode: exp.py\n"
                                  f"run: python exp.py --out_dir {{out_dir}}\nmetric: {metric}\n"
                                  "budget: {run_timeout_s: 60}\n")
    (t / "exp.py").write_text(script)
    for name, text in (extra or {}).items():
        (t / name).parent.mkdir(parents=True, exist_ok=True)
        (t / name).write_text(text)
    return load_topic(t)


WRITE = ("import argparse, json, os\np = argparse.ArgumentParser(); p.add_argument('--out_dir')\na = p.parse_args()\n"
         "os.makedirs(a.out_dir, exist_ok=True)\n")


@pytest.mark.parametrize("value,ok", [(1.5, False), (-0.1, False), (1.0, True), (0.0, True)])
def test_a_metric_outside_its_bounds_fails_the_run(tmp_path, value, ok):
    spec = _topic(tmp_path, WRITE + f"json.dump({{'accuracy': {value}}}, open(a.out_dir + '/final_info.json', 'w'))\n")
    r = _run(spec, spec.code_path.read_text(), tmp_path)
    assert (r.status == "success") == ok, r.reason
    if not ok:
        assert "outside its bounds [0, 1]" in r.reason


def test_open_bounds_allow_any_value_on_that_side(tmp_path):
    spec = _topic(tmp_path, WRITE + "json.dump({'r2': -3.5}, open(a.out_dir + '/final_info.json', 'w'))\n",
                  metric="{name: r2, goal: maximize, bounds: [-.inf, 1]}")
    assert spec.metric.bounds == (float("-inf"), 1.0)
    assert _run(spec, spec.code_path.read_text(), tmp_path).metric_value == -3.5


@pytest.mark.parametrize("action,name", [
    ("open('data/labels.txt', 'a').write('1\\n')", "data/labels.txt"),
    ("os.remove('helper.py')", "helper.py"),
    ("open('helper.py', 'w').write('SCALE = 100\\n')", "helper.py"),
])
def test_a_run_that_edits_files_beside_the_code_fails_naming_them(tmp_path, action, name):
    spec = _topic(tmp_path,
                  WRITE + action + "\njson.dump({'accuracy': 0.5}, open(a.out_dir + '/final_info.json', 'w'))\n",
                  extra={"helper.py": "SCALE = 1\n", "data/labels.txt": "0\n1\n"})
    r = _run(spec, spec.code_path.read_text(), tmp_path)
    assert r.status == "failed" and name in r.reason and "only exp.py may differ" in r.reason
    # new files (caches, checkpoints) are allowed
    ok = _run(spec, WRITE + "open('cache.bin', 'w').write('x')\njson.dump({'accuracy': 0.5}, "
              "open(a.out_dir + '/final_info.json', 'w'))\n", tmp_path, "ok")
    assert ok.status == "success", ok.reason


def test_topic_yaml_checks_score_and_hidden(tmp_path):
    from schemas.topic import TopicSpec, TopicSpecError

    base = {"name": "t", "title": "T", "description": "d", "run": "python e.py --out_dir {out_dir}",
            "metric": {"name": "r2", "goal": "maximize"}}
    with pytest.raises(ValueError, match="pred_dir"):
        TopicSpec(**base, score="python score.py --out_dir {out_dir}")
    with pytest.raises(ValueError, match="needs a 'score'"):
        TopicSpec(**base, hidden=["labels.csv"])
    with pytest.raises(ValueError, match="inside the topic folder"):
        TopicSpec(**base, score="python s.py {pred_dir}", hidden=["../labels.csv"])
    with pytest.raises(ValueError, match="low <= high"):
        TopicSpec(**{**base, "metric": {"name": "r2", "goal": "maximize", "bounds": [1, 0]}})
    t = tmp_path / "t"
    t.mkdir()
    (t / "e.py").write_text("")
    (t / "topic.yaml").write_text("name: t\ntitle: T\ndescription: d\ncode: e.py\n"
                                  "run: python e.py --out_dir {out_dir}\n"
                                  "score: python s.py {pred_dir}\nhidden: [labels.csv]\n"
                                  "metric: {name: r2, goal: maximize}\n")
    with pytest.raises(TopicSpecError, match="'hidden': labels.csv not found"):
        load_topic(t)


def test_scorer_output_without_a_file_is_read_from_its_last_lines():
    from assets.run_results.experimenting import metrics_from_output

    assert metrics_from_output("evaluated 30 rows\naccuracy: 0.8333\n", "accuracy") == {"accuracy": 0.8333}
    assert metrics_from_output("R2 = -0.25\n", "r2") == {"r2": -0.25}
    assert metrics_from_output('log\n{"r2": 0.5, "mae": 40}\n', "r2") == {"r2": 0.5, "mae": 40}
    assert metrics_from_output("0.91\n", "accuracy") == {"accuracy": 0.91}
    assert metrics_from_output("no score here\n", "accuracy") == {}
    assert metrics_from_output("top1_accuracy: 0.7\n", "accuracy") == {}  # another metric's name is not it


def test_links_and_fifos_made_by_the_run_are_never_followed_or_opened(tmp_path):
    """A hostile run turns its out dir into a link to a host folder and a data file into a FIFO:
    the host neither writes through the link nor blocks on the FIFO; the run fails, naming the file."""
    spec = load_topic(WILD)
    victim = tmp_path / "victim"
    victim.mkdir()
    link = (WILD / "baseline.py").read_text() + (
        f"\nimport shutil\nshutil.rmtree(os.path.dirname(args.submission))\n"
        f"os.symlink({str(victim)!r}, os.path.dirname(args.submission))\n")
    r = _run(spec, link, tmp_path, "link")
    assert r.status == "failed" and "scorer failed" in r.reason and list(victim.iterdir()) == []
    fifo = (WILD / "baseline.py").read_text() + "\nos.remove('train.csv')\nos.mkfifo('train.csv')\n"
    r = _run(spec, fifo, tmp_path, "fifo")
    assert r.status == "failed" and "train.csv" in r.reason
