"""Configuration from the environment, in one place: `Settings` has one field per variable the
project reads, under the names users already export (RESEARCHLOOP_*, plus OPENAI_BASE_URL,
OPENAI_API_KEY, MLFLOW_TRACKING_URI and the literature services' SEMANTIC_SCHOLAR_API_KEY /
OPENALEX_MAILTO). `settings()` reads the environment each time it is called (cheap), so a
variable changed by a test or by the CLI is seen at once.

Secrets (`openai_api_key`, `semantic_scholar_api_key`) are `SecretStr`: they print as '**********'
and never go into a resource's config; in the Dagster code location they are `dg.EnvVar`s, and
outside a run the resources read them from the environment when they use them.

The LLM endpoint is decided by the environment (`OPENAI_BASE_URL`; empty: the embedded local
server), not by run config: `llm_endpoint` refuses a configured URL that differs from it (for
example one typed into the UI launchpad), so a run cannot quietly send prompts or the API key to
another server. Without OPENAI_BASE_URL and without an API key, a loopback URL
(127.0.0.1/localhost: a server on this machine, such as the tests' fake endpoint) is accepted.
"""
from __future__ import annotations

import functools
import os
import urllib.parse
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class Settings(BaseSettings):
    """Every environment variable researchloop reads. Unset or empty means the default."""

    model_config = SettingsConfigDict(env_prefix="RESEARCHLOOP_", case_sensitive=False, extra="ignore",
                                      env_ignore_empty=True, populate_by_name=True, frozen=True)

    # -- the LLM ------------------------------------------------------------------------------
    openai_base_url: str = Field("", validation_alias=AliasChoices("OPENAI_BASE_URL"),
                                 description="an OpenAI-compatible endpoint; empty: the embedded local server")
    openai_api_key: SecretStr = Field(SecretStr(""), validation_alias=AliasChoices("OPENAI_API_KEY"),
                                      description="the endpoint's key (secret; the local server needs none)")
    model: str = Field("", description="RESEARCHLOOP_MODEL: the model name at the endpoint; empty: the "
                       "local model's name, or gpt-4o-mini for a remote endpoint")
    local_model: str = Field("qwen2.5-coder-1.5b", description="RESEARCHLOOP_LOCAL_MODEL: "
                             "qwen2.5-coder-1.5b | qwen2.5-coder-0.5b")
    edit_format: str = Field("auto", description="RESEARCHLOOP_EDIT_FORMAT: auto | whole | search_replace | functions")
    cache: str = Field("", description="RESEARCHLOOP_CACHE: where model files and the local server's state "
                       "live; empty: ~/.cache/researchloop")
    llm_wait_policy: str = Field("", description="RESEARCHLOOP_LLM_WAIT_POLICY: OMP_WAIT_POLICY of the local "
                                 "server (ACTIVE | PASSIVE); empty: ACTIVE with a bounded spin count")
    # one thread decodes: llama.cpp's threads meet at spinning barriers, so beside any other busy process
    # (an experiment, a step starting, another loop) a two-thread decode collapses, where one thread keeps
    # its pace; prompts, read in batches, keep all threads (bench/results/slots.md)
    llm_decode_threads: int = Field(1, ge=0, description="RESEARCHLOOP_LLM_DECODE_THREADS: threads the local "
                                    "server decodes answers with (prompts are read with all its threads); 0: all")
    llm_kv_unified: bool = Field(False, description="RESEARCHLOOP_LLM_KV_UNIFIED=1: the local server's slots share "
                                 "one KV cache, and a prompt an idle slot holds is kept in host memory where a "
                                 "request on any slot can take up its prefix")
    llm_speculative: str = Field("", description="RESEARCHLOOP_LLM_SPECULATIVE: the local server's "
                                 "speculative decoding (none | ngram_simple | ngram_mod | ngram_map_k); empty: the "
                                 "default (resources/local_llm/server.py DEFAULT_SPECULATIVE)")
    llm_slots: int = Field(2, ge=1, description="RESEARCHLOOP_LLM_SLOTS: requests the local server decodes at "
                           "once (llama.cpp's parallel slots); its context is this many times the per-request "
                           "window, so each request keeps the whole window")
    # host-wide limits per endpoint, shared by every process on this machine (resources/llm_limits.py)
    llm_max_concurrency: int | None = Field(None, ge=1, description="RESEARCHLOOP_LLM_MAX_CONCURRENCY: LLM "
                                            "requests in flight from this host to one endpoint; unset: no bound")
    llm_rpm: float | None = Field(None, gt=0, description="RESEARCHLOOP_LLM_RPM: LLM requests per minute from "
                                  "this host to one endpoint (starts spaced 60/rpm s apart); unset: no limit")
    # one request (resources/llm.py): a silent endpoint holds a call for at most timeout x (retries + 1); the
    # timeout leaves room for the local CPU model's longest answer (a whole file) while it waits behind other
    # requests on its one slot, and one retry only, since a local server goes on decoding an abandoned request
    llm_timeout_s: float = Field(600.0, gt=0, description="RESEARCHLOOP_LLM_TIMEOUT_S: seconds one LLM request "
                                 "may wait for its answer before it is retried or fails")
    llm_transport_retries: int = Field(1, ge=0, description="RESEARCHLOOP_LLM_TRANSPORT_RETRIES: retries of an LLM "
                                       "request that timed out or got 408/409/429/5xx, by the openai client")

    # -- literature and embeddings -------------------------------------------------------------
    literature: str = Field("corpus", description="RESEARCHLOOP_LITERATURE: corpus | dump | semantic_scholar "
                            "| openalex (a topic.yaml `literature:` section wins for its topic)")
    corpus: str = Field("", description="RESEARCHLOOP_CORPUS: the corpus or dump file; empty: the shipped corpus")
    categories: str = Field("", description="RESEARCHLOOP_CATEGORIES: arXiv categories to keep, comma-separated")
    embedder: str = Field("", description="RESEARCHLOOP_EMBEDDER: a sentence-transformers name or path; "
                          "empty: the bundled all-MiniLM-L6-v2")
    index_dir: str = Field("", description="RESEARCHLOOP_INDEX_DIR: the folder of the literature indexes (the "
                           "corpus's or a dump's embeddings, keyed by file and embedder); several homes may share "
                           "one (a build is locked, a finished index is only read); empty: $DAGSTER_HOME/index")
    embed_workers: int = Field(1, ge=1, description="RESEARCHLOOP_EMBED_WORKERS: chunks of a dump embedded at "
                               "once while its index is built (local backend: spawned processes, each loading "
                               "the embedder; RESEARCHLOOP_BACKEND=ray: Ray tasks); 1: one after another in the step")
    embed_ray_cpus: float = Field(1.0, gt=0, description="RESEARCHLOOP_EMBED_RAY_CPUS: CPUs one embedding task "
                                  "asks Ray for (also its torch threads)")
    semantic_scholar_api_key: SecretStr = Field(SecretStr(""), validation_alias=AliasChoices(
        "SEMANTIC_SCHOLAR_API_KEY"), description="optional Semantic Scholar key (secret)")
    openalex_mailto: str = Field("", validation_alias=AliasChoices("OPENALEX_MAILTO"),
                                 description="optional contact address for OpenAlex's polite pool")

    # -- running experiments -------------------------------------------------------------------
    max_parallel: int | None = Field(None, ge=1, description="RESEARCHLOOP_MAX_PARALLEL: experiments at once; "
                                     "unset: one per GPU, else one per core")
    unsandboxed: bool = Field(False, description="RESEARCHLOOP_UNSANDBOXED=1 runs experiments without "
                              "bubblewrap (only where it cannot run)")
    experiments: str = Field("", description="RESEARCHLOOP_EXPERIMENTS: the folder of topics; "
                             "empty: the repo's experiments/")
    sandbox_ro: str = Field("", description="RESEARCHLOOP_SANDBOX_RO: extra host folders the sandbox may "
                            "read (os.pathsep-separated); read by the sandbox (resources/sandbox/bwrap.py)")

    # -- the Ray experiment backend (resources/ray_backend.py; Ray itself reads RAY_ADDRESS) ---------
    # a topic.yaml `execution:` block (backend, cpus, gpus, resources) wins over these for its topic
    backend: str = Field("local", pattern="^(local|ray)$", description="RESEARCHLOOP_BACKEND: local (a sandboxed "
                         "subprocess in the step) | ray (each attempt a Ray task, same sandbox on the worker)")
    ray_cpus: float = Field(1.0, ge=0, description="RESEARCHLOOP_RAY_CPUS: CPUs one attempt asks Ray for")
    ray_gpus: float = Field(0.0, ge=0, description="RESEARCHLOOP_RAY_GPUS: GPUs one attempt asks Ray for")
    ray_resources: str = Field("", description="RESEARCHLOOP_RAY_RESOURCES: custom Ray resources one attempt "
                               "asks for, e.g. 'gpu_slot=1,a100=1'")
    ray_retries: int = Field(2, ge=0, description="RESEARCHLOOP_RAY_RETRIES: re-runs of an attempt whose "
                             "worker was lost (Ray's max_retries)")
    ray_wait_s: float = Field(3600.0, gt=0, description="RESEARCHLOOP_RAY_WAIT_S: how long an attempt may "
                              "queue for a worker, on top of its run time, before it fails")
    ray_return_mb: int = Field(64, ge=1, description="RESEARCHLOOP_RAY_RETURN_MB: the most file bytes one "
                               "attempt sends back (changed and new files; logs are tail-capped apart)")
    ray_scratch: str = Field("", description="RESEARCHLOOP_RAY_SCRATCH: where a worker unpacks workspaces "
                             "(read on the worker); empty: its temp folder")

    # -- storage and UI ------------------------------------------------------------------------
    mlflow_tracking_uri: str = Field("", validation_alias=AliasChoices("MLFLOW_TRACKING_URI"),
                                     description="empty: sqlite:///$DAGSTER_HOME/mlflow/mlflow.db")
    dagster_home: str = Field("", validation_alias=AliasChoices("DAGSTER_HOME"),
                              description="where Dagster and researchloop keep everything; empty: ./dagster_home")
    ui_port: int = Field(3000, description="RESEARCHLOOP_UI_PORT: the port of `make ui`")
    sensors: bool = Field(False, description="RESEARCHLOOP_SENSORS=1 (or `python -m pipelines.ui --sensors`) "
                          "starts the topic and round sensors with the UI; unset, they are off until turned on "
                          "in the UI")
    # RESEARCHLOOP_PG_HOST/PORT/USER/PASSWORD/DB are read by Dagster itself from dagster_home/dagster.yaml.

    @field_validator("max_parallel", mode="before")
    @classmethod
    def _whole_number(cls, v):
        if isinstance(v, str):
            v = v.strip()
            if not v:
                return None
            try:
                return max(1, int(v))
            except ValueError:
                raise ValueError(f"RESEARCHLOOP_MAX_PARALLEL must be a whole number, not {v!r}") from None
        return v

    @field_validator("unsandboxed", "sensors", mode="before")
    @classmethod
    def _only_one_means_yes(cls, v):
        """Only the documented value '1' switches these on (a typo keeps the sandbox on and the
        sensors off)."""
        return v.strip() == "1" if isinstance(v, str) else bool(v)

    def cache_dir(self) -> Path:
        return Path(self.cache).expanduser() if self.cache else Path.home() / ".cache" / "researchloop"


_NAMES = ("RESEARCHLOOP_", "OPENAI_BASE_URL", "OPENAI_API_KEY", "MLFLOW_TRACKING_URI", "SEMANTIC_SCHOLAR_API_KEY",
          "OPENALEX_MAILTO", "DAGSTER_HOME")


@functools.lru_cache(maxsize=16)
def _settings_for(_env: tuple[tuple[str, str], ...]) -> Settings:
    return Settings()


def settings() -> Settings:
    """The settings as the environment says now (parsed again only when one of its variables
    changed)."""
    return _settings_for(tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(_NAMES))))


class EndpointNotAllowed(ValueError):
    """A configured LLM endpoint that the environment did not choose."""


def _loopback(url: str) -> bool:
    return (urllib.parse.urlsplit(url).hostname or "") in LOOPBACK_HOSTS


def llm_endpoint(configured: str = "", env: Settings | None = None) -> str:
    """The LLM base URL to use: the environment's OPENAI_BASE_URL ("" = the embedded local
    server). A configured URL (resource config, e.g. from run config) must agree with it; where
    the environment names none and holds no API key, a loopback URL is also accepted. Anything
    else raises EndpointNotAllowed instead of silently talking to another server."""
    env = env or settings()
    chosen = env.openai_base_url.rstrip("/")
    asked = (configured or "").rstrip("/")
    if not asked or asked == chosen:
        return chosen
    if not chosen and not env.openai_api_key.get_secret_value() and _loopback(asked):
        return asked
    raise EndpointNotAllowed(
        f"the LLM endpoint is decided by OPENAI_BASE_URL in the code location's environment "
        f"({chosen or 'unset: the local server'}); the resource config asked for {asked!r}. "
        "Change the environment and restart, not the run config.")
