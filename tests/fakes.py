"""Deterministic test doubles for the providers (never the product's defaults)."""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from core.text import tokenize


class HashEmbedder:
    """Bag-of-stems hashed into `dim` buckets, L2-normalised: lexical, deterministic, instant.
    Counts its encode calls so tests can assert cache behaviour."""

    def __init__(self, dim: int = 64, model_id: str = "fake-hash-64", languages: frozenset[str] | None = frozenset({"en"})):
        self.dim = dim
        self.model_id = model_id
        self.languages = languages
        self.encoded = 0
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.encoded += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in tokenize(t):
                h = int(hashlib.md5(tok.encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0 if (h >> 64) & 1 else -1.0
            n = np.linalg.norm(out[i])
            out[i] = out[i] / n if n else out[i]
            if not n:
                out[i, 0] = 1.0
        return out
