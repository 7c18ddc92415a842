"""RAG Workbench entry point: builds Deps once, shows the sidebar, and routes to the pages (st.navigation)."""
from __future__ import annotations

import os

import streamlit as st

from core.config import PipelineConfig
from core.deps import Deps, build_deps
from pages import _state

st.set_page_config(page_title="RAG Workbench", page_icon=":material/search:", layout="wide")


@st.cache_resource(show_spinner="Loading the embedding model and opening the store…")
def _shared_deps(db: str, model: str) -> Deps:
    # One store connection and one model per process, shared by every session (cursors per call in the store).
    return build_deps(PipelineConfig().with_overrides({"embedding.model": model}), db=db)


# Tests inject their own Deps (fakes) into session_state before the first run; otherwise use the shared one,
# re-keyed by the configured model so a model change takes effect without a restart.
if _state.DEPS_KEY not in st.session_state or st.session_state.get("_deps_auto"):
    st.session_state[_state.DEPS_KEY] = _shared_deps(os.environ.get("RAG_DB", "data/workbench.duckdb"),
                                                     _state.config().embedding.model)
    st.session_state["_deps_auto"] = True

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
]
st.navigation(pages).run()
