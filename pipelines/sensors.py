"""Sensors: register topic folders as partitions; start the next round when one finishes.

Both are off by default: a daemon that starts (opening the UI starts one) runs nothing on its
own, since each run they request costs LLM calls and experiment time on every topic folder.
RESEARCHLOOP_SENSORS=1 (`python -m pipelines.ui --sensors`) starts them with the daemon; a state
set in the UI is stored in the instance and wins over this default."""

import hashlib
import json

import dagster as dg

from assets.shared.partitions import multi_key, round_partitions, topic_partitions
from assets.shared.topics import stale_reason
from pipelines.guards import TOPIC_TAG, fail_stale_runs, lock_held, topic_busy
from pipelines.jobs import research_round_job, topic_setup_job
from pipelines.loop import ROUND_END, decide_next_round
from resources.paths import experiments_root, resolve_topic_dir
from resources.settings import settings
from resources.store import record_store, split_partition_key
from schemas.topic import TopicSpecError, discover_topics, load_topic


def default_status() -> dg.DefaultSensorStatus:
    """RUNNING only when RESEARCHLOOP_SENSORS=1 is set where the code location loads."""
    return dg.DefaultSensorStatus.RUNNING if settings().sensors else dg.DefaultSensorStatus.STOPPED


@dg.sensor(job=topic_setup_job, minimum_interval_seconds=30, default_status=default_status(),
           description="Registers every valid experiments/<topic>/topic.yaml as a topic partition and sets it up.")
def topic_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    try:
        valid, errors = discover_topics(experiments_root())
    except Exception as e:  # noqa: BLE001  e.g. an unreadable experiments folder: warn on this tick, never raise
        context.log.warning(f"cannot list topics: {type(e).__name__}: {e}")
        return dg.SensorResult(skip_reason=f"cannot list topics: {e}")
    for err in errors.values():
        context.log.warning(f"not registered: {err}")
    known = set(context.instance.get_dynamic_partitions(topic_partitions.name))
    new = []
    for t in sorted(set(valid) - known):
        if lock_held(t):  # a `researchloop run` sets it up and registers it itself
            context.log.info(f"{t}: not set up here, a `researchloop run` holds its lock")
        else:
            new.append(t)
    again = _changed_topics(context, {t: valid[t] for t in sorted(set(valid) & known)})
    skip = None
    if not new and not again:
        skip = "no new or changed topic folders" + (f"; invalid: {'; '.join(errors.values())}" if errors else "")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=t, run_key=f"setup:{t}", tags={TOPIC_TAG: t}) for t in new]
        + [dg.RunRequest(partition_key=t, run_key=f"setup:{t}:{digest}", tags={TOPIC_TAG: t})
           for t, digest in again],
        dynamic_partitions_requests=[topic_partitions.build_add_request(new)] if new else [],
        skip_reason=skip,
    )


def _changed_topics(context, specs: dict) -> list[tuple[str, str]]:
    """(topic, digest of its topic.yaml and reference code) for each registered topic whose stored
    topic_brief no longer matches the folder: its set-up runs again (once per change: the digest is
    in the run key), so later rounds use the new spec and code, captured. A topic without a brief
    yet (set-up in flight or failed), locked by a CLI or with a run in flight is left alone."""
    store = record_store()
    out = []
    for t, spec in specs.items():
        try:
            brief = store.read("topic_brief", t)
            if brief is None or lock_held(t) or topic_busy(context.instance, t):
                continue
            why = stale_reason(brief, spec)
            if why is None:
                continue
            spec_and_code = (spec.path / "topic.yaml").read_bytes() + spec.code_path.read_bytes()
            digest = hashlib.sha256(spec_and_code).hexdigest()[:16]
            context.log.info(f"{t}: {why}: its set-up runs again")
            out.append((t, digest))
        except Exception as e:  # noqa: BLE001  one bad topic must not stop the others
            context.log.warning(f"{t}: cannot tell whether it changed: {type(e).__name__}: {e}")
    return out


def _candidates(instance, asset: str, cursor: str | None, log) -> tuple[list[tuple[str, str | None, str]], str | None]:
    """(topic, finished round or None, run id) for each new materialisation of `asset` since
    `cursor`; an unreadable record is logged and skipped."""
    res = instance.fetch_materializations(dg.AssetKey(asset), limit=100, cursor=cursor, ascending=True)
    found = []
    for rec in res.records:
        try:
            if rec.partition_key is None:
                continue
            topic, finished = split_partition_key(rec.partition_key)
            found.append((topic, finished, rec.run_id))
        except Exception as e:  # noqa: BLE001  one bad record must not stop the others
            log.warning(f"skipped a {asset} record ({rec.partition_key!r}): {type(e).__name__}: {e}")
    return found, res.cursor


def _decide(instance, topic: str, finished: str | None, run_id: str, store, log) -> tuple[str | None, bool]:
    """(round to start or None, whether to look again next tick because the topic is busy)."""
    try:
        spec = load_topic(resolve_topic_dir(topic))
    except TopicSpecError:
        return None, False
    busy = topic_busy(instance, topic, exclude={run_id})  # the run that just materialised does not count
    if busy:
        log.info(f"{topic}: waiting, {busy}")
        return None, True
    rk, why = decide_next_round(instance, spec, store, finished)
    if rk is None:
        log.info(f"{topic}: no round after {finished or 'the set-up'}: {why}")
    return rk, False


@dg.sensor(job=research_round_job, minimum_interval_seconds=30, default_status=default_status(),
           description="Starts round 1 after a topic's baseline, and round r+1 when round r is finished (its "
                       "best_code lands), until a stop rule holds: the round budget, the token or cost budget, or no "
                       "improvement in `patience` rounds (topic.yaml budget). Waits while a `researchloop run` "
                       "drives the topic or one of its runs is in flight.")
def round_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    log = context.log
    cursors = json.loads(context.cursor) if context.cursor else {}
    try:
        fail_stale_runs(context.instance, log=log.warning)
    except Exception as e:  # noqa: BLE001  the rounds can still be decided
        log.warning(f"stale-run cleanup failed: {type(e).__name__}: {e}")
    store = record_store()
    todo = [tuple(d) for d in cursors.pop("deferred", [])]  # busy topics from earlier ticks
    # feedback_summary too: a round stored before stacking existed ends with it (pipelines.loop.round_finished)
    for asset in ("baseline_results", "feedback_summary", ROUND_END):
        found, cursors[asset] = _candidates(context.instance, asset, cursors.get(asset), log)
        todo += found
    wanted: dict[tuple[str, str], None] = {}
    deferred: dict[tuple[str, str | None], str] = {}
    for topic, finished, run_id in todo:
        try:
            rk, busy = _decide(context.instance, topic, finished, run_id, store, log)
        except Exception as e:  # noqa: BLE001  a corrupt record of one topic: warn, go on with the others
            log.warning(f"{topic}: skipped ({type(e).__name__}: {e})")
            continue
        if busy:
            deferred[(topic, finished)] = run_id
        elif rk is not None:
            wanted[(topic, rk)] = None
    if deferred:
        cursors["deferred"] = [[t, f, r] for (t, f), r in deferred.items()]
    known = set(context.instance.get_dynamic_partitions(round_partitions.name))
    new_rounds = sorted({rk for _, rk in wanted} - known)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=str(multi_key(t, rk)), run_key=f"{t}|{rk}",
                                    tags={TOPIC_TAG: t}) for t, rk in wanted],
        dynamic_partitions_requests=[round_partitions.build_add_request(new_rounds)] if new_rounds else [],
        cursor=json.dumps(cursors),
        skip_reason=None if wanted else "no round to start",
    )
