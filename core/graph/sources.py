"""What the graph query path and its views read (and, for summaries, write): narrow Protocols over the store's
repositories, so graph stages never import the concrete store (core.store.Store satisfies GraphSource)."""
from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from core.types import (
    Chunk,
    CommunityMember,
    CommunitySummary,
    EdgeChunk,
    GraphNode,
    GraphState,
    MergeItem,
    NodeChunk,
)


class ChunkLookup(Protocol):
    """core.store's corpus repository."""

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = ...) -> dict[str, Chunk]: ...

    def corpus_version(self, workspace: str = ...) -> int: ...


class GraphReader(Protocol):
    """core.store's graph repository, read side."""

    def state(self, workspace: str = ...) -> GraphState | None: ...

    def nodes(self, workspace: str = ...) -> list[GraphNode]: ...

    def edge_arrays(self, workspace: str = ...) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def all_node_chunks(self, workspace: str = ...) -> dict[str, np.ndarray]: ...

    def node_chunks(self, node_ids: Sequence[str], workspace: str = ...) -> list[NodeChunk]: ...

    def nodes_by_id(self, node_ids: Sequence[str], workspace: str = ...) -> list[GraphNode]: ...

    def edge_arrays_among(self, node_ids: Sequence[str], workspace: str = ...
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def edge_chunks(self, pairs: Sequence[tuple[str, str]], workspace: str = ...) -> list[EdgeChunk]: ...


class CommunityStore(Protocol):
    """core.store's communities repository: membership and the summary cache."""

    def communities(self, workspace: str = ...) -> list[CommunityMember]: ...

    def summaries(self, members_hashes: Sequence[str] | None = None, workspace: str = ...
                  ) -> dict[str, CommunitySummary]: ...

    def summary_hashes(self, workspace: str = ...) -> set[str]: ...

    def put_summaries(self, rows: Sequence[tuple[str, int, str, str, str, str, dict[str, Any]]],
                      workspace: str = ...) -> None: ...


class NameVectorCache(Protocol):
    """core.store's caches repository: vectors of node names and summary texts keyed by text hash."""

    def name_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = ...) -> dict[str, np.ndarray]: ...

    def put_name_vectors(self, model_id: str, items: Mapping[str, np.ndarray], workspace: str = ...) -> None: ...


class ReviewQueue(Protocol):
    """core.store's review repository, read side (the Graph page's merge queue)."""

    def queue(self, status: str | None = None, workspace: str = ...) -> list[MergeItem]: ...


class GraphSource(Protocol):
    """The repositories the graph stages and views are handed (core.store.Store has them as attributes)."""

    corpus: ChunkLookup
    graph: GraphReader
    communities: CommunityStore
    caches: NameVectorCache
    review: ReviewQueue
