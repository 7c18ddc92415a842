"""Graph build workflow: keeps the stored graph in step with the corpus (full, incremental, re-resolve), thin glue
that reads settings and tables and calls the pure operations (extract, resolve, communities)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from core.config import GraphConfig
from core.graph.communities import (
    LEIDEN_VERSIONS,
    Community,
    agreement,
    hierarchical_leiden_arrays,
    local_update,
    modularity,
)
from core.graph.extract import extract_all, make_extractor
from core.graph.model import LLM_BUILT, STATISTICAL, BuildReport, ChunkExtraction
from core.graph.resolve import (
    Resolution,
    SynonymGroup,
    element_id,
    normalise_name,
    parse_synonyms,
    resolve,
    suggest_merges,
)
from core.graph.rules import merge_item_id, node_rows
from core.graph.snapshot import (
    ActiveGraph,
    active_graph,
    is_active,
    load_snapshot,
    name_vectors,
    region_graph,
    region_snapshot,
)
from core.graph.summaries import build_summaries
from core.models.embed import Embedder
from core.models.llm import LLMError
from core.types import DEFAULT_WORKSPACE, MergeItem, Usage

if TYPE_CHECKING:  # a build workflow writes through several repositories: it is handed the whole store
    from core.store import Store

Progress = Callable[[str, int, int], None]

EXTRACT_BATCH = 200  # chunks per stored batch of extractions

# Settings that change what extraction writes: when they differ from the stored graph's, only a full rebuild
# makes the whole graph consistent again, and the user is told so.
_EXTRACTION_KEYS = ("builder", "max_entities_per_chunk", "llm_model")


def _settings(cfg: GraphConfig) -> dict[str, Any]:
    keys = ("builder", "llm_model", "max_entities_per_chunk", "min_phrase_chunks", "merge_threshold", "split_by_type",
            "max_cluster_size", "max_levels", "resolution", "seed")
    return {k: getattr(cfg, k) for k in keys}


def builder_label(builder: str) -> str:
    return LLM_BUILT if builder == "llm" else STATISTICAL


# -- resolution ----------------------------------------------------------------------------------------------------
def current_resolution(store: Store, cfg: GraphConfig, workspace: str, chunk_ids: Sequence[str] | None = None,
                       queue: Sequence[MergeItem] | None = None, known: set[tuple[str, str]] | None = None,
                       skip: Sequence[str] = ()) -> Resolution:
    """Resolution from the stored elements, the synonym list and the review decisions (in decision order).
    `chunk_ids`: only the elements of these chunks' mentions (and of the synonym list's names) are read; every
    element among them resolves as with all elements read, since only the synonym list (whose types are read
    whole) and the decisions join elements. `queue`: the review queue when the caller has just read it.
    `known`: elements of mentions not stored yet (an update's new extractions), added to those read; `skip`:
    chunks whose stored mentions are left out (ones the update removes before it stores the new ones)."""
    groups = [SynonymGroup(tuple(n)) for n in store.review.synonyms(workspace)]
    queue = store.review.queue(workspace=workspace) if queue is None else queue
    decided = [q for q in queue if q.status != "pending"]
    decided.sort(key=lambda q: (q.decided_at, q.item_id))
    approved = [(q.keep_id, q.other_id) for q in decided if q.status == "approved"]
    rejected = [(q.keep_id, q.other_id) for q in decided if q.status == "rejected"]
    elements = (store.graph.elements(workspace) if chunk_ids is None else store.graph.elements_of_chunks(
        chunk_ids, [normalise_name(n) for g in groups for n in g.names], workspace, skip=skip))
    if known:
        elements = [*elements, *known]  # resolve() takes them as a set
    return resolve(elements, synonyms=groups, approved=approved, rejected=rejected, split_by_type=cfg.split_by_type)


def _mapping(res: Resolution) -> dict[str, str]:
    return {e: n for e, n in res.node_of.items() if e != n}


# -- steps ---------------------------------------------------------------------------------------------------------
def _store_extractions(store: Store, exts: Sequence[ChunkExtraction], builder: str, workspace: str) -> Usage:
    usage = Usage()
    chunk_rows, mention_rows, relation_rows = [], [], []
    for x in exts:
        usage = usage + x.usage
        chunk_rows.append((x.chunk_id, x.doc_id, builder))
        mention_rows += [(x.chunk_id, x.doc_id, m.norm, m.surface, m.type, m.count, m.description) for m in x.mentions]
        relation_rows += [(x.chunk_id, x.doc_id, r.src, r.dst, r.weight, r.description) for r in x.relations]
    store.graph.add_extractions(chunk_rows, mention_rows, relation_rows, workspace)
    return usage


def _resolved_rows(exts: Sequence[ChunkExtraction], builder: str, res: Resolution, split_by_type: bool
                   ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]] | None:
    """The rows _store_extractions writes, with the node ids apply_resolution would set on them (a mention: its
    element's node; a relation end: the node of its own chunk's mention of that norm, None without one); None
    when a chunk names one norm as two nodes (which one apply_resolution's join takes is not defined)."""
    mapping = _mapping(res)
    chunk_rows, mention_rows, relation_rows = [], [], []
    for x in exts:
        chunk_rows.append((x.chunk_id, x.doc_id, builder))
        ends: dict[str, str | None] = {}
        for m in x.mentions:
            element = element_id(m.norm, m.type, split_by_type) if m.norm is not None and (
                m.type is not None or not split_by_type) else None
            node = mapping.get(element, element) if element is not None else None
            if m.norm is not None:  # a NULL norm joins no relation end
                if m.norm in ends and ends[m.norm] != node:
                    return None
                ends[m.norm] = node
            mention_rows.append((x.chunk_id, x.doc_id, m.norm, m.surface, m.type, m.count, m.description, node))
        relation_rows += [(x.chunk_id, x.doc_id, r.src, r.dst, r.weight, r.description,
                           ends.get(r.src) if r.src is not None else None,
                           ends.get(r.dst) if r.dst is not None else None) for r in x.relations]
    return chunk_rows, mention_rows, relation_rows


def stored_communities(store: Store, workspace: str) -> list[Community]:
    """The stored community tree as Community records (members sorted)."""
    return _communities_of(store.communities.membership_columns(workspace))


def _communities_of(cols: dict[str, Any]) -> list[Community]:
    levels, cids, nids = cols["level"].tolist(), cols["community_id"].tolist(), cols["node_id"].tolist()
    parents = [None if p is None or p != p else p for p in cols["parent_id"].tolist()]  # NULL may read as NaN
    groups: dict[tuple[int, str], tuple[str | None, list[str]]] = {}
    for level, cid, parent, nid in zip(levels, cids, parents, nids):
        groups.setdefault((int(level), cid), (parent, []))[1].append(nid)
    return [Community(level, cid, parent, tuple(sorted(members))) for (level, cid), (parent, members) in groups.items()]


def cluster(store: Store, cfg: GraphConfig, workspace: str, touched: set[str] | None = None, g: Any = None
            ) -> tuple[list[Community], Any]:
    """The communities of the active graph: all of it re-clustered (touched None, graph.communities = full, or no
    stored communities), or only the communities the touched nodes are in (core/graph/communities.py
    local_update). Returns them with the active graph they partition (`g`, when the caller has it loaded)."""
    g = g if g is not None else active_graph(store, workspace, cfg.min_phrase_chunks)
    a, b = np.minimum(g.a, g.b), np.maximum(g.a, g.b)
    kw = dict(seed=cfg.seed, resolution=cfg.resolution, max_cluster_size=cfg.max_cluster_size,
              max_levels=cfg.max_levels)
    previous = stored_communities(store, workspace) if touched is not None and cfg.communities == "local" else []
    if previous:
        comms, _ = local_update(g.ids, a, b, g.w, previous, touched or set(), **kw)
    else:
        comms = hierarchical_leiden_arrays(g.ids, a, b, g.w, **kw)
    return comms, g


def recompute_communities(store: Store, cfg: GraphConfig, workspace: str, touched: set[str] | None = None,
                          g: Any = None) -> tuple[int, int, int]:
    """Communities over the active graph (cluster: all, or only those `touched` nodes are in); returns (levels,
    communities, summaries invalidated)."""
    comms, _ = cluster(store, cfg, workspace, touched, g)
    rows = [(c.level, c.community_id, c.parent_id, nid, c.members_hash) for c in comms for nid in c.members]
    invalidated = store.communities.put_communities(rows, workspace)
    levels = len({c.level for c in comms})
    return levels, len(comms), invalidated


def _active_names(store: Store, cfg: GraphConfig, workspace: str, g: ActiveGraph | None = None
                  ) -> tuple[list[str], list[str], list[int]]:
    """(ids, names, chunk counts) of the active nodes, ordered by id: from `g` when loaded, else three columns of
    the node table (not the whole rows an ActiveGraph holds)."""
    if g is not None:
        return [n[0] for n in g.nodes], [n[1] for n in g.nodes], [int(n[4]) for n in g.nodes]
    cols = store.graph.node_names(workspace)
    keep = [i for i, (t, c) in enumerate(zip(cols["type"].tolist(), cols["n_chunks"].tolist()))
            if is_active(t, c, cfg.min_phrase_chunks)]
    ids, names, sizes = cols["node_id"].tolist(), cols["name"].tolist(), cols["n_chunks"].tolist()
    return [ids[i] for i in keep], [names[i] for i in keep], [int(sizes[i]) for i in keep]


def refresh_suggestions(store: Store, cfg: GraphConfig, embedder: Embedder, workspace: str,
                        new_nodes: set[str] | None, g: Any = None, res: Resolution | None = None,
                        active: tuple[list[str], list[str], list[int]] | None = None,
                        queue: Sequence[MergeItem] | None = None) -> int:
    """Queue merge suggestions (name cosine >= merge_threshold) for new nodes against all active nodes, and drop
    pending ones that no longer make sense (a node left, or both already resolve to one node). `queue`: the review
    queue when the caller has read it since its last change."""
    ids, name_list, size_list = active if active is not None else _active_names(store, cfg, workspace, g)
    res = res if res is not None else current_resolution(store, cfg, workspace)
    alive = set(ids)
    # Read once: the pending items and every decided pair.
    queue = store.review.queue(workspace=workspace) if queue is None else queue
    stale = [q.item_id for q in queue if q.status == "pending"
             and (res(q.keep_id) == res(q.other_id) or res(q.keep_id) not in alive or res(q.other_id) not in alive)]
    store.review.delete_queue_items(stale, workspace)
    if len(ids) < 2 or (new_nodes is not None and alive.isdisjoint(new_nodes)):
        # No pair to score (suggest_merges scores only pairs touching an active new node): no name vector is read.
        return 0
    names = dict(zip(ids, name_list))
    sizes = dict(zip(ids, size_list))
    vecs = name_vectors(name_list, embedder, store, workspace)
    dropped = set(stale)
    decided = [(q.keep_id, q.other_id) for q in queue if q.item_id not in dropped]
    found = suggest_merges(ids, vecs, threshold=cfg.merge_threshold, new=new_nodes, skip=decided, sizes=sizes)
    return store.review.add_suggestions([(merge_item_id(s.a, s.b), s.a, s.b, names[s.a], names[s.b], s.score)
                                         for s in found], workspace)


@dataclass(frozen=True)
class Region:
    """An update's region (core/graph/communities.py local_update): the stored communities it replaces (`previous`:
    the touched top-level communities and their subtrees), the ones it writes (`comms`), the (level, id) of every
    other stored community (`outside`, kept as they are), and the active graph induced on its nodes (`g`)."""

    previous: list[Community]
    comms: list[Community]
    outside: list[tuple[int, str]]
    g: ActiveGraph
    stored: frozenset[tuple[int, str, str | None, str, str]] = frozenset()  # the previous ones' rows as read
    state: Any = None  # the build state it was read under


def local_region(store: Store, cfg: GraphConfig, workspace: str, touched: set[str], state: Any = None
                 ) -> Region | None:
    """The local community update read and computed over the region alone: the touched nodes' top-level
    communities with their subtrees, their nodes and the touched ones, and the edges between them; nothing else
    of the graph is read. Returns what `cluster` would return for the region, or None where it cannot tell from
    the region alone (no stored communities; the phrase filter changed since the last build, so nodes outside the
    region may have changed activity; the region grew a level deeper than the kept communities, which would then
    be carried down too): the caller then reads the whole graph. `state`: the stored build state when the caller
    has just read it."""
    state = state if state is not None else store.graph.state(workspace)
    if (state is None or cfg.communities != "local"
            or state.settings.get("min_phrase_chunks") != cfg.min_phrase_chunks):
        return None
    # The community keys and the region's rows in one read.
    keys, cols = store.communities.region_and_keys(sorted(touched), workspace)
    if not keys:
        return None
    previous = _communities_of(cols) if touched else []
    parents = [None if p is None or p != p else p for p in cols["parent_id"].tolist()]  # NULL may read as NaN
    stored = frozenset(zip([int(v) for v in cols["level"].tolist()], cols["community_id"].tolist(), parents,
                           cols["node_id"].tolist(), cols["members_hash"].tolist())) if touched else frozenset()
    held = {(c.level, c.community_id) for c in previous}
    outside = [k for k in keys if k not in held]
    g = region_graph(store, sorted({m for c in previous for m in c.members} | touched), workspace,
                     cfg.min_phrase_chunks)
    a, b = np.minimum(g.a, g.b), np.maximum(g.a, g.b)
    comms, _ = local_update(g.ids, a, b, g.w, previous, touched, seed=cfg.seed, resolution=cfg.resolution,
                            max_cluster_size=cfg.max_cluster_size, max_levels=cfg.max_levels, outside=outside)
    if outside and max((c.level for c in comms), default=0) > max(lv for lv, _ in outside):
        return None
    return Region(previous, comms, outside, g, stored, state)


def _finish_region(store: Store, cfg: GraphConfig, workspace: str, region: Region, *, mode: str, builder: str,
                   t0: float, embedder: Embedder | None, new_nodes: set[str], usage: Usage, added: int,
                   removed: int, notes: Sequence[str], res: Resolution | None,
                   queue: Sequence[MergeItem] | None = None) -> BuildReport:
    """_finish for an incremental update whose communities were computed over its region (local_region): the
    region's community rows replace the ones it re-clustered, and summaries are written from a snapshot of the
    region; the rest of the graph is read only as the three node columns merge suggestions compare against."""
    comms = region.comms
    rows = [(c.level, c.community_id, c.parent_id, nid, c.members_hash) for c in comms for nid in c.members]
    # The rows of the previous communities replaced by the new ones, as a difference: the rows that came back
    # unchanged stay (most of them, after a small edit), the others are deleted and the new ones inserted.
    new = set(rows)
    delete = sorted({(level, cid, nid) for level, cid, _p, nid, _h in region.stored - new})
    insert = [r for r in rows if r not in region.stored]
    levels = len({c.level for c in comms} | {lv for lv, _ in region.outside})
    n_comms = len(comms) + len(region.outside)
    active = _active_names(store, cfg, workspace)
    suggestions = (refresh_suggestions(store, cfg, embedder, workspace, new_nodes, res=res, active=active,
                                       queue=queue) if embedder is not None else 0)
    # The summaries of the region's new memberships, made before the community rows are written (the stored
    # ones they skip are the same: a membership the rows invalidate is not one of the region's), and written with
    # the community rows, the counts (nodes, edges, chunks), the corpus version and the state row in one
    # transaction (the snapshot's version is the state's before the update: the summaries do not read it).
    # A community whose membership holds but whose evidence changed (it holds a node the added or removed chunks
    # touch) loses its summary too, which is then written again below: it was written from passages that changed.
    # Dropped first, from the stored rows; a kill before the final transaction leaves them missing, and the next
    # update (its dirty nodes are these) or a query writes them.
    dropped = store.communities.drop_summaries_of_nodes(sorted(new_nodes), workspace) if new_nodes else 0
    snap = region_snapshot(store, region.g, comms, workspace, region.state)
    made: list[Any] = []
    written = build_summaries(snap, store, workspace=workspace, sink=made) if snap is not None else 0
    stats = {"active_nodes": len(active[0]), "levels": levels, "communities": n_comms, "leiden": LEIDEN_VERSIONS,
             "label": builder_label(builder)}
    _state, counts, invalidated = store.graph.finish_state(
        builder=builder, settings=_settings(cfg), stats=stats, workspace=workspace, community_delete=delete,
        community_rows=insert, summaries=made)
    invalidated += dropped
    return BuildReport(mode, builder_label(builder), added, removed, counts["nodes"], counts["edges"],
                       len(active[0]), levels, n_comms, invalidated, suggestions, time.perf_counter() - t0, usage,
                       tuple(notes), written)


def _finish(store: Store, cfg: GraphConfig, workspace: str, *, mode: str, builder: str, t0: float, embedder: Embedder | None,
            new_nodes: set[str] | None, usage: Usage = Usage(), added: int = 0, removed: int = 0,
            notes: Sequence[str] = (), res: Resolution | None = None, queue: Sequence[MergeItem] | None = None,
            state: Any = None) -> BuildReport:
    """Communities, merge suggestions, the build state and summaries after the node rows changed. `queue`: the
    review queue as read since its last change (merge suggestions read it otherwise); `state`: the stored build
    state as read since its last change."""
    if mode == "incremental" and new_nodes is not None:
        region = local_region(store, cfg, workspace, new_nodes, state)
        if region is not None:
            return _finish_region(store, cfg, workspace, region, mode=mode, builder=builder, t0=t0,
                                  embedder=embedder, new_nodes=new_nodes, usage=usage, added=added, removed=removed,
                                  notes=notes, res=res, queue=queue)
    # The active graph is read once (its nodes and edges are the update's biggest read) for every step below.
    g = active_graph(store, workspace, cfg.min_phrase_chunks)
    # An incremental update (new_nodes: the nodes its chunks touched) re-clusters only their communities.
    levels, n_comms, invalidated = recompute_communities(store, cfg, workspace,
                                                         None if new_nodes is None or mode != "incremental"
                                                         else new_nodes, g)
    if mode == "incremental" and new_nodes:  # as in _finish_region: evidence changed, membership may not have
        invalidated += store.communities.drop_summaries_of_nodes(sorted(new_nodes), workspace)
    suggestions = (refresh_suggestions(store, cfg, embedder, workspace, new_nodes, g, res, queue=queue)
                   if embedder is not None else 0)
    counts = store.graph.totals(workspace)
    active = g.nodes
    stats = {"nodes": counts["nodes"], "edges": counts["edges"], "active_nodes": len(active), "levels": levels,
             "communities": n_comms, "chunks": counts["chunks"], "leiden": LEIDEN_VERSIONS,
             "label": builder_label(builder)}
    store.graph.set_state(corpus_version=store.corpus.corpus_version(workspace), builder=builder,
                          settings=_settings(cfg), stats=stats, workspace=workspace)
    # Extractive summaries cost no model call, so the build stores them for every community whose membership is
    # new: global search then reads them instead of writing them into each process's memory on first use. LLM
    # summaries stay a query-time (or explicit) cost the user sees estimated first.
    snap = load_snapshot(store, workspace, cfg.min_phrase_chunks, g)
    written = build_summaries(snap, store, workspace=workspace) if snap is not None else 0
    return BuildReport(mode, builder_label(builder), added, removed, counts["nodes"], counts["edges"], len(active),
                       levels, n_comms, invalidated, suggestions, time.perf_counter() - t0, usage, tuple(notes),
                       written)


# -- entry points --------------------------------------------------------------------------------------------------
def build_graph(
    store: Store, cfg: GraphConfig, *, embedder: Embedder | None = None, llm: Any = None,
    workspace: str = DEFAULT_WORKSPACE, full: bool = False, progress: Progress | None = None,
) -> BuildReport:
    """Build the graph, or bring it up to date. Only chunks the graph has not seen are extracted and only chunks
    that left the corpus are dropped; `full` forgets every extraction first (synonyms and review decisions stay).
    Node aggregates are rewritten only for the nodes those chunks touch; communities are recomputed (seeded) and
    summaries are invalidated only where a community's membership changed or it holds a node those chunks touch
    (its evidence changed)."""
    t0, c0 = time.perf_counter(), time.process_time()
    state = store.graph.state(workspace)
    notes: list[str] = []
    if full:
        store.graph.clear(workspace)
        state = None
    elif state is not None:
        old = state.settings
        changed = [k for k in _EXTRACTION_KEYS if k in old and old[k] != getattr(cfg, k)]
        if changed:
            notes.append(f"extraction settings changed since the last build ({', '.join(changed)}); only new chunks "
                         "use them: rebuild fully to apply them everywhere")
        if old.get("split_by_type", cfg.split_by_type) != cfg.split_by_type:
            notes.append("split_by_type changed: re-resolving the whole graph")
    # Only the chunks the graph has not seen and the ones that left are read (not the corpus or the graph whole).
    # Also what an update killed half-way left: nodes it touched (graph_dirty) and extractions it stored but never
    # resolved; this one finishes them. Read before the removals below: their nodes are what remove_chunks
    # returns, and a removed chunk's unresolved rows go with it.
    added_ids, removed, dirty, unresolved = store.graph.update_delta(workspace)
    by_id = store.corpus.chunks_by_id(added_ids, workspace)
    added = [by_id[c] for c in added_ids]
    resplit = state is not None and state.settings.get("split_by_type", cfg.split_by_type) != cfg.split_by_type

    extractor, builder, notice = make_extractor(cfg.builder, llm=llm, model=cfg.llm_model, workspace=workspace,
                                                max_entities=cfg.max_entities_per_chunk)
    if notice:
        notes.append(notice)

    def extract(start: int, batch: Sequence[Any]) -> list[ChunkExtraction] | None:
        try:
            return extract_all(batch, extractor, (lambda i, n, s0=start: progress("extracting", s0 + i, len(added)))
                               if progress else None)
        except LLMError as exc:
            notes.append(f"extraction stopped after {start} of {len(added)} new chunks ({exc}); run the update "
                         "again to continue")
            return None

    usage = Usage()
    queue: Sequence[MergeItem] | None = None
    res: Resolution | None = None
    first: list[ChunkExtraction] | None = None
    # A scoped update whose new chunks are one batch, with nothing an earlier update left unresolved: extracted
    # first, then resolved from the new rows in memory (and the stored rows of the synonym list's names), and the
    # removal, the resolved rows and their dirty marks written in one transaction (what remove_chunks,
    # _store_extractions and apply_resolution write, without the statements that re-read the new rows).
    if state is not None and not resplit and len(added) <= EXTRACT_BATCH and not unresolved - set(removed):
        first = extract(0, added) if added else []
        if first is None:
            added, first = [], []
        queue = store.review.queue(workspace=workspace)  # nothing below changes it before merge suggestions read it
        if progress:
            progress("resolving", 0, 1)
        res = current_resolution(store, cfg, workspace, [], queue,
                                 known={(m.norm, m.type) for x in first for m in x.mentions}, skip=removed)
        rows = _resolved_rows(first, builder, res, cfg.split_by_type)
        if rows is not None:
            gone, touched = store.graph.replace_extractions(removed, *rows, workspace=workspace)
            affected = gone | dirty | touched
            for x in first:
                usage = usage + x.usage
        else:  # a chunk names one norm as two nodes: stored and resolved as below
            queue = res = None
    if res is None:
        affected = store.graph.remove_chunks(removed, workspace) | (set() if full else dirty)
        # Extractions are stored in batches: if an LLM call fails for good, what was already paid for is kept and
        # the next update carries on from there (its chunks are seen; their rows are resolved below).
        for start in range(0, len(added), EXTRACT_BATCH):
            exts = first if first is not None and start == 0 else extract(start, added[start:start + EXTRACT_BATCH])
            if exts is None:
                added = added[:start]
                break
            usage = usage + _store_extractions(store, exts, builder, workspace)
        if progress:
            progress("resolving", 0, 1)
        new_rows = sorted({c.chunk_id for c in added} | (unresolved - set(removed)))
        scope = None if (state is None or resplit) else new_rows
        queue = store.review.queue(workspace=workspace)  # nothing below changes it before merge suggestions read it
        res = current_resolution(store, cfg, workspace, scope, queue)
        # Scoped, it returns the nodes of the new rows (every node their mentions and relation ends name); a whole
        # re-resolution re-aggregates every node, so `affected` is not used then.
        affected |= store.graph.apply_resolution(_mapping(res), split_by_type=cfg.split_by_type, chunk_ids=scope,
                                                 workspace=workspace)
    whole = state is None or resplit
    _reaggregate(store, None if whole else affected, _display(res), workspace)
    if progress:
        progress("communities", 0, 1)
    mode = "full" if full or state is None else "incremental"
    report = _finish(store, cfg, workspace, mode=mode, builder=builder if added or state is None else state.builder,
                     t0=t0, embedder=embedder, new_nodes=None if whole else affected, usage=usage,
                     added=len(added), removed=len(removed), notes=notes, res=res, queue=queue, state=state)
    return replace(report, cpu_seconds=time.process_time() - c0)


@dataclass(frozen=True)
class Follow:
    """What a corpus change did to the graph: the update's report, or a notice that the graph was left behind."""

    report: BuildReport | None = None
    notice: str = ""


BEHIND_NOTICE = ("the entity graph was not updated (graph.follow_ingest = false) and is behind the corpus now; "
                 "`python -m core graph update` (or Update on the Graph page) catches it up")


def follow_corpus(
    store: Store, cfg: GraphConfig, *, embedder: Embedder | None = None, llm: Any = None,
    workspace: str = DEFAULT_WORKSPACE, doc_ids: Sequence[str] = (),
) -> Follow:
    """The hook for every path that adds, replaces or deletes documents (ingest on either engine, the Corpus page,
    `python -m core delete`): an incremental update when a graph exists (or graph building is enabled), unless
    graph.follow_ingest is off, when the first change after each build says so once, with the command.
    `doc_ids` is informational: the update finds new and vanished chunks itself, so a missed call is caught up by
    the next one."""
    state = store.graph.state(workspace)
    if state is None and not cfg.enabled:
        return Follow()
    if not cfg.follow_ingest:
        if state is not None and store.graph.first_notice(f"graph_behind:{state.version}:{state.built_at}",
                                                          workspace):
            return Follow(notice=BEHIND_NOTICE)
        return Follow()
    report = build_graph(store, cfg, embedder=embedder, llm=llm, workspace=workspace)
    if doc_ids:
        report = BuildReport(**{**report.__dict__, "notes": (*report.notes, f"documents: {', '.join(doc_ids)}")})
    return Follow(report)


def recluster(store: Store, cfg: GraphConfig, *, workspace: str = DEFAULT_WORKSPACE
              ) -> tuple[BuildReport, dict[str, float]]:
    """The periodic full re-clustering (`python -m core graph communities`): hierarchical Leiden over the whole
    active graph, whatever graph.communities says, measured against the partition it replaces (level-0 modularity
    before and after, NMI and adjusted Rand index between them). No extraction runs; summaries are invalidated and
    written only where a membership changed."""
    t0 = time.perf_counter()
    state = store.graph.state(workspace)
    if state is None:
        raise ValueError("no graph yet: build it first (`python -m core graph build`)")
    g = active_graph(store, workspace, cfg.min_phrase_chunks)
    lo, hi = np.minimum(g.a, g.b), np.maximum(g.a, g.b)
    before = stored_communities(store, workspace)
    report = _finish(store, cfg.model_copy(update={"communities": "full"}), workspace, mode="re-cluster",
                     builder=state.builder, t0=t0, embedder=None, new_nodes=None)
    after = stored_communities(store, workspace)
    return report, {"modularity_before": modularity(g.ids, lo, hi, g.w, before),
                    "modularity_after": modularity(g.ids, lo, hi, g.w, after), **agreement(g.ids, before, after)}


def reresolve_graph(store: Store, cfg: GraphConfig, *, embedder: Embedder | None = None,
                    workspace: str = DEFAULT_WORKSPACE) -> BuildReport:
    """After the synonym list or a review decision changed: re-map every mention, re-aggregate, recompute
    communities. No extraction runs."""
    t0 = time.perf_counter()
    state = store.graph.state(workspace)
    res = current_resolution(store, cfg, workspace)
    store.graph.apply_resolution(_mapping(res), split_by_type=cfg.split_by_type, workspace=workspace)
    _reaggregate(store, None, _display(res), workspace)
    return _finish(store, cfg, workspace, mode="re-resolve", builder=state.builder if state else cfg.builder,
                   t0=t0, embedder=embedder, new_nodes=set(), notes=res.conflicts, res=res)


def _display(res: Resolution) -> dict[str, str]:
    return {res(root): name for root, name in res.display.items()}


def _reaggregate(store: Store, node_ids: set[str] | None, display: dict[str, str], workspace: str) -> None:
    """Rewrite the aggregate rows of every node (None) or of `node_ids` and the edges touching them; the naming
    rules live in core/graph/rules.py, the store only counts and writes."""
    nodes = node_rows(store.graph.node_facts(node_ids, workspace), display)
    store.graph.write_aggregates(node_ids, nodes, workspace)


# -- user actions: synonyms and the review queue ---------------------------------------------------------------------
def set_synonyms(store: Store, cfg: GraphConfig, text: str, *, embedder: Embedder | None = None,
                 workspace: str = DEFAULT_WORKSPACE) -> BuildReport | None:
    """Replace the synonym list from its text form (raises SynonymError naming a bad line) and re-resolve."""
    groups = parse_synonyms(text)
    store.review.set_synonyms([g.names for g in groups], workspace)
    if store.graph.state(workspace) is None:
        return None
    return reresolve_graph(store, cfg, embedder=embedder, workspace=workspace)


def decide_merge(store: Store, cfg: GraphConfig, item_id: str, decision: str, *, embedder: Embedder | None = None,
                 workspace: str = DEFAULT_WORKSPACE) -> BuildReport:
    """approve | reject | undo (back to pending) one suggestion, then re-resolve. A rejection keeps the two
    names apart for good: later approvals that would join them are not applied (homonyms stay separate)."""
    status = {"approve": "approved", "reject": "rejected", "undo": "pending"}.get(decision)
    if status is None:
        raise ValueError(f"unknown decision {decision!r}: approve, reject or undo")
    if not store.review.set_queue_status(item_id, status, workspace):
        raise ValueError(f"no merge suggestion {item_id!r}")
    return reresolve_graph(store, cfg, embedder=embedder, workspace=workspace)


def synonyms_text(store: Store, workspace: str = DEFAULT_WORKSPACE) -> str:
    return "\n".join(" = ".join(g) for g in store.review.synonyms(workspace))


@dataclass(frozen=True)
class GraphStats:
    """A workspace's graph at a glance: whether one is built, the stored rows per table (`counts`), the build state
    (version, builder, the corpus version it was built at, when) and the builder's own figures (`figures`: active
    entities, levels, communities, the Leiden versions). `to_dict()` is the CLI's JSON (one flat mapping)."""

    built: bool
    counts: Mapping[str, int]
    version: int = 0
    builder: str = ""
    graph_corpus_version: int = 0
    corpus_version: int = 0
    built_at: str = ""
    figures: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stale(self) -> bool:
        return self.built and self.graph_corpus_version != self.corpus_version

    @property
    def nodes(self) -> int:
        return int(self.counts.get("nodes", 0))

    @property
    def edges(self) -> int:
        return int(self.counts.get("edges", 0))

    @property
    def pending_merges(self) -> int:
        return int(self.counts.get("pending_merges", 0))

    @property
    def active_nodes(self) -> int:
        return int(self.figures.get("active_nodes", self.nodes))

    @property
    def communities(self) -> int:
        return int(self.figures.get("communities", self.counts.get("communities", 0)))

    @property
    def levels(self) -> int:
        return int(self.figures.get("levels", 0))

    @property
    def leiden(self) -> Any:
        return self.figures.get("leiden", "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"built": self.built, **self.counts}
        if self.built:
            out.update({"version": self.version, "builder": self.builder,
                        "graph_corpus_version": self.graph_corpus_version, "corpus_version": self.corpus_version,
                        "stale": self.stale, **self.figures, "built_at": self.built_at})
        return out

    def __getitem__(self, key: str) -> Any:  # the flat mapping's entries, for callers that read by key
        return self.to_dict()[key]


def graph_stats(store: Store, workspace: str = DEFAULT_WORKSPACE) -> GraphStats:
    """Counts, the stored build state and whether the graph is behind the corpus."""
    state = store.graph.state(workspace)
    counts = store.graph.counts(workspace)
    if state is None:
        return GraphStats(False, counts)
    return GraphStats(True, counts, state.version, builder_label(state.builder), state.corpus_version,
                      store.corpus.corpus_version(workspace), str(state.built_at), dict(state.stats))
