"""The Dagster code location: `pipelines.definitions:defs`."""
from __future__ import annotations

import os

import dagster as dg

from assets import ALL_ASSETS
from assets.run_results.defs import STEP_IO
from pipelines.jobs import research_round_job, topic_setup_job
from pipelines.schedules import literature_refresh_schedule, refresh_literature
from pipelines.sensors import round_sensor, topic_sensor
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from resources.local_llm import LocalLLM
from resources.runner import Runner
from resources.store import RecordIOManager, record_store
from resources.tracker import Tracker


def build_resources(resolved: bool = False) -> dict:
    """The resources, configured from the environment. In the code location, set variables
    become dg.EnvVar (the UI shows where a value came from); `resolved=True` gives plain values
    for code that uses the resources outside a run (the CLI)."""

    def _env(name: str, default: str = ""):
        if not os.environ.get(name):
            return default
        return os.environ[name] if resolved else dg.EnvVar(name)

    local = LocalLLM(model=os.environ.get("RESEARCHLOOP_LOCAL_MODEL", "qwen2.5-coder-1.5b"))
    store = record_store()  # one record store: the IO manager and the stages reading earlier rounds
    return {
        "llm": LLM(base_url=_env("OPENAI_BASE_URL"), api_key=_env("OPENAI_API_KEY"),
                   model=_env("RESEARCHLOOP_MODEL"), edit_format=_env("RESEARCHLOOP_EDIT_FORMAT", "auto"),
                   local_llm=local),
        "embedder": Embedder(model=_env("RESEARCHLOOP_EMBEDDER")),
        "literature": Literature(source=_env("RESEARCHLOOP_LITERATURE", "corpus"), corpus=_env("RESEARCHLOOP_CORPUS"),
                                 categories=_env("RESEARCHLOOP_CATEGORIES")),
        "runner": Runner(),  # sandboxed unless RESEARCHLOOP_UNSANDBOXED=1, read at each run (not config)
        "tracker": Tracker(tracking_uri=_env("MLFLOW_TRACKING_URI")),
        "store": store, "io_manager": RecordIOManager(store=store),
        STEP_IO: dg.FilesystemIOManager(),  # per-idea step outputs, under the instance's storage
    }


defs = dg.Definitions(
    assets=ALL_ASSETS,
    jobs=[topic_setup_job, research_round_job, refresh_literature],
    schedules=[literature_refresh_schedule],
    sensors=[topic_sensor, round_sensor],
    resources=build_resources(),
)


def research_round() -> dg.JobDefinition:
    """The round job, resolved: `dg.reconstructable(research_round)` lets the CLI run it with the
    multiprocess executor (per-idea steps in parallel) outside `dagster dev`."""
    return defs.get_job_def("research_round")

