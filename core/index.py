"""In-memory search indexes (BM25, dense) per workspace, rebuilt lazily when the store's corpus version moves."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from core.embed import EmbedStats, Embedder, embed_with_cache
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.dense import DenseIndex
from core.store import Store


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
        version = store.corpus_version(workspace)
        slot = ("bm25", workspace, variant)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry.version != version or entry.key != (params,):
                chunks = store.chunks(workspace)
                index = BM25Index([c.chunk_id for c in chunks], [c.text for c in chunks], params)
                entry = _Entry(version, (params,), index)
                self._entries[slot] = entry
            return entry.index  # type: ignore[return-value]

    def dense(self, store: Store, embedder: Embedder, workspace: str, variant: str = "raw") -> DenseIndex:
        """Vectors of the active model only; chunks that lack one (new model) are embedded (cache first) now."""
        version = store.corpus_version(workspace)
        slot = ("dense", workspace, variant)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry.version != version or entry.key != (embedder.model_id,):
                missing = store.chunks_missing_vectors(embedder.model_id, variant, workspace)
                if missing:
                    vecs, stats = embed_with_cache([c.text for c in missing], embedder, store, workspace)
                    store.put_vectors([c.chunk_id for c in missing], vecs, embedder.model_id, variant, workspace)
                    store.record_cache_event("embedding", stats.cache_hits, stats.computed, "backfill", workspace)
                    self.last_embed_stats = stats
                ids, matrix = store.vectors(embedder.model_id, variant, workspace)
                entry = _Entry(store.corpus_version(workspace), (embedder.model_id,), DenseIndex(embedder.model_id, ids, matrix))
                self._entries[slot] = entry
            return entry.index  # type: ignore[return-value]

    def invalidate(self, workspace: str | None = None) -> None:
        with self._lock:
            for slot in [s for s in self._entries if workspace is None or s[1] == workspace]:
                del self._entries[slot]

