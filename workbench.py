"""RAG Workbench entry point: shows the sidebar (workspace, config, provider notices) and routes to the pages."""
from __future__ import annotations

import streamlit as st
from PIL import Image

from core.app.report import escape_md
from pages import _state
from pages._llm_panel import llm_panel
from pages._sweep_panel import restore_workspace_config
from pages._workspace_panel import workspace_panel

# The favicon is an image made here and served by Streamlit itself: a ":material/...:" page icon makes the browser
# fetch an SVG from fonts.gstatic.com, and the app must make no request outside this machine.
_ICON = Image.new("RGB", (32, 32), (37, 99, 235))
st.set_page_config(page_title="RAG Workbench", page_icon=_ICON, layout="wide")


def _home() -> None:
    # The root URL opens the Corpus page under its own name, so /corpus (like every page) has a direct URL; a
    # default page would be served only at "/" and /corpus would say "Page not found".
    st.switch_page("pages/corpus.py")


# Navigation first, before the model loads. Streamlit's own sidebar list is switched off (.streamlit/config.toml,
# client.showSidebarNavigation = false): a fresh server's first run lists every module under pages/ (helpers such as
# _state and _widgets included) as a page for seconds before this line runs, so the list is drawn here instead.
PAGES = [
    st.Page("pages/corpus.py", title="Corpus", icon=":material/library_books:", url_path="corpus"),
    st.Page("pages/search_lab.py", title="Search Lab", icon=":material/science:", url_path="search_lab"),
    st.Page("pages/evaluate.py", title="Evaluate", icon=":material/fact_check:", url_path="evaluate"),
    st.Page("pages/costs.py", title="Costs", icon=":material/payments:", url_path="costs"),
    st.Page("pages/graph.py", title="Graph", icon=":material/hub:", url_path="graph"),
]
nav = st.navigation([st.Page(_home, title="Home", url_path="home", default=True, visibility="hidden"), *PAGES],
                    position="hidden")
with st.sidebar.container(key="page_nav"):
    for page in PAGES:
        st.page_link(page)

# Streamlit's default top padding (6rem) and side padding (5rem) cost a 768 px high window a fifth of its height;
# the Search Lab needs that room for its stage row.
# The sidebar's default 300 px is narrowed too: the Search Lab's stage columns take what it gives back.
st.html("<style>[data-testid=stMainBlockContainer]{padding-top:2.2rem;padding-left:1.5rem;padding-right:1.5rem}"
        "[data-testid=stSidebar]{width:244px !important;min-width:244px !important}"
        "h1{padding-top:0.25rem !important;padding-bottom:0.25rem !important}</style>")

deps = _state.deps()
restore_workspace_config(deps.store)  # a new session starts from the workspace's stored configuration
with st.sidebar:
    st.caption("RAG Workbench")
    workspace_panel(deps.store)  # switch / create / rename / delete (pages/_workspace_panel.py)
    config_slot = st.empty()
    config_slot.text(f"config: {_state.config().stable_hash()}")  # rewritten after the page, which may change it
    st.text(f"embedder: {deps.embedder.model_id}")
    llm_panel()  # llm.provider: Claude, an OpenAI-compatible server or a GGUF file (pages/_llm_panel.py)
    for notice in deps.notices:
        st.warning(escape_md(notice))  # may quote a path or a provider's error text
try:
    nav.run()
finally:
    # Written after the page ran (also when it stopped early): a page may change the config, and a hash written
    # before it would lag one rerun behind.
    config_slot.text(f"config: {_state.config().stable_hash()}")
