"""Widgets built from the config's metadata (pages/_form.py): a bound, a choice or a description declared on a field
reaches the widget, and a page cannot write a second copy of a bound the field already has."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.app.routing import route_names
from core.config import PipelineConfig
from core.config.meta import field_spec
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from pages import _form, _state

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")


def _form_script() -> None:
    import streamlit as st

    from core.config import PipelineConfig
    from pages import _form

    cfg = PipelineConfig().with_overrides({"rerank.top_n": 70, "expand.mode": "parent", "context.use_batches": True})
    st.session_state["out"] = {
        "top_n": _form.setting(cfg, "rerank.top_n", "reads top n", key="top_n"),
        "lam": _form.setting(cfg, "mmr.lam", "λ", key="lam", widget="slider", step=0.05),
        "mode": _form.setting(cfg, "expand.mode", "mode", key="mode", widget="radio"),
        "method": _form.setting(cfg, "rerank.method", "method", key="method", help=""),
        "batches": _form.setting(cfg, "context.use_batches", "batches", key="batches", widget="checkbox"),
        "secs": _form.setting(cfg, "agent.max_seconds", "max seconds", key="secs", min_value=1.0, step=5.0),
        "model": _form.setting(cfg, "rerank.model", "model", key="model"),
    }


def test_bounds_choices_and_help_come_from_the_field() -> None:
    at = AppTest.from_function(_form_script).run()
    assert not at.exception
    top_n, spec = at.number_input(key="top_n"), field_spec("rerank.top_n")
    assert (top_n.value, top_n.proto.min, top_n.proto.max) == (70, spec.ge, spec.le) == (70, 1, 1000)
    assert top_n.proto.help == spec.description
    lam = at.slider(key="lam")
    assert (lam.proto.min, lam.proto.max, lam.value) == (field_spec("mmr.lam").ge, field_spec("mmr.lam").le, 0.7)
    mode = at.radio(key="mode")
    assert list(mode.options) == list(field_spec("expand.mode").choices) and mode.value == "parent"
    method = at.selectbox(key="method")
    assert list(method.options) == list(field_spec("rerank.method").choices) and method.proto.help == ""
    secs = at.number_input(key="secs")  # gt=0 on the field: the page's minimum must lie above it
    assert (secs.proto.min, secs.proto.max) == (1.0, field_spec("agent.max_seconds").le)
    assert at.checkbox(key="batches").value is True and at.text_input(key="model").value == field_spec(
        "rerank.model").default
    out = at.session_state["out"]
    assert out["top_n"] == 70 and isinstance(out["top_n"], int) and isinstance(out["secs"], float)


def test_a_page_cannot_restate_a_bound_or_invent_a_choice() -> None:
    with pytest.raises(ValueError, match="declares le=1000"):
        _form.bounds(field_spec("rerank.top_n"), max_value=500)
    with pytest.raises(ValueError, match="needs > 0"):
        _form.bounds(field_spec("agent.max_seconds"), min_value=0.0)
    assert _form.bounds(field_spec("fusion.bm25_weight"), max_value=10.0) == (0.0, 10.0)  # no le on the field
    with pytest.raises(ValueError, match="no choice 'bm42'"):
        _form.choices(field_spec("bm25.method"), ["lucene", "bm42"])
    assert _form.choices(field_spec("context.variant"), ["late", "llm"]) == ["late", "llm"]


def test_search_lab_widgets_mirror_the_config_and_the_routes(deps: Deps) -> None:
    report = ingest_files([("note.md", b"# Note\n\nThe harbour office opens at nine.\n")], store=deps.store,
                          embedder=deps.embedder, config=PipelineConfig())
    assert not report.errors
    at = AppTest.from_file(APP, default_timeout=15)
    at.session_state[_state.DEPS_KEY] = deps
    at = at.run().switch_page("pages/search_lab.py").run()
    assert not at.exception
    # Route names come from the router's own routes file, after the "router decides" choice.
    assert list(at.selectbox(key="route_override").options) == ["router decides", *route_names()]
    for key, dotted in (("rerank_top_n", "rerank.top_n"), ("prune_budget", "prune.token_budget"),
                        ("expand_window", "expand.window"), ("agent_tokens", "agent.max_tokens")):
        w, spec = at.number_input(key=key), field_spec(dotted)
        assert (w.proto.min, w.proto.max, w.value) == (spec.ge, spec.le, spec.default), key
    assert list(at.radio(key="context_variant").options) == list(field_spec("context.variant").choices)
    assert list(at.selectbox(key="rerank_method").options) == list(field_spec("rerank.method").choices)
