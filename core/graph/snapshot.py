"""In-memory snapshot of the active graph (CSR adjacency, degrees, names, communities), cached per graph version."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from core.graph.resolve import normalise_name
from core.graph.sources import GraphSource
from core.models.embed import cache_first
from core.models.protocols import Embedder
from core.text import sha256_text


def name_vectors(names: Sequence[str], embedder: Embedder, store: GraphSource | None, workspace: str, *,
                 write: bool = True) -> np.ndarray:
    """L2-normalised vectors of node names (or summary texts), looked up in the store's name-vector table first.
    The graph build stores them (write=True); a query passes write=False: misses are encoded, never stored."""
    if not names:
        return np.zeros((0, 1), dtype=np.float32)
    cache = store.caches if store is not None else None
    model = embedder.model_id
    res = cache_first(
        [sha256_text(n) for n in names], list(names),
        lookup=(lambda keys: cache.name_vectors(model, keys, workspace)) if cache is not None else (lambda keys: {}),
        compute=lambda todo: list(np.asarray(embedder.encode(todo), dtype=np.float32)),
        save=(lambda fresh: cache.put_name_vectors(model, fresh, workspace)) if cache is not None and write else None,
    )
    vecs = np.stack(res.values).astype(np.float32)
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


def is_active(type_: str, n_chunks: int, min_phrase_chunks: int) -> bool:
    """Lower-case terms seen in a single chunk are mostly noise; names and identifiers always count."""
    return type_ != "phrase" or n_chunks >= min_phrase_chunks


@dataclass
class GraphSnapshot:
    """The graph search and the views work on. Adjacency is CSR with each row sorted by weight (heaviest first,
    ties by neighbour id), so 'expand by edge weight' is a slice."""

    version: int
    corpus_version: int
    builder: str
    node_ids: list[str]
    names: list[str]
    types: list[str]
    descriptions: list[str]
    n_chunks: np.ndarray
    indptr: np.ndarray
    nbrs: np.ndarray
    weights: np.ndarray
    alias_index: dict[str, int]  # normalised name or alias -> node position
    communities: dict[int, dict[str, list[int]]]  # level -> community id -> node positions
    node_community: dict[int, dict[int, str]]  # level -> node position -> community id
    members_hash: dict[tuple[int, str], str]
    node_chunks: list[list[tuple[str, str, int]]] = field(default_factory=list)  # (chunk, doc, mentions) per node
    store: GraphSource | None = field(default=None, repr=False)  # name vectors go through its embedding cache
    workspace: str = "default"
    name_vectors: dict[str, np.ndarray] = field(default_factory=dict)  # model id -> matrix (lazy)
    # Community summaries a query wrote in memory (members hash -> summary); the store holds only built ones.
    summaries: dict[str, Any] = field(default_factory=dict, repr=False)
    pos: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.pos = {nid: i for i, nid in enumerate(self.node_ids)}

    def __len__(self) -> int:
        return len(self.node_ids)

    @property
    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def neighbours(self, i: int) -> list[tuple[int, float]]:
        s, e = int(self.indptr[i]), int(self.indptr[i + 1])
        return list(zip(self.nbrs[s:e].tolist(), self.weights[s:e].tolist()))

    def hub_threshold(self, percentile: float) -> float:
        """Degree above which a node is a hub (not expanded). 100 means no hubs."""
        if not len(self) or percentile >= 100:
            return float("inf")
        return float(np.percentile(self.degree, percentile))

    def levels(self) -> list[int]:
        return sorted(self.communities)

    def name_matrix(self, embedder: Embedder) -> np.ndarray:
        """Name vectors of every node for this embedder, computed once per snapshot (cache-first in the store)."""
        with self._lock:
            if embedder.model_id not in self.name_vectors:
                # Query time: the build stored these names' vectors; any it lacks are encoded, not stored.
                self.name_vectors[embedder.model_id] = name_vectors(self.names, embedder, self.store, self.workspace,
                                                                    write=False)
            return self.name_vectors[embedder.model_id]


@dataclass(frozen=True)
class ActiveGraph:
    """Active nodes (store rows, ordered by id) and the edges between them as index arrays into `nodes`."""

    nodes: list[tuple[Any, ...]]
    a: np.ndarray
    b: np.ndarray
    w: np.ndarray

    @property
    def ids(self) -> list[str]:
        return [n[0] for n in self.nodes]


def active_graph(store: GraphSource, workspace: str, min_phrase_chunks: int) -> ActiveGraph:
    nodes = [n for n in store.graph.nodes(workspace) if is_active(n[2], n[4], min_phrase_chunks)]
    return _indexed(nodes, *store.graph.edge_arrays(workspace))


def region_graph(store: GraphSource, node_ids: Sequence[str], workspace: str, min_phrase_chunks: int) -> ActiveGraph:
    """The active graph induced on `node_ids` (the active ones among them and the edges between those), read
    without the rest of the graph: an incremental update's region."""
    nodes = [n for n in store.graph.nodes_by_id(node_ids, workspace) if is_active(n[2], n[4], min_phrase_chunks)]
    return _indexed(nodes, *store.graph.edge_arrays_among([n[0] for n in nodes], workspace))


_SMALL_EDGES = 5000  # below this, a dict lookup per edge is cheaper than building two pandas indexes


def _indexed(nodes: list[tuple[Any, ...]], src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> ActiveGraph:
    if len(src) <= _SMALL_EDGES:  # an update's region: a few hundred edges
        pos = {n[0]: i for i, n in enumerate(nodes)}
        a = np.fromiter((pos.get(x, -1) for x in src), dtype=np.int64, count=len(src))
        b = np.fromiter((pos.get(x, -1) for x in dst), dtype=np.int64, count=len(dst))
    else:
        import pandas as pd

        # Ids to positions in one vectorised lookup (-1: an inactive end): per edge in Python it was a graph
        # update's biggest single cost on SciFact (~160k edges).
        index = pd.Index([n[0] for n in nodes])
        a = np.asarray(index.get_indexer(pd.Index(src)), dtype=np.int64)
        b = np.asarray(index.get_indexer(pd.Index(dst)), dtype=np.int64)
    keep = (a >= 0) & (b >= 0)
    return ActiveGraph(nodes, a[keep], b[keep], w[keep])


def load_snapshot(store: GraphSource, workspace: str, min_phrase_chunks: int, g: ActiveGraph | None = None
                  ) -> GraphSnapshot | None:
    """The snapshot of the stored graph (`g`: its active graph when the caller has just read it)."""
    state = store.graph.state(workspace)
    if state is None:
        return None
    g = g if g is not None else active_graph(store, workspace, min_phrase_chunks)
    rows = [(c.level, c.community_id, c.parent_id, c.node_id, c.members_hash)
            for c in store.communities.communities(workspace)]
    prov = store.graph.all_node_chunks(workspace)
    return _snapshot(state, g, rows, prov, store, workspace)


def region_snapshot(store: GraphSource, g: ActiveGraph, communities: Sequence[Any], workspace: str,
                    state: Any = None) -> GraphSnapshot | None:
    """A snapshot of an update's region only (`g`: its induced active graph; `communities`: core.graph.communities
    Community records over its nodes): what build_summaries needs to write the summaries of the region's new
    memberships, without reading the rest of the graph. It has no alias index (no query runs on it). `state`: the
    stored build state when the caller has just written it."""
    state = state if state is not None else store.graph.state(workspace)
    if state is None:
        return None
    rows = [(c.level, c.community_id, c.parent_id, nid, c.members_hash) for c in communities for nid in c.members]
    prov = store.graph.node_chunks(g.ids, workspace)
    cols = {"node_id": [p.node_id for p in prov], "chunk_id": [p.chunk_id for p in prov],
            "doc_id": [p.doc_id for p in prov], "mentions": np.asarray([p.mentions for p in prov], dtype=np.int64)}
    return _snapshot(state, g, rows, cols, store, workspace, aliases=False)


def _snapshot(state: Any, g: ActiveGraph, community_rows: Sequence[tuple[int, str, Any, str, str]],
              prov: Any, store: GraphSource, workspace: str, *, aliases: bool = True) -> GraphSnapshot:
    nodes, ids = g.nodes, g.ids
    n = len(ids)
    if len(g.a):
        src = np.concatenate([g.a, g.b])
        dst = np.concatenate([g.b, g.a])
        ww = np.concatenate([g.w, g.w])
        order = np.lexsort((dst, -ww, src))  # by row, then heaviest first, then neighbour id
        src, dst, ww = src[order], dst[order], ww[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    else:
        dst, ww, indptr = np.zeros(0, np.int64), np.zeros(0), np.zeros(n + 1, dtype=np.int64)
    pos = {nid: i for i, nid in enumerate(ids)}
    alias_index: dict[str, int] = {}
    for i, node in enumerate(nodes if aliases else ()):
        for alias in (*(node[7] or ()), node[0].split("|")[0], normalise_name(node[1])):
            # The busiest node wins a shared alias (only possible when homonyms are split by type).
            j = alias_index.get(alias)
            if j is None or nodes[j][4] < node[4]:
                alias_index[alias] = i
    communities: dict[int, dict[str, list[int]]] = {}
    node_comm: dict[int, dict[int, str]] = {}
    hashes: dict[tuple[int, str], str] = {}
    for level, cid, _parent, nid, mh in community_rows:
        if nid not in pos:
            continue
        communities.setdefault(level, {}).setdefault(cid, []).append(pos[nid])
        node_comm.setdefault(level, {})[pos[nid]] = cid
        hashes[(level, cid)] = mh
    # Provenance of the active nodes stays in memory: a query then needs no scan of the mention table.
    node_chunks: list[list[tuple[str, str, int]]] = [[] for _ in range(n)]
    for nid, cid, did, cnt in zip(prov["node_id"], prov["chunk_id"], prov["doc_id"], prov["mentions"].tolist()):
        p = pos.get(nid)
        if p is not None:
            node_chunks[p].append((cid, did, cnt))
    return GraphSnapshot(
        version=state.version, corpus_version=state.corpus_version, builder=state.builder, node_ids=ids,
        names=[x[1] for x in nodes], types=[x[2] for x in nodes], descriptions=[x[3] for x in nodes],
        n_chunks=np.asarray([x[4] for x in nodes], dtype=np.int64), indptr=indptr, nbrs=dst, weights=ww,
        alias_index=alias_index, communities=communities, node_community=node_comm, members_hash=hashes,
        node_chunks=node_chunks, store=store, workspace=workspace,
    )


class GraphCache:
    """One snapshot per (store, workspace, phrase filter), reloaded when the stored graph version moves.
    Safe to share across Streamlit sessions: a lock guards reloads and snapshots are read-only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, str, int], GraphSnapshot | None] = {}

    def get(self, store: GraphSource, workspace: str, min_phrase_chunks: int) -> GraphSnapshot | None:
        state = store.graph.state(workspace)
        key = (id(store), workspace, min_phrase_chunks)
        with self._lock:
            snap = self._entries.get(key)
            if state is None:
                self._entries.pop(key, None)
                return None
            if snap is None or snap.version != state.version or snap.store is not store:
                snap = load_snapshot(store, workspace, min_phrase_chunks)
                self._entries[key] = snap
            return snap

    def invalidate(self) -> None:
        with self._lock:
            self._entries.clear()
