"""Hierarchical Leiden communities behind one seeded function (igraph 1.0.0 community_leiden, pinned)."""
from __future__ import annotations

import hashlib
import random
import threading
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import version as _dist_version
from typing import Any, Sequence

import numpy as np

# igraph loads when a build runs Leiden, not when a query imports the graph package (the CLI's cold start).
LEIDEN_VERSIONS = f"igraph {_dist_version('igraph')} community_leiden"
# igraph draws from one process-wide generator; a seeded run swaps in its own and must not interleave with another.
_RNG_LOCK = threading.Lock()


@dataclass(frozen=True)
class Community:
    level: int
    community_id: str
    parent_id: str | None
    members: tuple[str, ...]  # node ids, sorted

    @cached_property  # read once per member row when the rows are written: computed once per community
    def members_hash(self) -> str:
        """Content address of the membership: a summary stays valid exactly as long as this does not change."""
        return hashlib.sha256("\x1f".join(self.members).encode()).hexdigest()[:16]


def leiden(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray, *, seed: int, resolution: float = 1.0) -> np.ndarray:
    """One seeded Leiden run (modularity with a resolution, weighted) over vertices 0..n-1: a label per vertex.
    igraph's C implementation: measured here >10x faster than leidenalg's on 30k nodes / 600k edges."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    import igraph as ig  # lazy: a heavy library only a graph build needs

    g = ig.Graph(n=n, edges=np.column_stack([a, b]).tolist() if len(a) else [], directed=False)
    with _RNG_LOCK:
        ig.set_random_number_generator(random.Random(seed))
        try:
            part = g.community_leiden(objective_function="modularity", weights=w.tolist() if len(w) else None,
                                      resolution=resolution, n_iterations=2)
        finally:
            ig.set_random_number_generator(random)
    return np.asarray(part.membership, dtype=np.int64)


def _ordered_groups(labels: np.ndarray, members: np.ndarray) -> list[np.ndarray]:
    """Groups of `members` by label, biggest first, ties by smallest member: ids stable for equal graphs."""
    if not len(members):
        return []
    order = np.lexsort((members, labels))
    lab, mem = labels[order], members[order]
    cuts = np.flatnonzero(np.diff(lab)) + 1
    groups = np.split(mem, cuts)
    return sorted(groups, key=lambda g: (-len(g), int(g[0])))


def hierarchical_leiden(
    node_ids: Sequence[str], edges: Sequence[tuple[str, str, float]], *, seed: int = 42, resolution: float = 1.0,
    max_cluster_size: int = 30, max_levels: int = 3,
) -> list[Community]:
    """Level 0 partitions the whole graph; each further level re-runs Leiden (at twice the resolution) inside every
    community larger than `max_cluster_size`. Every level is a full partition (a community that is not split
    carries over unchanged), so any level can colour the whole graph. Node and edge order do not matter: input is
    sorted and parallel edges are summed first."""
    order = sorted(set(node_ids))
    pos = {nid: i for i, nid in enumerate(order)}
    merged: dict[tuple[int, int], float] = {}
    for x, y, wt in edges:
        if x in pos and y in pos and x != y:
            key = (min(pos[x], pos[y]), max(pos[x], pos[y]))
            merged[key] = merged.get(key, 0.0) + float(wt)
    keys = sorted(merged)
    a = np.asarray([k[0] for k in keys], dtype=np.int64)
    b = np.asarray([k[1] for k in keys], dtype=np.int64)
    w = np.asarray([merged[k] for k in keys], dtype=np.float64)
    return hierarchical_leiden_arrays(order, a, b, w, seed=seed, resolution=resolution,
                                      max_cluster_size=max_cluster_size, max_levels=max_levels)


def hierarchical_leiden_arrays(
    order: Sequence[str], a: np.ndarray, b: np.ndarray, w: np.ndarray, *, seed: int = 42, resolution: float = 1.0,
    max_cluster_size: int = 30, max_levels: int = 3,
) -> list[Community]:
    """The same over sorted node ids and unique edges given as index arrays (a < b): no per-edge Python objects,
    which is what keeps a 5k-document graph's build in memory."""
    n = len(order)
    a, b, w = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64), np.asarray(w, dtype=np.float64)
    srt = np.lexsort((b, a))
    a, b, w = a[srt], b[srt], w[srt]
    out: list[Community] = []
    level_groups = _ordered_groups(leiden(n, a, b, w, seed=seed, resolution=resolution), np.arange(n))
    parents: list[str | None] = [None] * len(level_groups)
    for level in range(max_levels):
        ids = [f"L{level}-{k}" for k in range(len(level_groups))]
        out += [Community(level, cid, parent, tuple(order[int(m)] for m in g))
                for cid, parent, g in zip(ids, parents, level_groups)]
        if level + 1 >= max_levels:
            break
        group_of = np.empty(n, dtype=np.int64)
        for k, g in enumerate(level_groups):
            group_of[g] = k
        same = group_of[a] == group_of[b]
        next_groups: list[np.ndarray] = []
        next_parents: list[str | None] = []
        split_any = False
        for k, (cid, g) in enumerate(zip(ids, level_groups)):
            parts = [g]
            if len(g) > max_cluster_size:
                inside = same & (group_of[a] == k)
                local = np.full(n, -1, dtype=np.int64)
                local[g] = np.arange(len(g))
                # Each level looks twice as closely: at the parent's resolution a community is, by construction,
                # already the best grouping of its members and would rarely split.
                sub = leiden(len(g), local[a[inside]], local[b[inside]], w[inside], seed=seed,
                             resolution=resolution * 2 ** (level + 1))
                if len(np.unique(sub)) > 1:
                    parts = [g[grp] for grp in _ordered_groups(sub, np.arange(len(g)))]
                    split_any = True
            next_groups += parts
            next_parents += [cid] * len(parts)
        if not split_any:
            break
        level_groups, parents = next_groups, next_parents
    return out


# -- local updates -------------------------------------------------------------------------------------------------
def _index(cid: str) -> int:
    """The number of a community id 'L{level}-{k}' (0 for an id of another form)."""
    tail = cid.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@dataclass
class _Node:
    """A community of the tree being rebuilt: `old` when it is a stored community kept as it was (its id stays)."""

    level: int
    members: tuple[str, ...]
    parent: "_Node | None" = None
    old: Community | None = None


def local_update(
    order: Sequence[str], a: np.ndarray, b: np.ndarray, w: np.ndarray, previous: Sequence[Community],
    touched: set[str], *, seed: int = 42, resolution: float = 1.0, max_cluster_size: int = 30, max_levels: int = 3,
    outside: Sequence[tuple[int, str]] = (),
) -> tuple[list[Community], set[str]]:
    """Re-cluster only what a change touched. A community is touched when it holds a touched node (one whose
    mentions, edges or activity changed) or lost a node. Untouched top-level communities keep their ids, members and
    subtrees. The touched top-level communities are re-clustered (Leiden, seeded) together with the nodes of no
    previous community, on their induced subgraph, in which each of their untouched child communities is one
    contracted unit (its inner weight kept as a loop, so degrees stay as in the whole graph): such a child comes out
    inside one new top-level community, with its id, members and subtree, so its summaries stay valid. Inside a new
    top-level community over max_cluster_size, the nodes of no kept child are split as hierarchical Leiden splits
    (twice the resolution a level down). Edges from the region to untouched communities did not change (an edge is
    made by chunks, and a changed chunk touches both its ends), so leaving them out is the usual local approximation;
    `graph.communities = full` re-clusters everything, and bench/incremental.py measures the two against each other.
    Returns the communities and the ids of the top-level communities that were re-clustered.

    The region alone: when `order`, the edges and `previous` hold only the touched top-level communities' subtrees
    and the nodes of no community (core/graph/build.py reads just those rows), `outside` names the (level, id) of
    every other stored community; they are kept as they are, and new ids are numbered around them exactly as if
    they had been passed in whole, so both calls return the same region."""
    n = len(order)
    pos = {nid: i for i, nid in enumerate(order)}
    present = set(order)
    children: dict[str, list[Community]] = {}
    for c in previous:
        if c.parent_id:
            children.setdefault(c.parent_id, []).append(c)
    roots = [c for c in previous if c.level == 0]

    def is_hit(c: Community) -> bool:
        return bool(touched.intersection(c.members)) or not present.issuperset(c.members)

    def keep_subtree(c: Community, parent: _Node | None, level: int) -> list[_Node]:
        node = _Node(level, c.members, parent, c)
        out = [node]
        for ch in children.get(c.community_id, []):
            out += keep_subtree(ch, node, level + 1)
        return out

    tree: list[_Node] = []
    hit_roots = [c for c in roots if is_hit(c)]
    for c in roots:
        if not is_hit(c):
            tree += keep_subtree(c, None, 0)
    covered = {m for nd in tree for m in nd.members}
    # Units of the region: untouched real children of touched roots (contracted), then single nodes.
    units: list[tuple[str, ...]] = []
    unit_comm: list[Community | None] = []
    for r in hit_roots:
        for ch in children.get(r.community_id, []):
            if ch.members != r.members and not is_hit(ch):  # equal members: a carried copy, not a split
                units.append(ch.members)
                unit_comm.append(ch)
    in_units = {m for u in units for m in u}
    for nid in order:
        if nid not in covered and nid not in in_units:
            units.append((nid,))
            unit_comm.append(None)
    if units:
        unit_of = np.full(n, -1, dtype=np.int64)
        for k, u in enumerate(units):
            unit_of[[pos[m] for m in u]] = k
        ua, ub = unit_of[a], unit_of[b]
        ok = (ua >= 0) & (ub >= 0)
        lo, hi, ww = np.minimum(ua[ok], ub[ok]), np.maximum(ua[ok], ub[ok]), w[ok]
        keys, inv = np.unique(lo * len(units) + hi, return_inverse=True)
        sums = np.bincount(inv, weights=ww, minlength=len(keys))
        labels = leiden(len(units), keys // len(units), keys % len(units), sums, seed=seed, resolution=resolution)
        for grp in _ordered_groups(labels, np.arange(len(units))):
            members = tuple(sorted(m for k in grp for m in units[k]))
            top = _Node(0, members)
            tree.append(top)
            if len(members) <= max_cluster_size or max_levels < 2:
                continue  # not split a level down (a carried copy follows in _extend_levels)
            loose = sorted(m for k in grp if unit_comm[k] is None for m in units[k])
            for k in grp:
                if unit_comm[k] is not None:
                    tree += keep_subtree(unit_comm[k], top, 1)  # type: ignore[arg-type]
            if loose:
                tree += _split(order, pos, a, b, w, loose, top, seed=seed, resolution=resolution * 2,
                               max_cluster_size=max_cluster_size, max_levels=max_levels - 1)
    return _name(tree, previous, max_levels, outside), {c.community_id for c in hit_roots}


def _split(order: Sequence[str], pos: dict[str, int], a: np.ndarray, b: np.ndarray, w: np.ndarray,
           loose: list[str], parent: _Node, **kw: Any) -> list[_Node]:
    """Hierarchical Leiden over the loose nodes' induced subgraph, one level below `parent`."""
    local = np.full(len(order), -1, dtype=np.int64)
    local[[pos[m] for m in loose]] = np.arange(len(loose))
    inside = (local[a] >= 0) & (local[b] >= 0)
    sub = hierarchical_leiden_arrays(loose, local[a[inside]], local[b[inside]], w[inside], **kw)
    made: dict[str, _Node] = {}
    out = []
    for c in sorted(sub, key=lambda c: (c.level, _index(c.community_id))):
        node = _Node(parent.level + 1 + c.level, c.members, made.get(c.parent_id or "", parent))
        made[c.community_id] = node
        out.append(node)
    return out


def _name(tree: list[_Node], previous: Sequence[Community], max_levels: int,
          outside: Sequence[tuple[int, str]] = ()) -> list[Community]:
    """Community records for the rebuilt tree: a kept community keeps its id; a new one takes an id a re-clustered
    community freed at its level (smallest first), then the next after the highest the level has held, so
    re-clustering everything names the communities as a full build does."""
    held = {nd.old.community_id for nd in tree if nd.old is not None}
    by_level: dict[int, list[Community]] = {}
    for c in previous:
        by_level.setdefault(c.level, []).append(c)
    free = {lv: sorted((_index(c.community_id) for c in cs if c.community_id not in held), reverse=True)
            for lv, cs in by_level.items()}
    nxt = {lv: 1 + max(_index(c.community_id) for c in cs) for lv, cs in by_level.items()}
    for lv, cid in outside:  # kept communities outside the region: their ids are held, never reused
        nxt[lv] = max(nxt.get(lv, 0), 1 + _index(cid))
    ids: dict[int, str] = {}
    for nd in tree:
        if nd.old is not None:
            ids[id(nd)] = nd.old.community_id
    fresh = sorted((nd for nd in tree if nd.old is None), key=lambda nd: (nd.level, -len(nd.members), nd.members))
    for nd in fresh:
        pool = free.get(nd.level)
        if pool:
            k = pool.pop()
        else:
            k = nxt.get(nd.level, 0)
            nxt[nd.level] = k + 1
        ids[id(nd)] = f"L{nd.level}-{k}"
    comms = [Community(nd.level, ids[id(nd)], ids[id(nd.parent)] if nd.parent is not None else None, nd.members)
             for nd in tree]
    return _extend_levels(comms, max_levels, outside)


def _extend_levels(comms: list[Community], max_levels: int, outside: Sequence[tuple[int, str]] = ()
                   ) -> list[Community]:
    """Every level a full partition: a leaf above the deepest level is carried down (a new id, itself the parent),
    as hierarchical_leiden_arrays carries an unsplit community; kept subtrees and the re-clustered region may end
    at different depths."""
    depth = min(max_levels, 1 + max([c.level for c in comms] + [lv for lv, _ in outside], default=-1))
    parents = {c.parent_id for c in comms if c.parent_id}
    by_level: dict[int, list[Community]] = {}
    for c in comms:
        by_level.setdefault(c.level, []).append(c)
    nxt = {lv: 1 + max(_index(c.community_id) for c in cs) for lv, cs in by_level.items()}
    for lv, cid in outside:
        nxt[lv] = max(nxt.get(lv, 0), 1 + _index(cid))
    out = list(comms)
    for level in range(depth - 1):
        for c in sorted(by_level.get(level, []), key=lambda c: _index(c.community_id)):
            if c.community_id in parents:
                continue
            k = nxt.get(level + 1, 0)
            nxt[level + 1] = k + 1
            copy = Community(level + 1, f"L{level + 1}-{k}", c.community_id, c.members)
            by_level.setdefault(level + 1, []).append(copy)
            out.append(copy)
    return sorted(out, key=lambda c: (c.level, _index(c.community_id)))


def modularity(order: Sequence[str], a: np.ndarray, b: np.ndarray, w: np.ndarray, comms: Sequence[Community],
               level: int = 0) -> float:
    """Weighted modularity (resolution 1) of one level's partition over the graph."""
    import igraph as ig  # lazy: a heavy library only graph work needs

    label = {nid: k for k, c in enumerate(c for c in comms if c.level == level) for nid in c.members}
    g = ig.Graph(n=len(order), edges=np.column_stack([a, b]).tolist() if len(a) else [], directed=False)
    membership = [label.get(nid, -1) for nid in order]
    spare = max(membership, default=0) + 1
    membership = [m if m >= 0 else spare + i for i, m in enumerate(membership)]  # a missing node: its own community
    return float(g.modularity(membership, weights=w.tolist() if len(w) else None))


def agreement(order: Sequence[str], x: Sequence[Community], y: Sequence[Community], level: int = 0
              ) -> dict[str, float]:
    """How alike two partitions of the same nodes are at one level: NMI and adjusted Rand index (1 = identical)."""
    def labels(cs: Sequence[Community]) -> list[int]:
        lab = {nid: k for k, c in enumerate(c for c in cs if c.level == level) for nid in c.members}
        spare = len(lab) + 1
        return [lab.get(nid, spare + i) for i, nid in enumerate(order)]

    lx, ly = labels(x), labels(y)
    if not order:
        return {"nmi": 1.0, "ari": 1.0}
    import igraph as ig  # lazy: a heavy library only graph work needs

    return {"nmi": float(ig.compare_communities(lx, ly, method="nmi")),
            "ari": float(ig.compare_communities(lx, ly, method="adjusted_rand"))}
