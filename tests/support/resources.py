"""The Dagster resources a test materialises assets with, the small local model's name and the
threads a test's local server gets."""
import os

SMALL_MODEL = "qwen2.5-coder-0.5b"

# Under pytest-xdist the workers share the cores: a local LLM server a test starts gets its share
# of them (a server whose two threads fight another worker's busy core decodes many times slower).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
LLM_THREADS = max(1, min(2, (os.cpu_count() or 2) // WORKERS))


def make_resources(base_url: str, model: str = "fake-model") -> dict:
    import dagster as dg

    from assets.run_results.defs import STEP_IO
    from resources.embedder import Embedder
    from resources.literature import Literature
    from resources.llm import LLM
    from resources.runner import Runner
    from resources.store import RecordIOManager, RecordStore
    from resources.tracker import Tracker

    return {
        "llm": LLM(base_url=base_url, api_key="sk-test", model=model, edit_format="whole", max_retries=1),
        "embedder": Embedder(), "literature": Literature(), "runner": Runner(), "tracker": Tracker(),
        "store": RecordStore(), "io_manager": RecordIOManager(store=RecordStore()), STEP_IO: dg.FilesystemIOManager(),
    }
