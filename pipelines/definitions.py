"""The Dagster code location: `pipelines.definitions:defs`."""
from __future__ import annotations

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
from resources.settings import settings
from resources.store import RecordIOManager, record_store
from resources.tracker import Tracker


def build_resources(resolved: bool = False) -> dict:
    """The resources, configured from the environment (resources/settings.py `Settings`). In the
    code location, set variables become dg.EnvVar (the UI shows where a value came from);
    `resolved=True` gives plain values for code that uses the resources outside a run.

    Secrets (OPENAI_API_KEY, SEMANTIC_SCHOLAR_API_KEY, and the OpenAlex contact address) are never
    resolved into a resource's config, which would store them as defaults in every job snapshot
    and run: in the code location they are dg.EnvVar (the snapshot holds the variable's name), and
    with `resolved=True` they stay empty and the resources read the environment when they use them.
    The LLM endpoint is the environment's too: the LLM resource refuses a base_url from run
    config that differs from OPENAI_BASE_URL (resources/settings.py `llm_endpoint`)."""
    env = settings()

    def _env(name: str, field: str, default: str = ""):
        """The variable's value (resolved) or its dg.EnvVar, when it is set; else the default."""
        if field not in env.model_fields_set:
            return default
        return str(getattr(env, field)) if resolved else dg.EnvVar(name)

    def _secret(name: str, field: str):
        return dg.EnvVar(name) if field in env.model_fields_set and not resolved else ""

    local = LocalLLM(model=env.local_model)
    store = record_store()  # one record store: the IO manager and the stages reading earlier rounds
    return {
        "llm": LLM(base_url=_env("OPENAI_BASE_URL", "openai_base_url"),
                   api_key=_secret("OPENAI_API_KEY", "openai_api_key"),
                   model=_env("RESEARCHLOOP_MODEL", "model"),
                   edit_format=_env("RESEARCHLOOP_EDIT_FORMAT", "edit_format", "auto"), local_llm=local),
        "embedder": Embedder(model=_env("RESEARCHLOOP_EMBEDDER", "embedder")),
        "literature": Literature(source=_env("RESEARCHLOOP_LITERATURE", "literature", "corpus"),
                                 corpus=_env("RESEARCHLOOP_CORPUS", "corpus"),
                                 categories=_env("RESEARCHLOOP_CATEGORIES", "categories"),
                                 semantic_scholar_api_key=_secret("SEMANTIC_SCHOLAR_API_KEY",
                                                                  "semantic_scholar_api_key"),
                                 openalex_mailto=_secret("OPENALEX_MAILTO", "openalex_mailto")),
        "runner": Runner(),  # sandboxed unless RESEARCHLOOP_UNSANDBOXED=1, read at each run (not config)
        "tracker": Tracker(tracking_uri=_env("MLFLOW_TRACKING_URI", "mlflow_tracking_uri")),
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

