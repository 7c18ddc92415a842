"""RAG Workbench entry point: shows the sidebar (workspace, config, provider notices) and routes to the pages."""
from __future__ import annotations

import streamlit as st

from pages import _state

st.set_page_config(page_title="RAG Workbench", page_icon=":material/search:", layout="wide")


deps = _state.deps()
with st.sidebar:
    st.caption("RAG Workbench")
    st.text(f"workspace: {_state.workspace()}")
    st.text(f"config: {_state.config().stable_hash()}")
    st.text(f"embedder: {deps.embedder.model_id}")
    for notice in deps.notices:
        st.warning(notice)

pages = [
    st.Page("pages/corpus.py", title="Corpus", icon=":material/library_books:", default=True),
    st.Page("pages/search_lab.py", title="Search Lab", icon=":material/science:"),
    st.Page("pages/evaluate.py", title="Evaluate", icon=":material/fact_check:"),
    st.Page("pages/costs.py", title="Costs", icon=":material/payments:"),
    st.Page("pages/graph.py", title="Graph", icon=":material/hub:"),
]
st.navigation(pages).run()
