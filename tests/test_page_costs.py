"""AppTest of the Costs page: ledger with filters, per-build and per-query tables, hit rates, the context panel."""
from __future__ import annotations

import re
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


def _costs(deps: Deps, tab: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=20)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    at = at.switch_page("pages/costs.py").run()
    return _open(at, tab) if tab else at


def _open(at: AppTest, tab: str) -> AppTest:
    """Only the open tab runs (lazy tabs): open one as a click would."""
    at.session_state["costs_tab"] = tab
    return at.run()


def test_costs_page_shows_ledger_builds_queries_and_hit_rates(filled: Deps) -> None:
    at = _costs(filled)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Calls"] == "3"
    expected = sum(e.usd for e in filled.store.ledger.usage_ledger())
    assert metrics["Spent"] == f"${expected:,.4f}"
    assert metrics["Cache-read share"] == f"{6000 / (150 + 6000 + 6000):.0%}"
    assert len(at.dataframe) == 1  # the ledger; the other tabs run only when opened
    at.multiselect(key="led_purpose").select("answer").run()
    assert {m.label: m.value for m in at.metric}["Calls"] == "1"
    assert any("No LLM is configured" in i.value for i in at.info)
    for tab, tables in (("Per build", 1), ("Per query", 2), ("Build contexts", 1)):
        at = _open(at, tab)
        assert not at.exception and len(at.dataframe) == tables, tab


def test_per_query_tab_shows_the_refusal_share(filled: Deps) -> None:
    run_query("What is the capital of Peru?", PipelineConfig(), filled)  # nothing in the depot says: refused
    at = _costs(filled, "Per query")
    assert not at.exception
    assert any(s.value == "Refusal share" for s in at.subheader)
    metrics = {m.label: m.value for m in at.metric}
    runs = filled.store.runs.recent_runs()
    refused = sum(bool(r.trace["answer"]["refused"]) for r in runs)
    assert metrics["Refusal share"] == f"{refused / len(runs):.0%}" and 0 < refused < len(runs)
    table = at.dataframe[1].value  # below the per-query table
    assert {"day", "route", "queries", "refused", "refusal share", "answer-cache hits", "usd"} <= set(table.columns)
    assert table.queries.sum() == len(runs)


def test_ten_mistakes_tab_lists_every_check(filled: Deps) -> None:
    at = _costs(filled, "Ten mistakes")
    assert not at.exception
    labels = [e.label for e in at.expander]
    assert sum(1 for n in range(1, 11) if any(f" {n}\\. " in lab or f" {n}. " in lab for lab in labels)) == 10
    metrics = {m.label: int(m.value) for m in at.metric}
    assert sum(metrics[s] for s in ("fail", "warn", "ok", "not applicable")) == 10
    # no evaluation stored in this workspace: the stage-recall mistake fails and is open, with its evidence
    assert any("no stored evaluation" in md.value for md in at.markdown)


def test_context_panel_builds_heuristic_contexts(filled: Deps) -> None:
    at = _costs(filled, "Build contexts")
    at.radio(key="ctx_variant").set_value("heuristic").run()
    at.button(key="ctx_build").click().run()
    assert not at.exception
    assert any("heuristic: " in s.value for s in at.success)
    assert len(filled.store.ledger.contexts("heuristic")) == filled.store.corpus.count("chunks")


def test_context_panel_llm_needs_a_key_and_confirmation(filled: Deps, anthropic_stub: Stub) -> None:
    at = _costs(filled, "Build contexts")
    at.radio(key="ctx_variant").set_value("llm").run()
    assert any("need Claude" in w.value for w in at.warning)
    filled.llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, ledger=filled.store.ledger)
    at = _costs(filled, "Build contexts")
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"context.confirm_above_usd": 0.0})
    at.radio(key="ctx_variant").set_value("llm").run()
    assert at.button(key="ctx_build").disabled  # above the threshold: not until confirmed
    at.checkbox(key="ctx_confirm").check().run()
    at.button(key="ctx_build").click().run()
    assert not at.exception
    assert len(filled.store.ledger.contexts("llm")) == filled.store.corpus.count("chunks")
    assert anthropic_stub.key not in "".join(str(e.value) for e in at.markdown)


def test_builds_runs_and_the_embedding_chart_read_as_a_person_reads_them(filled: Deps) -> None:
    """Issue #28: an offline build (the ingest) is a build, so "No builds yet" only when none ran; no raw 32-character
    run id anywhere; the query line of the embedding-cache chart is what the queries' counters say."""
    from core.app.costs import embedding_cache_rate, query_embedding_events
    from core.app.counters import counters
    from core.types import Trace

    at = _costs(filled, "Per build")
    assert not any("No builds yet" in c.value for c in at.caption)
    builds = at.dataframe[0].value
    assert any(k.startswith("offline ingest") for k in builds["kind"]) and "LLM context" in set(builds["kind"])
    assert not any(k.startswith("LLM answer") for k in builds["kind"])  # a query's answer call is not a build
    hex32 = re.compile(r"\b[0-9a-f]{32}\b")
    for tab in ("Ledger", "Per build", "Per query"):
        at = _open(at, tab)
        for frame in at.dataframe:
            assert not hex32.search(frame.value.to_csv()), tab
    runs = filled.store.runs.recent_runs("default")
    line = embedding_cache_rate(query_embedding_events(runs), "1D")
    total = sum((counters(_as_trace(r.trace)) for r in runs), start=counters(Trace("", "", 0, ())))
    assert len(line) == 1 and line.cache[0] == "embedding cache, queries (texts)"
    assert line.volume[0] == total.embed_hits + total.embed_misses > 0
    assert line.hit_rate[0] == pytest.approx(total.embed_hits / (total.embed_hits + total.embed_misses))
    empty = Deps(store=Store(), embedder=filled.embedder)
    at = _costs(empty, "Per build")
    assert any("No builds yet" in c.value for c in at.caption)


def _as_trace(d: dict):  # noqa: ANN202 - the stored JSON back as a Trace, for the counters
    from core.answer.cache import trace_from_json
    import json

    return trace_from_json(json.dumps(d))
