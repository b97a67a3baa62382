"""Configuration: one Settings model read from the environment under the names users already
export; secrets never stored in Dagster's run storage (run config, job snapshot, anything under
DAGSTER_HOME); the LLM endpoint decided by the environment, not by run config."""
from __future__ import annotations

import json

import dagster as dg
import pytest

from resources.llm import LLM
from resources.settings import EndpointNotAllowed, Settings, llm_endpoint, settings

CANARY = "sk-canary-7f3a9c1e55"


def test_every_variable_keeps_its_name(monkeypatch):
    env = {"OPENAI_BASE_URL": "http://api.example/v1", "OPENAI_API_KEY": CANARY, "RESEARCHLOOP_MODEL": "m",
           "RESEARCHLOOP_LOCAL_MODEL": "qwen2.5-coder-0.5b", "RESEARCHLOOP_EDIT_FORMAT": "whole",
           "RESEARCHLOOP_CACHE": "/c", "RESEARCHLOOP_LLM_WAIT_POLICY": "PASSIVE", "RESEARCHLOOP_LITERATURE": "dump",
           "RESEARCHLOOP_CORPUS": "/p.jsonl", "RESEARCHLOOP_CATEGORIES": "cs.CV", "RESEARCHLOOP_EMBEDDER": "e",
           "SEMANTIC_SCHOLAR_API_KEY": "s2", "OPENALEX_MAILTO": "a@b.org", "RESEARCHLOOP_MAX_PARALLEL": "3",
           "RESEARCHLOOP_UNSANDBOXED": "1", "RESEARCHLOOP_EXPERIMENTS": "/x", "MLFLOW_TRACKING_URI": "sqlite:///m.db",
           "DAGSTER_HOME": "/dh", "RESEARCHLOOP_UI_PORT": "3111", "RESEARCHLOOP_SANDBOX_RO": "/a:/b"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = settings()
    assert (s.openai_base_url, s.openai_api_key.get_secret_value(), s.model, s.local_model, s.edit_format) == \
        ("http://api.example/v1", CANARY, "m", "qwen2.5-coder-0.5b", "whole")
    assert (s.cache, s.llm_wait_policy, s.literature, s.corpus, s.categories, s.embedder) == \
        ("/c", "PASSIVE", "dump", "/p.jsonl", "cs.CV", "e")
    assert (s.semantic_scholar_api_key.get_secret_value(), s.openalex_mailto, s.max_parallel, s.unsandboxed) == \
        ("s2", "a@b.org", 3, True)
    assert (s.experiments, s.mlflow_tracking_uri, s.dagster_home, s.ui_port, s.sandbox_ro) == \
        ("/x", "sqlite:///m.db", "/dh", 3111, "/a:/b")
    assert CANARY not in repr(s) and CANARY not in str(s.model_dump())       # secrets print masked
    monkeypatch.setenv("RESEARCHLOOP_UNSANDBOXED", "yes")                    # only "1" switches it off
    monkeypatch.setenv("RESEARCHLOOP_MAX_PARALLEL", "")                      # empty = unset
    assert settings().unsandboxed is False and settings().max_parallel is None
    monkeypatch.setenv("RESEARCHLOOP_MAX_PARALLEL", "many")
    with pytest.raises(ValueError, match="RESEARCHLOOP_MAX_PARALLEL must be a whole number"):
        settings()


def test_defaults_without_environment(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("RESEARCHLOOP_") or k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MLFLOW_TRACKING_URI"):
            monkeypatch.delenv(k)
    s = settings()
    assert (s.literature, s.local_model, s.edit_format, s.max_parallel, s.unsandboxed) == \
        ("corpus", "qwen2.5-coder-1.5b", "auto", None, False)
    assert s.model_fields_set <= {"dagster_home", "semantic_scholar_api_key", "openalex_mailto"}


def test_llm_endpoint_is_the_environments():
    remote = Settings(openai_base_url="https://api.example/v1", openai_api_key="sk-1")
    assert llm_endpoint("", remote) == "https://api.example/v1"
    assert llm_endpoint("https://api.example/v1/", remote) == "https://api.example/v1"
    with pytest.raises(EndpointNotAllowed, match="decided by OPENAI_BASE_URL"):
        llm_endpoint("https://collector.example/v1", remote)           # the key would go there
    with pytest.raises(EndpointNotAllowed):
        llm_endpoint("http://127.0.0.1:8000/v1", remote)               # not even a local one, with a key set
    local = Settings()
    assert llm_endpoint("", local) == ""                                # the embedded server
    assert llm_endpoint("http://127.0.0.1:8000/v1", local) == "http://127.0.0.1:8000/v1"
    with pytest.raises(EndpointNotAllowed):
        llm_endpoint("https://collector.example/v1", local)


def test_launchpad_cannot_point_the_llm_elsewhere(home, fake_llm, monkeypatch):
    """A run whose config sets llm.base_url to another server fails before any request is sent."""
    from assets import ALL_ASSETS
    from pipelines.definitions import build_resources

    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("RESEARCHLOOP_MODEL", "fake-model")
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("topics", ["toy_classification"])
    n_before = len(fake_llm.requests) if hasattr(fake_llm, "requests") else None
    res = dg.materialize(ALL_ASSETS, selection=["topic_brief"], partition_key="toy_classification", instance=instance,
                         resources=build_resources(),
                         run_config={"resources": {"llm": {"config": {"base_url": "http://127.0.0.1:9/v1"}}}},
                         raise_on_error=False)
    assert not res.success
    errors = [str(e.step_failure_data.error) for e in res.all_events if e.is_step_failure]
    assert any("decided by OPENAI_BASE_URL" in e for e in errors), errors
    if n_before is not None:
        assert len(fake_llm.requests) == n_before


def test_a_resolved_key_would_be_in_the_job_snapshot():
    """The check below can fail: a key put into a resource's config lands in the job snapshot
    (as the default of the resource's config), which Dagster stores with every run."""
    from dagster._core.snap import JobSnap
    from dagster._serdes import serialize_value

    @dg.asset
    def uses_llm(llm: LLM):
        return 1

    def snapshot(llm: LLM) -> str:
        defs = dg.Definitions(assets=[uses_llm], resources={"llm": llm}, jobs=[dg.define_asset_job("j")])
        return serialize_value(JobSnap.from_job_def(defs.get_job_def("j")))

    assert CANARY in snapshot(LLM(api_key=CANARY))
    assert CANARY not in snapshot(LLM(api_key=dg.EnvVar("OPENAI_API_KEY")))


def _stored_bytes(root) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("resolved", [False, True])
def test_secrets_never_reach_run_storage(home, fake_llm, monkeypatch, resolved):
    """With the key in the environment, a real run (the code location's resources, and the
    resolved ones code outside a run uses) stores neither the key nor the other secrets: not in
    the run's config, not in the job snapshot, nowhere in DAGSTER_HOME's files."""
    from assets import ALL_ASSETS
    from pipelines.definitions import build_resources

    secrets = {"OPENAI_API_KEY": CANARY, "SEMANTIC_SCHOLAR_API_KEY": "s2-canary-91b2",
               "OPENALEX_MAILTO": "canary-83d1@example.org"}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("RESEARCHLOOP_MODEL", "fake-model")
    resources = build_resources(resolved=resolved)
    assert all(v not in repr(resources) for v in secrets.values())
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("topics", ["toy_classification"])
    res = dg.materialize(ALL_ASSETS, selection=["topic_brief"], partition_key="toy_classification",
                         instance=instance, resources=resources)
    assert res.success                                   # the key was used: the fake endpoint answered
    run = instance.get_run_by_id(res.run_id)
    snap = instance.get_job_snapshot(run.job_snapshot_id)
    from dagster._serdes import serialize_value

    stored = json.dumps(run.run_config) + serialize_value(snap)
    assert "OPENAI_API_KEY" in serialize_value(snap) or resolved   # the code location stores the name only
    instance.dispose()
    everything = stored.encode() + _stored_bytes(home / "dagster_home")
    for value in secrets.values():
        assert value.encode() not in everything
