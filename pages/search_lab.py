"""Search Lab page: one query through the pipeline, every stage side by side with its candidates, timing and notes."""
from __future__ import annotations

import streamlit as st

from core.config import ConfigError
from core.pipeline import QueryError, run_query
from pages import _state, _widgets

deps, ws = _state.deps(), _state.workspace()
store = deps.store
st.title("Search Lab")

if _widgets.empty_store_hint(store, ws):
    st.stop()

with st.form("query_form", border=False):
    q_col, b_col = st.columns([6, 1], vertical_alignment="bottom")
    query = q_col.text_input("Query", key="query", placeholder="e.g. who worked with which client on which project?")
    submitted = b_col.form_submit_button("Search", type="primary", key="search")
if submitted:
    st.session_state[_widgets.LAST_QUERY_KEY] = query

# -- settings: written into the session config; a change re-runs the last query --------------------------------------
cfg = _state.config()
with st.container(border=True):
    c = st.columns([2, 1, 1, 1, 1, 1.4, 1])
    modes = list(_widgets.MODES)
    mode = c[0].radio("Retrieval", modes, index=modes.index(_widgets.mode_of(cfg)), horizontal=True, key="mode")
    bm25_k = c[1].number_input("BM25 k", 1, 1000, cfg.bm25.k, key="bm25_k", disabled=mode == "dense")
    dense_k = c[2].number_input("dense k", 1, 1000, cfg.dense.k, key="dense_k", disabled=mode == "BM25")
    hybrid = mode == "hybrid"
    fusion_k = c[3].number_input("fused k", 1, 1000, cfg.fusion.k, key="fusion_k", disabled=not hybrid)
    rrf_k = c[4].number_input("RRF k", 1, 10000, cfg.fusion.rrf_k, key="rrf_k", disabled=not hybrid,
                              help="score = Σ weight / (k + rank); larger k flattens the difference between ranks")
    method = c[5].selectbox("Fusion", ["rrf", "weighted_rrf"], index=["rrf", "weighted_rrf"].index(cfg.fusion.method),
                            key="fusion_method", disabled=not hybrid)
    depth = c[6].number_input("rows shown", 1, 200, 10, key="depth")
    overrides = {**_widgets.MODES[mode], "bm25.k": int(bm25_k), "dense.k": int(dense_k), "fusion.k": int(fusion_k),
                 "fusion.rrf_k": int(rrf_k), "fusion.method": method}
    if method == "weighted_rrf" and hybrid:
        w1, w2, _ = st.columns([1, 1, 4])
        overrides["fusion.bm25_weight"] = w1.number_input("BM25 weight", 0.0, 10.0, cfg.fusion.bm25_weight, 0.1,
                                                          key="w_bm25")
        overrides["fusion.dense_weight"] = w2.number_input("dense weight", 0.0, 10.0, cfg.fusion.dense_weight, 0.1,
                                                           key="w_dense")
    with st.expander("Context and graph: which text is searched, GraphRAG stages"):
        g = st.columns(3)
        variants = ["none", "heuristic", "late", "llm"]
        overrides["context.variant"] = g[0].radio(
            "Chunk context", variants, variants.index(cfg.context.variant), horizontal=True, key="context_variant",
            help="none: raw chunks · heuristic: title, heading path and lead sentence (no LLM) · late: late-chunking "
                 "vectors · llm: contexts written by Claude (build them on the Costs page). Switches without re-index.")
        overrides["graph.enabled"] = g[1].toggle("GraphRAG search", cfg.graph.enabled, key="graph_on",
                                                 help="needs a graph: build it on the Graph page")
        graph_modes = ["local", "global", "both"]
        overrides["graph.mode"] = g[2].radio("graph mode", graph_modes, graph_modes.index(cfg.graph.mode),
                                             horizontal=True, key="graph_mode")
    with st.expander("Compression cascade: rerank → prune → MMR → expand"):
        r = st.columns(4)
        methods = ["late-interaction", "cross-encoder", "llm"]
        overrides["rerank.enabled"] = r[0].toggle("Rerank", cfg.rerank.enabled, key="rerank_on")
        overrides["rerank.method"] = r[0].selectbox("method", methods, methods.index(cfg.rerank.method),
                                                    key="rerank_method")
        overrides["rerank.top_n"] = int(r[0].number_input("reads top n", 1, 1000, cfg.rerank.top_n, key="rerank_top_n"))
        overrides["rerank.k"] = int(r[0].number_input("keeps k", 1, 1000, cfg.rerank.k, key="rerank_k"))
        overrides["prune.enabled"] = r[1].toggle("Sentence pruning", cfg.prune.enabled, key="prune_on")
        overrides["prune.token_budget"] = int(r[1].number_input("token budget", 16, 100000, cfg.prune.token_budget,
                                                                key="prune_budget"))
        scorers = {"hybrid": "hybrid (pooled token cosine + BM25)", "hybrid-encoded": "hybrid, sentences encoded (slow)",
                   "embedder": "embedder cosine (slow)", "reranker": "the reranker's own"}
        overrides["prune.scorer"] = r[1].selectbox("sentence scorer", list(scorers), list(scorers).index(cfg.prune.scorer),
                                                   format_func=scorers.get, key="prune_scorer")
        overrides["mmr.enabled"] = r[2].toggle("MMR + duplicate collapse", cfg.mmr.enabled, key="mmr_on")
        overrides["mmr.lam"] = r[2].slider("λ (1 = relevance only)", 0.0, 1.0, cfg.mmr.lam, 0.05, key="mmr_lam")
        overrides["expand.enabled"] = r[3].toggle("Expansion", cfg.expand.enabled, key="expand_on")
        overrides["expand.mode"] = r[3].radio("mode", ["window", "parent"], ["window", "parent"].index(cfg.expand.mode),
                                              horizontal=True, key="expand_mode")
        overrides["expand.window"] = int(r[3].number_input("± sentences", 0, 50, cfg.expand.window, key="expand_window"))
    try:
        wanted = cfg.with_overrides(overrides)
    except ConfigError as exc:
        st.error(str(exc))
        wanted = cfg
    if wanted != cfg:
        _state.set_config(wanted)
        cfg = wanted

# -- run and render -----------------------------------------------------------------------------------------------------
last = st.session_state.get(_widgets.LAST_QUERY_KEY)
if last is None:
    st.caption("Type a query and press Search. Settings changes re-run the last query.")
    st.stop()
try:
    # Only an explicit search goes to the run log; re-runs caused by settings changes would flood it.
    trace = run_query(last, cfg, deps, workspace=ws, log=submitted)
except QueryError as exc:
    st.error(str(exc))
    st.stop()

st.caption(f"query language {trace.query_lang} · config {trace.config_hash} · corpus v{trace.corpus_version} · "
           f"total {sum(s.ms for s in trace.stages):.1f} ms")
for note in trace.notes:
    st.warning(note, icon="🌐")
doc_names = {d.doc_id: d.name for d in store.documents(ws)}
_widgets.answer_panel(trace.answer)
_widgets.stage_grid(trace, doc_names=doc_names, depth=int(depth))
_widgets.chunk_detail(trace, store, ws, doc_names)
