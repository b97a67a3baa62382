"""`tracker`: MLflow with a SQLite backend and an explicit artifact root under dagster_home/.
One MLflow experiment per topic; a parent run per topic x round with a nested run per idea
(and one run for the baseline). mlflow is imported on first use.

Tracking is a record of the work, not the work: several step processes write to one SQLite
file, and SQLite answers a writer that waits too long with "database is locked". Every MLflow
call is retried on that (and on MLflow's TEMPORARILY_UNAVAILABLE) with jittered exponential
backoff (`tenacity`); if the database stays locked, the tracker logs a warning and goes on
without a run id (as when tracking is disabled), so a finished experiment is never turned into a
failure by its bookkeeping. Other errors still raise."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import dagster as dg
import tenacity
from pydantic import Field, PrivateAttr

from resources.paths import under_home
from resources.settings import settings

log = logging.getLogger("researchloop.tracker")

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
            before_sleep=lambda rs: log.info("MLflow database busy (%s); try %d again", rs.outcome.exception(),
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
    artifact_root: str = Field("", description="empty: $DAGSTER_HOME/mlflow/artifacts")
    enabled: bool = True
    retry_attempts: int = Field(6, ge=1, description="tries of an MLflow call while its database is locked")
    retry_max_wait_s: float = Field(8.0, gt=0, description="longest pause between two tries")
    retry_first_wait_s: float = Field(0.25, gt=0, description="first pause (doubles each try, plus jitter)")

    _client: object = PrivateAttr(default=None)

    def uri(self) -> str:
        return (self.tracking_uri or settings().mlflow_tracking_uri
                or f"sqlite:///{under_home('mlflow') / 'mlflow.db'}")

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
        root = Path(self.artifact_root) if self.artifact_root else under_home("mlflow", "artifacts")
        try:
            return c.create_experiment(name, artifact_location=(root / topic).as_uri())
        except TrackingUnavailable:
            raise
        except Exception:  # noqa: BLE001 (created concurrently by another step: look it up)
            return c.get_experiment_by_name(name).experiment_id

    def _find_or_create(self, topic: str, tags: dict[str, str], run_name: str,
                        parent_id: str | None = None) -> str:
        c = self.client()
        exp = self.experiment_id(topic)
        flt = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        found = c.search_runs([exp], filter_string=flt, max_results=1)
        if found:
            return found[0].info.run_id
        all_tags = dict(tags)
        if parent_id:
            all_tags["mlflow.parentRunId"] = parent_id
        return c.create_run(exp, tags=all_tags, run_name=run_name).info.run_id

    def round_run(self, topic: str, round_key: str) -> str | None:
        if not self.enabled:
            return None
        try:
            return self._find_or_create(topic, {"researchloop.topic": topic, "researchloop.round": round_key,
                                                "researchloop.kind": "round"}, f"{topic} {round_key}")
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
            for k, v in params.items():
                c.log_param(run_id, k, str(v)[:6000])
            for k, v in metrics.items():
                if isinstance(v, (int, float)):
                    c.log_metric(run_id, k, float(v))
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
