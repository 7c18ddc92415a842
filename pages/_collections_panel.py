"""Corpus page panel: the workspace's collections (knowledge bases) with their computed profiles, and the editor of
a collection's description (the LLM collection router reads it)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.collections import listed, refresh, rows, set_description
from core.app.report import escape_md


def collections_panel(store: Any, workspace: str, model_id: str) -> None:
    kbs = listed(store, workspace)
    if len(kbs) < 2:  # one knowledge base: nothing to route, no profile to compute
        if kbs:
            st.caption(f"Collection: every document is in '{escape_md(kbs[0].name)}'. Choose another collection "
                       "at upload to keep several knowledge bases in this workspace.")
        return
    cols = refresh(store, workspace, model_id)
    st.subheader(f"Collections ({len(cols)})")
    st.caption("A file goes to the collection chosen at upload (or its top folder on `ingest`, or `--collection`). "
               "With several collections the Search Lab's `collections` stage picks the ones a question needs from "
               "these profiles (vocabulary, centroid) and searches only them.")
    st.dataframe(rows(cols), hide_index=True, key="collections_table")
    names = [c.name for c in cols]
    e1, e2 = st.columns([1, 3], vertical_alignment="bottom")
    pick = e1.selectbox("Describe collection", names, key="collection_pick")
    current = next(c.description for c in cols if c.name == pick)
    text = e2.text_input("Description", value=current, key=f"collection_desc_{pick}", max_chars=2000)
    if st.button("Save description", key="collection_save", disabled=text.strip() == current):
        set_description(store, workspace, pick, text)
        st.toast(f"description of {escape_md(pick)} saved")
        st.rerun()
