"""What the pages read and change in a workspace, as plain functions over the store's repositories: listing and
deleting documents, chunk texts, the last logged trace, stored evaluation runs and the usage/cache history. Pages
call these and never touch a repository themselves."""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from core.config import GraphConfig
from core.graph.build import follow_corpus
from core.models.protocols import Embedder
from core.types import (
    DEFAULT_WORKSPACE,
    CacheEvent,
    Chunk,
    DocumentRow,
    EvalRunRecord,
    LedgerEntry,
    RunRecord,
)


class _Corpus(Protocol):
    def corpus_version(self, workspace: str = ...) -> int: ...
    def count(self, table: str, workspace: str = ...) -> int: ...
    def documents(self, workspace: str = ...) -> list[DocumentRow]: ...
    def chunks(self, workspace: str = ..., doc_id: str | None = None) -> list[Chunk]: ...
    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = ...) -> dict[str, Chunk]: ...
    def delete_document(self, doc_id: str, workspace: str = ...) -> bool: ...


class _Runs(Protocol):
    def recent_runs(self, workspace: str = ..., limit: int = ...) -> list[RunRecord]: ...
    def eval_runs(self, workspace: str = ..., dataset: str | None = None, limit: int = ...) -> list[EvalRunRecord]: ...


class _Ledger(Protocol):
    def usage_ledger(self, workspace: str = ...) -> list[LedgerEntry]: ...


class _Caches(Protocol):
    def cache_events(self, workspace: str = ...) -> list[CacheEvent]: ...

    def take_notices(self) -> list[str]: ...


class WorkspaceData(Protocol):
    """The repositories these functions read (core.store.Store has them as attributes)."""

    corpus: _Corpus
    runs: _Runs
    ledger: _Ledger
    caches: _Caches


# -- corpus ----------------------------------------------------------------------------------------------------------
def has_documents(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> bool:
    return store.corpus.count("documents", workspace) > 0


def corpus_version(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> int:
    return store.corpus.corpus_version(workspace)


def documents(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> list[DocumentRow]:
    return store.corpus.documents(workspace)


def document_names(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
    """doc_id -> file name, for labelling candidates and provenance."""
    return {d.doc_id: d.name for d in store.corpus.documents(workspace)}


def document_chunks(store: WorkspaceData, doc_id: str, workspace: str = DEFAULT_WORKSPACE) -> list[Chunk]:
    return store.corpus.chunks(workspace, doc_id)


def chunk_texts(store: WorkspaceData, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                ) -> dict[str, str]:
    """chunk_id -> text for the chunks still in the corpus (a deleted chunk is simply absent)."""
    return {cid: c.text for cid, c in store.corpus.chunks_by_id(list(dict.fromkeys(chunk_ids)), workspace).items()}


def chunk_lookup(store: WorkspaceData) -> Any:
    """The chunks_by_id reader itself, for views that fetch chunk details lazily."""
    return store.corpus.chunks_by_id


def delete_document(store: Any, doc_id: str, *, graph: GraphConfig, embedder: Embedder | None = None,
                    workspace: str = DEFAULT_WORKSPACE, notices: list[str] | None = None) -> bool:
    """Delete a document with its chunks, vectors and contexts, then take its mentions out of the entity graph
    (an incremental update; nothing when no graph exists; with graph.follow_ingest off, a notice appended to
    `notices` once). False when there was no such document."""
    if not store.corpus.delete_document(doc_id, workspace):
        return False
    follow = follow_corpus(store, graph, embedder=embedder, workspace=workspace, doc_ids=[doc_id])
    if follow.notice and notices is not None:
        notices.append(follow.notice)
    return True


# -- run log, evaluations, usage -------------------------------------------------------------------------------------
def last_trace(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any] | None:
    """The newest logged query's trace (Trace.to_dict form), or None."""
    runs = store.runs.recent_runs(workspace, 1)
    return runs[0].trace if runs else None


def recent_runs(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE, limit: int = 100) -> list[RunRecord]:
    return store.runs.recent_runs(workspace, limit)


def eval_runs(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> list[EvalRunRecord]:
    """Stored evaluation runs, newest first (without per-question results; core.eval.run.load_run reopens one)."""
    return store.runs.eval_runs(workspace)


def usage_ledger(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> list[LedgerEntry]:
    return store.ledger.usage_ledger(workspace)


def cache_events(store: WorkspaceData, workspace: str = DEFAULT_WORKSPACE) -> list[CacheEvent]:
    return store.caches.cache_events(workspace)


def store_notices(store: WorkspaceData) -> list[str]:
    """What the store found wrong while serving the last query (a token-vector file missing: its vectors are
    recomputed), said once."""
    return store.caches.take_notices()
