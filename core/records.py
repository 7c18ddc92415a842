"""Typed rows the store hands out, shared by core/store and its readers (no duckdb here).

Records read as a whole are frozen dataclasses. Narrow rows read in bulk (vectors per model, graph nodes, edges,
provenance) are NamedTuples: typed and immutable too, and they still unpack, so hot loops over thousands of rows
stay cheap and existing `for a, b, w, *_ in edges` readers keep working."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple


@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    name: str
    kind: str
    size_bytes: int
    content_hash: str
    lang: str
    title: str
    chunker: str
    n_chunks: int
    ingested_at: datetime


class VectorSet(NamedTuple):
    """(model, variant) and how many chunk vectors the workspace holds for it."""

    model_id: str
    variant: str
    count: int


class CacheEvent(NamedTuple):
    cache: str
    hits: int
    misses: int
    purpose: str
    created_at: datetime


@dataclass(frozen=True)
class RunRecord:
    """One logged query: its trace as the JSON dict Trace.to_dict() wrote."""

    run_id: str
    kind: str
    query: str
    config_hash: str
    corpus_version: int
    trace: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class EvalRunRecord:
    """One configuration's run over a golden set. `summary` holds metrics, spread, stage recall and the rest;
    `results` (per-question dicts as core.eval_run wrote them) is filled only by Runs.eval_run()."""

    eval_id: str
    dataset: str
    config_name: str
    config_hash: str
    config: dict[str, Any]
    corpus_version: int
    repeats: int
    n_queries: int
    summary: dict[str, Any]
    created_at: datetime
    results: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The flat dict the evaluation lab stored (summary keys at top level), for code that rebuilds a run."""
        return {"eval_id": self.eval_id, "dataset": self.dataset, "config_name": self.config_name,
                "config_hash": self.config_hash, "config": self.config, "corpus_version": self.corpus_version,
                "repeats": self.repeats, "n_queries": self.n_queries, **self.summary, "created_at": self.created_at}


@dataclass(frozen=True)
class OpenBatch:
    """A submitted Message Batch whose results were not collected yet; custom id r<i> is chunk_ids[i]."""

    batch_id: str
    model: str
    run_id: str
    n_requests: int
    status: str
    chunk_ids: tuple[str, ...]
    created_at: datetime | None


@dataclass(frozen=True)
class GraphState:
    version: int
    corpus_version: int
    builder: str
    settings: dict[str, Any]
    stats: dict[str, Any]
    built_at: datetime


class GraphNode(NamedTuple):
    node_id: str
    name: str
    type: str
    description: str
    n_chunks: int
    n_mentions: int
    n_docs: int
    aliases: tuple[str, ...]


class GraphEdge(NamedTuple):
    """An undirected edge, src < dst."""

    src: str
    dst: str
    weight: float
    n_chunks: int
    description: str


class CommunityMember(NamedTuple):
    level: int
    community_id: str
    parent_id: str | None
    node_id: str
    members_hash: str


@dataclass(frozen=True)
class CommunitySummary:
    members_hash: str
    level: int
    community_id: str
    title: str
    summary: str
    mode: str
    usage: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class MergeItem:
    """A merge suggestion in the review queue (status pending, approved or rejected)."""

    item_id: str
    keep_id: str
    other_id: str
    keep_name: str
    other_name: str
    score: float
    status: str
    created_at: datetime
    decided_at: datetime | None


class NodeChunk(NamedTuple):
    """Provenance of a node: a chunk that mentions it and how often."""

    node_id: str
    chunk_id: str
    doc_id: str
    mentions: int


class EdgeChunk(NamedTuple):
    """Provenance of an edge (a < b): a chunk that relates the two, its strongest weight and description."""

    a: str
    b: str
    chunk_id: str
    doc_id: str
    weight: float
    description: str


class NodeFacts(NamedTuple):
    """What a node's mentions say, before any choice: counts per surface form and per type, sizes, sorted aliases
    and sorted distinct descriptions. core/graph/aggregate.py turns it into a GraphNode."""

    node_id: str
    surfaces: dict[str, int]
    types: dict[str, int]
    n_chunks: int
    n_mentions: int
    n_docs: int
    aliases: tuple[str, ...]
    descriptions: tuple[str, ...]
