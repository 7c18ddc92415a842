"""Incremental re-indexing (issue #31): an edited document keeps its unchanged chunks' ids, vectors, contexts and
graph mentions; context.reindex decides what happens to the kept contexts."""
from __future__ import annotations

import pytest

from core.config import PipelineConfig
from core.ingest.identity import adopt_ids, diff_chunks
from core.ingest.pipeline import ingest_files
from core.store import Store
from core.types import Chunk
from tests.fakes import HashEmbedder

SECTIONS = [f"## Part {i}\n\nPart {i} covers topic{i} in detail. The owner of topic{i} is team{i}.\n" for i in range(6)]
DOC = "# Handbook\n\nThe handbook opens with a summary of all parts.\n\n" + "\n".join(SECTIONS)
EDITED = DOC.replace("The owner of topic3 is team3.", "The owner of topic3 is team9 since May.")


def _ingest(store: Store, emb: HashEmbedder, text: str, cfg: PipelineConfig | None = None):
    return ingest_files([("h.md", text.encode())], store=store, embedder=emb, config=cfg or PipelineConfig())


def _llm_contexts_for_all(store: Store) -> dict[str, str]:
    chunks = store.corpus.chunks()
    store.ledger.put_contexts([(c.chunk_id, f"context of {c.chunk_id}") for c in chunks], "llm", "stub")
    return store.ledger.contexts("llm")


def test_one_sentence_edit_keeps_the_other_chunks_ids_vectors_and_contexts(store: Store) -> None:
    emb = HashEmbedder()
    first = _ingest(store, emb, DOC).results[0]
    assert (first.status, first.new, first.unchanged) == ("ingested", first.chunks, 0)
    before = {c.chunk_id: c.text for c in store.corpus.chunks()}
    assert len(before) >= 5
    _llm_contexts_for_all(store)
    heur = store.ledger.contexts("heuristic")
    encoded = emb.encoded
    res = _ingest(store, emb, EDITED).results[0]
    after = {c.chunk_id: c.text for c in store.corpus.chunks()}
    assert res.status == "replaced"
    assert (res.unchanged, res.changed, res.new, res.removed) == (len(before) - 1, 1, 0, 0)
    assert "1 changed" in res.chunk_changes()
    kept = set(before) & set(after)
    assert len(kept) == len(before) - 1 and all(before[c] == after[c] for c in kept)
    (changed,) = set(after) - kept
    assert "team9" in after[changed]
    assert emb.encoded - encoded == 1  # only the changed chunk went through the model
    llm = store.ledger.contexts("llm")
    assert set(llm) == kept and res.contexts_kept == len(kept) and res.contexts_to_write == 1
    ids, _ = store.corpus.vectors(emb.model_id)
    assert set(ids) == set(after)
    # Heuristic contexts (free) are recomputed for the whole document; the lead sentence did not change: kept.
    assert store.ledger.contexts("heuristic", chunk_ids=sorted(kept)) == {c: heur[c] for c in kept}
    # The saving is on record: one cache-events row, hits = contexts kept, misses = contexts to write.
    ev = [e for e in store.caches.cache_events() if e.cache == "llm_context"]
    assert [(e.hits, e.misses) for e in ev] == [(len(kept), 1)]


def test_reindex_full_rewrites_the_document_and_major_marks_the_rest_stale(store: Store) -> None:
    emb = HashEmbedder()
    _ingest(store, emb, DOC)
    _llm_contexts_for_all(store)
    full = PipelineConfig().with_overrides({"context.reindex": "full"})
    res = _ingest(store, emb, EDITED, full).results[0]
    assert store.ledger.contexts("llm") == {} and res.contexts_kept == 0 and res.contexts_to_write == res.chunks
    assert res.unchanged == res.chunks - 1  # the chunks still keep their ids and raw vectors
    _llm_contexts_for_all(store)
    major = PipelineConfig().with_overrides({"context.reindex": "major", "context.major_share": 0.5})
    res = _ingest(store, emb, DOC, major).results[0]  # one chunk of seven changed: below the share
    assert res.contexts_kept == res.chunks - 1
    assert set(store.ledger.stale_contexts("llm")) == set(store.ledger.contexts("llm"))
    # Writing a stale context again clears its mark.
    one, two = store.ledger.stale_contexts("llm")[:2]
    store.ledger.put_contexts([(one, "fresh")], "llm", "stub")
    assert one not in store.ledger.stale_contexts("llm")
    # What `context --refresh-stale` does first: the stale contexts go, so the build writes them again.
    assert store.ledger.drop_contexts([two], "llm") == 1 and two not in store.ledger.contexts("llm")
    assert two not in store.ledger.stale_contexts("llm")
    strict = PipelineConfig().with_overrides({"context.reindex": "major", "context.major_share": 0.1})
    res = _ingest(store, emb, EDITED, strict).results[0]  # 1/7 > 0.1: the whole document is re-contextualised
    assert store.ledger.contexts("llm") == {} and store.ledger.stale_contexts("llm") == []


def test_an_edit_with_a_new_lead_sentence_rewrites_every_heuristic_context(store: Store) -> None:
    emb = HashEmbedder()
    _ingest(store, emb, DOC)
    heur = store.ledger.contexts("heuristic")
    _ingest(store, emb, DOC.replace("opens with a summary", "opens with a short summary"))
    now = store.ledger.contexts("heuristic")
    assert set(now) == {c.chunk_id for c in store.corpus.chunks()}
    assert all("short summary" in v for v in now.values()) and not set(now.values()) & set(heur.values())


def test_legacy_positional_ids_carry_over_and_diff_classifies() -> None:
    def ch(cid: str, text: str, i: int) -> Chunk:
        return Chunk(cid, "d", i, text, 0, 0)

    old = [ch("d-0000", "a", 0), ch("d-0001", "b", 1), ch("d-0002", "c", 2), ch("d-0003", "a", 3)]
    new = adopt_ids([ch("x", "a", 0), ch("x", "B", 1), ch("x", "c", 2), ch("x", "a", 3), ch("x", "e", 4)], "d", old)
    assert [c.chunk_id for c in new][:1] == ["d-0000"] and new[2].chunk_id == "d-0002" and new[3].chunk_id == "d-0003"
    assert new[1].chunk_id.startswith("d-") and new[1].chunk_id not in {c.chunk_id for c in old}
    d = diff_chunks(["a", "b", "c", "y"], ["a", "B", "c", "z", "w", "y"])
    assert d.counts() == {"unchanged": 3, "changed": 1, "new": 2, "removed": 0}
    d = diff_chunks(["a", "b", "c"], ["c", "a"])  # a move is not a change
    assert d.counts() == {"unchanged": 2, "changed": 0, "new": 0, "removed": 1}


@pytest.mark.parametrize("repeat", [2, 3])
def test_repeated_text_gets_distinct_stable_ids(store: Store, repeat: int) -> None:
    text = "# T\n\n" + "\n\n".join(f"## S\n\nSame words here, repeated. {'x' * 0}" for _ in range(repeat))
    _ingest(store, HashEmbedder(), text)
    ids = [c.chunk_id for c in store.corpus.chunks()]
    assert len(set(ids)) == len(ids)


# -- the graph follows ingest; local community updates -----------------------------------------------------------
TEAMS = [("Arden", "Brill", "Cove"), ("Dorset", "Elmar", "Fenwick"), ("Garrow", "Halden", "Iverson"),
         ("Jorvik", "Kessler", "Lindqvist")]


def _team_doc(k: int, extra: str = "") -> tuple[str, bytes]:
    a, b, c = TEAMS[k]
    text = (f"# Team {a}\n\n## Start\n\n{a} Labs works with {b} Group on the {c} Bridge.\n\n"
            f"## Middle\n\n{b} Group and {c} Bridge share a depot with {a} Labs.\n\n"
            f"## End\n\n{c} Bridge reports to {a} Labs and {b} Group.{extra}\n")
    return f"team{k}.md", text.encode()


def _graph_cfg(**kw) -> PipelineConfig:
    return PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1, **{f"graph.{k}": v for k, v in kw.items()}})


def test_ingest_updates_an_existing_graph_and_reclusters_only_the_touched_community(store: Store, monkeypatch) -> None:
    import core.graph.communities as communities
    from core.app.graph_ops import build_graph

    emb = HashEmbedder()
    off = _graph_cfg()  # graph.enabled stays false: only an existing graph is followed
    ingest_files([_team_doc(k) for k in range(4)], store=store, embedder=emb, config=off)
    assert store.graph.state() is None  # no graph, none is started
    build_graph(store, off.graph, embedder=emb)
    rows = store.communities.communities()
    members: dict[tuple[int, str, str], set[str]] = {}
    for c in rows:
        members.setdefault((c.level, c.community_id, c.members_hash), set()).add(c.node_id)
    n_nodes = len({c.node_id for c in rows})
    summaries = set(store.communities.summaries())
    assert len(members) == 4 and summaries == {k[2] for k in members}
    sizes: list[int] = []
    real = communities.leiden
    monkeypatch.setattr(communities, "leiden", lambda n, *a, **k: (sizes.append(n), real(n, *a, **k))[1])
    rep = ingest_files([_team_doc(1, " Dorset Group hires Mallory Quist.")], store=store, embedder=emb, config=off)
    g = rep.graph
    assert g is not None and g.mode == "incremental" and (g.chunks_added, g.chunks_removed) == (1, 1)
    # Leiden ran on the edited team's community and the new names only, not on the whole graph.
    assert sizes and max(sizes) <= 4 + 2 < n_nodes
    after = {(c.level, c.community_id, c.members_hash) for c in store.communities.communities()}
    # The three untouched teams keep their community ids and memberships, and with them their summaries.
    untouched = {k for k, m in members.items() if not any(n.startswith(("dorset", "elmar", "fenwick")) for n in m)}
    assert len(untouched) == 3 and untouched <= after
    assert {k[2] for k in untouched} <= set(store.communities.summaries())
    assert g.summaries_invalidated <= 1
    assert graph_stats_ok(store)


def graph_stats_ok(store: Store) -> bool:
    from core.app.graph_ops import graph_stats

    s = graph_stats(store)
    return bool(s["built"]) and not s["stale"]


def test_follow_ingest_off_says_once_that_the_graph_is_behind(store: Store) -> None:
    from core.app.graph_ops import build_graph

    emb = HashEmbedder()
    ingest_files([_team_doc(0)], store=store, embedder=emb, config=_graph_cfg())
    build_graph(store, _graph_cfg().graph, embedder=emb)
    manual = _graph_cfg(follow_ingest=False)
    first = ingest_files([_team_doc(1)], store=store, embedder=emb, config=manual)
    second = ingest_files([_team_doc(2)], store=store, embedder=emb, config=manual)
    assert first.graph is None and len(first.notes) == 1 and "graph update" in first.notes[0]
    assert second.notes == []  # said once
    assert not graph_stats_ok(store)


def test_local_update_is_deterministic_and_full_reclustering_is_available(store: Store) -> None:
    from core.graph.build import cluster

    emb = HashEmbedder()
    cfg = _graph_cfg()
    from core.app.graph_ops import build_graph

    ingest_files([_team_doc(k) for k in range(4)], store=store, embedder=emb, config=cfg)
    build_graph(store, cfg.graph, embedder=emb)
    touched = {"dorset"}
    one, g = cluster(store, cfg.graph, "default", touched)
    two, _ = cluster(store, cfg.graph, "default", touched)
    assert one == two
    full, _ = cluster(store, cfg.graph.model_copy(update={"communities": "full"}), "default", touched)
    assert {c.members for c in full if c.level == 0} == {c.members for c in one if c.level == 0}


def test_the_estimate_says_what_will_be_rebuilt_and_what_the_edit_saved(store: Store) -> None:
    from core.app.costs import embedding_cache_rate
    from core.ingest.context import estimate_llm_contexts

    emb = HashEmbedder()
    _ingest(store, emb, DOC)
    n = len(_llm_contexts_for_all(store))
    _ingest(store, emb, EDITED, PipelineConfig().with_overrides({"context.reindex": "major"}))
    est, notes = estimate_llm_contexts(store, model="claude-haiku-4-5")
    plan = [x for x in notes if x.startswith("plan: ")]
    assert est.calls == 1
    assert any(f"1 changed or new chunks of 1 edited documents need one; their {n - 1} unchanged" in x for x in plan)
    assert any(f"{n - 1} kept contexts are marked possibly stale" in x for x in plan)
    rate = embedding_cache_rate(store.caches.cache_events(), "1h")
    kept = rate[rate.cache == "llm contexts kept across edits"]
    assert list(kept.hit_rate) == [pytest.approx((n - 1) / n)]


def test_cli_line_and_corpus_frame_show_the_chunk_changes(store: Store) -> None:
    from core.app.report import ingest_frame
    from core.cli import _result_line

    emb = HashEmbedder()
    _ingest(store, emb, DOC)
    _llm_contexts_for_all(store)
    res = _ingest(store, emb, EDITED).results[0]
    line = _result_line(res)
    assert line.startswith("replaced") and f"({res.unchanged} unchanged · 1 changed · 0 new · 0 removed; llm " \
        f"contexts: {res.unchanged} kept, 1 to write)" in line
    row = ingest_frame([res]).iloc[0]
    assert (row["unchanged"], row["changed"], row["new"], row["removed"], row["contexts kept"]) == (
        res.unchanged, 1, 0, 0, res.unchanged)


def test_full_reclustering_on_demand_is_measured_against_the_local_partition(store: Store) -> None:
    from core.app.graph_ops import build_graph
    from core.graph.build import recluster

    emb = HashEmbedder()
    cfg = _graph_cfg()
    ingest_files([_team_doc(k) for k in range(4)], store=store, embedder=emb, config=cfg)
    build_graph(store, cfg.graph, embedder=emb)
    ingest_files([_team_doc(1, " Dorset Group hires Mallory Quist.")], store=store, embedder=emb, config=cfg)
    version = store.graph.state().version
    rep, cmp_ = recluster(store, cfg.graph)
    assert rep.mode == "re-cluster" and store.graph.state().version == version + 1
    assert 0.0 <= cmp_["modularity_before"] <= cmp_["modularity_after"] + 0.05 and 0.0 <= cmp_["ari"] <= 1.0
    again, same = recluster(store, cfg.graph)  # seeded: a second full re-clustering changes nothing
    assert same["nmi"] == pytest.approx(1.0) and same["ari"] == pytest.approx(1.0) and again.summaries_invalidated == 0


def test_cli_graph_communities_and_delete_follow(tmp_path, capsys) -> None:
    from core.app.graph_ops import build_graph
    from core.cli import main

    db = tmp_path / "w.duckdb"
    store = Store(db)
    emb = HashEmbedder()
    cfg = _graph_cfg()
    ingest_files([_team_doc(k) for k in range(3)], store=store, embedder=emb, config=cfg)
    build_graph(store, cfg.graph)
    doc = store.corpus.documents()[0].doc_id
    store.close()
    assert main(["graph", "communities", "--db", str(db), "--set", "graph.min_phrase_chunks=1"]) == 0
    assert "re-clustered in" in capsys.readouterr().out
    # `delete` takes the document out of the graph too (it used to leave the graph behind the corpus).
    assert main(["delete", doc, "--db", str(db), "--set", "graph.min_phrase_chunks=1"]) == 0
    store = Store(db)
    assert graph_stats_ok(store) and doc not in set(store.graph.seen_chunks().values())
    store.close()
