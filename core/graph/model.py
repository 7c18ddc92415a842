"""Frozen records of the entity graph: what an extractor saw in one chunk and what a build did. The stored node
and edge rows are core.types.GraphNode / GraphEdge (the store returns them)."""
from __future__ import annotations

from dataclasses import dataclass, field

from core.types import Usage

# Labels shown wherever the graph's origin matters: a statistical graph must never pass for an LLM one.
STATISTICAL = "statistical, no LLM"
LLM_BUILT = "LLM extraction"


@dataclass(frozen=True)
class Mention:
    """One entity as one chunk names it. `norm` is the resolution key before synonyms and merges."""

    surface: str
    norm: str
    type: str  # statistical: identifier | named | phrase; LLM: the model's type, lower-cased
    count: int = 1
    description: str = ""


@dataclass(frozen=True)
class Relation:
    """An undirected link seen in one chunk, between two mention norms (src < dst)."""

    src: str
    dst: str
    weight: float
    description: str = ""


@dataclass(frozen=True)
class ChunkExtraction:
    chunk_id: str
    doc_id: str
    mentions: tuple[Mention, ...]
    relations: tuple[Relation, ...]
    source: str = "statistical"  # statistical | llm
    usage: Usage = Usage()
    failure: str = ""  # llm: why the model's reply gave nothing usable (counted and shown by the build), "" if it did


@dataclass(frozen=True)
class BuildReport:
    """What one build or update did; shown by the CLI and the Graph page."""

    mode: str  # full | incremental | re-resolve
    builder: str
    chunks_added: int = 0
    chunks_removed: int = 0
    nodes: int = 0
    edges: int = 0
    active_nodes: int = 0
    levels: int = 0
    communities: int = 0
    summaries_invalidated: int = 0
    suggestions: int = 0
    seconds: float = 0.0
    usage: Usage = Usage()
    notes: tuple[str, ...] = field(default_factory=tuple)
    summaries_written: int = 0  # extractive community summaries stored at build time (global search reads them)
    cpu_seconds: float = 0.0  # process CPU time of a build or update (all threads): its cost on a busy machine
