"""Sidebar workspace panel: switch, create, rename and delete workspaces (core/workspaces.py does the work)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.types import DEFAULT_WORKSPACE
from core.workspaces import (WorkspaceError, create_workspace, delete_workspace, rename_workspace,
                             workspace_names)
from pages import _state


def _switch(name: str) -> None:
    st.session_state[_state.WORKSPACE_KEY] = name
    st.session_state.pop("ws_select", None)  # the selectbox re-reads the active workspace on the next run


def workspace_panel(store: Any) -> None:
    current = _state.workspace()
    names = workspace_names(store)
    if current not in names:
        names = sorted({*names, current})  # a workspace is created on first ingest; until then it is only a name
    st.selectbox("Workspace", names, index=names.index(current), key="ws_select",
                 on_change=lambda: st.session_state.__setitem__(_state.WORKSPACE_KEY, st.session_state["ws_select"]))
    with st.expander("Manage workspaces"):
        new = st.text_input("New workspace", key="ws_new", placeholder="name")
        if st.button("Create", key="ws_create", disabled=not new.strip()):
            _act(lambda: _switch(create_workspace(store, new)), f"created '{new.strip()}'")
        ren = st.text_input(f"Rename '{current}' to", key="ws_rename", disabled=current == DEFAULT_WORKSPACE)
        if st.button("Rename", key="ws_rename_go", disabled=not ren.strip() or current == DEFAULT_WORKSPACE):
            _act(lambda: (rename_workspace(store, current, ren), _switch(" ".join(ren.split()))),
                 f"renamed '{current}' to '{ren.strip()}'")
        sure = st.checkbox(f"Delete '{current}' with all its documents, graph, runs, ledger and caches",
                           key="ws_delete_sure", disabled=current == DEFAULT_WORKSPACE)
        if st.button("Delete", key="ws_delete", type="primary", disabled=not sure):
            _act(lambda: (delete_workspace(store, current), _switch(DEFAULT_WORKSPACE)), f"deleted '{current}'")


def _act(fn: Any, done: str) -> None:
    try:
        fn()
    except WorkspaceError as exc:
        st.error(str(exc))
        return
    st.toast(done)
    st.rerun()
