"""`tracker`: MLflow with a SQLite backend and an explicit artifact root under dagster_home/.
One MLflow experiment per topic; a parent run per topic x round with a nested run per idea
(and one run for the baseline). mlflow is imported on first use.

Tracking is a record of the work, not the work: several step processes write to one SQLite
file, and SQLite answers a writer that waits too long with "database is locked". Every MLflow
call is retried on that (and on MLflow's TEMPORARILY_UNAVAILABLE) with jittered exponential
backoff (`tenacity`); if the database stays locked, the tracker logs a warning and goes on
without a run id (as when tracking is disabled), so a finished experiment is never turned into a
failure by its bookkeeping. Other errors still raise.

Many workers, one server: with MLFLOW_TRACKING_URI=http://host:port (an `mlflow server` with a
database backend and `--artifacts-destination`, see the README's "Scaling out"), the same calls
go over HTTP; experiments then get the server's artifact root (artifacts are uploaded through the
server, so no worker writes to its own disk) unless `artifact_root` names one. Concurrent writers:
params and metrics go in batches (`log_batch`, a few requests per run instead of one per value);
finding-or-creating a run by its tags is done under a host-wide file lock next to a local SQLite
store. Against a server, the round's run (opened by every idea step of the round at once) is
created then reconciled: the writer waits `settle_s` (longer than a request's latency plus the
hosts' clock skew), looks again, keeps the run already marked settled or else the oldest run with
those tags (start time, then id), marks it settled and deletes its own if it lost, so the steps end
up in one run. (Start times are the writers' clocks: without the mark, a create that landed after
the first racer's look but carries an older start time would win a second, later look.) Idea, attempt and
baseline runs are each written by one step and need no reconciling."""
from __future__ import annotations

import contextlib
import logging
import os
import time
import urllib.parse
from pathlib import Path
from typing import cast

import dagster as dg
import tenacity
from filelock import FileLock
from pydantic import Field, PrivateAttr

from resources.paths import under_home
from resources.settings import settings

log = logging.getLogger("researchloop.tracker")

MAX_PARAMS_PER_BATCH = 100  # MLflow's limits on one log_batch request
MAX_METRICS_PER_BATCH = 1000
MAX_PARAM_CHARS = 6000
SETTLED_TAG = "researchloop.settled"  # on a shared run once a racer has handed it out
TRANSIENT_MARKERS = ("database is locked", "database table is locked", "database is busy",
                     "TEMPORARILY_UNAVAILABLE")


def is_transient(exc: BaseException) -> bool:
    """A locked/busy database somewhere in the exception's chain."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = f"{type(e).__name__}: {e} {getattr(e, 'error_code', '')}"
        if any(m in text for m in TRANSIENT_MARKERS):
            return True
        e = e.__cause__ or e.__context__
    return False


class TrackingUnavailable(RuntimeError):
    """The tracking database stayed locked through every retry."""


class _RetryingClient:
    """An MlflowClient whose every method call is retried while the database is locked."""

    def __init__(self, client, attempts: int, max_wait_s: float, first_wait_s: float):
        self._client = client
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient), stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_exponential_jitter(multiplier=first_wait_s, max=max_wait_s, jitter=first_wait_s),
            before_sleep=lambda rs: log.info("MLflow database busy (%s); try %d again",
                                             rs.outcome.exception() if rs.outcome else None,
                                             rs.attempt_number + 1),
            reraise=True)

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                return self._retrying(attr, *args, **kwargs)
            except Exception as e:
                if is_transient(e):
                    raise TrackingUnavailable(f"MLflow {name}: still locked after retries: {e}") from e
                raise
        return call


class Tracker(dg.ConfigurableResource):
    tracking_uri: str = Field("", description="empty: $MLFLOW_TRACKING_URI, else "
                              "sqlite:///$DAGSTER_HOME/mlflow/mlflow.db")
    artifact_root: str = Field("", description="a folder or URI; empty: $DAGSTER_HOME/mlflow/artifacts for a "
                               "local store, the server's own artifact root for an http(s) tracking server")
    enabled: bool = True
    retry_attempts: int = Field(6, ge=1, description="tries of an MLflow call while its database is locked")
    retry_max_wait_s: float = Field(8.0, gt=0, description="longest pause between two tries")
    retry_first_wait_s: float = Field(0.25, gt=0, description="first pause (doubles each try, plus jitter)")
    settle_s: float = Field(1.0, ge=0, description="tracking server: wait after creating a shared (round) run "
                            "before looking for concurrent duplicates")

    _client: object = PrivateAttr(default=None)

    def uri(self) -> str:
        return (self.tracking_uri or settings().mlflow_tracking_uri
                or f"sqlite:///{under_home('mlflow') / 'mlflow.db'}")

    def is_server(self) -> bool:
        """A tracking server (http/https) rather than a store this process opens itself."""
        return urllib.parse.urlsplit(self.uri()).scheme in ("http", "https")

    def _sqlite_path(self) -> Path | None:
        uri = self.uri()
        return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None

    @contextlib.contextmanager
    def _creating(self):
        """Held while a run is looked up and created: a file lock beside a local SQLite store, so
        the step processes of this host do not both create the same run; nothing for a server
        (create-then-reconcile covers it, see _find_or_create)."""
        db = self._sqlite_path()
        if db is None:
            yield False
            return
        db.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(db.with_name(db.name + ".create.lock"), thread_local=False):
            yield True

    def artifact_location(self, topic: str) -> str | None:
        """Where a new topic experiment keeps its artifacts; None: the server decides."""
        if self.artifact_root:
            root = self.artifact_root
            return f"{root.rstrip('/')}/{topic}" if "://" in root else (Path(root) / topic).resolve().as_uri()
        if self.is_server():
            return None
        return (under_home("mlflow", "artifacts") / topic).as_uri()

    def client(self):
        if self._client is None:
            os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
            from mlflow.tracking import MlflowClient

            self._client = _RetryingClient(MlflowClient(tracking_uri=self.uri()), self.retry_attempts,
                                           self.retry_max_wait_s, self.retry_first_wait_s)
        return self._client

    def _skip(self, what: str, e: TrackingUnavailable) -> None:
        log.warning("MLflow %s not recorded, the work goes on: %s", what, e)

    def experiment_id(self, topic: str) -> str:
        c = self.client()
        name = f"researchloop/{topic}"
        exp = c.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        try:
            return c.create_experiment(name, artifact_location=self.artifact_location(topic))
        except TrackingUnavailable:
            raise
        except Exception:  # noqa: BLE001 (created concurrently by another step: look it up)
            return c.get_experiment_by_name(name).experiment_id

    def _find_or_create(self, topic: str, tags: dict[str, str], run_name: str,
                        parent_id: str | None = None, shared: bool = False) -> str:
        c = self.client()
        exp = self.experiment_id(topic)
        flt = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())

        def oldest() -> tuple[str, bool] | None:
            """The run every writer agrees on when duplicates exist: the oldest one already
            handed out (marked settled), else the oldest (start time, then id); and whether it
            is settled."""
            found = c.search_runs([exp], filter_string=flt, max_results=50, order_by=["attributes.start_time ASC"])
            settled = [r for r in found if r.data.tags.get(SETTLED_TAG) == "yes"]
            if not found:
                return None
            return min(settled or found, key=lambda r: (r.info.start_time or 0, r.info.run_id)).info.run_id, \
                bool(settled)

        run_id, latency = None, 0.0
        with self._creating() as locked:
            if (existing := oldest()) is not None and (existing[1] or locked or not shared):
                return existing[0]
            if existing is None:
                all_tags = dict(tags)
                if parent_id:
                    all_tags["mlflow.parentRunId"] = parent_id
                t0 = time.monotonic()
                run_id = c.create_run(exp, tags=all_tags, run_name=run_name).info.run_id
                latency = time.monotonic() - t0
                if locked or not shared:
                    return run_id
        # no lock across hosts: a shared run found young (not yet settled) or just created may
        # have racers. Once every racer's create has landed (settle_s, or 3x this create's
        # latency on a slow server), look again; every writer keeps the same run, marks it
        # settled, and a writer whose run lost deletes it
        time.sleep(max(self.settle_s, 3 * latency))
        keep, settled = oldest() or (run_id, False)
        if not settled:
            # a racer whose create landed after this look, but whose start time (its own clock)
            # is older, adopts the marked run instead of winning by start time
            try:
                c.set_tag(keep, SETTLED_TAG, "yes")
            except TrackingUnavailable:
                raise
            except Exception as e:  # noqa: BLE001 (marked by a racer at the same moment)
                log.debug("MLflow run %s: settled mark not set (%s)", keep, e)
        if run_id is not None and keep != run_id:
            log.info("MLflow run %s duplicated %s (created concurrently); keeping the older one", run_id, keep)
            c.delete_run(run_id)
        return cast(str, keep)  # a run id: run_id or one oldest() found

    def _log_values(self, run_id: str, params: dict, metrics: dict) -> None:
        """Params and numeric metrics in as few requests as MLflow's batch limits allow."""
        from mlflow.entities import Metric, Param

        ps = [Param(str(k), str(v)[:MAX_PARAM_CHARS]) for k, v in params.items()]
        now = int(time.time() * 1000)
        ms = [Metric(str(k), float(v), now, 0) for k, v in metrics.items()
              if isinstance(v, (int, float))]
        c = self.client()
        for i in range(0, len(ps), MAX_PARAMS_PER_BATCH):
            c.log_batch(run_id, params=ps[i:i + MAX_PARAMS_PER_BATCH])
        for i in range(0, len(ms), MAX_METRICS_PER_BATCH):
            c.log_batch(run_id, metrics=ms[i:i + MAX_METRICS_PER_BATCH])

    def round_run(self, topic: str, round_key: str) -> str | None:
        if not self.enabled:
            return None
        try:
            return self._find_or_create(topic, {"researchloop.topic": topic, "researchloop.round": round_key,
                                                "researchloop.kind": "round"}, f"{topic} {round_key}",
                                       shared=True)
        except TrackingUnavailable as e:
            self._skip(f"round run {topic} {round_key}", e)
            return None

    def log_run(self, topic: str, run_name: str, tags: dict[str, str], params: dict, metrics: dict,
                texts: dict[str, str], parent_id: str | None = None, failed: bool = False) -> str | None:
        """Create (or reuse, by tags) a run, log params/metrics/text artifacts, close it. None
        when tracking is off or its database stayed locked."""
        if not self.enabled:
            return None
        try:
            c = self.client()
            run_id = self._find_or_create(topic, {"researchloop.topic": topic, **tags}, run_name, parent_id)
            self._log_values(run_id, params, metrics)
            for name, text in texts.items():
                if text:
                    c.log_text(run_id, text, name)
            c.set_terminated(run_id, status="FAILED" if failed else "FINISHED")
            return run_id
        except TrackingUnavailable as e:
            self._skip(f"run {run_name!r}", e)
            return None

    def log_image(self, run_id: str | None, name: str, png: bytes) -> None:
        """A PNG as an artifact of a run (e.g. the topic's progress plot on the round's run)."""
        if run_id is None:
            return
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / name
            f.write_bytes(png)
            try:
                self.client().log_artifact(run_id, str(f))
            except TrackingUnavailable as e:
                self._skip(f"image {name}", e)

    def close_round(self, run_id: str | None, metrics: dict) -> None:
        if run_id is None:
            return
        try:
            c = self.client()
            for k, v in metrics.items():
                if isinstance(v, (int, float)):
                    c.log_metric(run_id, k, float(v))
            c.set_terminated(run_id, status="FINISHED")
        except TrackingUnavailable as e:
            self._skip(f"round close {run_id}", e)
