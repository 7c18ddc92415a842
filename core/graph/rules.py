"""Graph bookkeeping rules kept out of the store: which name, type and description a node shows, and the id of
a merge suggestion. Pure functions; core/store only reads and writes the rows they produce."""
from __future__ import annotations

import hashlib
from typing import Iterable, Mapping, Sequence

from core.types import GraphNode, NodeFacts

DESCRIPTIONS_SHOWN = 3  # a node lists at most this many of its distinct descriptions
DESCRIPTION_SEP = " | "


def most_frequent(counts: Mapping[str, int]) -> str:
    """The value seen most often; ties go to the alphabetically first, so an incremental update and a full
    rebuild pick the same one whatever order the rows came in."""
    if not counts:
        return ""
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def join_descriptions(descriptions: Iterable[str], limit: int = DESCRIPTIONS_SHOWN) -> str:
    """Up to `limit` distinct non-empty descriptions in sorted order (stable across rebuilds)."""
    return DESCRIPTION_SEP.join(sorted({d for d in descriptions if d})[:limit])


def node_row(facts: NodeFacts, display: Mapping[str, str] | None = None) -> GraphNode:
    """A node's aggregate row: the synonym list's display name when it fixes one, else the most frequent surface
    form; the most frequent type."""
    name = (display or {}).get(facts.node_id) or most_frequent(facts.surfaces)
    return GraphNode(facts.node_id, name, most_frequent(facts.types), join_descriptions(facts.descriptions),
                     facts.n_chunks, facts.n_mentions, facts.n_docs, tuple(facts.aliases))


def node_rows(facts: Sequence[NodeFacts], display: Mapping[str, str] | None = None) -> list[GraphNode]:
    return [node_row(f, display) for f in facts]


def merge_item_id(a: str, b: str) -> str:
    """Review-queue id of the unordered pair {a, b}: the same whichever node is kept."""
    return hashlib.sha256("\x1f".join(sorted((a, b))).encode()).hexdigest()[:12]
