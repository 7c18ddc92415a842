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


def test_created_workspace_sticks_in_the_selector(deps: Deps) -> None:
    """Issue #33 item 7: after Create the selector shows the new workspace in the browser too (its value is pushed:
    a keyed selectbox keeps its identity, so the browser would otherwise keep showing 'default' and send it back on
    the next click), unrelated clicks keep it, and what the pages ingest goes there."""
    at = _app(deps)
    at = at.text_input(key="ws_new").input("team a").run()
    at = at.button(key="ws_create").click().run()
    sel = at.selectbox(key="ws_select")
    assert sel.value == "team a" and sel.proto.set_value and sel.proto.raw_value == "team a"
    assert list(sel.options) == ["default", "team a"]
    for _ in range(2):  # unrelated clicks: typing elsewhere, a bare rerun
        at = at.text_input(key="ws_new").input("something else").run()
        at = at.run()
        assert at.session_state[_state.WORKSPACE_KEY] == "team a" and at.selectbox(key="ws_select").value == "team a"
    assert _state.WORKSPACE_KEY in at.session_state and at.session_state[_state.WORKSPACE_KEY] == "team a"


def _panel_and_ingest() -> None:
    # The panel plus the Corpus page's ingest call (the page ingests into _state.workspace(); AppTest cannot drive
    # a file uploader, so a button hands it the bytes).
    import streamlit as st

    from core.app.builds import ingest_files
    from pages import _state
    from pages._workspace_panel import workspace_panel

    deps = st.session_state[_state.DEPS_KEY]
    with st.sidebar:
        workspace_panel(deps.store)
    if st.button("fake upload", key="fake_upload"):
        ingest_files([("note.txt", b"Quarterly figures for the new team.")], store=deps.store,
                     embedder=deps.embedder, config=_state.config(), workspace=_state.workspace())


def test_upload_after_create_lands_in_the_new_workspace(deps: Deps) -> None:
    at = AppTest.from_function(_panel_and_ingest, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at = at.run()
    at = at.text_input(key="ws_new").input("team b").run()
    at = at.button(key="ws_create").click().run()
    at = at.text_input(key="ws_new").input("").run()  # an unrelated click first
    at = at.button(key="fake_upload").click().run()
    assert not at.exception
    counts = {w.workspace_id: w.documents for w in deps.store.workspaces_repo.list()}
    assert counts == {"default": 0, "team b": 1}


def test_delete_confirmation_is_clear_after_a_delete_and_on_every_switch(deps: Deps) -> None:
    """Issue #47: after deleting one workspace and switching to another, the Delete box is unticked (it stayed
    ticked: one click from deleting the workspace the person is in); a box ticked and left is cleared on a switch."""
    at = _app(deps)
    for name in ("keep", "gone"):
        at = at.text_input(key="ws_new").input(name).run()
        at = at.button(key="ws_create").click().run()
    assert at.session_state[_state.WORKSPACE_KEY] == "gone"
    at = at.checkbox(key="ws_delete_sure").check().run()
    at = at.button(key="ws_delete").click().run()
    assert not at.exception and "gone" not in deps.store.workspaces()
    at = at.selectbox(key="ws_select").set_value("keep").run()
    assert at.session_state[_state.WORKSPACE_KEY] == "keep"
    assert at.checkbox(key="ws_delete_sure").value is False and at.button(key="ws_delete").disabled
    at = at.checkbox(key="ws_delete_sure").check().run()  # armed, then the person switches away and back
    at = at.selectbox(key="ws_select").set_value("default").run()
    at = at.selectbox(key="ws_select").set_value("keep").run()
    assert at.checkbox(key="ws_delete_sure").value is False and at.button(key="ws_delete").disabled
    assert "keep" in deps.store.workspaces()
