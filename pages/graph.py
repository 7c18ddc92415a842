"""Graph page: build the entity graph, explore it (pyvis), inspect entities and communities, review merges."""
from __future__ import annotations

import streamlit as st

from core.app import corpus_ops
from core.app.graph_ops import (
    SynonymError,
    build_graph,
    decide_merge,
    graph_stats,
    plan_global,
    set_synonyms,
    synonyms_text,
    view,
)
from core.app.report import escape_md
from pages import _raptor, _state

REPORT_KEY = "graph_build_report"


@st.cache_data(max_entries=64, show_spinner=False)
def _layout(ids: tuple[str, ...], links: tuple[tuple[str, str], ...], _nodes: object, _edges: object
            ) -> dict[str, tuple[float, float]]:
    # Keyed by the node ids and link ends only (what static_layout reads); the frames themselves are not hashed.
    return view.static_layout(_nodes, _edges)


deps, ws, cfg = _state.deps(), _state.workspace(), _state.config()
store = deps.store
st.title("Graph")

if not corpus_ops.has_documents(store, ws):
    st.info(f"Workspace '{escape_md(ws)}' has no documents yet: upload some on the Corpus page, then build the graph "
            "here.")
    st.stop()

# -- build / update ------------------------------------------------------------------------------------------------
stats = graph_stats(store, ws)
with st.container(border=True):
    if stats.built:
        st.caption(f"{stats.builder} · graph v{stats.version} · {stats.nodes} entities "
                   f"({stats.active_nodes} active) · {stats.edges} links · {stats.communities} communities "
                   f"on {stats.levels} level(s) · {stats.pending_merges} merges to review · {stats.leiden}")
        if stats.stale:
            st.warning(f"The graph is behind the corpus (built at corpus v{stats.graph_corpus_version}, now "
                       f"v{stats.corpus_version}): update it.")
    else:
        st.info("No graph yet. The offline builder is statistical (no LLM): names, identifiers and terms become "
                "entities, co-occurrence in a chunk becomes a link.")
    b1, b2 = st.columns([1, 4], vertical_alignment="bottom")
    full = b2.checkbox("full rebuild (re-extract every chunk)", key="graph_full")
    if b1.button("Update graph" if stats.built else "Build graph", type="primary", key="graph_build"):
        with st.spinner("Extracting entities, resolving, detecting communities…"):
            st.session_state[REPORT_KEY] = build_graph(store, cfg.graph, embedder=deps.embedder, llm=deps.llm,
                                                       workspace=ws, full=full)
        st.rerun()
    rep = st.session_state.get(REPORT_KEY)
    if rep is not None:
        st.success(f"{rep.mode} build in {rep.seconds:.2f} s: +{rep.chunks_added} / -{rep.chunks_removed} chunks, "
                   f"{rep.suggestions} new merge suggestions, {rep.summaries_invalidated} summaries invalidated, {rep.summaries_written} written")
        for note in rep.notes:
            st.warning(escape_md(note))

_raptor.panel(deps, cfg, ws)
snap = deps.graph.get(store, ws, cfg.graph.min_phrase_chunks)
if snap is None or not len(snap):
    st.stop()

last = st.session_state.get("last_trace")
if last is None:
    last = corpus_ops.last_trace(store, ws)
used = view.used_by_trace(last)

tab_graph, tab_entity, tab_comm, tab_review, tab_syn = st.tabs(
    ["Graph", "Entity", "Communities", "Merge review", "Synonyms"])

with tab_graph:
    f1, f2, f3, f4, f5, f6 = st.columns([1, 2, 2, 1, 1, 1.2], vertical_alignment="bottom")
    level = f1.selectbox("Level", snap.levels() or [0], key="graph_level")
    frame = view.nodes_frame(snap, level=level)
    noise = view.common_phrases(frame, len(corpus_ops.document_names(store, ws)))
    if not st.toggle(f"Show common phrases ({int(noise.sum())})", key="graph_show_noise",
                     help="lowercase phrases that hold a stop word, are a cut-off piece of a longer phrase, or run "
                          "through a large share of the documents: hidden from the views by default"):
        frame = frame[~noise | frame["node_id"].isin(used.nodes)]
    comms = f2.multiselect("Community", sorted(frame["community"].dropna().unique()), key="graph_comms")
    types = f3.multiselect("Type", sorted(frame["type"].unique()), key="graph_types")
    min_deg = f4.number_input("Min degree", 0, 10_000, 1, key="graph_min_degree")
    max_nodes = f5.number_input("Max nodes", 10, 1000, 150, step=10, key="graph_max_nodes")
    full = f6.toggle(f"Full graph ({len(frame):,})", key="graph_full_view",
                     help="every active entity; large graphs take a while to draw")
    if full:
        shown = frame
    elif comms or types or int(min_deg) > 1:
        shown = view.filter_nodes(frame, communities=comms, types=types, min_degree=int(min_deg),
                                  max_nodes=int(max_nodes), must_show=used.nodes)
    else:  # the default view: each community's best-connected entities, so the picture has labels, not a hairball
        shown = view.overview_nodes(frame, int(max_nodes), must_show=used.nodes)
    edges = view.edges_frame(snap, shown["node_id"])
    if not full:
        edges = view.strongest_edges(edges, per_node=3)
    # Positions computed once in Python: the browser draws a still picture (no physics running after load) and stays
    # responsive. A layout depends only on the nodes and links drawn, so it is kept per process (every session and
    # every reload of the page reuses it) under that key.
    lkey = ("graph_layout", snap.version, level, tuple(shown["node_id"]))
    if st.session_state.get("graph_layout_key") != lkey:
        with st.spinner(f"Laying out {len(shown):,} entities…"):
            st.session_state["graph_layout"] = _layout(tuple(shown["node_id"]), tuple(zip(edges["src"], edges["dst"])),
                                                       shown, edges)
        st.session_state["graph_layout_key"] = lkey
    # st.iframe replaces st.components.v1.html (deprecated in this Streamlit). The HTML is built by us and every
    # string from a document in it is escaped (core/graph/view.py).
    # A still SVG by default (a few kB, nothing running in the browser); pan and zoom on demand with pyvis, whose page
    # inlines vis.js (~0.9 MB, 1-2 s to build) and is therefore built once per view and kept.
    if st.toggle("Pan and zoom (interactive, slower)", key="graph_interactive"):
        hkey = (lkey, used)
        if st.session_state.get("graph_html_key") != hkey:
            st.session_state["graph_html"] = view.pyvis_html(shown, edges, used=used,
                                                             layout=st.session_state["graph_layout"])
            st.session_state["graph_html_key"] = hkey
        st.iframe(st.session_state["graph_html"], height=640)
    else:
        st.iframe(view.svg_graph_html(shown, edges, st.session_state["graph_layout"], used=used), height=640)
    st.caption(f"{len(shown):,} of {len(frame):,} entities shown · {len(edges):,} links"
               + ("" if full else " (each entity's three strongest)") + " · colour = community · hover a node for "
               "its details")
    if used.nodes:
        st.caption("Red borders and links: what graph local search used for the last query "
                   f"('{escape_md(used.query)}'); stars are its seed entities.")
    else:
        st.caption("Run a query with graph.enabled = true in the Search Lab to see which entities it used.")

with tab_entity:
    find = st.text_input("Find an entity by name (else: the entities in the graph view)", key="graph_find")
    options = view.find_nodes(frame, find) if find.strip() else list(shown["node_id"])
    pick = st.selectbox("Entity", options, key="graph_entity", format_func=lambda nid: snap.names[snap.pos[nid]])
    if pick is None:
        st.caption("No entity matches.")
    else:
        doc_names = corpus_ops.document_names(store, ws)
        d = view.entity_detail(snap, store, pick, doc_names=doc_names)
        st.text(f"{d['name']} · type {d['type']} · degree {d['degree']} · {d['chunks_total']} chunks · "
                "communities " + ", ".join(f"level {lvl}: {c}" for lvl, c in d["communities"].items()))
        st.text(f"aliases: {', '.join(d['aliases'])}")
        st.text(d["description"] or "(no description)")
        c1, c2 = st.columns(2)
        c1.dataframe(d["relations"], hide_index=True)
        c2.dataframe(d["chunks"], hide_index=True)

with tab_comm:
    lvl = st.selectbox("Level", snap.levels() or [0], key="graph_comm_level")
    st.caption("Summaries are written lazily, when a global query touches a community, then cached until its "
               "membership changes.")
    llm_on = cfg.graph.llm_summaries and getattr(deps.llm, "available", False)
    plan = plan_global(snap, store, level=lvl, max_communities=cfg.graph.global_max_communities, use_llm=llm_on,
                       model=cfg.graph.llm_model, workspace=ws)
    st.text(f"Global search at level {lvl} (before it runs): {len(plan.community_ids)} of {plan.total_at_level} "
            f"communities, {plan.cached} summaries cached, {plan.to_write} to write, {plan.mode}, estimate "
            f"${plan.est_usd:.4f} (bound graph.global_max_usd ${cfg.graph.global_max_usd:.2f})")
    st.dataframe(view.communities_frame(snap, store, lvl), hide_index=True)

with tab_review:
    st.caption(f"Pairs of entity names with cosine ≥ {cfg.graph.merge_threshold} ({deps.embedder.model_id}). "
               "Approve to merge; reject keeps them apart for good (homonyms, look-alike codes).")
    queue = view.queue_frame(store, ws)
    st.caption(f"{stats.pending_merges} pending; showing the 50 best and the 20 latest decisions.")
    for row in queue.itertuples(index=False):
        q1, q2, q3 = st.columns([6, 1, 1], vertical_alignment="center")
        q1.text(f"{row.keep}  ⟵  {row.merge}   (cosine {row.cosine}, {row.status})")
        actions = [("approve", "Approve"), ("reject", "Reject")] if row.status == "pending" else [("undo", "Undo")]
        for col, (act, label) in zip((q2, q3), actions):
            if col.button(label, key=f"graph_{act}_{row.item}"):
                decide_merge(store, cfg.graph, row.item, act, embedder=deps.embedder, workspace=ws)
                st.rerun()
    if queue.empty:
        st.caption("No merge suggestions.")

with tab_syn:
    text = st.text_area("Synonyms: one group per line, canonical name first", synonyms_text(store, ws),
                        placeholder="PostgreSQL = Postgres = pg", key="graph_synonyms")
    if st.button("Save synonyms and re-resolve", key="graph_save_synonyms"):
        try:
            set_synonyms(store, cfg.graph, text, embedder=deps.embedder, workspace=ws)
            st.rerun()
        except SynonymError as exc:
            st.error(escape_md(exc))
