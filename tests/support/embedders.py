"""An embedder that counts what it embeds."""
from __future__ import annotations

import re
import zlib

import numpy as np


class CountingEmbedder:
    """A tiny bag-of-words embedder (hashed into 64 dims) that counts what it encodes."""

    def __init__(self):
        self.calls: list[int] = []

    def model_id(self) -> str:
        return "fake-bow-64"

    def encode(self, texts):
        self.calls.append(len(texts))
        vecs = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w\w+", t.lower()):
                vecs[i, zlib.crc32(w.encode()) % 64] += 1.0
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
