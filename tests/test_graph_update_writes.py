"""The statements an incremental graph update sends were merged (issue #31): the merged store methods return what
the separate ones did, and an update through the one-pass path (extract, resolve in memory, write removal,
resolved rows and dirty marks in one transaction) stores exactly what the stepwise path stores."""
from __future__ import annotations

import pytest

import core.graph.build as build
from core.graph.model import ChunkExtraction, Mention, Relation
from core.graph.resolve import Resolution
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.test_graph_region import TEAMS, WS, _built, _cfg, _doc


def _everything(store: Store) -> dict[str, object]:
    cur = store.db.cursor()

    def rows(sql: str) -> list[tuple[str, ...]]:
        return sorted(tuple(str(x) for x in r) for r in cur.execute(sql).fetchall())

    st = store.graph.state(WS)
    return {"nodes": rows("SELECT * FROM graph_nodes"), "edges": rows("SELECT * FROM graph_edges"),
            "mentions": rows("SELECT * FROM graph_mentions"),
            "relations": rows("SELECT * FROM graph_relations"),
            "chunks": rows("SELECT chunk_id, doc_id, builder FROM graph_chunks"),
            "communities": rows("SELECT * FROM graph_communities"),
            "summaries": rows("SELECT members_hash, level, community_id, title, summary, mode FROM "
                              "graph_community_summaries"),
            "queue": rows("SELECT item_id, keep_id, other_id, score, status FROM graph_merge_queue"),
            "dirty": rows("SELECT * FROM graph_dirty"),
            "state": (st.version, st.corpus_version, st.builder, st.settings, st.stats)}


@pytest.mark.parametrize("split, synonyms", [(False, False), (True, False), (False, True)])
def test_the_one_pass_update_stores_what_the_stepwise_update_stores(monkeypatch: pytest.MonkeyPatch, split: bool,
                                                                    synonyms: bool) -> None:
    cfg = _cfg(max_cluster_size=2, split_by_type=split)
    edit = [_doc(1, " Fenwick Group hires Mallory Quist at Arden Labs."), _doc(3, " Pryce Yard opens.")]
    got = []
    for one_pass in (True, False):
        store, emb = _built(cfg)
        try:
            if synonyms:
                build.set_synonyms(store, cfg.graph, "Arden Labs = Brill Group\nMallory Quist = Pryce", embedder=emb)
            calls = []
            real = build._resolved_rows
            monkeypatch.setattr(build, "_resolved_rows", lambda *a: calls.append(1) or (real(*a) if one_pass else None))
            rep = ingest_files(edit, store=store, embedder=emb, config=cfg).graph
            assert rep is not None and rep.mode == "incremental" and calls  # the one-pass path was tried
            got.append((_everything(store),
                        {k: v for k, v in rep.__dict__.items() if k not in ("seconds", "cpu_seconds")}))
        finally:
            store.close()
    assert got[0] == got[1]
    assert got[0][0]["dirty"] == []


def test_resolved_rows_set_the_node_ids_apply_resolution_sets_and_refuse_an_ambiguous_norm() -> None:
    res = Resolution(node_of={"b": "a", "c|named": "a|named"}, display={})
    x = ChunkExtraction("c1", "d1", (Mention("A", "a", "named"), Mention("B", "b", "named")),
                        (Relation("a", "b", 1.0), Relation("a", "zz", 2.0)))
    chunks, mentions, relations = build._resolved_rows([x], "statistical", res, False)
    assert chunks == [("c1", "d1", "statistical")]
    assert [m[-1] for m in mentions] == ["a", "a"]  # b -> a by the resolution, a itself
    assert [r[-2:] for r in relations] == [("a", "a"), ("a", None)]  # no mention of zz in the chunk: NULL
    split = ChunkExtraction("c2", "d1", (Mention("C", "c", "named"), Mention("c", "c", "phrase")), ())
    assert build._resolved_rows([split], "statistical", res, True) is None  # one norm, two nodes: stepwise path
    _, m2, _ = build._resolved_rows([ChunkExtraction("c3", "d1", (Mention("C", "c", "named"),), ())],
                                    "statistical", res, True)
    assert m2[0][-1] == "a|named"


def test_replace_extractions_writes_what_remove_add_and_apply_write() -> None:
    cfg = _cfg(max_cluster_size=2)
    stores = [_built(cfg)[0], _built(cfg)[0]]
    try:
        gone = sorted(store_chunk for store_chunk, _ in stores[0].graph.seen_chunks(WS).items())[:2]
        new_chunk = [("n1", "team9.md", "statistical")]
        ments = [("n1", "team9.md", "arden labs", "Arden Labs", "named", 2, "", "arden labs"),
                 ("n1", "team9.md", "zed", "Zed", "named", 1, "", "zed")]
        rels = [("n1", "team9.md", "arden labs", "zed", 1.5, "", "arden labs", "zed")]
        a_gone, a_new = stores[0].graph.replace_extractions(gone, new_chunk, ments, rels, WS)
        b_gone = stores[1].graph.remove_chunks(gone, WS)
        stores[1].graph.add_extractions(new_chunk, [m[:7] for m in ments], [r[:6] for r in rels], WS)
        b_new = stores[1].graph.apply_resolution({}, split_by_type=False, chunk_ids=["n1"], workspace=WS)
        assert (a_gone, a_new) == (b_gone, b_new) and a_new == {"arden labs", "zed"} and a_gone
        one, two = _everything(stores[0]), _everything(stores[1])
        assert {k: v for k, v in one.items() if k != "dirty"} == {k: v for k, v in two.items() if k != "dirty"}
        assert sorted(set(one["dirty"])) == sorted(set(two["dirty"]))
        assert stores[0].graph.replace_extractions([], [], [], [], WS) == (set(), set())
    finally:
        for s in stores:
            s.close()


def test_region_and_keys_finish_state_skip_and_summary_replacement_give_the_known_answers() -> None:
    store, emb = _built(_cfg(max_cluster_size=2))
    try:
        rows = store.communities.communities(WS)
        one = rows[0].node_id
        keys, cols = store.communities.region_and_keys([one], WS)
        want = store.communities.region_columns([one], WS)
        assert keys == store.communities.community_keys(WS)
        assert all(cols[c].tolist() == want[c].tolist() for c in ("level", "community_id", "parent_id", "node_id"))
        assert store.communities.region_and_keys([], WS)[1]["node_id"].tolist() == []
        # finish_state: the counts and corpus version read in its transaction, the state it wrote, dirty cleared.
        before = store.graph.state(WS)
        store.db.cursor().execute("INSERT INTO graph_dirty VALUES (?, 'x')", [WS])
        state, counts, _ = store.graph.finish_state(builder="statistical", settings={"seed": 1}, stats={"levels": 2},
                                                 workspace=WS)
        assert counts == store.graph.totals(WS)
        assert state == store.graph.state(WS) and state.version == before.version + 1
        assert state.corpus_version == store.corpus.corpus_version(WS)
        assert state.stats == {"levels": 2, **counts} and store.graph.dirty_nodes(WS) == set()
        # elements_of_chunks(skip=...): the skipped chunks' mentions are left out.
        chunks = sorted(store.graph.seen_chunks(WS))
        every = store.graph.elements_of_chunks(chunks, (), WS)
        assert store.graph.elements_of_chunks(chunks, (), WS, skip=chunks[1:]) == store.graph.elements_of_chunks(
            chunks[:1], (), WS) != every
        # put_summaries replaces a stored membership's summary (one row per hash, the new text).
        mh = next(iter(store.communities.summaries(None, WS)))
        store.communities.put_summaries([(mh, 0, "c", "T", "new text", "extractive", {})], WS)
        got = store.communities.summaries([mh], WS)
        assert len(got) == 1 and got[mh].summary == "new text" and got[mh].title == "T"
        store.communities.put_summaries([], WS)
    finally:
        store.close()
    assert len(TEAMS) == 5


def test_community_rows_written_as_a_difference_leave_the_table_a_whole_replacement_would() -> None:
    cfg = _cfg(max_cluster_size=2)
    store = _built(cfg)[0]
    try:
        rows = sorted(store.communities.communities(WS))
        # A known edit of the tree: one community loses its first member to a new community, the others stay.
        level, cid = rows[0].level, rows[0].community_id
        members = [r for r in rows if (r.level, r.community_id) == (level, cid)]
        moved = members[0]
        new = [(r.level, r.community_id, r.parent_id, r.node_id, "changed-hash") for r in members[1:]]
        new.append((level, "brand-new", moved.parent_id, moved.node_id, "new-hash"))
        old_hash = members[0].members_hash
        assert not any(r.members_hash == old_hash for r in rows if (r.level, r.community_id) != (level, cid))
        store.communities.put_summaries([(old_hash, level, cid, "t", "s", "extractive", {})], WS)
        # The table a whole replacement of that community leaves: the other rows, then the new ones.
        expected = sorted([r for r in rows if (r.level, r.community_id) != (level, cid)]
                          + [type(rows[0])(*r) for r in new])
        _, _, dropped = store.graph.finish_state(
            builder="statistical", settings={}, stats={}, workspace=WS,
            community_delete=sorted((r.level, r.community_id, r.node_id) for r in members), community_rows=new)
        assert dropped == 1 and old_hash not in store.communities.summaries(None, WS)  # the old membership's summary
        assert sorted(store.communities.communities(WS)) == expected
        assert store.graph.finish_state(builder="statistical", settings={}, stats={}, workspace=WS)[2] == 0
    finally:
        store.close()


def test_build_summaries_counts_a_membership_shared_by_two_levels_once() -> None:
    from core.graph.snapshot import load_snapshot
    from core.graph.summaries import build_summaries

    store, _ = _built(_cfg(max_cluster_size=30))
    try:
        snap = load_snapshot(store, WS, 1)
        assert snap is not None
        # Two levels holding the same membership (one hash): written once, counted once.
        level0 = snap.communities[0]
        cid, members = next((c, m) for c, m in level0.items() if len(m) >= 2)
        mh = snap.members_hash[(0, cid)]
        snap.communities = {0: {cid: members}, 1: {"copy": list(members)}}
        snap.members_hash = {(0, cid): mh, (1, "copy"): mh}
        store.db.cursor().execute("DELETE FROM graph_community_summaries")
        assert build_summaries(snap, store, workspace=WS) == 1
        assert list(store.communities.summaries(None, WS)) == [mh]
        assert build_summaries(snap, store, workspace=WS) == 0
    finally:
        store.close()


def test_id_match_selects_the_same_rows_as_a_list_or_as_a_relation() -> None:
    import duckdb

    from core.store.db import SMALL_IDS, SMALL_LIST, id_match

    cur = duckdb.connect()
    cur.execute("CREATE TABLE t AS SELECT 'n' || i::VARCHAR AS id, i FROM range(3000) r(i)")
    cur.execute("INSERT INTO t VALUES (NULL, -1)")
    for n in (0, 3, SMALL_LIST, SMALL_LIST + 1, SMALL_IDS + 5):
        values = [f"n{i}" for i in range(0, 2 * n, 2)] + ["absent"]
        with id_match(cur, "_m", "id", values) as (match, p):
            got = [r[0] for r in cur.execute(f"SELECT i FROM t WHERE {match('id')} OR i = -2 ORDER BY i", p).fetchall()]
        assert got == list(range(0, 2 * n, 2))
    assert not [r for r in cur.execute("SHOW TABLES").fetchall() if r[0] == "_m"]  # unregistered on exit
