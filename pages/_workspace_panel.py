"""Sidebar workspace panel: switch, create, rename and delete workspaces (core/app/workspaces.py does the work)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.report import escape_md
from core.app.workspaces import (
    WorkspaceError,
    create_workspace,
    delete_workspace,
    load_workspace_config,
    rename_workspace,
    save_workspace_config,
    workspace_names,
)
from core.types import DEFAULT_WORKSPACE
from pages import _state

SELECT_KEY = "ws_select"


def _switch(store: Any, name: str, *, save: bool = True) -> None:
    """Make `name` the active workspace: the one we leave keeps its configuration, the one we enter gets its own
    back (each workspace has its own configuration)."""
    old = _state.workspace()
    _state.disarm()  # a confirmation armed in one workspace never carries over to another
    if save and old != name and old in workspace_names(store):
        save_workspace_config(store, old, _state.config())
    st.session_state[_state.WORKSPACE_KEY] = name
    cfg, notice = load_workspace_config(store, name)
    if cfg is not None:
        _state.set_config(cfg, external=True)
    if notice:
        st.session_state["ws_notice"] = notice


def _on_select(store: Any) -> None:
    _switch(store, st.session_state[SELECT_KEY])


def workspace_panel(store: Any) -> None:
    _state.apply_disarm()  # first in every run, before any armed box is built
    current = _state.workspace()
    names = workspace_names(store)
    if current not in names:
        names = sorted({*names, current})  # a workspace is created on first ingest; until then it is only a name
    # The active workspace is the truth and the selector shows it. Why through its session-state key (before the
    # widget is built) and not `index=`: a keyed selectbox keeps its identity when `index` changes, so the browser
    # keeps showing the old choice and sends it back on the next unrelated click (a silent switch back). A value set
    # through session state is pushed to the browser.
    if st.session_state.get(SELECT_KEY) != current:
        st.session_state[SELECT_KEY] = current
    st.selectbox("Workspace", names, key=SELECT_KEY, on_change=_on_select, args=(store,))
    if notice := st.session_state.pop("ws_notice", None):
        st.warning(escape_md(notice))
    # Workspace names are typed by users and labels render Markdown: every name shown in a label is escaped.
    shown = escape_md(current)
    with st.expander("Manage workspaces"):
        new = st.text_input("New workspace", key="ws_new", placeholder="name")
        if st.button("Create", key="ws_create", disabled=not new.strip()):
            _act(lambda: _switch(store, create_workspace(store, new)), f"created '{escape_md(new.strip())}'")
        ren = st.text_input(f"Rename '{shown}' to", key="ws_rename", disabled=current == DEFAULT_WORKSPACE)
        if st.button("Rename", key="ws_rename_go", disabled=not ren.strip() or current == DEFAULT_WORKSPACE):
            _act(lambda: (rename_workspace(store, current, ren), _switch(store, " ".join(ren.split()), save=False)),
                 f"renamed '{shown}' to '{escape_md(ren.strip())}'")
        sure = st.checkbox(f"Delete '{shown}' with all its documents, graph, runs, ledger and caches",
                           key="ws_delete_sure", disabled=current == DEFAULT_WORKSPACE)
        if st.button("Delete", key="ws_delete", type="primary", disabled=not sure):
            # The delete rewrites the database file (no trace of the text left in it): that takes a moment.
            with st.status(f"Deleting '{shown}'…") as box:
                _act(lambda: (delete_workspace(store, current, progress=lambda m: box.write(escape_md(m))),
                              _switch(store, DEFAULT_WORKSPACE, save=False)), f"deleted '{shown}'")


def _act(fn: Any, done: str) -> None:
    try:
        fn()
    except WorkspaceError as exc:
        st.error(escape_md(exc))
        return
    finally:
        _state.disarm()  # after every action, done or refused, the confirmations start unticked again
    st.toast(done)
    st.rerun()
