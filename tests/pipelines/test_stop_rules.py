"""Stop rules: the round budget, a token or cost budget, and patience (no improvement in K
rounds), as a pure function and as applied by round_sensor."""
import dagster as dg
import pytest

from pipelines.loop import stop_reason
from pipelines.sensors import round_sensor
from resources.store import Store
from schemas.frames import to_frame
from schemas.records import Feedback
from schemas.topic import TopicSpec, load_topic
from tests.support.briefs import store_brief

TOPIC = "toy_classification"


def _spec(**budget) -> TopicSpec:
    return TopicSpec(name="t", title="T", description="d", run="python e.py --out_dir {out_dir}",
                     metric={"name": "accuracy", "goal": "maximize"}, budget={"rounds": 10, **budget})


def _rounds(*improvements):
    return [{"round": f"r{i}", "improvement": n} for i, n in enumerate(improvements, 1)]


def test_stop_reason_rules():
    assert stop_reason(_spec(), _rounds(0, 0, 0)) is None
    assert "round budget" in stop_reason(_spec(rounds=3), _rounds(1, 0, 0))
    assert "token budget" in stop_reason(_spec(max_tokens=1000), _rounds(1), tokens=1000)
    assert stop_reason(_spec(max_tokens=1000), _rounds(1), tokens=999) is None
    assert "cost budget" in stop_reason(_spec(max_cost_usd=0.5), _rounds(1), cost_usd=0.51)
    assert "no improvement in the last 2" in stop_reason(_spec(patience=2), _rounds(1, 0, 0))
    assert stop_reason(_spec(patience=2), _rounds(0, 1, 0)) is None  # an improvement one round ago
    assert stop_reason(_spec(patience=2), _rounds(0)) is None  # not enough rounds to judge


def _set_budget(home, budget: str):
    """Replace the toy topic's budget line; returns its topic.yaml."""
    topic_yaml = home / "experiments" / TOPIC / "topic.yaml"
    lines = [line for line in topic_yaml.read_text().splitlines() if not line.startswith("budget")]
    topic_yaml.write_text("\n".join(lines) + f"\nbudget: {budget}\n")
    return topic_yaml


def _feedback(round_key: str, verdict: str) -> None:
    fb = Feedback(idea_id=f"{TOPIC}/{round_key}/a", name="a", title="A", summary="s", verdict=verdict, reason="r",
                  metric_value=0.8, baseline_value=0.8, delta=0.0, effective=verdict == "improvement")
    st = Store()
    st.write(to_frame([fb], Feedback), "feedback_summary", TOPIC, round_key)


@pytest.mark.parametrize("budget, usage, starts", [
    ("{rounds: 5, patience: 1}", {}, False),           # r1 had no improvement: stop
    ("{rounds: 5, max_tokens: 500}", {"prompt_tokens": 400, "completion_tokens": 100}, False),
    ("{rounds: 5, max_tokens: 5000}", {"prompt_tokens": 400, "completion_tokens": 100}, True),
])
def test_round_sensor_applies_stop_rules(home, budget, usage, starts):
    topic_yaml = _set_budget(home, budget)
    load_topic(topic_yaml.parent)  # still valid
    _feedback("r1", "maintenance")
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("topics", [TOPIC])
        instance.add_dynamic_partitions("rounds", ["r1"])
        pk = str(dg.MultiPartitionKey({"topic": TOPIC, "round": "r1"}))
        if usage:  # LLM use recorded in a stage's metadata, as the assets do
            instance.report_runless_asset_event(dg.AssetMaterialization("ideas", partition=pk, metadata=usage))
        instance.report_runless_asset_event(dg.AssetMaterialization("feedback_summary", partition=pk))
        r = round_sensor(dg.build_sensor_context(instance=instance))
    assert [rr.partition_key for rr in r.run_requests] == ([f"r2|{TOPIC}"] if starts else [])


def test_weekly_refresh_expires_old_literature_answers(home):
    import os
    import time

    from pipelines.definitions import defs
    from pipelines.schedules import refresh_literature
    from resources.literature import Literature
    from resources.llm import ResponseCache

    cache = ResponseCache(home / "dagster_home" / "http_cache" / "openalex")
    cache.put("a" * 64, {"body": "old"})
    cache.put("b" * 64, {"body": "new"})
    old = cache._path("a" * 64)
    os.utime(old, (time.time() - 8 * 86400,) * 2)
    res = refresh_literature.execute_in_process(resources={"literature": Literature()})
    assert res.success and res.output_for_node("expire_literature_cache") == 1
    assert not old.exists() and cache.get("b" * 64) == {"body": "new"}

    from pipelines.schedules import literature_refresh_schedule as schedule

    assert schedule in defs.schedules
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING and schedule.cron_schedule == "0 3 * * 1"


# -- one decision, two loop drivers ----------------------------------------------------------

def _recorder(ctx):
    import logging

    records: list[str] = []

    class Rec(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    ctx.log.addHandler(Rec(level=logging.INFO))
    return records


@pytest.mark.parametrize("budget, usage, reason", [
    ("{rounds: 5, patience: 1}", {}, "no improvement in the last 1 round(s)"),
    ("{rounds: 5, max_tokens: 500}", {"prompt_tokens": 400, "completion_tokens": 100},
     "token budget spent (500 >= 500)"),
    ("{rounds: 5, max_cost_usd: 0.5}", {"prompt_tokens": 10, "cost_usd": 0.6},
     "cost budget spent ($0.6000 >= $0.5)"),
])
def test_cli_and_sensor_stop_for_the_same_reason(home, monkeypatch, capsys, budget, usage, reason):
    """The same stored state (r1 done without an improvement, its usage recorded, the set-up
    materialised) drives round_sensor and `researchloop run`: neither starts r2, both say why
    with decide_next_round's words, and the CLI launches no run at all."""
    from pipelines import cli
    from pipelines.loop import decide_next_round

    topic_yaml = _set_budget(home, budget)
    _feedback("r1", "maintenance")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # a remote model that is never asked
    monkeypatch.setenv("RESEARCHLOOP_MODEL", "fake-model")
    instance = dg.DagsterInstance.get()  # the persistent instance under the test's DAGSTER_HOME, as the CLI opens it
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1"])
    for asset in ("topic_brief", "baseline_results"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=TOPIC))
    store_brief(load_topic(topic_yaml.parent))  # the set-up's record, as it captured the topic
    pk = str(dg.MultiPartitionKey({"topic": TOPIC, "round": "r1"}))
    instance.report_runless_asset_event(dg.AssetMaterialization("ideas", partition=pk, metadata=usage))
    instance.report_runless_asset_event(dg.AssetMaterialization("feedback_summary", partition=pk))

    assert decide_next_round(instance, load_topic(topic_yaml.parent), Store(), "r1") == (None, reason)

    ctx = dg.build_sensor_context(instance=instance)
    logged = _recorder(ctx)
    r = round_sensor(ctx)
    assert r.run_requests == []
    assert any(m.endswith(f"no round after r1: {reason}") for m in logged), logged

    assert cli.main(["run", "--topic", TOPIC]) == 0
    out = capsys.readouterr().out
    assert "r1 already finished: not run again" in out
    assert "set-up of toy_classification already materialised" in out
    assert f"stopped before r2: {reason}" in out
    assert instance.get_runs() == []  # neither a set-up nor a round run was launched


def test_cli_round_budget_is_its_rounds_flag(home, monkeypatch, capsys):
    """--rounds sets the CLI's round budget: with r1 stored, `--rounds 1` stops before r2 for the
    round budget, as the sensor stops a topic whose budget is 1 round."""
    from pipelines import cli

    _feedback("r1", "improvement")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    instance = dg.DagsterInstance.get()
    for asset in ("topic_brief", "baseline_results"):
        instance.add_dynamic_partitions("topics", [TOPIC])
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=TOPIC))
    store_brief(load_topic(home / "experiments" / TOPIC))
    assert cli.main(["run", "--topic", TOPIC, "--rounds", "1"]) == 0
    assert "stopped before r2: round budget spent (1/1)" in capsys.readouterr().out
    assert instance.get_runs() == []
