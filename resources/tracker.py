"""`tracker`: MLflow with a SQLite backend and an explicit artifact root under dagster_home/.
One MLflow experiment per topic; a parent run per topic x round with a nested run per idea
(and one run for the baseline). mlflow is imported on first use."""
from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field, PrivateAttr

from resources.paths import under_home


class Tracker(dg.ConfigurableResource):
    tracking_uri: str = Field("", description="empty: sqlite:///$DAGSTER_HOME/mlflow/mlflow.db")
    artifact_root: str = Field("", description="empty: $DAGSTER_HOME/mlflow/artifacts")
    enabled: bool = True

    _client: object = PrivateAttr(default=None)

    def uri(self) -> str:
        return self.tracking_uri or f"sqlite:///{under_home('mlflow') / 'mlflow.db'}"

    def client(self):
        if self._client is None:
            os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri())
        return self._client

    def experiment_id(self, topic: str) -> str:
        c = self.client()
        name = f"researchloop/{topic}"
        exp = c.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        root = Path(self.artifact_root) if self.artifact_root else under_home("mlflow", "artifacts")
        try:
            return c.create_experiment(name, artifact_location=(root / topic).as_uri())
        except Exception:  # created concurrently by another step
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
        return self._find_or_create(topic, {"researchloop.topic": topic, "researchloop.round": round_key,
                                            "researchloop.kind": "round"}, f"{topic} {round_key}")

    def log_run(self, topic: str, run_name: str, tags: dict[str, str], params: dict, metrics: dict,
                texts: dict[str, str], parent_id: str | None = None, failed: bool = False) -> str | None:
        """Create (or reuse, by tags) a run, log params/metrics/text artifacts, close it."""
        if not self.enabled:
            return None
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

    def log_image(self, run_id: str | None, name: str, png: bytes) -> None:
        """A PNG as an artifact of a run (e.g. the topic's progress plot on the round's run)."""
        if run_id is None:
            return
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / name
            f.write_bytes(png)
            self.client().log_artifact(run_id, str(f))

    def close_round(self, run_id: str | None, metrics: dict) -> None:
        if run_id is None:
            return
        c = self.client()
        for k, v in metrics.items():
            if isinstance(v, (int, float)):
                c.log_metric(run_id, k, float(v))
        c.set_terminated(run_id, status="FINISHED")
