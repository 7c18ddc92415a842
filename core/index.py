"""In-memory search indexes (BM25, dense) per workspace, rebuilt lazily when the store's corpus version moves."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.embed import EmbedStats, Embedder, embed_with_cache
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.dense import DenseIndex
from core.store import Store
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
            return self._dense(store, embedder, workspace, variant)

    def _dense(self, store: Store, embedder: Embedder, workspace: str, variant: str) -> DenseIndex:
        version = store.corpus_version(workspace)
        slot = ("dense", workspace, variant)
        if variant == "raw":
            state = ""
        elif variant == "late":
            state = str([m for m in store.vector_models(workspace) if m[0] == embedder.model_id and m[1] == "late"])
        else:
            state = store.context_state(variant, workspace)
        entry = self._entries.get(slot)
        if entry is None or entry.version != version or entry.key != (embedder.model_id, state):
            if variant == "late":
                raw = self._dense(store, embedder, workspace, "raw")
                ids, matrix = store.vectors(embedder.model_id, "late", workspace)
                have = set(ids)
                extra = [i for i, cid in enumerate(raw.chunk_ids) if cid not in have]
                if extra:
                    ids = ids + [raw.chunk_ids[i] for i in extra]
                    matrix = raw.matrix[extra] if not len(have) else np.vstack([matrix, raw.matrix[extra]])
                index = DenseIndex(embedder.model_id, ids, matrix)
            else:
                missing = store.chunks_missing_vectors(embedder.model_id, variant, workspace)
                if missing:
                    texts = variant_texts(store, workspace, variant, missing)
                    vecs, stats = embed_with_cache(texts, embedder, store, workspace)
                    store.put_vectors([c.chunk_id for c in missing], vecs, embedder.model_id, variant, workspace)
                    store.record_cache_event("embedding", stats.cache_hits, stats.computed, "backfill", workspace)
                    self.last_embed_stats = stats
                ids, matrix = store.vectors(embedder.model_id, variant, workspace)
                index = DenseIndex(embedder.model_id, ids, matrix)
            entry = _Entry(store.corpus_version(workspace), (embedder.model_id, state), index)
            self._entries[slot] = entry
        return entry.index  # type: ignore[return-value]

    def invalidate(self, workspace: str | None = None) -> None:
        with self._lock:
            for slot in [s for s in self._entries if workspace is None or s[1] == workspace]:
                del self._entries[slot]

