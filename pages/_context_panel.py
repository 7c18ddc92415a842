"""The context-building panel: coverage per variant, cost estimate, confirmation above the threshold, budget, progress."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.builds import (
    BuildRequest,
    ContextError,
    LLMError,
    coverage,
    estimate_llm_contexts,
    run_build,
)
from core.app.report import escape_md
from core.config import PipelineConfig
from pages import _form, _state

LABELS = {"heuristic": "heuristic (title, heading path, lead sentence; offline)",
          "late": "late chunking (whole-document token vectors; offline)",
          "llm": "LLM contexts (Claude, prompt-cached)"}


def context_panel(deps: Any, cfg: PipelineConfig, workspace: str) -> None:
    store = deps.store
    rows = []
    for v in LABELS:
        have, total = coverage(store, v, workspace, deps.embedder.model_id)
        rows.append({"variant": v, "chunks with it": have, "chunks": total,
                     "share": f"{have / total:.0%}" if total else "—"})
    st.dataframe(rows, hide_index=True)
    st.caption("Contexts are stored beside the chunks: the Search Lab's context toggle switches indexes without "
               "re-indexing. The answer always reads the original chunk.")
    # The variants a build writes: the config's choices but 'none'; the widget keeps its own state.
    variant = _form.setting(cfg, "context.variant", "Build", key="ctx_variant", widget="radio", help="",
                            options=list(LABELS), labels=LABELS, from_config=False)
    c = cfg.context
    req = BuildRequest(variant, model=c.model, budget_usd=c.budget_usd, use_batches=c.use_batches,
                       max_output_tokens=c.max_output_tokens, ttl=cfg.llm.cache_ttl)
    ready = True
    if variant == "llm":
        if not deps.llm.available:
            st.warning(f"LLM contexts need Claude: {escape_md(deps.llm.reason)}. The offline variants work without a "
                       "key.")
            return
        a, b, d = st.columns([2, 1, 1])
        model = _form.setting(cfg, "context.model", "Model", key="ctx_model", where=a)
        budget = _form.setting(cfg, "context.budget_usd", "Budget (USD, hard stop)", key="ctx_budget", where=b,
                               max_value=10_000.0, step=0.5)
        batches = _form.setting(cfg, "context.use_batches", "Message Batches (−50 %)", key="ctx_batches", where=d,
                                widget="checkbox")
        req = BuildRequest("llm", model=model, budget_usd=budget, use_batches=batches,
                           max_output_tokens=c.max_output_tokens, ttl=cfg.llm.cache_ttl)
        est, warnings = estimate_llm_contexts(store, model=model, workspace=workspace, batch=batches,
                                              ttl=cfg.llm.cache_ttl)
        m1, m2, m3 = st.columns(3)
        m1.metric("Calls", f"{est.calls:,}")
        m2.metric("Estimate with prompt caching", f"${est.with_cache_usd:,.4f}")
        m3.metric("Without caching", f"${est.without_cache_usd:,.4f}")
        st.caption("Tokens are estimated at ~4 characters each (there is no offline Claude tokenizer).")
        for w in warnings[:20]:  # "plan: ..." lines say what the build writes and why (context.reindex)
            (st.info if w.startswith("plan: ") else st.warning)(escape_md(w.removeprefix("plan: ")))
        if est.with_cache_usd > c.confirm_above_usd:
            # Two '$' in one label would be typeset as maths: escaped.
            ready = st.checkbox(f"I accept an estimated \\${est.with_cache_usd:,.4f} (above the "
                                f"\\${c.confirm_above_usd:,.2f} confirmation threshold)", key="ctx_confirm")
        ready = ready and est.calls > 0
    if st.button("Build contexts", key="ctx_build", disabled=not ready, type="primary"):
        bar = st.progress(0.0, text="starting…")

        def progress(done: int, total: int, usd: float) -> None:
            bar.progress(min(1.0, done / total) if total else 1.0, text=f"{done}/{total} · ${usd:,.4f}")

        try:
            rep = run_build(req, store, deps.embedder, deps.llm, workspace=workspace, progress=progress)
        except (ContextError, LLMError) as exc:
            st.error(escape_md(exc))  # may quote a gateway's error body
            return
        bar.progress(1.0, text="done")
        _state.disarm()  # an accepted spend covers this build only: the box is unticked on the next run
        st.success(f"{variant}: {rep.written} written, {rep.existing} already there, {rep.remaining} remaining, "
                   f"{rep.vectors} vectors embedded, ${rep.usd:,.4f} spent")
        for w in rep.warnings[:20]:
            st.warning(escape_md(w))
        if rep.stopped:
            st.info(f"Stopped — {escape_md(rep.stopped)}")
