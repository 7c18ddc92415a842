"""The workbench's pages and their shared helpers (modules starting with '_').

Streamlit treats a folder named `pages/` beside the entry script as an old-style multipage app until some session
has run `st.navigation`: a fresh server's first visitor arriving on /search_lab (say) would get that page run on its
own, without workbench.py (no sidebar, no page config) and with every module here, helpers included, listed as a
page. Every page imports this package first, so when that mode is on it is switched off here and the run restarts
through workbench.py's navigation. (Renaming the folder would also do it; the package name is imported widely.)"""
from __future__ import annotations


def _leave_folder_mode() -> None:
    try:
        from streamlit.runtime.pages_manager import PagesManager
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # another Streamlit layout: nothing to undo
        return
    if PagesManager.uses_pages_directory and get_script_run_ctx() is not None:
        PagesManager.uses_pages_directory = False
        import streamlit as st

        st.rerun()


_leave_folder_mode()
