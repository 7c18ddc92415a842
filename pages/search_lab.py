"""Search Lab page: one query through the pipeline, every stage side by side in one row, counters beside them."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from core.app import corpus_ops, readiness, trace_export
from core.app.collections import listed as listed_collections
from core.app.counters import Counters, counters
from core.app.graph_ops import local_nodes, subgraph_svg
from core.app.report import escape_md
from core.app.routing import NO_RETRIEVAL, route_names, routed_stages
from core.config import ConfigError, PipelineConfig
from core.pipeline import QueryError, run_query
from core.types import InRound
from pages import _answer_box, _conversation, _form, _state, _widgets
from pages._gold_from_lab import add_to_golden
from pages._sql_panel import sql_panel

TRACE_KEY, SESSION_KEY, BUILT_KEY, TOKENS_KEY = "lab_traces", "lab_session_counters", "lab_build_done", "lab_tokens"
PENDING_KEY = "lab_pending_build"  # (need, config) of a build whose button was pressed: it runs at the top, in view
RECOMPUTE_KEY = "lab_recompute"  # "Recompute" was pressed: the next run bypasses the answer cache for this query
ANYWAY_KEY = "lab_search_anyway"  # the route override was set by "Search the documents anyway", for this question only
TRACES_KEPT = 16  # settings flipped back and forth show their trace again without re-running the pipeline
deps, ws = _state.deps(), _state.workspace()
store = deps.store
st.title("Search Lab")

if _widgets.empty_store_hint(store, ws):
    st.stop()

with st.form("query_form", border=False):
    q_col, b_col = st.columns([8, 1], vertical_alignment="bottom")
    query = q_col.text_input("Query", key="query", placeholder="e.g. who worked with which client on which project?",
                             label_visibility="collapsed")
    submitted = b_col.form_submit_button("Search", type="primary", key="search", use_container_width=True)
if submitted:
    st.session_state[_widgets.LAST_QUERY_KEY] = query
    if st.session_state.pop(ANYWAY_KEY, False):  # "search anyway" held for one question; the router decides again
        st.session_state["route_override"] = ""

# -- settings: one compact row of popovers; a change re-runs the last query --------------------------------------------
cfg = _state.config()
# Short popover labels (what each holds is its tooltip): at 1366x768 every label reads whole and the mode radio
# stays on one line.
c = st.columns([2.2, 0.75, 1.45, 1.0, 1.15, 0.8, 1.35, 0.55], vertical_alignment="center")
modes = list(_widgets.MODES)
_form.follow_config("mode", _widgets.mode_of(cfg))
mode = c[0].radio("Retrieval", modes, index=modes.index(_widgets.mode_of(cfg)), horizontal=True, key="mode",
                  label_visibility="collapsed")
hybrid = mode == "hybrid"
overrides: dict = dict(_widgets.MODES[mode])


def setting(dotted: str, label: str, key: str, where: object = None, **kw: object) -> None:
    """One setting's widget, built from its field (bounds, choices, help), into the overrides."""
    overrides[dotted] = _form.setting(cfg, dotted, label, key=key, where=where, **kw)


with c[1].popover("Lists", use_container_width=True, help="BM25 and dense depths, fusion"):
    setting("bm25.k", "BM25 k", "bm25_k", disabled=mode == "dense")
    setting("dense.k", "dense k", "dense_k", disabled=mode == "BM25")
    setting("fusion.k", "fused k", "fusion_k", disabled=not hybrid)
    setting("fusion.rrf_k", "RRF k", "rrf_k", disabled=not hybrid)
    setting("fusion.method", "Fusion", "fusion_method", disabled=not hybrid)
    if overrides["fusion.method"] == "weighted_rrf" and hybrid:
        setting("fusion.bm25_weight", "BM25 weight", "w_bm25", max_value=10.0, step=0.1)
        setting("fusion.dense_weight", "dense weight", "w_dense", max_value=10.0, step=0.1)
with c[2].popover("Context · graph", use_container_width=True,
                  help="chunk context, multilingual list, GraphRAG, RAPTOR, router and route"):
    setting("context.variant", "Chunk context", "context_variant", widget="radio",
            help="none: raw chunks · heuristic: title, heading path and lead sentence (no LLM) · late: late-chunking "
                 "vectors · llm: contexts written by Claude (build them on the Costs page). A variant that is not "
                 "built yet is offered for building here; until then raw text is searched.")
    setting("embedding.multilingual", "Multilingual list (dense_ml)", "multilingual", widget="radio")
    setting("graph.enabled", "GraphRAG search", "graph_on", help="needs a graph: build it here or on the Graph page")
    setting("graph.mode", "graph mode", "graph_mode", widget="radio")
    setting("raptor.enabled", "RAPTOR tree search", "raptor_on",
            help="needs a RAPTOR tree: build it on the Graph page (RAPTOR expander) or `python -m core raptor build`")
    setting("router.enabled", "Router", "router_on")
    # cag: the whole corpus in Claude's cached prompt (needs a key and a corpus under cag.max_corpus_tokens; the route
    # stage says why when it is unavailable, with the estimate). Per query: the widget keeps its own state.
    setting("router.override", "Route (this query)", "route_override", from_config=False,
            options=["", *route_names(cfg.router.routes_file)], labels={"": "router decides"},
            help="the 'route' stage shows what the router chose and why")
    kbs = listed_collections(store, ws)
    if len(kbs) > 1:  # several knowledge bases: the collections stage picks, or this names one (per query)
        setting("collections.only", "Collection (this query)", "collection_only", from_config=False,
                options=["", *(k.name for k in kbs)], labels={"": "router picks"},
                help="the 'collections' stage shows which collections were searched and why: " + ", ".join(
                    f"{k.name} ({k.n_docs} docs)" for k in kbs))
with c[3].popover("Cascade", use_container_width=True, help="rerank, stage guard, sentence pruning, MMR, expansion"):
    setting("rerank.enabled", "Rerank", "rerank_on")
    setting("cascade_guard.enabled", "Stage guard (step aside where the evaluation shows a loss)", "guard_on")
    r = st.columns(3)
    setting("rerank.method", "method", "rerank_method", r[0])
    setting("rerank.top_n", "reads top n", "rerank_top_n", r[1])
    setting("rerank.k", "keeps k", "rerank_k", r[2])
    setting("prune.enabled", "Sentence pruning", "prune_on")
    p = st.columns(2)
    setting("prune.token_budget", "token budget", "prune_budget", p[0])
    setting("prune.scorer", "sentence scorer", "prune_scorer", p[1], labels={
        "hybrid": "hybrid (pooled token cosine + BM25)", "hybrid-encoded": "hybrid, sentences encoded (slow)",
        "embedder": "embedder cosine (slow)", "reranker": "the reranker's own"})
    setting("mmr.enabled", "MMR + duplicate collapse", "mmr_on")
    setting("mmr.lam", "λ (1 = relevance only)", "mmr_lam", widget="slider", step=0.05)
    setting("expand.enabled", "Expansion", "expand_on")
    e = st.columns(2)
    setting("expand.mode", "mode", "expand_mode", e[0], widget="radio")
    setting("expand.window", "± sentences", "expand_window", e[1])
with c[4].popover("Transforms", use_container_width=True, help="HyDE, multi-query, decomposition"):
    # Each transform searches its own generated queries and shows their fused list as its own stage.
    st.caption("off: never · auto: when the route asks for it (HyDE also when the dense top-1 is weak) · on: every "
               "query that searches")
    setting("transforms.hyde", "HyDE (offline: pseudo-relevance feedback)", "hyde_mode", widget="radio")
    setting("transforms.multi_query", "Multi-query", "multi_query_mode", widget="radio")
    setting("transforms.decompose", "Decomposition", "decompose_mode", widget="radio")
with c[5].popover("Agent", use_container_width=True, help="the agentic loop, its budgets and tools"):
    setting("agent.enabled", "Several rounds (grade, then search again)", "agent_on",
            help="offline: a calibrated grader and entity bridging; with a key: Claude grades and writes the next "
                 "queries. Hard budgets below.")
    g = st.columns(2)
    setting("agent.max_rounds", "max rounds", "agent_rounds", g[0])
    setting("agent.max_llm_calls", "max LLM calls", "agent_calls", g[1])
    setting("agent.max_usd", "max $", "agent_usd", g[0], step=0.01, format="%.4f")
    setting("agent.max_seconds", "max seconds", "agent_seconds", g[1], min_value=1.0, step=5.0)
    setting("agent.max_tokens", "max tokens (in + out)", "agent_tokens", step=1000)
    setting("agent.tools", "Tools (search, SQL, graph)", "agent_tools", widget="radio")
with c[6].popover("Answer · cache", use_container_width=True, help="answer, semantic answer cache, CAG, collections"):
    setting("answer.enabled", "Answer", "answer_on")
    setting("answer_cache.enabled", "Semantic answer cache", "answer_cache_on")
    setting("cag.enabled", "CAG route (whole corpus in a cached prompt; needs a key)", "cag_on")
    setting("collections.enabled", "Collection routing", "collections_on", disabled=len(kbs) < 2,
            help=None if len(kbs) > 1 else "this workspace has one collection: there is nothing to pick")
depth = int(c[7].number_input("rows", 1, 200, 10, key="depth", label_visibility="collapsed",
                              help="cards shown per stage"))
try:
    wanted = cfg.with_overrides(overrides)
except ConfigError as exc:
    st.error(escape_md(exc))
    wanted = cfg
if wanted != cfg:
    _state.set_config(wanted)
    cfg = wanted

# -- builds the settings need: said with an estimate, run only when confirmed ------------------------------------------
UNTIL = {"context": "Until then this query searches raw text.", "graph": "Until then this query runs without a graph.",
         "multilingual": "Until then questions in another language skip the multilingual list (dense_ml)."}


def offer(need: readiness.Need, for_cfg: PipelineConfig) -> None:
    """One build with its estimate and a button; it runs only when clicked (progress bar, then a rerun). A context
    variant's build also encodes the token vectors late interaction will read for it, so the first query on the new
    variant does not spend seconds encoding its candidates."""
    quiet = need.kind == "tokens"  # a speed-up, not a missing index: one quiet line, no box
    with st.container(border=not quiet, key=f"need_{need.kind}"):
        n1, n2 = st.columns([6, 1] if quiet else [5, 1], vertical_alignment="center")
        if quiet:
            n1.caption(f":material/speed: {need.label} (about {need.est_seconds:,.0f} s); until then first queries "
                       "and setting switches encode the chunks they meet.")
        else:
            n1.markdown(f":material/construction: **Needs building** — {need.label}; about "
                        f"{need.est_seconds:,.0f} s. " + UNTIL.get(need.kind, ""))
        if n2.button("Encode now" if quiet else "Build now", key=f"build_{need.kind}",
                     type="secondary" if quiet else "primary", use_container_width=quiet):
            # The offer sits below the stage row, out of view: the build runs at the top of the next run, where its
            # progress bar is in the window (run_pending_build).
            st.session_state[PENDING_KEY] = (need, for_cfg)
            st.rerun()


def run_pending_build() -> None:
    """A build asked for by an offer's button: its progress bar right under the settings row, in view; then a
    rerun, so every offer and panel drawn from the old state shows the new one."""
    pending = st.session_state.pop(PENDING_KEY, None)
    if pending is None:
        return
    need, for_cfg = pending
    with st.container(border=True, key="build_progress"):
        bar = st.progress(0.0, text=f"building {need.kind}…")
        with st.spinner(f"Building {need.kind} (about {need.est_seconds:,.0f} s)…"):
            msg = readiness.build(need, for_cfg, deps, ws, progress=lambda d, t: bar.progress(
                min(1.0, d / t) if t else 1.0, text=f"{need.kind}: {d:,}/{t:,}"))
            then = readiness.token_need(deps, for_cfg, ws) if need.kind == "context" else None
            if then is not None:
                msg += "; " + readiness.build(then, for_cfg, deps, ws, progress=lambda d, t: bar.progress(
                    min(1.0, d / t) if t else 1.0, text=f"token vectors: {d:,}/{t:,}"))
    st.session_state[BUILT_KEY] = msg
    st.session_state.pop(TRACE_KEY, None)  # the cached trace searched without the build
    st.session_state.pop(TOKENS_KEY, None)
    st.rerun()


def token_offer(run_cfg: PipelineConfig, recount: bool = False) -> None:
    """Late-interaction token vectors not encoded yet, offered below the stage row (whose counters show what the
    query encoded), so the row keeps its room on a 768 px screen. The check reads every chunk's text: once per
    (workspace, corpus version, config), and again after a query that encoded some while they were missing."""
    tkey = (ws, corpus_ops.corpus_version(store, ws), run_cfg.stable_hash())
    memo = st.session_state.get(TOKENS_KEY)
    if memo is None or memo[0] != tkey or (recount and memo[1] is not None):
        st.session_state[TOKENS_KEY] = memo = (tkey, readiness.token_need(deps, run_cfg, ws))
    if memo[1] is not None:
        offer(memo[1], run_cfg)


run_pending_build()
needs = readiness.needs(store, cfg, ws, deps.embedder.model_id, embedder=deps.embedder, indexes=deps.indexes)
# A context variant whose vectors are missing is searched as raw text until it is built, as its offer says: the dense
# index would otherwise embed every missing chunk in memory on this query's path (minutes on a large corpus).
run_cfg = cfg.with_overrides({"context.variant": "none"}) if any(n.kind == "context" for n in needs) else cfg
if st.session_state.get(BUILT_KEY):
    st.success(st.session_state.pop(BUILT_KEY))  # our own summary: counts and seconds only

sql_panel(store, ws)

# -- run and render -----------------------------------------------------------------------------------------------------
last = st.session_state.get(_widgets.LAST_QUERY_KEY)
if last is None:
    for need in needs:
        offer(need, cfg)
    token_offer(run_cfg)
    st.caption("Type a query and press Search. Settings changes re-run the last query.")
    st.stop()
# A rerun for any other widget (chunk detail, a popover opening) reuses the trace, and so does flipping a setting
# back: the last TRACES_KEPT traces are kept by (query, config, corpus version); an explicit Search always runs.
key = (last, run_cfg.stable_hash(), corpus_ops.corpus_version(store, ws))
kept = st.session_state.setdefault(TRACE_KEY, {})
recompute = bool(st.session_state.pop(RECOMPUTE_KEY, False))
fresh = recompute or not (key in kept and not submitted)
if not fresh:
    trace = kept[key]
else:
    try:
        with st.spinner("Running the query…"):
            # Only an explicit search (or recompute) goes to the run log; re-runs caused by settings changes would
            # flood it.
            # A settings re-run is unlogged but still a user's query: the answer cache serves it (use_cache=True).
            trace = run_query(last, run_cfg, deps, workspace=ws, log=submitted or recompute, use_cache=not recompute,
                              history=_conversation.history(submitted, ws))
    except QueryError as exc:
        st.error(escape_md(exc))  # may quote the query
        st.stop()
    kept[key] = trace
    for notice in corpus_ops.store_notices(store):  # e.g. a token-vector file missing beside the database
        st.warning(escape_md(notice))
    for stale in list(kept)[:-TRACES_KEPT]:
        del kept[stale]
    st.session_state["last_trace"] = trace  # the Graph page highlights what this query used
    st.session_state[SESSION_KEY] = st.session_state.get(SESSION_KEY, Counters()) + counters(trace)

_conversation.panel(last, trace, submitted, ws)
doc_names = corpus_ops.document_names(store, ws)
inserts = {}
local = trace.stage("graph_local")
if local is not None and local_nodes(local):
    snap = deps.graph.get(store, ws, cfg.graph.min_phrase_chunks)
    names = {nid: snap.names[snap.pos[nid]] for nid in local_nodes(local) if snap and nid in snap.pos}
    inserts["graph_global" if trace.stage("graph_global") else "graph_local"] = subgraph_svg(local, names)
main, rounds = _widgets.split_rounds(trace)
# The answer first, in view at 1366x768; the stage row right under it; everything else below the row.
actions = []
route = trace.route_info()
if trace.answer is not None and trace.answer.mode == "route" and route is not None and route.config in NO_RETRIEVAL:
    def _search_anyway() -> None:
        # A callback runs before the rerun builds the route selectbox, so its value may still be set here; the new
        # config re-runs this question through the default pipeline, whose answer stage can still refuse.
        st.session_state["route_override"] = "abstain"
        st.session_state[ANYWAY_KEY] = True

    actions.append(lambda: st.button(
        ":material/search: Search anyway", key="search_anyway", on_click=_search_anyway, use_container_width=True,
        help=f"the router sent this question to {route.config} without searching (Route: abstain, the default "
             "pipeline, for this question; the next one is routed again)"))
hit = _answer_box.cache_hit(trace)
if hit is not None:
    def _recompute() -> None:
        st.session_state[RECOMPUTE_KEY] = True

    actions.append(lambda: st.button(
        ":material/refresh: Recompute", key="recompute", on_click=_recompute, use_container_width=True,
        help="run the whole pipeline for this query now, bypassing the answer cache"))
_answer_box.answer_box(trace, doc_names=doc_names, lookup=lambda ids: corpus_ops.chunk_lookup(store)(ids, ws),
                       actions=actions)
shown, cached_note = main, ""
if hit is not None and trace.stored is not None:
    # The stages that produced the served answer, from the trace stored with it, after this query's own condense
    # and cache lookup (the live stages).
    live = tuple(s for s in main.stages if s.stage in _widgets.LIVE_WHEN_CACHED)
    shown = replace(main, stages=(*live, *(s for s in _widgets.split_rounds(trace.stored)[0].stages
                                           if s.stage not in _widgets.LIVE_WHEN_CACHED)))
    cached_note = (f"stages from the stored trace that produced this answer ({_answer_box.age_text(hit.stored_at)}"
                   f", question “{trace.stored.query}”): not run now; Recompute runs them")
routed = routed_stages(trace, cfg)  # stages a route turned on although the settings above have them off
_widgets.stage_row(shown, doc_names=doc_names, depth=depth, counters=counters(trace),
                   session=st.session_state.get(SESSION_KEY), inserts=inserts, from_cache=cached_note, routed=routed)
for stage, why in routed.items():
    st.caption(f":material/alt_route: {escape_md(stage)}: {escape_md(why)}")
if trace.agent is not None:
    ag = trace.agent
    spent = ag.spent
    # A tool run (core/route/tools.py: a planner and its calls) and the agentic retrieval loop share the record.
    what = (f"tools: {ag.tool_calls} call(s) planned by the {escape_md(str(ag.planner))} "
            f"planner ({escape_md(ag.form.replace('_', ' '))}) in {ag.rounds} round(s)"
            if ag.planner is not None else f"agentic loop: {ag.rounds} round(s)")
    st.caption(f":material/autorenew: {what}, stopped: "
               f"**{escape_md(ag.stop_reason)}** · {spent.get('llm_calls', 0)} LLM calls, "
               f"{spent.get('tokens', 0):,} tokens, ${spent.get('usd', 0):.4f}, {spent.get('seconds', 0):.1f} s")
for rnd, sub in rounds:
    queries = sorted({s.info.query for s in sub.stages if isinstance(s.info, InRound) and s.info.query})
    # Cut before escaping: a cut escaped text could end in a lone backslash.
    with st.expander(f"Round {rnd}: {len(queries)} quer{'y' if len(queries) == 1 else 'ies'} — "
                     + escape_md("; ".join(queries)[:160]), expanded=False):
        _widgets.stage_row(sub, doc_names=doc_names, depth=depth, key=f"round_{rnd}")
if run_cfg is not cfg:
    st.caption(f":material/info: context.variant = {cfg.context.variant} is not built yet: this query searched raw "
               f"text (config {run_cfg.stable_hash()}); build it below to search it.")
# Notes quote queries, cached questions and gateway error text: escaped for Markdown like every user string here.
for note in trace.notes:
    st.caption(f":material/info: {escape_md(note)}")
for need in needs:
    offer(need, cfg)
ml_need = readiness.trace_multilingual_need(store, run_cfg, ws, trace)  # a cross-language question met no vectors
if ml_need is not None and all(n.kind != ml_need.kind for n in needs):
    offer(ml_need, run_cfg)
token_offer(run_cfg, recount=fresh and counters(trace).token_computed > 0)  # only a query that encoded some
st.caption(f"query language {trace.query_lang} · config {trace.config_hash} · corpus v{trace.corpus_version} · "
           "click a card to read more; hover a skipped strip for its reason")
# Serialised on click, not on every rerun (tens of ms for a trace of a few hundred candidates); no rerun after it.
st.download_button(":material/download: Trace as OpenTelemetry JSON (OpenInference spans)",
                   lambda: trace_export.download_bytes(trace.to_dict()),
                   file_name=f"trace-{trace.config_hash}.otlp.json",
                   mime="application/json", key="trace_download", on_click="ignore")
_widgets.chunk_detail(trace, corpus_ops.chunk_lookup(store), ws, doc_names)
add_to_golden(deps, ws, trace, doc_names)
