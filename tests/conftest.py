import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private DAGSTER_HOME and experiments root holding the toy topic."""
    dh = tmp_path / "dagster_home"
    dh.mkdir()
    ex = tmp_path / "experiments"
    shutil.copytree(FIXTURES / "toy_classification", ex / "toy_classification")
    monkeypatch.setenv("DAGSTER_HOME", str(dh))
    monkeypatch.setenv("RESEARCHLOOP_EXPERIMENTS", str(ex))
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RESEARCHLOOP_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


@pytest.fixture
def fake_llm():
    from tests.fake_llm import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


SMALL_MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture
def local_llm(tmp_path):
    """A private local server with the small model (slow tests); the GGUF is linked from the
    shared model cache."""
    import resources.local_llm as ll

    model = ll.assemble_model(SMALL_MODEL, progress=False)
    cache = tmp_path / "llm"
    (cache / "models").mkdir(parents=True)
    for p in (model, model.with_name(model.name + ".sha256ok")):
        (cache / "models" / p.name).symlink_to(p)
    res = ll.LocalLLM(model=SMALL_MODEL, cache_dir=str(cache), ctx_size=8192)
    yield res
    ll.stop_server(cache)


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


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder for a sandboxed run."""
    d = tmp_path / "ws"
    d.mkdir()
    return d
