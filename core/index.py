"""In-memory search indexes (BM25, dense) per workspace, rebuilt lazily when the store's corpus version moves."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.embed import EmbedStats, Embedder, embed_with_cache
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.dense import DenseIndex
from core.types import Chunk


def contextual_text(context: str | None, text: str) -> str:
    """The text a contextual variant indexes: its context, a blank line, then the untouched chunk."""
    return f"{context}\n\n{text}" if context else text


def variant_texts(store: Store, workspace: str, variant: str, chunks: Sequence[Chunk]) -> list[str]:
    """Texts to index for a variant: raw chunk text, or context + chunk where a context of that variant exists."""
    if variant in ("raw", "late"):
        return [c.text for c in chunks]
    # A long id list makes the IN-filter slower than reading the variant whole.
    ctx = store.contexts(variant, workspace, None if len(chunks) > 500 else [c.chunk_id for c in chunks])
    return [contextual_text(ctx.get(c.chunk_id), c.text) for c in chunks]


@dataclass
class _Entry:
    version: int
    key: tuple
    index: object


class IndexCache:
    """Holds one BM25 and one dense index per (workspace, variant, params/model). Safe to share across
    Streamlit sessions: a lock guards rebuilds, and built indexes are immutable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple, _Entry] = {}
        self.last_embed_stats: EmbedStats | None = None

    def bm25(self, store: Store, workspace: str, params: BM25Params, variant: str = "raw") -> BM25Index:
        """`variant` 'heuristic' / 'llm' indexes context + chunk; 'late' only changes vectors, so it reads raw text."""
        version = store.corpus_version(workspace)
        text_variant = "raw" if variant in ("raw", "late") else variant
        slot = ("bm25", workspace, text_variant)
        state = "" if text_variant == "raw" else store.context_state(text_variant, workspace)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry.version != version or entry.key != (params, state):
                chunks = store.chunks(workspace)
                texts = variant_texts(store, workspace, text_variant, chunks)
                index = BM25Index([c.chunk_id for c in chunks], texts, params)
                entry = _Entry(version, (params, state), index)
                self._entries[slot] = entry
            return entry.index  # type: ignore[return-value]

    def dense(self, store: Store, embedder: Embedder, workspace: str, variant: str = "raw") -> DenseIndex:
        """Vectors of the active model only; chunks that lack one (new model) are embedded (cache first) now.
        Contextual variants embed context + chunk; 'late' vectors are only made by late chunking (core.context),
        so chunks without one fall back to their raw vector."""
        with self._lock:
            return self._building.setdefault(slot, threading.Lock())

    def _store(self, slot: tuple, entry: _Entry) -> None:
        with self._lock:
            self._entries[slot] = entry

    def bm25(self, store: IndexSources, workspace: str, params: BM25Params, variant: str = "raw") -> BM25Index:
        """`variant` 'heuristic' / 'llm' indexes context + chunk; 'late' only changes vectors, so it reads raw text."""
        text_variant = "raw" if variant in ("raw", "late") else variant
        slot = ("bm25", workspace, text_variant)

        def stamp() -> tuple[int, tuple]:
            state = "" if text_variant == "raw" else store.ledger.context_state(text_variant, workspace)
            return store.corpus.corpus_version(workspace), (params, state)

        version, key = stamp()
        if (entry := self._fresh(slot, version, key)) is not None:
            return entry.index  # type: ignore[return-value]
        with self._build_lock(slot):
            # Stamped before the rows are read: a document committed meanwhile leaves this entry older than the
            # store, so the next call rebuilds instead of serving an index that lacks it.
            version, key = stamp()
            if (entry := self._fresh(slot, version, key)) is not None:
                return entry.index  # type: ignore[return-value]
            chunks = store.corpus.chunks(workspace)
            texts = variant_texts(store.ledger, workspace, text_variant, chunks)
            index = BM25Index([c.chunk_id for c in chunks], texts, params)
            self._store(slot, _Entry(version, key, index))
            return index

    def dense(self, store: IndexSources, embedder: Embedder, workspace: str, variant: str = "raw") -> DenseIndex:
        """Vectors of the active model only. Contextual variants hold context + chunk vectors; 'late' vectors are
        only made by late chunking (core.context), so chunks without one fall back to their raw vector. Chunks with
        no stored vector for the model (a new model, a context written after its vectors) are embedded cache-first
        in memory for this index and nothing is written: a query only reads. `unstored()` says how many; the
        build-time `backfill_vectors` stores them."""
        slot = ("dense", workspace, variant)

        def stamp() -> tuple[int, tuple]:
            if variant == "raw":
                state = ""
            elif variant == "late":
                state = str([tuple(m) for m in store.corpus.vector_models(workspace)
                             if m[0] == embedder.model_id and m[1] == "late"])
            else:
                state = store.ledger.context_state(variant, workspace)
            return store.corpus.corpus_version(workspace), (embedder.model_id, state)

        version, key = stamp()
        if (entry := self._fresh(slot, version, key)) is not None:
            return entry.index  # type: ignore[return-value]
        with self._build_lock(slot):
            version, key = stamp()  # before any row is read (see bm25)
            if (entry := self._fresh(slot, version, key)) is not None:
                return entry.index  # type: ignore[return-value]
            if variant == "late":
                raw = self.dense(store, embedder, workspace, "raw")  # another slot: its own build lock
                ids, matrix = store.corpus.vectors(embedder.model_id, "late", workspace)
                entry = _Entry(version, key, _with_fallback(embedder.model_id, ids, matrix, raw))
            else:
                entry = self._dense_rows(store, embedder, workspace, variant, version, key)
            self._store(slot, entry)
            return entry.index  # type: ignore[return-value]

    def _dense_rows(self, store: IndexSources, embedder: Embedder, workspace: str, variant: str, version: int,
                    key: tuple) -> _Entry:
        ids, matrix = store.corpus.vectors(embedder.model_id, variant, workspace)
        have = set(ids)
        missing = [c for c in store.corpus.chunks_missing_vectors(embedder.model_id, variant, workspace)
                   if c.chunk_id not in have]
        if missing:
            texts = variant_texts(store.ledger, workspace, variant, missing)
            vecs, stats = embed_with_cache(texts, embedder, store.caches, workspace, write=False)
            self.last_embed_stats = stats
            ids = list(ids) + [c.chunk_id for c in missing]
            matrix = vecs if not len(have) else np.vstack([matrix, vecs])
        return _Entry(version, key, DenseIndex(embedder.model_id, ids, matrix), len(missing))

    def unstored(self, workspace: str, variant: str = "raw") -> int:
        """Chunks the current dense index of this slot embedded in memory because no vector was stored."""
        with self._lock:
            entry = self._entries.get(("dense", workspace, variant))
            return entry.unstored if entry is not None else 0

    def invalidate(self, workspace: str | None = None) -> None:
        with self._lock:
            for slot in [s for s in self._entries if workspace is None or s[1] == workspace]:
                del self._entries[slot]

