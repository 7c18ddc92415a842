"""One configuration hash from the sweep table to the running Search Lab (issue #47): the table's row, the "Use
this" message and the trace the Search Lab then runs name the same configuration, also when the Lab's widgets held
other values before; a workspace switch brings the widgets to that workspace's configuration."""
from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from pages import _state
from tests.test_sweep import DOCS, GRID, LINES, ROOT


def _lab_hash(at: AppTest) -> str:
    caption = next(c.value for c in at.caption if "· config " in c.value)
    return re.search(r"config (\w+)", caption).group(1)


def test_use_this_runs_the_hash_the_table_shows(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    monkeypatch.setattr("core.eval.sweep.STANDARD_GRID", tuple(GRID))
    monkeypatch.setattr("pages._sweep_panel.STANDARD_GRID", tuple(GRID))
    at = AppTest.from_file(str(ROOT / "workbench.py"), default_timeout=120)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    at = at.switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("nightly backups")
    at = at.button(key="search").click().run()
    at.radio(key="mode").set_value("dense").run()  # the Lab's own widget now says dense
    at.toggle(key="rerank_on").set_value(False).run()
    at = at.switch_page("pages/evaluate.py").run()
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input("\n".join(json.dumps(x) for x in LINES)).run()
    at.button(key="sweep_run").click().run()
    (table,) = [d.value for d in at.dataframe if {"band", "config", "hash"} <= set(d.value.columns)]
    at.selectbox(key="sweep_pick").set_value("hybrid").run()
    at.button(key="sweep_use").click().run()
    row_hash = table.set_index("config").loc["hybrid", "hash"]
    message = next(s.value for s in at.success if "is now the configuration" in s.value)
    chosen = at.session_state[_state.CONFIG_KEY]
    assert chosen.stable_hash() == row_hash and f"({row_hash})" in message
    at = at.switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("nightly backups")
    at = at.button(key="search").click().run()
    assert not at.exception
    assert at.session_state[_state.CONFIG_KEY].stable_hash() == row_hash
    assert at.session_state["last_trace"].config_hash == row_hash and _lab_hash(at) == row_hash


def test_widgets_follow_a_configuration_set_from_outside(deps: Deps) -> None:
    """The Lab's widgets hold values of their own; a configuration set from outside (a workspace switch, Use this)
    is what the next run shows and runs, not the widgets' old values written back over it."""
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = AppTest.from_file(str(ROOT / "workbench.py"), default_timeout=60)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    at = at.switch_page("pages/search_lab.py").run()
    at.toggle(key="rerank_on").set_value(False).run()
    at.radio(key="mode").set_value("BM25").run()
    assert not at.session_state[_state.CONFIG_KEY].rerank.enabled
    outside = PipelineConfig().with_overrides({"graph.enabled": True})
    at.session_state[_state.CONFIG_KEY] = outside  # as pages._state.set_config(outside, external=True) does
    at.session_state[_state.CONFIG_GEN_KEY] = at.session_state[_state.CONFIG_GEN_KEY] + 1 \
        if _state.CONFIG_GEN_KEY in at.session_state else 1
    at.run()
    assert not at.exception
    assert at.session_state[_state.CONFIG_KEY].stable_hash() == outside.stable_hash()
    assert at.toggle(key="rerank_on").value is True and at.toggle(key="graph_on").value is True
    assert at.radio(key="mode").value == "hybrid"
