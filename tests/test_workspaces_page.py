"""Sidebar workspace panel (AppTest with fakes): create switches to the new workspace, rename moves it, delete
needs the confirmation and removes it; a bad name is an error message, not a crash."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.deps import Deps
from pages import _state

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")


def _panel() -> None:
    # The sidebar panel alone (AppTest keeps no sidebar elements of workbench.py after the first rerun, which
    # switch_page causes; the panel itself is what is under test).
    import streamlit as st

    from pages import _state
    from pages._workspace_panel import workspace_panel

    with st.sidebar:
        workspace_panel(st.session_state[_state.DEPS_KEY].store)


def _app(deps: Deps) -> AppTest:
    at = AppTest.from_function(_panel, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    return at.run()


def test_workbench_shows_the_panel(deps: Deps) -> None:
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at = at.run()
    assert not at.exception and at.sidebar.selectbox(key="ws_select").value == "default"


def test_create_rename_delete_from_the_sidebar(deps: Deps) -> None:
    at = _app(deps)
    assert at.selectbox(key="ws_select").value == "default"
    at = at.text_input(key="ws_new").input("team a").run()
    at = at.button(key="ws_create").click().run()
    assert not at.exception
    assert at.session_state[_state.WORKSPACE_KEY] == "team a" and "team a" in deps.store.workspaces()
    assert at.selectbox(key="ws_select").value == "team a"
    at = at.text_input(key="ws_rename").input("team b").run()
    at = at.button(key="ws_rename_go").click().run()
    assert at.session_state[_state.WORKSPACE_KEY] == "team b" and deps.store.workspaces() == ["default", "team b"]
    assert at.button(key="ws_delete").disabled  # until the deletion is confirmed
    at = at.checkbox(key="ws_delete_sure").check().run()
    at = at.button(key="ws_delete").click().run()
    assert deps.store.workspaces() == ["default"] and at.session_state[_state.WORKSPACE_KEY] == "default"


def test_bad_name_is_an_error_message(deps: Deps) -> None:
    at = _app(deps)
    at = at.text_input(key="ws_new").input("a/b").run()
    at = at.button(key="ws_create").click().run()
    assert not at.exception and any("not allowed" in e.value for e in at.error)
    assert deps.store.workspaces() == ["default"]


def test_each_workspace_keeps_its_configuration(deps: Deps) -> None:
    from core.config import PipelineConfig

    at = _app(deps)
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"rerank.k": 5})
    at = at.text_input(key="ws_new").input("team a").run()
    at = at.button(key="ws_create").click().run()  # 'default' is saved with k=5; the new one starts from it
    assert at.session_state[_state.CONFIG_KEY].rerank.k == 5
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"rerank.k": 7})  # changed in 'team a'
    at = at.selectbox(key="ws_select").select("default").run()
    assert at.session_state[_state.WORKSPACE_KEY] == "default" and at.session_state[_state.CONFIG_KEY].rerank.k == 5
    at = at.selectbox(key="ws_select").select("team a").run()
    assert at.session_state[_state.WORKSPACE_KEY] == "team a" and at.session_state[_state.CONFIG_KEY].rerank.k == 7
