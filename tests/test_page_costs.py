"""AppTest of the Costs page: ledger with filters, per-build and per-query tables, hit rates, the context panel."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM
from core.models.pricing import tokens_usd
from core.pipeline import run_query
from core.store import Store
from core.types import LedgerEntry
from pages import _state
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture
from tests.fakes import HashEmbedder

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")
DOC = b"# Depot\n\n## Brakes\n\nThe depot inspects brake pads every night. Torque values are logged.\n"


def _entry(purpose: str, run: str, w: int, r: int) -> LedgerEntry:
    m = "claude-haiku-4-5"
    return LedgerEntry(purpose, m, 50, 40, w, r,
                       tokens_usd(m, input_tokens=50, output_tokens=40, cache_write_tokens=w, cache_read_tokens=r),
                       tokens_usd(m, input_tokens=50 + w + r, output_tokens=40), 12.0, "d1", run)


@pytest.fixture
def filled(store: Store, embedder: HashEmbedder) -> Deps:
    ingest_files([("depot.md", DOC)], store=store, embedder=embedder, config=PipelineConfig())
    for e in (_entry("context", "run-a", 6000, 0), _entry("context", "run-a", 0, 6000), _entry("answer", "q1", 0, 0)):
        store.ledger.record_usage(e)
    deps = Deps(store=store, embedder=embedder)
    run_query("brake pads", PipelineConfig(), deps)
    return deps


def _costs(deps: Deps) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=20)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    return at.switch_page("pages/costs.py").run()


def test_costs_page_shows_ledger_builds_queries_and_hit_rates(filled: Deps) -> None:
    at = _costs(filled)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Calls"] == "3"
    expected = sum(e.usd for e in filled.store.ledger.usage_ledger())
    assert metrics["Spent"] == f"${expected:,.4f}"
    assert metrics["Cache-read share"] == f"{6000 / (150 + 6000 + 6000):.0%}"
    assert len(at.dataframe) >= 4  # ledger, builds, per-query, coverage
    at.multiselect(key="led_purpose").select("answer").run()
    assert {m.label: m.value for m in at.metric}["Calls"] == "1"
    assert any("No LLM is configured" in i.value for i in at.info)


def test_context_panel_builds_heuristic_contexts(filled: Deps) -> None:
    at = _costs(filled)
    at.radio(key="ctx_variant").set_value("heuristic").run()
    at.button(key="ctx_build").click().run()
    assert not at.exception
    assert any("heuristic: " in s.value for s in at.success)
    assert len(filled.store.ledger.contexts("heuristic")) == filled.store.corpus.count("chunks")


def test_context_panel_llm_needs_a_key_and_confirmation(filled: Deps, anthropic_stub: Stub) -> None:
    at = _costs(filled)
    at.radio(key="ctx_variant").set_value("llm").run()
    assert any("need Claude" in w.value for w in at.warning)
    filled.llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, ledger=filled.store.ledger)
    at = _costs(filled)
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"context.confirm_above_usd": 0.0})
    at.radio(key="ctx_variant").set_value("llm").run()
    assert at.button(key="ctx_build").disabled  # above the threshold: not until confirmed
    at.checkbox(key="ctx_confirm").check().run()
    at.button(key="ctx_build").click().run()
    assert not at.exception
    assert len(filled.store.ledger.contexts("llm")) == filled.store.corpus.count("chunks")
    assert anthropic_stub.key not in "".join(str(e.value) for e in at.markdown)
