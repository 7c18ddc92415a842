"""Costs page panel: the ten typical mistakes checked on this workspace (core/app/doctor.py), each with its status,
the evidence measured here and the fix."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.doctor import FAIL, NA, OK, WARN, doctor, summary
from core.app.report import escape_md
from core.config import PipelineConfig

ICONS = {OK: ":material/check_circle:", WARN: ":material/warning:", FAIL: ":material/error:",
         NA: ":material/remove_circle_outline:"}


def doctor_panel(deps: Any, config: PipelineConfig, workspace: str) -> None:
    st.caption("The seed article's ten typical mistakes, each measured on this workspace's documents, logged "
               "queries, ledger and stored evaluations under the session configuration "
               f"({config.stable_hash()}). Also headless: `python -m core doctor --workspace {escape_md(workspace)} "
               "--json`.")
    checks = doctor(deps.store, workspace, config, embedder_id=deps.embedder.model_id)
    counts = summary(checks)
    m = st.columns(4)
    for col, status in zip(m, (FAIL, WARN, OK, NA)):
        col.metric(status, counts[status])
    for c in checks:
        with st.expander(f"{ICONS[c.status]} {c.number}. {escape_md(c.mistake)} — **{c.status}**",
                         expanded=c.status == FAIL):
            # Evidence quotes queries and file names from the workspace: escaped like every user string.
            st.markdown(f"**Evidence.** {escape_md(c.evidence)}")
            st.markdown(f"**Fix.** {escape_md(c.fix)}")
