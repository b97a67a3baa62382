"""Dagster's instance storage on a real PostgreSQL server (dagster-postgres): the Postgres block of
dagster_home/dagster.yaml, uncommented, runs the toy topic's set-up and a whole round with the
scripted fake LLM; runs, materialisations, check evaluations and dynamic partitions are read back
through a fresh instance and straight from the database."""
import json

import dagster as dg
import pytest

from assets import ROUND_ASSETS, TOPIC_ASSETS
from resources.paths import REPO_ROOT
from tests.support.postgres import postgres_server  # noqa: F401 - the fixture
from tests.support.resources import make_resources
from tests.support.rounds import TOPIC, materialize_round, materialize_topic

PARTITION = f"r1|{TOPIC}"


def postgres_instance_yaml() -> str:
    """dagster_home/dagster.yaml with its commented Postgres block switched on."""
    lines = (REPO_ROOT / "dagster_home" / "dagster.yaml").read_text().splitlines()
    start = lines.index("# storage:")
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line[2:])
    rest = [line for line in lines if not line.startswith("#")]
    return "\n".join(block + rest) + "\n"


def test_postgres_block_of_the_shipped_config_is_complete():
    """The commented block parses, reads every connection setting from the RESEARCHLOOP_PG_* variables
    the server fixture sets, and switching it on keeps the rest of the instance config."""
    import yaml

    from tests.support.postgres import PgServer

    parsed = yaml.safe_load(postgres_instance_yaml())
    db = parsed["storage"]["postgres"]["postgres_db"]
    env_vars = {v["env"] for v in db.values() if isinstance(v, dict)}
    assert env_vars == set(PgServer("h", 1, "u", "p", "d").env())
    assert db["scheme"] == "postgresql+psycopg2"
    assert parsed["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert parsed["telemetry"] == {"enabled": False}


@pytest.mark.slow
def test_whole_round_on_postgres_storage(home, fake_llm, postgres_server, monkeypatch):  # noqa: F811
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )

    dh = home / "dagster_home"
    (dh / "dagster.yaml").write_text(postgres_instance_yaml())
    for k, v in postgres_server.env().items():
        monkeypatch.setenv(k, v)

    resources = make_resources(fake_llm.base_url)
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        materialize_topic(instance, resources)
        res = materialize_round(instance, resources, "r1")
        assert res.success
        n_checks = len(res.get_asset_check_evaluations())
        assert n_checks >= len(ROUND_ASSETS)

    # Nothing of Dagster's went to SQLite (history/runs.db, storage/*.db, schedules/); MLflow keeps its own.
    sqlite_files = [str(p.relative_to(dh)) for p in dh.rglob("*.db") if p.relative_to(dh).parts[0] != "mlflow"]
    assert not sqlite_files, sqlite_files

    # Read back through a fresh instance built from the same dagster.yaml.
    with dg.DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions("topics") == [TOPIC]
        assert instance.get_dynamic_partitions("rounds") == ["r1"]
        runs = instance.get_runs()
        assert len(runs) == 2 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        for a in ROUND_ASSETS:
            ev = instance.get_latest_materialization_event(a.key)
            assert ev is not None and ev.asset_materialization.partition == PARTITION, a.key
        fb = instance.get_latest_materialization_event(dg.AssetKey("feedback_summary")).asset_materialization
        assert "verdicts" in fb.metadata and fb.metadata["improvement_rate"].value is not None
        for a in TOPIC_ASSETS:
            assert instance.get_latest_materialization_event(a.key).asset_materialization.partition == TOPIC
        check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("feedback_summary"), "verdicts_valid")])
        assert check[dg.AssetCheckKey(dg.AssetKey("feedback_summary"), "verdicts_valid")].status.value == "SUCCEEDED"

    # And straight from PostgreSQL.
    conn = postgres_server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT dagster_event_type, count(*) FROM event_logs GROUP BY 1")
            counts = dict(cur.fetchall())
            cur.execute("SELECT asset_key, partition FROM event_logs "
                        "WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
            mats = {(json.loads(k)[-1], p) for k, p in cur.fetchall()}
            cur.execute("SELECT partitions_def_name, partition FROM dynamic_partitions ORDER BY 1")
            dyn = cur.fetchall()
            cur.execute("SELECT asset_key, check_name, execution_status FROM asset_check_executions")
            checks = cur.fetchall()
            cur.execute("SELECT status, count(*) FROM runs GROUP BY 1")
            run_status = dict(cur.fetchall())
    finally:
        conn.close()
    assert counts["ASSET_MATERIALIZATION"] == len(ROUND_ASSETS) + len(TOPIC_ASSETS)
    assert {(a.key.path[-1], PARTITION) for a in ROUND_ASSETS} | {(a.key.path[-1], TOPIC) for a in TOPIC_ASSETS} == mats
    assert counts["ASSET_CHECK_EVALUATION"] >= n_checks
    assert dyn == [("rounds", "r1"), ("topics", TOPIC)]
    assert ('["feedback_summary"]', "verdicts_valid", "SUCCEEDED") in checks
    assert all(status in ("SUCCEEDED", "FAILED") for _, _, status in checks)
    assert run_status == {"SUCCESS": 2}
