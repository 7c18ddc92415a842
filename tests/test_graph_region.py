"""Incremental graph updates read and write only their region (issue #31): the store's narrow queries return what
the whole reads return for the same ids, and an update computed over its region alone writes exactly what the
whole-graph local update writes, touching only the communities of the edited document."""
from __future__ import annotations

import numpy as np
import pytest

import core.graph.build as build
from core.config import PipelineConfig
from core.graph.build import local_region, stored_communities
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.fakes import HashEmbedder

WS = "default"
TEAMS = [("Arden", "Brill", "Cove", "Dunmore"), ("Elmar", "Fenwick", "Garrow", "Halden"),
         ("Iverson", "Jorvik", "Kessler", "Lindqvist"), ("Morrow", "Nestor", "Oakley", "Pryce"),
         ("Quarry", "Rosslyn", "Sutter", "Tamsin")]


def _doc(k: int, extra: str = "") -> tuple[str, bytes]:
    a, b, c, d = TEAMS[k]
    text = (f"# Team {a}\n\n## Start\n\n{a} Labs works with {b} Group on the {c} Bridge.\n\n"
            f"## Middle\n\n{b} Group and {c} Bridge share a depot with {a} Labs and {d} Yard.\n\n"
            f"## End\n\n{c} Bridge reports to {a} Labs, {d} Yard and {b} Group.{extra}\n")
    return f"team{k}.md", text.encode()


def _cfg(**kw: object) -> PipelineConfig:
    return PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1, **{f"graph.{k}": v for k, v in kw.items()}})


def _built(cfg: PipelineConfig) -> tuple[Store, HashEmbedder]:
    store, emb = Store(":memory:"), HashEmbedder()
    ingest_files([_doc(k) for k in range(len(TEAMS))], store=store, embedder=emb, config=cfg)
    build.build_graph(store, cfg.graph, embedder=emb)
    return store, emb


def _rows(store: Store) -> set[tuple]:
    return set(store.communities.communities(WS))


def test_the_narrow_store_reads_return_what_the_whole_reads_return_for_those_ids() -> None:
    store, _ = _built(_cfg(max_cluster_size=2))
    try:
        nodes = store.graph.nodes(WS)
        pick = [n.node_id for n in nodes[::3]] + ["no such node"]
        assert store.graph.nodes_by_id(pick, WS) == [n for n in nodes if n.node_id in pick]
        src, dst, w = store.graph.edge_arrays(WS)
        inside = np.asarray([s in pick and d in pick for s, d in zip(src, dst)], dtype=bool)
        got = store.graph.edge_arrays_among(pick, WS)
        assert inside.any() and [x.tolist() for x in got] == [src[inside].tolist(), dst[inside].tolist(),
                                                              w[inside].tolist()]
        cols = store.graph.node_names(WS)
        assert cols["node_id"].tolist() == [n.node_id for n in nodes]
        assert cols["name"].tolist() == [n.name for n in nodes]
        # The region of one node: its level-0 community and every community below it, row for row.
        rows = store.communities.communities(WS)
        one = pick[0]
        root = next(r.community_id for r in rows if r.level == 0 and r.node_id == one)
        root_nodes = {r.node_id for r in rows if r.level == 0 and r.community_id == root}
        want = [r for r in rows if r.node_id in root_nodes]
        reg = store.communities.region_columns([one], WS)
        assert list(zip(reg["level"].tolist(), reg["community_id"].tolist(), reg["node_id"].tolist())) == [
            (r.level, r.community_id, r.node_id) for r in want]
        assert store.communities.community_keys(WS) == sorted({(r.level, r.community_id) for r in rows})
        assert max(r.level for r in rows) >= 1  # the fixture has a tree, not one flat level
        # Elements of some chunks: exactly the distinct (norm, type) of those chunks' mentions.
        chunk_ids = [c.chunk_id for c in store.corpus.chunks(WS)][:2]
        mine = {(cid, n) for cid, n in store.graph.chunk_nodes(chunk_ids, WS)}
        els = store.graph.elements_of_chunks(chunk_ids, (), WS)
        assert els and set(els) <= set(store.graph.elements(WS)) and {e[0] for e in els} == {n for _, n in mine}
        # Nothing changed since the build: no chunk to extract, none to drop, nothing dirty or unresolved.
        assert store.graph.update_delta(WS) == ([], [], set(), set())
    finally:
        store.close()


@pytest.mark.parametrize("max_cluster_size", [2, 30])
def test_the_region_update_writes_what_the_whole_graph_local_update_writes(monkeypatch, max_cluster_size: int
                                                                          ) -> None:
    cfg = _cfg(max_cluster_size=max_cluster_size)
    edit = [_doc(1, " Fenwick Group hires Mallory Quist at Arden Labs.")]
    out = []
    for narrow in (True, False):
        store, emb = _built(cfg)
        with monkeypatch.context() as m:
            calls: list[bool] = []
            real = build.local_region

            def spy(*a: object, **k: object) -> object:
                region = real(*a, **k) if narrow else None  # type: ignore[arg-type]
                calls.append(region is not None)
                return region

            m.setattr(build, "local_region", spy)
            rep = ingest_files(edit, store=store, embedder=emb, config=cfg).graph
        assert rep is not None and rep.mode == "incremental" and calls == [narrow]
        out.append((sorted(store.communities.communities(WS)), store.communities.summaries(None, WS),
                    store.graph.state(WS).stats, [(q.item_id, q.keep_id, q.other_id, q.score, q.status) for q in store.review.queue(workspace=WS)],
                    store.graph.nodes(WS),
                    (rep.communities, rep.levels, rep.summaries_invalidated, rep.summaries_written, rep.active_nodes)))
        store.close()
    (c1, s1, st1, q1, n1, r1), (c2, s2, st2, q2, n2, r2) = out
    assert c1 == c2
    assert st1 == st2
    assert q1 == q2
    assert n1 == n2
    assert r1 == r2
    assert {k: (v.title, v.summary) for k, v in s1.items()} == {k: (v.title, v.summary) for k, v in s2.items()}


def test_an_edit_touching_one_community_changes_only_that_communitys_rows() -> None:
    cfg = _cfg(max_cluster_size=2)
    store, emb = _built(cfg)
    try:
        before = _rows(store)
        summaries = {h: s.created_at for h, s in store.communities.summaries(None, WS).items()}
        roots = {r.community_id: set() for r in before if r.level == 0}
        for r in before:
            if r.level == 0:
                roots[r.community_id].add(r.node_id)
        rep = ingest_files([_doc(3, " Nestor Group opens a workshop.")], store=store, embedder=emb, config=cfg).graph
        assert rep is not None and rep.mode == "incremental"
        after = _rows(store)
        # The edited team's nodes sit in one level-0 community: every row of every other community is unchanged.
        team = {n.node_id for n in store.graph.nodes(WS) if n.name.split()[0] in TEAMS[3]}
        hit = {cid for cid, nodes in roots.items() if nodes & team}
        assert len(hit) == 1
        hit_nodes = set().union(*(roots[c] for c in hit))
        kept = {r for r in before if r.node_id not in hit_nodes}
        assert kept and kept <= after
        assert {r for r in after if r.node_id not in hit_nodes} == kept
        # Only summaries of the touched community are dropped (its membership changed, or its evidence did: the
        # edited chunk's nodes are in it) and written again where it still exists.
        now = {h: s.created_at for h, s in store.communities.summaries(None, WS).items()}
        gone = {h for h in summaries if h not in now or now[h] != summaries[h]}
        assert gone and gone <= {r.members_hash for r in before if r.node_id in hit_nodes}
        assert rep.summaries_invalidated == len(gone)
        touched_hashes = {r.members_hash for r in after if r.node_id in team}
        assert all(h in now and (h not in summaries or now[h] != summaries[h]) for h in touched_hashes if h in now)
        # Seeded and deterministic: the same region computed again gives the same communities.
        one = local_region(store, cfg.graph, WS, team)
        two = local_region(store, cfg.graph, WS, team)
        assert one is not None and two is not None and one.comms == two.comms
    finally:
        store.close()


def test_the_region_alone_is_not_used_when_the_phrase_filter_changed() -> None:
    cfg = _cfg()
    store, _ = _built(cfg)
    try:
        some = {store.graph.nodes(WS)[0].node_id}
        assert local_region(store, cfg.graph, WS, some) is not None
        other = cfg.graph.model_copy(update={"min_phrase_chunks": 2})
        assert local_region(store, other, WS, some) is None
        assert stored_communities(store, WS)
    finally:
        store.close()


@pytest.mark.parametrize("max_cluster_size, communities, levels", [(2, 31, 2), (30, 5, 1)])
def test_an_edit_then_a_no_op_update_give_the_known_counts_and_the_no_op_writes_only_the_state(
        max_cluster_size: int, communities: int, levels: int) -> None:
    # Known answers: what the update wrote before its fixed cost was cut (same counts); summaries: the one whose
    # membership changed, and the one whose membership held but whose evidence (the edited chunk's nodes) changed,
    # dropped and written again (same hash); the no-op then made five write transactions, now one (the state row).
    cfg = _cfg(max_cluster_size=max_cluster_size)
    store, emb = _built(cfg)
    try:
        before = set(store.communities.summaries(None, WS))
        rep = ingest_files([_doc(1, " Fenwick Group hires Mallory Quist at Arden Labs.")], store=store, embedder=emb,
                           config=cfg).graph
        after = set(store.communities.summaries(None, WS))
        assert rep is not None and rep.mode == "incremental"
        assert (rep.chunks_added, rep.chunks_removed, rep.nodes, rep.edges, rep.active_nodes) == (1, 1, 26, 54, 26)
        assert (rep.communities, rep.levels) == (communities, levels)
        assert (rep.summaries_invalidated, rep.summaries_written, rep.suggestions) == (2, 2, 0)
        assert len(before - after) == 1 and len(after - before) == 1  # by hash: one membership changed
        rows = (sorted(store.communities.communities(WS)), store.graph.nodes(WS), store.graph.edges(WS),
                store.communities.summaries(None, WS), store.review.queue(workspace=WS))
        state, generation = store.graph.state(WS), store.db.generation
        noop = build.build_graph(store, cfg.graph, embedder=emb)
        assert (noop.chunks_added, noop.chunks_removed, noop.summaries_invalidated, noop.summaries_written,
                noop.suggestions) == (0, 0, 0, 0, 0)
        assert (noop.nodes, noop.edges, noop.communities, noop.levels) == (26, 54, communities, levels)
        assert store.db.generation == generation + 1  # one write transaction: set_state
        new_state = store.graph.state(WS)
        assert new_state.version == state.version + 1 and new_state.stats == state.stats
        assert rows == (sorted(store.communities.communities(WS)), store.graph.nodes(WS), store.graph.edges(WS),
                        store.communities.summaries(None, WS), store.review.queue(workspace=WS))
    finally:
        store.close()


def test_node_facts_counted_in_python_match_the_grouped_statements(monkeypatch) -> None:
    import core.store.graph as graph_store

    store, _ = _built(_cfg())
    try:
        ids = {n.node_id for n in store.graph.nodes(WS)[::2]}
        small = store.graph.node_facts(ids, WS)  # the mention rows counted in Python
        monkeypatch.setattr(graph_store, "RAW_FACTS", 0)  # forces the grouped statements
        grouped = store.graph.node_facts(ids, WS)
        whole = [f for f in store.graph.node_facts(None, WS) if f.node_id in ids]
        assert small and small == grouped == whole
        assert [list(f.surfaces) for f in small] == [sorted(f.surfaces) for f in small]
        assert store.graph.node_facts(set(), WS) == []
    finally:
        store.close()
