"""Sensors: register topic folders as partitions; start the next round when one finishes."""

import dagster as dg

from assets.shared.partitions import multi_key, round_partitions, topic_partitions
from pipelines.jobs import research_round_job, topic_setup_job
from pipelines.loop import next_round, stop_reason
from resources.paths import experiments_root
from resources.store import Store, split_partition_key
from schemas.topic import TopicSpecError, discover_topics, load_topic


@dg.sensor(job=topic_setup_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Registers every valid experiments/<topic>/topic.yaml as a topic partition and sets it up.")
def topic_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    valid, errors = discover_topics(experiments_root())
    for folder, err in errors.items():
        context.log.warning(f"not registered: {err}")
    known = set(context.instance.get_dynamic_partitions(topic_partitions.name))
    new = sorted(set(valid) - known)
    skip = None
    if not new:
        skip = "no new topic folders" + (f"; invalid: {'; '.join(errors.values())}" if errors else "")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=t, run_key=f"setup:{t}", tags={"researchloop/topic": t})
                      for t in new],
        dynamic_partitions_requests=[topic_partitions.build_add_request(new)] if new else [],
        skip_reason=skip,
    )


def topic_stop_reason(instance, spec, store: Store) -> str | None:
    """The stop rules (pipelines/loop.py) over the topic's stored rounds and recorded LLM usage."""
    from assets import ROUND_ASSETS
    from assets.feedback_summary.feedback import progress_rows
    from assets.shared.metadata import round_usage

    rows = progress_rows(store, spec.name)
    stages = [a.key.to_user_string() for a in ROUND_ASSETS]
    usage = [round_usage(instance, str(multi_key(spec.name, r["round"])), stages) for r in rows]
    return stop_reason(spec, rows, sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage),
                       sum(u["cost_usd"] for u in usage))


def _requests_after(instance, asset: str, cursor: str | None, store: Store, log=print):
    """Round requests caused by new materialisations of `asset` since `cursor`."""
    res = instance.fetch_materializations(dg.AssetKey(asset), limit=100, cursor=cursor, ascending=True)
    wanted: dict[tuple[str, str], None] = {}
    for rec in res.records:
        pk = rec.partition_key
        if pk is None:
            continue
        topic, finished = split_partition_key(pk)
        try:
            spec = load_topic(experiments_root() / topic)
        except TopicSpecError:
            continue
        rk = next_round(spec, store, finished)
        if rk is None:
            continue
        why = topic_stop_reason(instance, spec, store)
        if why is not None:
            log(f"{topic}: not starting {rk}: {why}")
            continue
        wanted[(topic, rk)] = None
    return list(wanted), res.cursor


@dg.sensor(job=research_round_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Starts round 1 after a topic's baseline, and round r+1 when round r's feedback_summary "
                       "lands, until a stop rule holds: the round budget, the token or cost budget, or no "
                       "improvement in `patience` rounds (topic.yaml budget).")
def round_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    import json

    cursors = json.loads(context.cursor) if context.cursor else {}
    store = Store()
    wanted = []
    for asset in ("baseline_results", "feedback_summary"):
        found, cursors[asset] = _requests_after(context.instance, asset, cursors.get(asset), store,
                                                context.log.info)
        wanted += found
    known = set(context.instance.get_dynamic_partitions(round_partitions.name))
    new_rounds = sorted({rk for _, rk in wanted} - known)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=str(multi_key(t, rk)), run_key=f"{t}|{rk}",
                                    tags={"researchloop/topic": t}) for t, rk in wanted],
        dynamic_partitions_requests=[round_partitions.build_add_request(new_rounds)] if new_rounds else [],
        cursor=json.dumps(cursors),
        skip_reason=None if wanted else "no round to start",
    )
