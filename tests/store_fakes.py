"""Tiny in-memory implementations of the store's repository Protocols, for tests that need no DuckDB. Each one is
held to the same contract suite as the DuckDB repository (tests/test_store_contract.py)."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any, Mapping, Sequence

import numpy as np

from core.types import DEFAULT_WORKSPACE, Chunk, Document, LedgerEntry, RunRecord, Trace


class MemoryCorpus:
    """DocumentSource / ChunkSource / CorpusSource over dicts."""

    def __init__(self) -> None:
        self._docs: dict[tuple[str, str], Document] = {}
        self._chunks: dict[tuple[str, str], Chunk] = {}
        self._version: dict[str, int] = {}

    def put_document(self, doc: Document, chunks: Sequence[Chunk], vectors: Any = None, model_id: str = "") -> None:
        ws = doc.workspace
        self._docs[(ws, doc.doc_id)] = doc
        for c in chunks:
            self._chunks[(ws, c.chunk_id)] = c
        self._version[ws] = self._version.get(ws, 0) + 1

    def corpus_version(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        return self._version.get(workspace, 0)

    def document_text(self, doc_id: str, workspace: str = DEFAULT_WORKSPACE) -> str | None:
        d = self._docs.get((workspace, doc_id))
        return d.text if d else None

    def document_titles(self, doc_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        return {i: (d.title or d.name) for i in doc_ids if (d := self._docs.get((workspace, i)))}

    def chunks(self, workspace: str = DEFAULT_WORKSPACE, doc_id: str | None = None) -> list[Chunk]:
        out = [c for (ws, _), c in self._chunks.items() if ws == workspace and (doc_id is None or c.doc_id == doc_id)]
        return sorted(out, key=lambda c: (c.doc_id, c.ordinal))

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, Chunk]:
        return {i: c for i in chunk_ids if (c := self._chunks.get((workspace, i)))}


class MemoryCaches:
    """The embedding cache and the token-vector cache (EmbeddingCacheStore, core.cascade.rerank.TokenStore) over dicts."""

    def __init__(self) -> None:
        self._emb: dict[tuple[str, str, str], np.ndarray] = {}
        self._tok: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def cached_embeddings(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                          ) -> dict[str, np.ndarray]:
        return {h: v.copy() for h in hashes if (v := self._emb.get((workspace, model_id, h))) is not None}

    def cache_embeddings(self, model_id: str, items: Mapping[str, np.ndarray], workspace: str = DEFAULT_WORKSPACE
                         ) -> None:
        for h, v in items.items():  # first write wins, like INSERT OR IGNORE
            self._emb.setdefault((workspace, model_id, h), np.asarray(v, dtype=np.float32).ravel().copy())

    def cached_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                             ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return {h: t for h in hashes if (t := self._tok.get((workspace, model_id, h))) is not None}

    def cache_token_vectors(self, model_id: str, items: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                            workspace: str = DEFAULT_WORKSPACE) -> None:
        for h, (ids, vecs, spans) in items.items():
            self._tok.setdefault((workspace, model_id, h), (np.asarray(ids, np.int32), np.asarray(vecs, np.float16),
                                                            np.asarray(spans, np.int32)))


class MemoryLedger:
    """core.models.llm.LedgerSink plus the ledger's read side."""

    def __init__(self) -> None:
        self._rows: list[LedgerEntry] = []

    def record_usage(self, entry: LedgerEntry) -> None:
        self._rows.append(replace(entry, created_at=datetime.now()))

    def usage_ledger(self, workspace: str = DEFAULT_WORKSPACE, *, purpose: str | None = None,
                     run_id: str | None = None, limit: int | None = None) -> list[LedgerEntry]:
        rows = [e for e in self._rows if e.workspace == workspace and purpose in (None, e.purpose)
                and run_id in (None, e.run_id)]
        return rows[:limit] if limit is not None else rows


class MemoryRunLog:
    """The run log: log_trace and recent_runs."""

    def __init__(self) -> None:
        self._runs: list[tuple[str, RunRecord]] = []

    def log_trace(self, trace: Trace, kind: str = "query") -> str:
        run_id = uuid.uuid4().hex
        self._runs.append((trace.workspace, RunRecord(run_id, kind, trace.query, trace.config_hash,
                                                      trace.corpus_version, trace.to_dict(), datetime.now())))
        return run_id

    def recent_runs(self, workspace: str = DEFAULT_WORKSPACE, limit: int = 50) -> list[RunRecord]:
        return [r for ws, r in reversed(self._runs) if ws == workspace][:limit]
