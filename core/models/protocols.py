"""The model layer's protocols: an Embedder (texts to vectors) and a TokenEncoder (its contextual token vectors)."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors. `model_id` goes on every stored vector."""

    model_id: str
    languages: frozenset[str] | None  # None: multilingual / unknown-but-broad

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class TokenEncoder(Protocol):
    """A transformer's tokenizer and forward pass: contextual token vectors of an embedder. `model_id` must equal the dense embedder's: late vectors
    are compared with its query vectors."""

    model_id: str
    window_tokens: int  # content tokens one forward pass can take (without special tokens)

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> list[np.ndarray]: ...


_ENGLISH_ONLY_HINTS = ("all-minilm", "all-mpnet", "msmarco", "ms-marco", "bge-small-en", "bge-base-en",
                       "bge-large-en", "e5-small-v2", "e5-base-v2", "gte-small", "gte-base")
_MULTILINGUAL_HINTS = ("multilingual", "bge-m3", "labse", "paraphrase-xlm", "distiluse")


def declared_languages(model_name: str) -> frozenset[str] | None:
    low = model_name.lower()
    if any(h in low for h in _MULTILINGUAL_HINTS):
        return None
    if any(h in low for h in _ENGLISH_ONLY_HINTS):
        return frozenset({"en"})
    return None
