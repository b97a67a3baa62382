"""The server's foreground launcher, run in its own process (``python -m resources.local_llm
serve``): xllamacpp until SIGTERM/SIGINT."""
from __future__ import annotations

import os
import signal
import threading
import time

from resources.local_llm.server import _GOMP_SPINCOUNT, _OMP_WAIT_POLICY


def serve(
    model: str,
    port: int,
    ctx_size: int = 8192,
    threads: int = 2,
    alias: str | None = None,
    parallel: int = 1,
    cache_ram_mib: int = 2048,
    speculative: str = "none",
    decode_threads: int = 0,
    kv_unified: bool = False,
) -> None:
    """Run the xllamacpp server in the foreground until SIGTERM/SIGINT."""
    os.environ.setdefault("OMP_WAIT_POLICY", _OMP_WAIT_POLICY)  # before libgomp loads
    os.environ.setdefault("GOMP_SPINCOUNT", _GOMP_SPINCOUNT)
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.n_ctx = ctx_size
    params.n_parallel = parallel
    params.cpuparams.n_threads = decode_threads or threads  # answers, one token at a time
    params.cpuparams_batch.n_threads = threads  # prompts, read in batches
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.cache_prompt = True  # reuse the KV cache of a shared prompt prefix
    params.cache_ram_mib = cache_ram_mib  # host-RAM prompt cache across different prompts
    # one KV buffer for all slots: an idle slot's prompt goes to the host-RAM cache when a request
    # comes (cache_idle_slots), so requests that start alike on other slots take up its prefix
    params.kv_unified = kv_unified
    params.cache_idle_slots = kv_unified
    params.warmup = True
    if alias:
        params.model_alias = {alias}
    if speculative != "none":
        kind = getattr(xlc.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{speculative.upper()}")
        params.speculative.types = [kind]

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()
        # Never hang on shutdown: hard exit if the native teardown stalls.
        threading.Timer(5.0, lambda: os._exit(0)).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t0 = time.monotonic()
    server = xlc.Server(params)
    print(
        f"[local_llm] serving {model} at {server.listening_address} "
        f"(ctx={ctx_size}, threads={threads}, decode threads={decode_threads or threads}, parallel={parallel}, "
        f"kv unified={kv_unified}, speculative={speculative}, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}) "
        f"loaded in {time.monotonic() - t0:.1f}s",
        flush=True,
    )
    while not stop.wait(1.0):
        pass
    del server
    print("[local_llm] stopped", flush=True)
    os._exit(0)
