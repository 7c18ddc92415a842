"""GraphRAG: extraction, resolution, Leiden communities, local/global search, incremental updates, escaping."""
from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest

from core.config import GraphConfig, PipelineConfig
from core.deps import Deps
from core.graph import view
from core.graph.build import (
    build_graph,
    decide_merge,
    graph_stats,
    reresolve_graph,
    set_synonyms,
)
from core.graph.communities import hierarchical_leiden
from core.graph.extract import extract_statistical, extraction_from_json, token_kind
from core.graph.resolve import SynonymError, normalise_name, parse_synonyms, resolve
from core.graph.search import (
    expand,
    find_seeds,
    global_search,
    local_search,
    plan_global,
)
from core.graph.snapshot import GraphCache, load_snapshot
from core.graph.summaries import get_summaries
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from core.types import Chunk, Document, Usage
from tests.fakes import HashEmbedder
from tests.graph_fakes import ScriptedLLM, VectorEmbedder, extraction_by_passage

WS = "default"


def _cfg(**kw) -> GraphConfig:
    return GraphConfig(**{"min_phrase_chunks": 1, **kw})


# -- communities ------------------------------------------------------------------------------------------------------

def _two_cliques(n: int = 6) -> tuple[list[str], list[tuple[str, str, float]]]:
    a = [f"a{i}" for i in range(n)]
    b = [f"b{i}" for i in range(n)]
    edges = [(x, y, 1.0) for x, y in itertools.combinations(a, 2)] + [(x, y, 1.0) for x, y in itertools.combinations(b, 2)]
    return a + b, edges + [("a0", "b0", 1.0)]


def test_leiden_splits_two_joined_cliques_and_is_seeded() -> None:
    nodes, edges = _two_cliques()
    comms = [c for c in hierarchical_leiden(nodes, edges, seed=7) if c.level == 0]
    assert sorted(c.members for c in comms) == [tuple(f"a{i}" for i in range(6)), tuple(f"b{i}" for i in range(6))]
    # Same graph, shuffled input order and another run: identical ids and memberships.
    again = hierarchical_leiden(list(reversed(nodes)), list(reversed(edges)), seed=7)
    assert [(c.community_id, c.members) for c in again if c.level == 0] == [(c.community_id, c.members) for c in comms]


def test_hierarchy_splits_big_communities_and_each_level_is_a_full_partition() -> None:
    # Four 5-cliques, paired: many links inside a pair, one between the pairs. Coarse level 0 sees the two pairs;
    # with max size 6 each pair splits into its cliques one level down.
    groups = [[f"g{g}n{i}" for i in range(5)] for g in range(4)]
    edges = [(x, y, 1.0) for grp in groups for x, y in itertools.combinations(grp, 2)]
    edges += [(groups[p][i], groups[p + 1][i], 1.0) for p in (0, 2) for i in range(3)]
    edges += [(groups[1][4], groups[2][4], 1.0)]
    nodes = [n for grp in groups for n in grp]
    comms = hierarchical_leiden(nodes, edges, seed=1, resolution=0.3, max_cluster_size=6, max_levels=3)
    levels = sorted({c.level for c in comms})
    assert levels == [0, 1]
    assert sorted(len(c.members) for c in comms if c.level == 0) == [10, 10]
    assert sorted(c.members for c in comms if c.level == 1) == sorted(tuple(sorted(g)) for g in groups)
    for lvl in levels:
        members = sorted(m for c in comms if c.level == lvl for m in c.members)
        assert members == sorted(nodes)  # a full partition at every level
    last = [c for c in comms if c.level == levels[-1]]
    assert max(len(c.members) for c in last) <= 6
    ids = {(c.level, c.community_id) for c in comms}
    assert all(c.parent_id is None or (c.level - 1, c.parent_id) in ids for c in comms)


# -- extraction and normalisation -------------------------------------------------------------------------------------

def test_statistical_extraction_finds_names_identifiers_and_terms() -> None:
    text = ("Sanne de Vries is the data engineer for Project Saltmarsh. She set TLS_VERSION_MIN and retryBackoffMs "
            "on the FB-340 gateway; the data engineer reports to Corvane's office in Rotterdam.")
    ex = extract_statistical(Chunk("c1", "d1", 0, text, 0, len(text)))
    kinds = {m.surface: m.type for m in ex.mentions}
    assert kinds["Sanne de Vries"] == "named" and kinds["Project Saltmarsh"] == "named"
    assert kinds["TLS_VERSION_MIN"] == kinds["retryBackoffMs"] == kinds["FB-340"] == "identifier"
    assert kinds["data engineer"] == "phrase" and kinds["Corvane"] == "named" and kinds["Rotterdam"] == "named"
    assert next(m for m in ex.mentions if m.surface == "data engineer").count == 2
    rel = {(r.src, r.dst): r.weight for r in ex.relations}
    sanne = normalise_name("Sanne de Vries")  # 'sanne de vrie': a Title-case head is folded like any plural
    assert rel[("project saltmarsh", sanne)] == 1.0  # same sentence
    assert rel[("rotterdam", sanne)] == 0.5  # same chunk only
    assert token_kind("2024") == "other" and token_kind("v2.1") == "other" and token_kind("the") == "stop"


def test_normalisation_folds_case_plural_accents_and_keeps_identifiers() -> None:
    assert normalise_name("Pump Stations") == normalise_name("pump stations") == "pump station"
    assert normalise_name("Postgres") == "postgres" and normalise_name("FieldOS") == "fieldos"  # names, not plurals
    assert normalise_name("Corvane APIs") == "corvane apis" and normalise_name("AWS") == "aws"
    assert normalise_name("Gdańsk") == normalise_name("GDANSK") == "gdansk"
    assert normalise_name("Corvane's") == "corvane" and normalise_name("TLS") == "tls"
    assert normalise_name("SM-0088-V") == "sm-0088-v" and normalise_name("remote-work policies") == "remote work policy"


# -- resolution ------------------------------------------------------------------------------------------------------

def _store_with_chunks(store: Store, docs: dict[str, list[str]]) -> None:
    for doc_id, texts in docs.items():
        chunks = [Chunk(f"{doc_id}-{i:04d}", doc_id, i, t, 0, len(t)) for i, t in enumerate(texts)]
        store.corpus.put_document(Document(doc_id, f"{doc_id}.md", "md", 10, doc_id, "en", " ".join(texts), "x"), chunks,
                           None, "none")


PG_DOCS = {
    "dpg": ["The billing service keeps invoices in PostgreSQL on the Harbor cluster.",
            "Operations restart Postgres every night after the Harbor backup.",
            "The PG replica in Harbor lags by two seconds."],
}


def test_synonym_list_merges_postgres_forms_into_one_node(store: Store) -> None:
    _store_with_chunks(store, PG_DOCS)
    build_graph(store, _cfg(), workspace=WS)
    names = {n[1] for n in store.graph.nodes()}
    assert {"PostgreSQL", "Postgres", "PG"} <= names  # three islands before the synonym list
    with pytest.raises(SynonymError, match="line 1"):
        set_synonyms(store, _cfg(), "PostgreSQL")
    set_synonyms(store, _cfg(), "PostgreSQL = Postgres = pg\n# comment line\n")
    nodes = {n[0]: n for n in store.graph.nodes()}
    pg = nodes["postgresql"]
    assert pg[1] == "PostgreSQL" and pg[4] == 3 and sorted(pg[7]) == ["pg", "postgres", "postgresql"]
    assert "postgres" not in nodes and "pg" not in nodes
    # Provenance survives the merge: every chunk that named any form is a source chunk of the merged node.
    assert {c for _, c, _, _ in store.graph.node_chunks(["postgresql"])} == {"dpg-0000", "dpg-0001", "dpg-0002"}
    # The merged node links to Harbor with the three chunks as evidence.
    edge = next(e for e in store.graph.edges() if {e[0], e[1]} == {"harbor", "postgresql"})
    assert edge[3] == 3


def test_homonyms_with_different_types_stay_apart_when_split_by_type(store: Store) -> None:
    _store_with_chunks(store, {"dm": ["Mercury is the code name of the billing rewrite.",
                                      "Mercury is the smallest planet of the solar system."]})
    llm = ScriptedLLM(extraction_by_passage({
        "billing": {"entities": [{"name": "Mercury", "type": "project", "description": "billing rewrite"}],
                    "relations": []},
        "planet": {"entities": [{"name": "Mercury", "type": "planet", "description": "smallest planet"}],
                   "relations": []},
    }))
    build_graph(store, _cfg(builder="llm", split_by_type=True), llm=llm)
    nodes = {n[0]: n for n in store.graph.nodes()}
    assert set(nodes) == {"mercury|project", "mercury|planet"}
    assert {nodes["mercury|project"][3], nodes["mercury|planet"][3]} == {"billing rewrite", "smallest planet"}
    assert len(llm.requests) == 2 and all(r.json_schema for r in llm.requests)
    # Without the split the two senses share a name and fuse, which is what the option is for.
    build_graph(store, _cfg(builder="llm", split_by_type=False), llm=llm, full=True)
    assert [n[0] for n in store.graph.nodes()] == ["mercury"]


def test_rejected_pair_is_kept_apart_even_through_a_chain_of_approvals() -> None:
    elems = [("e-mrd-0901", "identifier"), ("e-mrd-0932", "identifier"), ("e-mrd-0900", "identifier")]
    res = resolve(elems, approved=[("e-mrd-0901", "e-mrd-0900"), ("e-mrd-0932", "e-mrd-0900")],
                  rejected=[("e-mrd-0901", "e-mrd-0932")])
    assert res("e-mrd-0900") == res("e-mrd-0901") != res("e-mrd-0932")
    assert len(res.conflicts) == 1 and "kept apart" in res.conflicts[0]
    assert [g.names for g in parse_synonyms("A = B\n\n# x\nC=D=E")] == [("A", "B"), ("C", "D", "E")]


def test_review_queue_suggests_approves_rejects_and_undoes(store: Store) -> None:
    _store_with_chunks(store, {"dq": ["Error E-MRD-0901 and error E-MRD-0932 both appear on the Meridian console.",
                                      "Corvane Systems and Corvane Systems B.V sign the Meridian contract.",
                                      "Pumps at Harbor Station failed; the audit met at Harbour Station in Rotterdam."]})
    emb = VectorEmbedder({"E-MRD-0901": [1, 0.1, 0, 0, 0, 0, 0, 0], "E-MRD-0932": [1, 0.12, 0, 0, 0, 0, 0, 0],
                          "Corvane Systems": [0, 0, 1, 0.1, 0, 0, 0, 0], "Corvane Systems B.V": [0, 0, 1, 0.15, 0, 0, 0, 0],
                          "Harbor Station": [0, 0, 0, 0, 1, 0.1, 0, 0], "Harbour Station": [0, 0, 0, 0, 1, 0.12, 0, 0],
                          "Meridian": [0, 1, 0, 0, 1, 0, 0, 0]})
    build_graph(store, _cfg(), embedder=emb)
    pending = {frozenset((q.keep_name, q.other_name)): q for q in store.review.queue("pending")}
    firm = pending[frozenset(("Corvane Systems", "Corvane Systems B.V"))]
    place = pending[frozenset(("Harbor Station", "Harbour Station"))]
    assert firm.score >= 0.93 and frozenset(("Meridian", "Harbor Station")) not in pending
    # Look-alike codes with different numbers are different codes: never suggested, whatever the cosine.
    assert frozenset(("E-MRD-0901", "E-MRD-0932")) not in pending
    decide_merge(store, _cfg(), firm.item_id, "approve", embedder=emb)
    assert "corvane systems b.v" not in {n[0] for n in store.graph.nodes()}
    decide_merge(store, _cfg(), place.item_id, "reject", embedder=emb)  # the pump station is not the office
    ids = {n[0] for n in store.graph.nodes()}
    assert {"harbor station", "harbour station", "e-mrd-0901", "e-mrd-0932"} <= ids
    decide_merge(store, _cfg(), firm.item_id, "undo", embedder=emb)
    assert "corvane systems b.v" in {n[0] for n in store.graph.nodes()}
    # A rebuild keeps the decisions (they are user data) and does not re-suggest the rejected pair.
    build_graph(store, _cfg(), embedder=emb, full=True)
    statuses = {q.item_id: q.status for q in store.review.queue()}
    assert statuses[place.item_id] == "rejected" and statuses[firm.item_id] == "pending"
    with pytest.raises(ValueError):
        decide_merge(store, _cfg(), "nope", "approve")


# -- local search ------------------------------------------------------------------------------------------------------

def _star_graph(store: Store) -> None:
    """Seed Sol: neighbours Arden (5), Brill (3), Hubble (2), Cove (1); Arden-Dunmore (4) two hops out; Hubble a hub
    with 30 leaves. One chunk per link, extracted by a scripted LLM so the weights are exact."""
    links = {
        "s-a": [("Sol", "Arden", 5.0)], "s-b": [("Sol", "Brill", 3.0)], "s-c": [("Sol", "Cove", 1.0)],
        "s-h": [("Sol", "Hubble", 2.0)], "a-d": [("Arden", "Dunmore", 4.0)],
        **{f"h-l{i}": [("Hubble", f"Leaf{i}", 1.0)] for i in range(30)},
    }
    _store_with_chunks(store, {"dg": [f"{k} passage" for k in links]})
    table = {f"{k} passage": {"entities": [{"name": n, "type": "thing", "description": ""}
                                          for a, b, _ in rels for n in (a, b)],
                              "relations": [{"source": a, "target": b, "description": f"{a} with {b}", "weight": w}
                                            for a, b, w in rels]}
             for k, rels in links.items()}
    build_graph(store, _cfg(builder="llm"), llm=ScriptedLLM(extraction_by_passage(table)))


def test_local_search_takes_one_hop_neighbours_in_weight_order_under_the_node_cap(store: Store) -> None:
    _star_graph(store)
    snap = load_snapshot(store, WS, 1)
    seeds = find_seeds("what is Sol?", snap)
    assert [snap.names[s.pos] for s in seeds] == ["Sol"] and seeds[0].how == "name"
    ex = expand(snap, seeds, hops=1, node_cap=40, hub_threshold=float("inf"))
    assert [snap.names[p] for p in ex.order] == ["Sol", "Arden", "Brill", "Hubble", "Cove"]
    capped = expand(snap, seeds, hops=1, node_cap=3, hub_threshold=float("inf"))
    assert [snap.names[p] for p in capped.order] == ["Sol", "Arden", "Brill"] and capped.capped
    res = local_search("what is Sol?", snap, store, hops=1, node_cap=40, hub_percentile=100, seed_k=0)
    # The chunk that links Sol to its heaviest neighbour comes first and says why.
    assert res.candidates[0].chunk_id == "dg-0000" and "Sol — Arden: Sol with Arden" in res.candidates[0].meta["relations"]
    assert res.info(snap)["nodes"] == ["sol", "arden", "brill", "hubble", "cove"]


def test_hubs_are_reached_but_not_expanded(store: Store) -> None:
    _star_graph(store)
    snap = load_snapshot(store, WS, 1)
    thr = snap.hub_threshold(99)
    assert snap.degree[snap.pos["hubble"]] > thr >= snap.degree[snap.pos["sol"]]
    res = local_search("Sol", snap, store, hops=2, node_cap=40, hub_percentile=99, seed_k=0)
    nodes = res.info(snap)["nodes"]
    assert "hubble" in nodes and "dunmore" in nodes  # Hubble is held, Arden was expanded to Dunmore
    assert not any(n.startswith("leaf") for n in nodes)  # Hubble's leaves are not: it is a hub
    assert res.info(snap)["hubs"] == ["hubble"] and any("hub" in n for n in res.notes)
    no_cut = local_search("Sol", snap, store, hops=2, node_cap=40, hub_percentile=100, seed_k=0)
    assert sum(n.startswith("leaf") for n in no_cut.info(snap)["nodes"]) == 30


def test_embedding_seeds_find_an_entity_the_query_does_not_name(store: Store) -> None:
    _star_graph(store)
    snap = load_snapshot(store, WS, 1)
    emb = VectorEmbedder({"Dunmore": [0, 0, 1, 0, 0, 0, 0, 0], "tell me about the dial": [0, 0.2, 1, 0, 0, 0, 0, 0]})
    qvec = emb.encode(["tell me about the dial"])[0]
    seeds = find_seeds("tell me about the dial", snap, query_vec=qvec, name_matrix=snap.name_matrix(emb),
                       seed_k=1, seed_min_sim=0.9)
    assert [(snap.names[s.pos], s.how) for s in seeds] == [("Dunmore", "embedding")]


# -- incremental updates ---------------------------------------------------------------------------------------------

DOC_A = ("alpha.md", b"# Alpha\n\nKestrel Water Authority runs Project Bluefin with Tomas Rehak.\n\n"
                     b"Tomas Rehak configures TLS_VERSION_MIN on the FB-340 gateway.\n")
DOC_B = ("beta.md", b"# Beta\n\nNordhaven Ports Authority runs Project Saltmarsh with Sanne de Vries.\n\n"
                    b"Sanne de Vries tunes the FB-340 gateway for Lena Brightwater.\n")
DOC_C = ("gamma.md", b"# Gamma\n\nProject Bluefin and Project Saltmarsh share the FB-340 gateway and Meridian.\n\n"
                     b"Lena Brightwater meets Tomas Rehak in Rotterdam about Meridian.\n")


def _snapshot_tables(store: Store) -> tuple:
    edges = [(a, b, round(w, 9), n, d) for a, b, w, n, d in store.graph.edges()]
    return (store.graph.nodes(), edges, [(lvl, c, p, n, h) for lvl, c, p, n, h in store.communities.communities()],
            sorted(store.graph.seen_chunks().items()))


def test_incremental_add_and_delete_equals_a_full_rebuild(deps: Deps) -> None:
    cfg = PipelineConfig()
    g = _cfg()
    ingest_files([DOC_A, DOC_B], store=deps.store, embedder=deps.embedder, config=cfg)
    first = build_graph(deps.store, g, embedder=deps.embedder)
    assert first.mode == "full" and first.chunks_added == deps.store.corpus.count("chunks")
    snap = load_snapshot(deps.store, WS, 1)
    get_summaries(snap, deps.store, 0, list(snap.communities[0]), workspace=WS)  # cache every level-0 summary
    before = set(deps.store.communities.summaries())

    # Ingest would update the graph itself (graph.follow_ingest); off here, so the one update below does both.
    ingest_files([DOC_C], store=deps.store, embedder=deps.embedder,
                 config=cfg.with_overrides({"graph.follow_ingest": False}))
    beta = next(d for d in deps.store.corpus.documents() if d.name == "beta.md")
    n_beta = len(deps.store.corpus.chunks(doc_id=beta.doc_id))
    deps.store.corpus.delete_document(beta.doc_id)
    upd = build_graph(deps.store, g, embedder=deps.embedder)
    assert upd.mode == "incremental" and upd.chunks_removed == n_beta
    assert upd.chunks_added == len(deps.store.corpus.chunks()) - (first.chunks_added - n_beta)  # only gamma was extracted
    # Summaries whose membership survived are kept; exactly the others were invalidated.
    # The build stores an extractive summary for every community of two or more entities; an update invalidates
    # the ones whose membership changed and writes exactly the missing ones.
    sizes = Counter(h for *_, h in deps.store.communities.communities())
    live, live_multi = set(sizes), {h for h, n in sizes.items() if n >= 2}
    assert before and first.summaries_written == len(before)
    assert set(deps.store.communities.summaries()) == live_multi
    assert upd.summaries_invalidated == len(before - live) and upd.summaries_written == len(live_multi - before)

    fresh = Store(":memory:")
    ingest_files([DOC_A, DOC_C], store=fresh, embedder=deps.embedder, config=cfg)
    build_graph(fresh, g, embedder=deps.embedder)
    assert _snapshot_tables(deps.store) == _snapshot_tables(fresh)
    assert normalise_name("Sanne de Vries") not in {n[0] for n in deps.store.graph.nodes()}


def test_ingest_updates_the_graph_when_graph_building_is_enabled(deps: Deps) -> None:
    on = PipelineConfig().with_overrides({"graph.enabled": True, "graph.min_phrase_chunks": 1})
    ingest_files([DOC_A], store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    assert deps.store.graph.state() is None  # off by default: ingest leaves the graph alone
    ingest_files([DOC_B], store=deps.store, embedder=deps.embedder, config=on)
    stats = graph_stats(deps.store)
    assert stats["built"] and not stats["stale"] and stats["chunks"] == deps.store.corpus.count("chunks")


# -- pipeline stages and global search ---------------------------------------------------------------------------------

def test_graph_stages_in_the_trace_and_fused_with_text(deps: Deps) -> None:
    cfg = PipelineConfig()
    ingest_files([DOC_A, DOC_B, DOC_C], store=deps.store, embedder=deps.embedder, config=cfg)
    off = run_query("Tomas Rehak", cfg, deps)
    assert off.stage("graph_local").skipped == "graph.enabled = false"
    on = cfg.with_overrides({"graph.enabled": True, "graph.mode": "both", "graph.min_phrase_chunks": 1})
    missing = run_query("Tomas Rehak", on, deps)
    assert "graph build" in missing.stage("graph_local").skipped
    build_graph(deps.store, on.graph, embedder=deps.embedder)
    tr = run_query("Which client does Tomas Rehak work for?", on, deps)
    names = [s.stage for s in tr.stages]
    assert names.index("dense") < names.index("graph_local") < names.index("graph_global") < names.index("fused")
    local = tr.stage("graph_local")
    assert local.candidates and "Tomas Rehak" in local.candidates[0].meta["entities"]
    assert "Tomas Rehak — " in local.candidates[0].meta["relations"]  # co-occurrence edge, source chunk by provenance
    assert local.info["seeds"][0]["name"] == "Tomas Rehak" and local.info["seeds"][0]["how"] == "name"
    glob = tr.stage("graph_global")
    assert glob.info["plan"]["mode"] == "extractive" and glob.info["plan"]["est_usd"] == 0
    fused = tr.stage("fused").candidates
    assert any(c.meta.get("rank_graph_local") for c in fused) and any(c.meta.get("rank_graph_global") for c in fused)
    json.dumps(tr.to_dict())  # the run log stores it
    no_fuse = run_query("Tomas Rehak", on.with_overrides({"graph.fuse_with_text": False}), deps)
    assert all("rank_graph_local" not in c.meta for c in no_fuse.stage("fused").candidates)


def test_global_plan_is_known_before_running_and_bounds_llm_cost(deps: Deps) -> None:
    ingest_files([DOC_A, DOC_B, DOC_C], store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    build_graph(deps.store, _cfg(), embedder=deps.embedder)
    snap = GraphCache().get(deps.store, WS, 1)
    plan = plan_global(snap, deps.store, level=0, max_communities=2, use_llm=False)
    # the build stored the extractive summaries; an LLM plan still counts them as to write (they are not LLM ones)
    assert len(plan.community_ids) <= 2 and plan.est_usd == 0 and plan.cached == len(plan.community_ids) > 0
    assert plan_global(snap, deps.store, level=0, max_communities=2, use_llm=True).to_write == len(plan.community_ids)
    q = "what themes run through the corpus"
    qv = deps.embedder.encode([q])[0]
    res = global_search(q, snap, deps.store, query_vec=qv, embedder=deps.embedder, level=0, max_communities=2)
    assert res.partials and all(0 <= p.score <= 100 for p in res.partials) and res.usage == Usage()
    again = plan_global(snap, deps.store, level=0, max_communities=2, use_llm=False)
    assert again.cached == len(again.community_ids) and again.to_write == 0
    llm = ScriptedLLM(lambda r: {"points": [{"text": "x", "score": 50}]})
    costly = global_search(q, snap, deps.store, query_vec=qv, level=0, max_communities=40, max_usd=0.0, llm=llm)
    assert costly.candidates == [] and not llm.requests and "above graph.global_max_usd" in costly.notes[-1]
    assert costly.plan.mode == "llm" and costly.plan.est_usd > 0


# -- LLM extraction input hygiene and escaping ---------------------------------------------------------------------------

def test_llm_json_is_validated_not_trusted() -> None:
    chunk = Chunk("c", "d", 0, "Acme hires Bob.", 0, 15)
    ex = extraction_from_json(chunk, {"entities": [{"name": "Acme", "type": "ORG", "description": "a firm"}, {"x": 1},
                                                   {"name": "  "}],
                                      "relations": [{"source": "Acme", "target": "Bob", "weight": "heavy"},
                                                    {"source": "Acme", "target": "Acme", "weight": 3}, "junk"]},
                              Usage(10, 5))
    assert [(m.norm, m.type) for m in ex.mentions] == [("acme", "org"), ("bob", "entity")]
    assert [(r.src, r.dst, r.weight) for r in ex.relations] == [("acme", "bob", 1.0)] and ex.usage.input_tokens == 10


EVIL = ['<img src=x onerror="alert(1)">', "</script><script>alert(2)</script>", "Bob & 'Eve'"]


def test_labels_from_documents_are_escaped_in_the_graph_html(store: Store) -> None:
    _store_with_chunks(store, {"de": ["an evil passage"]})
    llm = ScriptedLLM(extraction_by_passage({"evil": {
        "entities": [{"name": n, "type": "<b>x</b>", "description": n} for n in EVIL],
        "relations": [{"source": EVIL[0], "target": EVIL[1], "description": EVIL[2], "weight": 2}]}}))
    build_graph(store, _cfg(builder="llm"), llm=llm)
    snap = load_snapshot(store, WS, 1)
    frame = view.nodes_frame(snap, level=0)
    page = view.pyvis_html(frame, view.edges_frame(snap, frame["node_id"]))
    for raw in EVIL + ["<b>x</b>"]:
        assert raw not in page
    assert "onerror" not in page.split("<script")[0]  # nothing before the first script tag carries the payload
    body = page[page.index("new vis.DataSet"):]
    # Escaped exactly once, by the JSON the template writes: no HTML entity on top (vis shows labels as text).
    assert "\\u003cimg src=x onerror=" in body
    assert "&lt;img" not in body and "\\u0026lt;img" not in body and "&amp;" not in body.split("</script>")[0]
    assert "</script><script>alert(2)" not in body and "<script>alert" not in page


def test_stats_and_state(store: Store) -> None:
    assert graph_stats(store).to_dict() == {"built": False, **store.graph.counts()} and not graph_stats(store).built
    _store_with_chunks(store, PG_DOCS)
    rep = build_graph(store, _cfg())
    stats = graph_stats(store)
    assert stats.builder == "statistical, no LLM" == rep.builder and stats.version == 1 and not stats.stale
    reresolve_graph(store, _cfg())
    assert graph_stats(store).version == 2
    assert np.isfinite(load_snapshot(store, WS, 1).hub_threshold(95))


def test_cli_graph_build_stats_review_and_query_json(tmp_path, monkeypatch, capsys) -> None:
    import core.cli as cli

    monkeypatch.setattr(cli, "build_deps", lambda cfg, store=None, **_: Deps(store=store, embedder=HashEmbedder()))
    db = str(tmp_path / "g.duckdb")
    store = Store(db)
    ingest_files([DOC_A, DOC_B, DOC_C], store=store, embedder=HashEmbedder(), config=PipelineConfig())
    store.close()
    assert cli.main(["graph", "build", "--db", db, "--set", "graph.min_phrase_chunks=1"]) == 0
    assert "full build (statistical, no LLM)" in capsys.readouterr().out
    assert cli.main(["graph", "update", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "incremental"
    assert cli.main(["graph", "stats", "--db", db, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["built"] and stats["builder"] == "statistical, no LLM" and stats["nodes"] > 0
    syn = tmp_path / "syn.txt"
    syn.write_text("Project Bluefin = Bluefin\n")
    assert cli.main(["graph", "synonyms", "--db", db, "--file", str(syn)]) == 0
    capsys.readouterr()
    assert cli.main(["graph", "synonyms", "--db", db]) == 0
    assert capsys.readouterr().out.strip() == "Project Bluefin = Bluefin"
    assert cli.main(["graph", "review", "--db", db, "--approve", "nope"]) == 2
    assert cli.main(["query", "Who works with Tomas Rehak?", "--db", db, "--json", "--set", "graph.enabled=true",
                     "--set", "graph.min_phrase_chunks=1"]) == 0
    out = json.loads(capsys.readouterr().out)
    local = next(s for s in out["stages"] if s["stage"] == "graph_local")
    assert not local["skipped"] and local["candidates"] and "entities" in local["candidates"][0]
    assert local["info"]["seeds"][0]["name"] == "Tomas Rehak"


def test_global_search_with_an_llm_summarises_maps_and_reduces_within_budget(deps: Deps) -> None:
    ingest_files([DOC_A, DOC_B, DOC_C], store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    build_graph(deps.store, _cfg(), embedder=deps.embedder)
    snap = GraphCache().get(deps.store, WS, 1)

    def reply(req):
        if req.purpose == "graph_summary":
            return {"title": "Projects and people", "summary": "Tomas Rehak works on Project Bluefin."}
        if req.purpose == "graph_map":
            return {"points": [{"text": "Bluefin is led by Tomas Rehak", "score": 80}]}
        return "Tomas Rehak leads Project Bluefin."

    llm = ScriptedLLM(reply)
    res = global_search("who leads Bluefin", snap, deps.store, level=0, max_communities=3, top=2, max_usd=5.0, llm=llm)
    n = len(res.plan.community_ids)
    assert res.plan.mode == "llm" and res.plan.to_write == n and 0 < res.plan.est_usd <= 5.0
    purposes = [r.purpose for r in llm.requests]
    assert purposes == ["graph_summary"] * n + ["graph_map"] * n + ["graph_reduce"]
    assert res.answer == "Tomas Rehak leads Project Bluefin." and res.usage.calls == 2 * n + 1
    assert all(p.score == 80 for p in res.partials) and res.candidates
    again = plan_global(snap, deps.store, level=0, max_communities=3, use_llm=True, model="claude-haiku-4-5")
    assert again.cached == n and again.to_write == 0  # LLM summaries are cached too


def test_a_failing_llm_keeps_what_was_extracted_and_the_next_update_finishes(store: Store, monkeypatch) -> None:
    import core.graph.build as gb
    from core.models.llm import LLMError

    monkeypatch.setattr(gb, "EXTRACT_BATCH", 1)
    _store_with_chunks(store, {"dl": ["Acme hires Bob.", "Bob meets Carol.", "Carol joins Acme."]})
    good = extraction_by_passage({
        "hires": {"entities": [], "relations": [{"source": "Acme", "target": "Bob", "description": "", "weight": 2}]},
        "meets": {"entities": [], "relations": [{"source": "Bob", "target": "Carol", "description": "", "weight": 2}]},
        "joins": {"entities": [], "relations": [{"source": "Carol", "target": "Acme", "description": "", "weight": 2}]},
    })
    calls = {"n": 0}

    def flaky(req):
        calls["n"] += 1
        if calls["n"] == 3:
            raise LLMError("529 overloaded after 4 retries")
        return good(req)

    rep = build_graph(store, _cfg(builder="llm"), llm=ScriptedLLM(flaky))
    assert rep.chunks_added == 2 and "stopped after 2 of 3" in rep.notes[0]
    assert len(store.graph.seen_chunks()) == 2 and store.graph.unresolved_chunks() == []
    rep2 = build_graph(store, _cfg(builder="llm"), llm=ScriptedLLM(good))
    assert rep2.chunks_added == 1 and not rep2.notes
    assert {(a, b) for a, b, *_ in store.graph.edges()} == {("acme", "bob"), ("bob", "carol"), ("acme", "carol")}


def test_common_phrases_are_flagged_and_svg_labels_never_overlap() -> None:
    """Issue #28: lowercase phrases holding a stop word, cut-off pieces of a longer phrase seen as often, and phrases
    spread over a large share of the documents are noise; names and identifiers never are. The default picture
    labels a node only where its label touches no other."""
    import re

    import pandas as pd

    rows = [("n1", "Helen Marsh", "named", 9, 4, 2), ("n2", "fewer remote", "phrase", 2, 2, 2),
            ("n3", "fewer remote days", "phrase", 2, 2, 2), ("n4", "messages with", "phrase", 2, 2, 2),
            ("n5", "quarterly report", "phrase", 5, 9, 9), ("n6", "pump stations", "phrase", 3, 3, 3),
            ("n7", "FB-340", "identifier", 3, 9, 9)]
    frame = pd.DataFrame(rows, columns=["node_id", "name", "type", "degree", "chunks", "docs"]).assign(community="c0")
    noise = view.common_phrases(frame, n_docs=20)
    assert list(frame.name[noise]) == ["fewer remote", "messages with", "quarterly report"]
    # twelve nodes on one spot: one label, the rest keep their hover titles
    crowd = pd.DataFrame([(f"m{i}", f"entity number {i}", "named", 10 - i, 1, 1, "c0") for i in range(12)],
                         columns=["node_id", "name", "type", "degree", "chunks", "docs", "community"])
    layout = {f"m{i}": (0.0 + i * 0.001, 0.0) for i in range(12)}
    layout["far"] = (100.0, 100.0)
    crowd.loc[len(crowd)] = ("far", "far away", "named", 1, 1, 1, "c0")
    svg = view.svg_graph_html(crowd, pd.DataFrame(columns=["src", "dst", "weight"]), layout)
    labels = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    assert labels == ["entity number 0", "far away"] and svg.count("<title>") == 13
