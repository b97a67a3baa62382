"""schemas/topic.py: loading and validating experiments/<topic>/topic.yaml."""
from __future__ import annotations

import pytest
import yaml

from schemas.topic import TopicSpec, TopicSpecError, discover_topics, load_topic
from tests.support import paths
from tests.support.topics import VALID, make_topic


def with_(**changes) -> dict:
    spec = {**VALID, **changes}
    return {k: v for k, v in spec.items() if v is not ...}


def test_load_valid(tmp_path):
    d = make_topic(tmp_path, "toy", VALID)
    spec = load_topic(d)
    assert isinstance(spec, TopicSpec)
    assert spec.name == "toy" and spec.metric.goal == "maximize" and spec.metric.tolerance == 0.005
    assert spec.budget.rounds == 3 and spec.budget.ideas_per_round == 2
    assert spec.budget.papers == 30 and spec.budget.debug_attempts == 5  # defaults
    assert spec.path == d.resolve() and spec.code_path == d.resolve() / "experiment.py"
    assert spec.run_command("out") == ["python", "experiment.py", "--out_dir", "out"]
    assert spec.run_command("o", "check") == ["python", "experiment.py", "--out_dir", "o", "--dry_run"]
    assert "dir" not in spec.model_dump()


def test_load_minimal_uses_defaults(tmp_path):
    d = make_topic(tmp_path, "toy", with_(code=..., check=..., budget=...))
    spec = load_topic(d)
    assert spec.code == "experiment.py" and spec.check is None
    assert spec.budget.rounds == 2 and spec.budget.ideas_per_round == 3


def test_fixture_topic_loads():
    spec = load_topic(paths.FIXTURES / "toy_classification")
    assert spec.name == "toy_classification" and spec.budget.rounds == 2


@pytest.mark.parametrize("spec,field", [
    (with_(metric=...), "field 'metric'"),
    (with_(title=...), "field 'title'"),
    (with_(metric={"name": "accuracy", "goal": "maximise"}), "field 'metric.goal'"),
    (with_(metric={"name": "accuracy", "goal": "maximize", "tolerance": -0.1}), "field 'metric.tolerance'"),
    (with_(name="toy|r1"), "field 'name'"),
    (with_(name="toy run"), "field 'name'"),
    (with_(run="python experiment.py --out_dir out"), "field 'run'"),
    (with_(budget={"rounds": 0}), "field 'budget.rounds'"),
    (with_(budget={"round": 2}), "field 'budget.round'"),
    (with_(metrics={"name": "x", "goal": "maximize"}), "field 'metrics'"),  # extra field: a typo
])
def test_invalid_field_named(tmp_path, spec, field):
    d = make_topic(tmp_path, "toy", spec)
    with pytest.raises(TopicSpecError) as ei:
        load_topic(d)
    msg = str(ei.value)
    assert msg.startswith("toy: ")
    assert field in msg


def test_missing_metric_says_required(tmp_path):
    with pytest.raises(TopicSpecError, match=r"field 'metric': Field required"):
        load_topic(make_topic(tmp_path, "toy", with_(metric=...)))


def test_run_without_out_dir_explains(tmp_path):
    with pytest.raises(TopicSpecError, match=r"\{out_dir\}"):
        load_topic(make_topic(tmp_path, "toy", with_(run="python experiment.py")))


def test_name_differs_from_folder(tmp_path):
    d = make_topic(tmp_path, "toy_folder", VALID)
    with pytest.raises(TopicSpecError) as ei:
        load_topic(d)
    assert "field 'name'" in str(ei.value) and "'toy'" in str(ei.value) and "'toy_folder'" in str(ei.value)


def test_missing_code_file(tmp_path):
    d = make_topic(tmp_path, "toy", with_(code="train.py"))  # experiment.py exists, train.py does not
    with pytest.raises(TopicSpecError, match=r"field 'code': train.py not found"):
        load_topic(d)


def test_invalid_yaml(tmp_path):
    d = make_topic(tmp_path, "toy", text="name: toy\nmetric: {name: accuracy, goal: [maximize\n")
    with pytest.raises(TopicSpecError, match="not valid YAML"):
        load_topic(d)


@pytest.mark.parametrize("text,match", [("- a\n- b\n", "must be a mapping"), ("", "field 'name'")])
def test_yaml_not_a_mapping_or_empty(tmp_path, text, match):
    with pytest.raises(TopicSpecError, match=match):
        load_topic(make_topic(tmp_path, "toy", text=text))


def test_no_topic_yaml(tmp_path):
    (tmp_path / "toy").mkdir()
    with pytest.raises(TopicSpecError, match="no topic.yaml"):
        load_topic(tmp_path / "toy")


def test_topic_spec_error_is_value_error():
    assert issubclass(TopicSpecError, ValueError)


def test_discover_topics_splits_valid_and_errors(tmp_path):
    make_topic(tmp_path, "toy", VALID)
    make_topic(tmp_path, "other", with_(name="other", metric={"name": "loss", "goal": "minimize"}))
    make_topic(tmp_path, "broken", with_(name="broken", metric={"name": "acc", "goal": "up"}))
    make_topic(tmp_path, "badyaml", text=": : :\n  - [")
    (tmp_path / "notes").mkdir()                      # no topic.yaml: ignored
    (tmp_path / "README.md").write_text("x")          # a file: ignored
    valid, errors = discover_topics(tmp_path)
    assert sorted(valid) == ["other", "toy"]
    assert valid["other"].metric.goal == "minimize"
    assert sorted(errors) == ["badyaml", "broken"]
    assert "field 'metric.goal'" in errors["broken"]
    assert "YAML" in errors["badyaml"]


def test_discover_topics_missing_root(tmp_path):
    assert discover_topics(tmp_path / "nope") == ({}, {})


# --------------------------------------------------------------------------- execution: (backend, Ray request)

@pytest.mark.parametrize("execution,match", [
    ({"backend": "slurm"}, r"field 'execution.backend': Input should be 'local' or 'ray'"),
    ({"backend": "ray", "gpus": -1}, r"field 'execution.gpus': Input should be greater than or equal to 0"),
    ({"cpus": -0.5}, r"field 'execution.cpus'"),
    ({"gpus": 1.5}, r"field 'execution.gpus': .*fraction below 1 or a whole number"),
    ({"gpus": True}, r"field 'execution.gpus'"),                       # not silently 1 GPU
    ({"gpus": float("inf")}, r"field 'execution.gpus': Input should be a finite number"),
    ({"gpu": 1}, r"field 'execution.gpu': Extra inputs are not permitted"),   # a typo
    ({"sandbox": False}, r"field 'execution.sandbox': Extra inputs are not permitted"),  # never a topic's choice
    ({"memory_mb": 8000}, r"field 'execution.memory_mb'"),             # memory stays budget.memory_mb
    ({"resources": {"gpu_slot": -1}}, r"field 'execution.resources'.*finite number >= 0"),
    ({"resources": {"GPU": 1}}, r"field 'execution.resources'.*Ray's own resource: use cpus, gpus"),
    ({"resources": {"": 1}}, r"field 'execution.resources'.*non-empty"),
    ({"resources": ["gpu_slot"]}, r"field 'execution.resources'"),
    ({"backend": "local", "gpus": 1}, r"field 'execution'.*gpus apply to the ray backend"),
    ("ray", r"field 'execution'"),
])
def test_bad_execution_blocks_name_the_field(tmp_path, execution, match):
    with pytest.raises(TopicSpecError, match=match) as ei:
        load_topic(make_topic(tmp_path, "toy", with_(execution=execution)))
    assert str(ei.value).startswith("toy: ")


def test_execution_block_loads_and_an_absent_one_is_the_environments_choice(tmp_path):
    from assets.shared.topics import spec_from_json

    d = make_topic(tmp_path, "toy", text=yaml.safe_dump(VALID) + (
        "execution:\n  backend: ray\n  cpus: 2\n  gpus: 0.5\n  resources: {gpu_slot: 1, a100: 0.25}\n"))
    spec = load_topic(d)
    ex = spec.execution
    assert (ex.backend, ex.cpus, ex.gpus, ex.resources) == ("ray", 2.0, 0.5, {"gpu_slot": 1.0, "a100": 0.25})
    assert spec_from_json(spec.model_dump_json(), spec.dir) == spec  # topic_brief's captured copy keeps it
    # only some fields: the others stay empty (the environment fills them at run time)
    part = load_topic(make_topic(tmp_path / "b", "toy", with_(execution={"gpus": 1})))
    assert part.execution.backend is None and part.execution.resources is None and part.execution.gpus == 1
    plain = load_topic(make_topic(tmp_path / "c", "toy", VALID))
    assert plain.execution is None
    assert spec_from_json(plain.model_dump_json(), plain.dir).execution is None
