import os
import shutil
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tests.support.resources import LLM_THREADS, SMALL_MODEL, WORKERS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Under pytest-xdist a local LLM server gets its share of the cores (LLM_THREADS) and waits
# passively, so its threads do not spin against another worker's experiment.
if WORKERS > 1:
    os.environ.setdefault("RESEARCHLOOP_LLM_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def shared_index(tmp_path_factory) -> Path:
    """One literature index folder for the session: the shipped corpus is embedded by the first
    test that searches it and read by the others (RESEARCHLOOP_INDEX_DIR; a build is locked).
    Under pytest-xdist every worker has its own basetemp below one shared root: the folder sits
    in that root, so the workers share one index too."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        d = tmp_path_factory.getbasetemp().parent / "literature_index"
        d.mkdir(exist_ok=True)
        return d
    return tmp_path_factory.mktemp("literature_index")


@pytest.fixture
def home(tmp_path, monkeypatch, shared_index):
    """A private DAGSTER_HOME and experiments root holding the toy topic; the literature index is
    the session's shared one."""
    dh = tmp_path / "dagster_home"
    dh.mkdir()
    ex = tmp_path / "experiments"
    shutil.copytree(FIXTURES / "toy_classification", ex / "toy_classification")
    monkeypatch.setenv("DAGSTER_HOME", str(dh))
    monkeypatch.setenv("RESEARCHLOOP_EXPERIMENTS", str(ex))
    monkeypatch.setenv("RESEARCHLOOP_INDEX_DIR", str(shared_index))
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RESEARCHLOOP_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


@pytest.fixture
def fake_llm():
    from tests.support.fake_llm import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


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
    res = ll.LocalLLM(model=SMALL_MODEL, cache_dir=str(cache), ctx_size=8192, threads=LLM_THREADS)
    yield res
    ll.stop_server(cache)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder for a sandboxed run."""
    d = tmp_path / "ws"
    d.mkdir()
    return d


def pytest_collection_modifyitems(config, items):
    """Files that hold a slow test run first (the order is otherwise kept): pytest-xdist hands the
    files out in this order (make test passes --no-loadscope-reorder), so the long ones start at
    once on their own workers and the many short files fill in around them, instead of a long
    file starting last and running alone at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
