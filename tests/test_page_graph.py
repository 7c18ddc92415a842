"""AppTest of the Graph page: build button, pyvis view, entity detail, merge review, highlight, escaping."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.config import PipelineConfig
from core.deps import Deps
from core.graph.build import build_graph, graph_stats
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from pages import _state
from tests.fakes import HashEmbedder
from tests.graph_fakes import ScriptedLLM, VectorEmbedder, extraction_by_passage

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")
DOCS = [
    ("staff.md", b"# Staffing\n\nTomas Rehak is the lead architect for Project Bluefin.\n\n"
                 b"Sanne de Vries is the data engineer for Project Saltmarsh.\n"),
    ("clients.md", b"# Clients\n\nKestrel Water Authority runs Project Bluefin; Rafael Quintero manages it.\n\n"
                   b"Nordhaven Ports Authority runs Project Saltmarsh; Lena Brightwater manages it.\n"),
]


def _page(deps: Deps, config: PipelineConfig | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    if config is not None:
        at.session_state[_state.CONFIG_KEY] = config
    at.run()
    return at.switch_page("pages/graph.py").run()


def _iframe_html(at: AppTest) -> str:
    frames = at.get("iframe")
    assert frames, "no graph view rendered"
    return frames[0].proto.srcdoc


def test_graph_page_on_an_empty_store_says_what_to_do(deps: Deps) -> None:
    at = _page(deps)
    assert not at.exception and at.title[0].value == "Graph"
    assert "no documents" in at.info[0].value


def test_build_button_builds_and_the_view_renders(deps: Deps) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = _page(deps, PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1}))
    assert not at.exception and "No graph yet" in at.info[0].value
    at = at.button(key="graph_build").click().run()
    assert not at.exception and graph_stats(deps.store)["built"]
    assert any("full build" in s.value for s in at.success)
    html = _iframe_html(at)
    assert "Tomas Rehak" in html and "<svg" in html and "<script" not in html  # default: a still picture
    at = at.toggle(key="graph_interactive").set_value(True).run()
    html = _iframe_html(at)
    assert "Tomas Rehak" in html and "vis.DataSet" in html and "cdn.jsdelivr" not in html  # in_line: offline
    assert re.search(r'"physics": \{\s*"enabled": false', html)  # positions from Python, nothing simulated
    texts = [t.value for t in at.text]
    assert any("type named" in t for t in texts)
    assert any(t.startswith("Global search at level 0 (before it runs)") and "extractive" in t for t in texts)
    assert at.button(key="graph_build").label == "Update graph"


def test_the_layout_is_computed_once_for_every_session_that_draws_the_same_graph(
        deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st

    from core.graph import view

    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1})
    build_graph(deps.store, cfg.graph, embedder=deps.embedder, workspace="default")
    st.cache_data.clear()
    calls: list[int] = []
    real = view.static_layout
    monkeypatch.setattr(view, "static_layout", lambda n, e, **kw: calls.append(len(n)) or real(n, e, **kw))
    first = _iframe_html(_page(deps, cfg))
    second = _iframe_html(_page(deps, cfg))  # a new session: a reload, or another user
    assert len(calls) == 1 and calls[0] > 0
    assert first == second  # the same picture, positions included


def test_nodes_used_by_the_last_query_are_highlighted(deps: Deps) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"graph.enabled": True, "graph.min_phrase_chunks": 1})
    build_graph(deps.store, cfg.graph, embedder=deps.embedder)
    run_query("Who manages the client of Tomas Rehak?", cfg, deps)  # logged: the page reads the run log
    at = _page(deps, cfg)
    assert not at.exception
    assert any("Who manages the client of Tomas Rehak?" in c.value for c in at.caption)
    html = _iframe_html(at)
    assert "stroke='#ff2d55' stroke-width='3'" in html and "stroke='#ff2d55' stroke-width='2'" in html  # nodes, links
    at = at.toggle(key="graph_interactive").set_value(True).run()
    html = _iframe_html(at)
    assert '"shape": "star"' in html and "#ff2d55" in html  # the seed, and red borders / links


def test_merge_review_approve_reject_undo_from_the_page() -> None:
    store = Store(":memory:")
    emb = VectorEmbedder({"Corvane Systems": [1, 0.1, 0, 0, 0, 0, 0, 0], "Corvane Systems B.V": [1, 0.12, 0, 0, 0, 0, 0, 0],
                          "Harbor Station": [0, 0, 1, 0.1, 0, 0, 0, 0], "Harbour Station": [0, 0, 1, 0.13, 0, 0, 0, 0]})
    deps = Deps(store=store, embedder=emb)
    ingest_files([("m.md", b"Corvane Systems signed. Corvane Systems B.V pays. Harbor Station and Harbour Station.")],
                 store=store, embedder=emb, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1})
    build_graph(store, cfg.graph, embedder=emb)
    items = {frozenset((q.keep_name, q.other_name)): q.item_id for q in store.review.queue("pending")}
    firm = items[frozenset(("Corvane Systems", "Corvane Systems B.V"))]
    place = items[frozenset(("Harbor Station", "Harbour Station"))]
    at = _page(deps, cfg)
    at = at.button(key=f"graph_approve_{firm}").click().run()
    assert not at.exception and "corvane systems b.v" not in {n[0] for n in store.graph.nodes()}
    at = at.button(key=f"graph_reject_{place}").click().run()
    assert {q.item_id: q.status for q in store.review.queue()}[place] == "rejected"
    at = at.button(key=f"graph_undo_{firm}").click().run()
    assert not at.exception and "corvane systems b.v" in {n[0] for n in store.graph.nodes()}


def test_synonyms_saved_from_the_page_merge_nodes(deps: Deps) -> None:
    ingest_files([("db.md", b"Billing uses PostgreSQL daily. Ops restart Postgres nightly.")], store=deps.store,
                 embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1})
    build_graph(deps.store, cfg.graph, embedder=deps.embedder)
    at = _page(deps, cfg)
    at.text_area(key="graph_synonyms").input("PostgreSQL =")
    at = at.button(key="graph_save_synonyms").click().run()
    assert "line 1" in at.error[0].value
    at.text_area(key="graph_synonyms").input("PostgreSQL = Postgres")
    at = at.button(key="graph_save_synonyms").click().run()
    assert not at.exception and "postgres" not in {n[0] for n in deps.store.graph.nodes()}


def test_a_malicious_document_cannot_inject_script_into_the_graph_view() -> None:
    evil = ['<img src=x onerror="alert(1)">', "</script><script>alert(2)</script>"]
    store = Store(":memory:")
    llm = ScriptedLLM(extraction_by_passage({"Quarterly": {
        "entities": [{"name": n, "type": "<i>t</i>", "description": n} for n in evil] +
                    [{"name": "Acme", "type": "org", "description": "a firm"}],
        "relations": [{"source": evil[0], "target": "Acme", "description": evil[1], "weight": 3}]}}))
    deps = Deps(store=store, embedder=HashEmbedder(), llm=llm)
    ingest_files([("evil.md", b"Quarterly note <img src=x onerror=alert(1)> about Acme.")], store=store,
                 embedder=deps.embedder, config=PipelineConfig())
    at = _page(deps, PipelineConfig().with_overrides({"graph.builder": "llm", "graph.min_phrase_chunks": 1}))
    at = at.button(key="graph_build").click().run()
    assert not at.exception and llm.requests
    html = _iframe_html(at)
    for raw in evil + ["<i>t</i>"]:
        assert raw not in html
    assert "onerror" in html  # the name is there, escaped, not dropped
    # Entity detail and review rows use st.text: shown literally, never rendered as HTML.
    assert not [m for m in at.markdown if "onerror" in m.value]


def test_entity_detail_finds_by_name_and_lists_relations_and_sources(deps: Deps) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1})
    build_graph(deps.store, cfg.graph, embedder=deps.embedder)
    at = _page(deps, cfg)
    at.text_input(key="graph_find").input("rehak")
    at = at.run()
    assert not at.exception and at.selectbox(key="graph_entity").value == "tomas rehak"
    texts = [t.value for t in at.text]
    assert any(t.startswith("Tomas Rehak · type named") for t in texts)
    assert any("quote:" in t and "lead architect" in t for t in texts)  # statistical: a quote, not a description
    relations, sources = at.dataframe[0].value, at.dataframe[1].value
    assert "Project Bluefin" in set(relations["entity"]) and set(sources["document"]) == {"staff.md"}
    at.text_input(key="graph_find").input("zzz-nothing")
    at = at.run()
    assert not at.exception and any("No entity matches" in c.value for c in at.caption)


# -- graph view helpers (core/graph/view.py): default view, link thinning, static layout, the query's subgraph ------

def test_overview_takes_each_communitys_hub_first_then_the_next() -> None:
    import pandas as pd

    from core.graph.view import overview_nodes

    frame = pd.DataFrame({"node_id": list("abcdefg"), "name": list("ABCDEFG"), "type": ["t"] * 7,
                          "degree": [9, 8, 7, 6, 5, 1, 3], "chunks": [1] * 7,
                          "community": ["X", "X", "X", "X", "Y", "Y", None]})
    # ranks inside communities: X a0 b1 c2 d3 · Y e0 f1 · none g0; ties on rank go to the bigger community
    assert list(overview_nodes(frame, 4)["node_id"]) == ["a", "e", "g", "b"]
    assert list(overview_nodes(frame, 2, must_show=["f"])["node_id"]) == ["a", "f"]  # the cap holds


def test_strongest_edges_keeps_each_nodes_heaviest_links() -> None:
    import pandas as pd

    from core.graph.view import strongest_edges

    edges = pd.DataFrame({"src": ["a", "a", "a", "b"], "dst": ["b", "c", "d", "c"], "weight": [5.0, 1.0, 3.0, 2.0]})
    kept = strongest_edges(edges, per_node=1)
    # a keeps a-b (5); b keeps a-b; c keeps b-c (2, its heaviest); d keeps a-d (its only link)
    assert sorted(zip(kept["src"], kept["dst"])) == [("a", "b"), ("a", "d"), ("b", "c")]


def test_static_layout_is_seeded_and_spread_over_the_canvas() -> None:
    import pandas as pd

    from core.graph.view import _spread, static_layout

    nodes = pd.DataFrame({"node_id": list("abcde")})
    edges = pd.DataFrame({"src": ["a", "b", "c"], "dst": ["b", "c", "a"], "weight": [1.0, 1.0, 1.0]})
    one, two = static_layout(nodes, edges), static_layout(nodes, edges)
    assert one == two and set(one) == set("abcde")
    assert _spread([0.0, 0.01, 0.02, 10.0]) == pytest.approx([0.0, 0.7 / 3 + 0.3 * 0.001, 1.4 / 3 + 0.3 * 0.002, 1.0])


def test_subgraph_svg_lays_out_seeds_hops_and_chunks_escaped() -> None:
    from core.app.graph_ops import local_nodes, subgraph_svg
    from core.graph.stages import GraphLocalInfo, SeedHit
    from core.types import Candidate, StageResult

    info = GraphLocalInfo(1, (SeedHit("s", "Seed<x>", 1.0, "name"),), ("s", "h"), (("s", "h", 2.0),), (), None,
                          False, False)
    local = StageResult("graph_local", (Candidate("c1", "d", "text <b>", 1.0, 1, {"entities": "Seed<x>; Hop"}),), 1.0,
                        info=info)
    import base64

    assert local_nodes(local) == ("s", "h") and local_nodes(StageResult("graph_local", skipped="off")) == ()
    html_part = subgraph_svg(local, {"h": "Hop"})
    svg = base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)", html_part).group(1)).decode()
    assert "<x>" not in svg and "Seed&lt;x&gt;" in svg and "&lt;b&gt;" in svg
    assert svg.count("<circle") == 2 and svg.count("<rect") == 1
    # seed (hop 0) left of its neighbour (hop 1), the chunk in the rightmost column, linked to both entities
    xs = [float(v) for v in re.findall(r"<circle cx='([\d.]+)'", svg)]
    rect_x = float(re.search(r"<rect x='([\d.]+)'", svg).group(1))
    assert xs[0] < xs[1] < rect_x and svg.count("stroke-dasharray") == 2


def test_raptor_panel_estimates_builds_and_shows_the_tree(deps: Deps) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = _page(deps, PipelineConfig().with_overrides({"raptor.cluster_size": 2}))
    assert not at.exception and any(e.label == "RAPTOR tree: not built" for e in at.expander)
    assert any("summaries on" in c.value for c in at.caption)  # the estimate, before anything runs
    at = at.button(key="raptor_build").click().run()
    assert not at.exception and deps.store.raptor.state("default") is not None
    assert any("(extractive)" in s.value for s in at.success)
    # the panel redraws when its build ends: the label says the tree exists (it said "not built" until a rerun)
    n = deps.store.raptor.state("default")[2]
    assert [e.label for e in at.expander if e.label.startswith("RAPTOR tree")] == [f"RAPTOR tree: {n} summaries"]
    frame = next(d.value for d in at.dataframe if "summary" in d.value.columns)
    assert len(frame) >= 1 and frame["level"].max() >= 1
    charts = at.get("graphviz_chart")  # the tree drawn beside the table
    assert charts and "digraph raptor" in charts[0].proto.spec and all(n in charts[0].proto.spec for n in frame["node"])
    at = at.run().button(key="raptor_update").click().run()  # nothing new: the stored tree stays
    assert not at.exception and any(s.value.startswith("unchanged") for s in at.success)
