"""The Graph page's RAPTOR panel: the tree of cluster summaries, its estimate and its build."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.raptor_ops import build_raptor, raptor_frame, raptor_plan
from core.config import PipelineConfig


def panel(deps: Any, cfg: PipelineConfig, workspace: str) -> None:
    frame = raptor_frame(deps.store, workspace)
    with st.expander(f"RAPTOR tree: {len(frame)} summaries" if len(frame) else "RAPTOR tree: not built",
                     expanded=False):
        plan = raptor_plan(deps, cfg, workspace)
        st.caption(plan.label() + ". Search it with raptor.enabled (a `raptor` stage fused like the other lists).")
        if st.button("Build RAPTOR tree", key="raptor_build", disabled=deps.store.read_only or not plan.chunks):
            bar = st.progress(0.0)
            out = build_raptor(deps, cfg, workspace, progress=lambda d, t: bar.progress(min(1.0, d / max(t, 1))))
            st.success(f"{out['nodes']} summaries on {out['levels']} level(s) in {out['seconds']} s (extractive)")
            frame = raptor_frame(deps.store, workspace)
        if len(frame):
            st.dataframe(frame, hide_index=True, use_container_width=True)
