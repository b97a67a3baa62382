"""The Dagster resources a test materialises assets with, and the small local model's name."""

SMALL_MODEL = "qwen2.5-coder-0.5b"


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
