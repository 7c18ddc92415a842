"""The Graph page's RAPTOR panel: the tree of cluster summaries (drawn and as a table), its estimate, build and
update."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.raptor_ops import build_raptor, raptor_dot, raptor_frame, raptor_plan
from core.config import PipelineConfig


def panel(deps: Any, cfg: PipelineConfig, workspace: str) -> None:
    frame = raptor_frame(deps.store, workspace)
    with st.expander(f"RAPTOR tree: {len(frame)} summaries" if len(frame) else "RAPTOR tree: not built",
                     expanded=False):
        plan = raptor_plan(deps, cfg, workspace)
        st.caption(plan.label() + ". Search it with raptor.enabled (a `raptor` stage fused like the other lists).")
        b1, b2 = st.columns(2)
        build = b1.button("Build RAPTOR tree", key="raptor_build", disabled=deps.store.read_only or not plan.chunks)
        update = b2.button("Update (new and removed chunks only)", key="raptor_update",
                           disabled=deps.store.read_only or not plan.chunks or not len(frame))
        if build or update:
            bar = st.progress(0.0)
            out = build_raptor(deps, cfg, workspace, full=build,
                               progress=lambda d, t: bar.progress(min(1.0, d / max(t, 1))))
            st.success(out.label())
            for note in out.notes:
                st.warning(note)
            frame = raptor_frame(deps.store, workspace)
        if len(frame):
            tree, table = st.tabs(["Tree", "Table"])
            with tree:
                st.graphviz_chart(raptor_dot(deps.store, workspace), width="stretch")
            with table:
                st.dataframe(frame, hide_index=True, use_container_width=True)
