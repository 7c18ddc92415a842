"""In-memory search indexes (BM25, dense) per workspace, rebuilt lazily when the store's corpus version moves."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import numpy as np

from core.models.embed import (
    Embedder,
    EmbeddingCacheStore,
    EmbedStats,
    embed_with_cache,
)
from core.retrieve.ann import ANN_MIN_CHUNKS, Sync, ann_path, synced
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.dense import DenseIndex
from core.store.index_files import decode_strings, encode_strings
from core.types import Chunk


class CorpusReader(Protocol):
    """What the indexes read of the corpus (core.store's corpus repository implements it)."""

    def corpus_version(self, workspace: str = ...) -> int: ...

    def chunks(self, workspace: str = ...) -> list[Chunk]: ...

    def vectors(self, model_id: str, variant: str = ..., workspace: str = ...) -> tuple[list[str], np.ndarray]: ...

    def chunks_missing_vectors(self, model_id: str, variant: str = ..., workspace: str = ...) -> list[Chunk]: ...

    def vector_models(self, workspace: str = ...) -> Sequence[tuple[str, str, int]]: ...

    def language_counts(self, workspace: str = ...) -> dict[str, int]: ...

    def chunk_fingerprint(self, workspace: str = ...) -> str: ...


class ContextReader(Protocol):
    """Chunk contexts (core.store's ledger repository implements it)."""

    def contexts(self, variant: str, workspace: str = ..., chunk_ids: Sequence[str] | None = None) -> dict[str, str]: ...

    def context_state(self, variant: str, workspace: str = ...) -> str: ...


class ArrayFiles(Protocol):
    """Index arrays per corpus version beside the database (core.store.IndexFiles implements it)."""

    def load(self, kind: str, workspace: str, key: str, version: int) -> dict[str, np.ndarray] | None: ...

    def save(self, kind: str, workspace: str, key: str, version: int, arrays: Mapping[str, np.ndarray]) -> bool: ...


class IndexSources(Protocol):
    """The repositories an index is read from; core.store.Store has them as attributes."""

    corpus: CorpusReader
    ledger: ContextReader
    caches: EmbeddingCacheStore
    index_files: ArrayFiles


class VectorWriter(Protocol):
    def put_vectors(self, chunk_ids: Sequence[str], vectors: np.ndarray, model_id: str, variant: str = ...,
                    workspace: str = ...) -> None: ...


class CacheEvents(EmbeddingCacheStore, Protocol):
    def record_cache_event(self, cache: str, hits: int, misses: int, purpose: str, workspace: str = ...) -> None: ...


def contextual_text(context: str | None, text: str) -> str:
    """The text a contextual variant indexes: its context, a blank line, then the untouched chunk."""
    return f"{context}\n\n{text}" if context else text


def variant_texts(contexts: ContextReader, workspace: str, variant: str, chunks: Sequence[Chunk]) -> list[str]:
    """Texts to index for a variant: raw chunk text, or context + chunk where a context of that variant exists."""
    if variant in ("raw", "late"):
        return [c.text for c in chunks]
    # A long id list makes the IN-filter slower than reading the variant whole.
    ctx = contexts.contexts(variant, workspace, None if len(chunks) > 500 else [c.chunk_id for c in chunks])
    return [contextual_text(ctx.get(c.chunk_id), c.text) for c in chunks]


def backfill_vectors(corpus: CorpusReader, contexts: ContextReader, caches: CacheEvents, writer: VectorWriter,
                     embedder: Embedder, workspace: str, variant: str = "raw", *, purpose: str = "backfill"
                     ) -> EmbedStats:
    """Store the vectors chunks lack for this model and variant (cache first). A build-time write: ingest, a
    context build or an explicit backfill call it; a query never does (it embeds what is missing in memory)."""
    missing = corpus.chunks_missing_vectors(embedder.model_id, variant, workspace)
    if not missing:
        return EmbedStats(0, 0, 0)
    vecs, stats = embed_with_cache(variant_texts(contexts, workspace, variant, missing), embedder, caches, workspace)
    writer.put_vectors([c.chunk_id for c in missing], vecs, embedder.model_id, variant, workspace)
    caches.record_cache_event("embedding", stats.cache_hits, stats.computed, purpose, workspace)
    return stats


@dataclass
class _Entry:
    version: int
    key: tuple
    index: object
    unstored: int = 0  # chunks whose vectors were embedded in memory for this index (none stored for the model)


class QueryVectors:
    """Question vectors by (model id, exact text), least recently used dropped first: a repeated question (an
    evaluation's repeats, A/B runs over the same set, a user asking again) computes no embedding."""

    def __init__(self, size: int = 2_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._vecs: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    def get(self, model_id: str, text: str) -> np.ndarray | None:
        with self._lock:
            v = self._vecs.get((model_id, text))
            if v is not None:
                self._vecs.move_to_end((model_id, text))
            return v

    def put(self, model_id: str, text: str, vec: np.ndarray) -> None:
        with self._lock:
            self._vecs[(model_id, text)] = np.asarray(vec)
            self._vecs.move_to_end((model_id, text))
            while len(self._vecs) > self._size:
                self._vecs.popitem(last=False)


class IndexCache:
    """Holds one BM25 and one dense index per (workspace, variant, params/model). Safe to share across
    Streamlit sessions: built indexes are immutable; `_lock` only guards the dictionary (held for lookups, never
    while reading rows or embedding), and a build lock per slot makes callers of the same index wait for one build
    instead of repeating it, while every other workspace and variant stays searchable."""

    def __init__(self, ann_dir: Path | None = None, ann_min_chunks: int = ANN_MIN_CHUNKS, *,
                 ann_writable: bool = True) -> None:
        """`ann_dir`: where dense indexes of `ann_min_chunks` vectors or more keep their ANN graph (None: built in
        memory, never saved); `ann_writable` false: a saved graph is read, never written (a read-only database)."""
        self.ann_dir = ann_dir
        self.ann_writable = ann_writable
        self.ann_min_chunks = ann_min_chunks
        self.last_ann_sync: Sync | None = None
        self._lock = threading.Lock()
        self._entries: dict[tuple, _Entry] = {}
        self._building: dict[tuple, threading.Lock] = {}
        self.last_embed_stats: EmbedStats | None = None
        self.queries = QueryVectors()

    def _fresh(self, slot: tuple, version: int, key: tuple) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(slot)
            return entry if entry is not None and entry.version == version and entry.key == key else None

    def _build_lock(self, slot: tuple) -> threading.Lock:
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
            index = self._bm25_file(store, workspace, version, key, params)
            if index is None:
                chunks = store.corpus.chunks(workspace)
                texts = variant_texts(store.ledger, workspace, text_variant, chunks)
                index = BM25Index([c.chunk_id for c in chunks], texts, params)
                if (arrays := index.to_arrays()) is not None:
                    stamp = np.frombuffer(store.corpus.chunk_fingerprint(workspace).encode(), dtype=np.uint8)
                    store.index_files.save("bm25", workspace, repr(key), version, {**arrays, "stamp": stamp})
            self._store(slot, _Entry(version, key, index))
            return index

    @staticmethod
    def _bm25_file(store: IndexSources, workspace: str, version: int, key: tuple, params: BM25Params
                   ) -> BM25Index | None:
        """The index saved for this corpus version and key (params, context state), when it was made of the chunks the
        workspace holds now (a file left by another database at this path was not)."""
        arrays = store.index_files.load("bm25", workspace, repr(key), version)
        if arrays is None or "stamp" not in arrays:
            return None
        if arrays["stamp"].tobytes().decode("utf-8", "replace") != store.corpus.chunk_fingerprint(workspace):
            return None
        return BM25Index.from_arrays(arrays, params)

    def dense(self, store: IndexSources, embedder: Embedder, workspace: str, variant: str = "raw") -> DenseIndex:
        """Vectors of the active model only. Contextual variants hold context + chunk vectors; 'late' vectors are
        only made by late chunking (core.ingest.context), so chunks without one fall back to their raw vector. Chunks with
        no stored vector for the model (a new model, a context written after its vectors) are embedded cache-first
        in memory for this index and nothing is written: a query only reads. `unstored()` says how many; the
        build-time `backfill_vectors` stores them."""
        # One slot per model: the main and the multilingual embedder keep their own index of the same chunks.
        slot = ("dense", workspace, variant, embedder.model_id)

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
            self._attach_ann(entry.index, workspace, variant)  # type: ignore[arg-type]
            self._store(slot, entry)
            return entry.index  # type: ignore[return-value]

    def _attach_ann(self, index: DenseIndex, workspace: str, variant: str) -> None:
        """Above the threshold, the saved ANN graph brought in step with these vectors (or built and saved)."""
        if len(index) < self.ann_min_chunks or not len(index):
            return
        path = ann_path(self.ann_dir, workspace, index.model_id, variant) if self.ann_dir is not None else None
        ann, self.last_ann_sync = synced(path, index.model_id, index.chunk_ids, index.matrix, save=self.ann_writable)
        index.attach_ann(ann)

    def _dense_rows(self, store: IndexSources, embedder: Embedder, workspace: str, variant: str, version: int,
                    key: tuple) -> _Entry:
        # Every chunk with a stored vector: the matrix saved for this corpus version is read instead of every row's
        # FLOAT[] (a fresh process's largest read); a chunk without one is embedded in memory below, and not saved.
        fingerprint = store.corpus.chunk_fingerprint(workspace)
        stored = next((v.count for v in store.corpus.vector_models(workspace)
                       if v.model_id == embedder.model_id and v.variant == variant), 0)
        complete = stored == int(fingerprint.split(":", 1)[0]) and stored > 0
        fkey, stamp = repr((key, variant)), f"{fingerprint}|{stored}"
        if complete and (saved := _saved_matrix(store, workspace, fkey, version, stamp)) is not None:
            return _Entry(version, key, DenseIndex(embedder.model_id, *saved))
        ids, matrix = store.corpus.vectors(embedder.model_id, variant, workspace)
        if complete and len(ids) == stored and (raw := encode_strings(list(ids))) is not None:
            store.index_files.save("dense", workspace, fkey, version, {
                "chunk_ids": raw, "n": np.array([len(ids)]), "matrix": np.asarray(matrix, dtype=np.float32),
                "stamp": np.frombuffer(stamp.encode(), dtype=np.uint8)})
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

    def unstored(self, workspace: str, variant: str = "raw", model_id: str | None = None) -> int:
        """Chunks the current dense index of this slot embedded in memory because no vector was stored (the most of
        any model's index when `model_id` is None)."""
        with self._lock:
            return max((e.unstored for s, e in self._entries.items()
                        if s[:3] == ("dense", workspace, variant) and model_id in (None, s[3])), default=0)

    def languages(self, store: IndexSources, workspace: str) -> dict[str, int]:
        """Chunks per language in the workspace (core.store.corpus.chunk_language, stored with each chunk at
        ingest: a count, never a pass over the texts). Read once per corpus version."""
        slot = ("languages", workspace)
        version = store.corpus.corpus_version(workspace)
        if (entry := self._fresh(slot, version, ())) is not None:
            return dict(entry.index)  # type: ignore[call-overload]
        counts = store.corpus.language_counts(workspace)
        self._store(slot, _Entry(version, (), counts))
        return dict(counts)

    def invalidate(self, workspace: str | None = None) -> None:
        with self._lock:
            for slot in [s for s in self._entries if workspace is None or s[1] == workspace]:
                del self._entries[slot]


def _saved_matrix(store: IndexSources, workspace: str, key: str, version: int, stamp: str
                  ) -> tuple[list[str], np.ndarray] | None:
    """(chunk ids, vectors) saved for this corpus version, key and stamp (chunk fingerprint, stored vector count)."""
    arrays = store.index_files.load("dense", workspace, key, version)
    if arrays is None or not {"chunk_ids", "n", "matrix", "stamp"} <= arrays.keys():
        return None
    if arrays["stamp"].tobytes().decode("utf-8", "replace") != stamp:
        return None
    ids = decode_strings(arrays["chunk_ids"], int(arrays["n"][0]))
    return (ids, arrays["matrix"]) if len(ids) == len(arrays["matrix"]) else None


def _with_fallback(model_id: str, ids: list[str], matrix: np.ndarray, raw: DenseIndex) -> DenseIndex:
    """Late vectors where they exist, the raw vector for every other chunk."""
    have = set(ids)
    extra = [i for i, cid in enumerate(raw.chunk_ids) if cid not in have]
    if extra:
        ids = list(ids) + [raw.chunk_ids[i] for i in extra]
        matrix = raw.matrix[extra] if not len(have) else np.vstack([matrix, raw.matrix[extra]])
    return DenseIndex(model_id, ids, matrix)
