"""Costs page: the LLM usage ledger, dollars per build and per query, cache hit rates, and the context builder."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from core.app import corpus_ops
from core.app.costs import (
    builds_frame,
    cache_read_share,
    embedding_cache_rate,
    ledger_frame,
    prompt_cache_rate,
    query_embedding_events,
    query_stage_costs,
    refusal_share,
    run_labels,
)
from core.app.report import escape_md
from core.app.routing import workspace_estimate
from core.app.workspaces import answer_cache_table
from pages import _state
from pages._context_panel import context_panel
from pages._doctor_panel import doctor_panel

deps, ws = _state.deps(), _state.workspace()
store, cfg = deps.store, _state.config()
st.title("Costs")
if not deps.llm.available:
    st.info(f"No LLM is configured ({escape_md(deps.llm.reason)}): answers are extractive and contexts offline, so "
            "the ledger only fills once a key is set. Cache hit rates of the embedding cache are shown either way.")

LEDGER_ROWS_SHOWN = 1000
REFUSAL_RUNS = 2000  # logged queries the refusal share reads at most
# Only the open tab runs (st.tabs on_change="rerun" + .open): the page opens in well under a second on a ledger of
# 10,000 calls (bench/results/costs_page.json) instead of building every tab's frames and charts on each open.
t_ledger, t_builds, t_queries, t_cache, t_build, t_doctor = st.tabs(
    ["Ledger", "Per build", "Per query", "Cache hit rates", "Build contexts", "Ten mistakes"], key="costs_tab",
    on_change="rerun")
ledger = ledger_frame(corpus_ops.usage_ledger(store, ws)) if (t_ledger.open or t_builds.open or t_cache.open) else None

if t_ledger.open:
    with t_ledger:
        if ledger.empty:
            st.caption("No LLM calls yet.")
        else:
            f0, f1, f2, f3 = st.columns(4)
            providers = f0.multiselect("Provider", sorted(ledger.provider.unique()), key="led_provider")
            purposes = f1.multiselect("Purpose", sorted(ledger.purpose.unique()), key="led_purpose")
            models = f2.multiselect("Model", sorted(ledger.model.unique()), key="led_model")
            ref = f3.text_input("Document / query id contains", key="led_ref")
            view = ledger
            if providers:
                view = view[view.provider.isin(providers)]
            if purposes:
                view = view[view.purpose.isin(purposes)]
            if models:
                view = view[view.model.isin(models)]
            if ref:
                view = view[view.ref_id.str.contains(ref, regex=False)]
            m = st.columns(5)
            m[4].metric("Model seconds", f"{view.latency_ms.sum() / 1000:,.1f}")  # local models cost time, not $
            m[0].metric("Calls", f"{len(view):,}")
            m[1].metric("Spent", f"${view.usd.sum():,.4f}")
            m[2].metric("Without prompt caching", f"${view.usd_uncached.sum():,.4f}")
            m[3].metric("Cache-read share", f"{cache_read_share(view.input_tokens.sum(), view.cache_write_tokens.sum(), view.cache_read_tokens.sum()):.0%}")
            # The newest rows only: the figures above count every call, the browser draws a table it can scroll.
            newest = view.sort_values("created_at", ascending=False).head(LEDGER_ROWS_SHOWN)
            st.dataframe(newest.assign(run=run_labels(newest)).drop(columns=["run_id"]), hide_index=True,
                         key="ledger_table")
            if len(view) > LEDGER_ROWS_SHOWN:
                st.caption(f"the newest {LEDGER_ROWS_SHOWN:,} of {len(view):,} calls; the filters above narrow them")
            uncached = view[view.note.str.len() > 0]
            if len(uncached):
                st.caption(f"{len(uncached)} call(s) formed no prompt cache (see the note column): a prefix below "
                           "the model's minimum cacheable length is never cached and cache reads stay 0.")

if t_builds.open:
    with t_builds:
        builds = builds_frame(ledger, corpus_ops.cache_events(store, ws))
        if builds.empty:
            st.caption("No builds yet: ingesting documents, building contexts, a graph or multilingual vectors each "
                       "adds one here.")
        else:
            st.dataframe(builds, hide_index=True, key="build_table")
            llm = builds[builds.calls > 0]
            if not llm.empty:
                long = llm.melt(id_vars=["build"], value_vars=["input_tokens", "cache_write_tokens",
                                                               "cache_read_tokens", "output_tokens"],
                                var_name="category", value_name="tokens")
                st.plotly_chart(px.bar(long, x="build", y="tokens", color="category",
                                       title="Tokens by category (LLM builds)"))
                dollars = llm.rename(columns={"usd": "with caching", "usd_uncached": "without caching"}).melt(
                    id_vars=["build"], value_vars=["with caching", "without caching"], var_name="billing",
                    value_name="dollars")
                st.plotly_chart(px.bar(dollars, x="build", y="dollars", color="billing", barmode="group",
                                       title="Dollars with vs without prompt caching"))
            else:
                st.caption("Offline builds cost no tokens: the table says what each one embedded.")

if t_queries.open:
    with t_queries:
        runs = corpus_ops.recent_runs(store, ws, limit=100)
        stages = query_stage_costs(runs)
        if stages.empty:
            st.caption("No logged queries yet.")
        else:
            labels = {r.run_id: f"{pd.Timestamp(r.created_at):%m-%d %H:%M:%S} · {r.query[:60]}" for r in runs}
            stages = stages.assign(query_run=stages.run_id.map(labels))
            per_query = stages.groupby(["query_run"], sort=False).agg(ms=("ms", "sum"), usd=("usd", "sum")
                                                                     ).reset_index()
            st.dataframe(per_query.rename(columns={"query_run": "query"}), hide_index=True, key="query_table")
            ran = stages[~stages.skipped]
            st.plotly_chart(px.bar(ran, x="query_run", y="ms", color="stage", hover_data=["usd"],
                                   labels={"query_run": "query"}, title="Milliseconds per stage per query"))
        refusals = refusal_share(corpus_ops.recent_runs(store, ws, limit=REFUSAL_RUNS))
        st.subheader("Refusal share")
        if refusals.empty:
            st.caption("No logged answers yet: the refusal share counts the live queries that reached an answer.")
        else:
            n, r = int(refusals.queries.sum()), int(refusals.refused.sum())
            m = st.columns(4)
            m[0].metric("Refusal share", f"{r / n:.0%}", help=f"{r} of {n} logged answers said the corpus does not say")
            m[1].metric("Answers logged", f"{n:,}")
            m[2].metric("Answer-cache hits", f"{int(refusals['answer-cache hits'].sum()):,}")
            m[3].metric("Cost of these queries", f"${refusals.usd.sum():,.4f}")
            st.dataframe(refusals, hide_index=True, key="refusal_table",
                         column_config={"refusal share": st.column_config.NumberColumn(format="percent")})
            st.caption(f"Live queries (the run log, newest {REFUSAL_RUNS:,}) by day and route: a share far from "
                       "what the golden set's unanswerable questions lead you to expect is worth reading — too low, "
                       "and answers come from irrelevant context; too high, and the threshold or the router refuses "
                       "what the corpus says. A cache hit counts under the route that first produced the answer.")

if t_cache.open:
    with t_cache:
        freq = st.selectbox("Bucket", ["1min", "1h", "1D"], index=1, key="cache_freq")
        events = [*corpus_ops.cache_events(store, ws),
                  *query_embedding_events(corpus_ops.recent_runs(store, ws, limit=500))]
        rates = pd.concat([prompt_cache_rate(ledger, freq), embedding_cache_rate(events, freq)], ignore_index=True)
        if rates.empty:
            st.caption("No cache events yet.")
        else:
            st.plotly_chart(px.line(rates, x="time", y="hit_rate", color="cache", markers=True,
                                    hover_data=["volume"], range_y=[0, 1], title="Hit rate over time"))
            st.caption("Prompt cache: share of prompt tokens read from the cache. Embedding cache, queries: the "
                       "share each logged query's counters show ('10 from cache / 1 computed'; the query itself is "
                       "never cached), last 500 queries. Embedding cache, builds: ingest and context builds (new "
                       "texts are computed by nature). LLM contexts kept: share of an edited document's contexts its "
                       "unchanged chunks kept (context.reindex).")
        st.subheader("Semantic answer cache")
        answer_rows = answer_cache_table(store)
        if answer_rows:
            st.dataframe(pd.DataFrame(answer_rows), hide_index=True, key="answer_cache_table")
        st.caption("Per workspace: hits served a stored answer; guarded misses were close enough by cosine but "
                   "refused by the guard (negation, numbers, names...); saved = the ms and $ the served answers "
                   "first cost.")
        if st.button(f"Clear cached answers of '{escape_md(ws)}'", key="answer_cache_clear"):
            st.toast(f"cleared {store.answers.clear_answers(ws)} cached answers")

if t_build.open:
    with t_build:
        context_panel(deps, cfg, ws)

if t_doctor.open:
    with t_doctor:
        doctor_panel(deps, cfg, ws)

cag = st.expander("Cache-augmented generation (CAG): the whole corpus in a cached prompt", key="cag_expander",
                  on_change="rerun")
if cag.open:  # the estimate reads every chunk: only when asked for
    with cag:
        est, sha = workspace_estimate(store.corpus, ws, model=cfg.cag.model, limit_tokens=cfg.cag.max_corpus_tokens,
                                      max_chunks=cfg.answer.max_chunks, output_tokens=cfg.cag.max_tokens, llm=deps.llm,
                                      ttl=cfg.llm.cache_ttl)
        m = st.columns(4)
        m[0].metric("Corpus tokens", f"~{est.corpus_tokens:,}", help=f"limit {est.limit_tokens:,} (cag.max_corpus_tokens)")
        m[1].metric("CAG first / next query", f"${est.first_query_usd:.4f} / ${est.next_query_usd:.4f}")
        m[2].metric("RAG per query", f"${est.rag_query_usd:.4f}")
        m[3].metric("Break-even", f"{est.break_even_queries} queries" if est.break_even_queries else "never")
        st.caption(f"{escape_md(est.model)}; first query writes the prompt cache, later ones read it (per cache "
                   "lifetime); "
                   f"prefix sha256 {sha[:12]}. "
                   + (escape_md(est.note) if est.note else "CAG is available for this workspace (python -m core cag)."))
