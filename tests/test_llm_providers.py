"""llm.provider (issue #45): the config and the sidebar choose the client, every LLM stage takes it through deps, and
the trace, the ledger and the reports say which provider and model answered. Local calls run against the loopback
OpenAI-compatible stub; the in-process GGUF runtime has its own tests (tests/test_gguf.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.config import GraphConfig, PipelineConfig
from core.deps import Deps, with_llm_provider
from core.graph.build import build_graph
from core.ingest.context import CONTEXT_INSTRUCTIONS, build_llm_contexts
from core.ingest.pipeline import ingest_files
from core.models.gguf import GGUFLLM, runtime_missing
from core.models.llm import AnthropicLLM, OfflineLLM
from core.models.openai_compat import OpenAICompatLLM
from core.models.providers import build_provider, provider_label
from core.pipeline import run_query
from pages import _state
from tests.openai_stub import OAStub, openai_stub  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ("valves.md", b"# Valves\n\nThe Lyon plant of Acme Industrial makes brass valves for Northwind Water. "
                  b"Each valve is tested at 16 bar.\n\n## Shipping\n\nValves leave Lyon by rail to Basel, where "
                  b"Northwind Water stores them before installation in Zurich."),
    ("pumps.md", b"# Pumps\n\nThe Porto workshop of Acme Industrial repairs pumps for Harbor Energy. Repairs take "
                 b"five days.\n\n## Parts\n\nSpare impellers come from the Acme depot in Bilbao."),
]


def _ingest(deps: Deps, cfg: PipelineConfig | None = None) -> None:
    cfg = cfg or PipelineConfig().with_overrides({"chunking.size_tokens": 40, "chunking.overlap_tokens": 0})
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)


def _local(stub: OAStub, deps: Deps) -> OpenAICompatLLM:
    return OpenAICompatLLM(stub.base_url, "local-model", api_key="sk-local-stub-0123456789abcdef",
                           ledger=deps.store.ledger, sleep=lambda s: None)


def test_the_config_chooses_the_provider_and_says_why_one_cannot_run(tmp_path: Path) -> None:
    cfg = PipelineConfig().llm
    assert isinstance(build_provider(cfg)[0], OfflineLLM)
    assert isinstance(build_provider(cfg, anthropic_key="sk-ant-test-0000000000")[0], AnthropicLLM)
    oa = PipelineConfig().with_overrides({"llm.provider": "openai-compatible"}).llm
    llm, notice = build_provider(oa)
    assert isinstance(llm, OfflineLLM) and "llm.base_url" in notice
    oa = PipelineConfig().with_overrides({"llm.provider": "openai-compatible", "llm.base_url": "http://127.0.0.1:9/v1",
                                          "llm.model": "qwen"}).llm
    llm, notice = build_provider(oa)
    assert isinstance(llm, OpenAICompatLLM) and notice is None and provider_label(llm) == "openai-compatible:qwen"
    gg = PipelineConfig().with_overrides({"llm.provider": "gguf", "llm.gguf_path": str(tmp_path / "none.gguf")}).llm
    llm, notice = build_provider(gg)
    assert isinstance(llm, OfflineLLM) and provider_label(llm) == "offline"
    assert ("make local-llm" in notice) if runtime_missing() else ("not a file" in notice)
    if runtime_missing() is None:
        (tmp_path / "m.gguf").write_bytes(b"GGUF")
        llm, _ = build_provider(gg.model_copy(update={"gguf_path": str(tmp_path / "m.gguf")}))
        assert isinstance(llm, GGUFLLM) and llm.model == "m"


def test_a_local_provider_replaces_only_the_llm_of_the_deps(deps: Deps, openai_stub: OAStub) -> None:
    cfg = PipelineConfig().with_overrides({"llm.provider": "openai-compatible", "llm.base_url": openai_stub.base_url,
                                           "llm.model": "local-model"})
    local = with_llm_provider(deps, cfg, env={})
    assert local.store is deps.store and local.embedder is deps.embedder
    assert isinstance(local.llm, OpenAICompatLLM) and local.llm.model == "local-model"


def test_contexts_reuse_each_documents_prefix_and_the_ledger_books_it(deps: Deps, openai_stub: OAStub) -> None:
    _ingest(deps)
    openai_stub.state.responder = lambda body: "This excerpt is part of a document about Acme's plants."
    llm = _local(openai_stub, deps)
    rep = build_llm_contexts(deps.store, llm, model="claude-haiku-4-5", budget_usd=0.0)  # $0 budget: local is free
    assert rep.written > 2 and rep.remaining == 0 and rep.stopped == ""
    rows = deps.store.ledger.usage_ledger()
    assert {r.provider for r in rows} == {"openai-compatible"} and {r.model for r in rows} == {"local-model"}
    by_doc: dict[str, list[int]] = {}
    for r in rows:
        by_doc.setdefault(r.ref_id, []).append(r.cache_read_tokens)
    # The first chunk of a document evaluates its document (reusing at most the instructions every document shares),
    # the others reuse the instructions and the document.
    shared = len(f"<system>{CONTEXT_INSTRUCTIONS}<document>\n".encode()) // 4
    assert len(by_doc) == 2
    for reads in by_doc.values():
        assert reads[0] <= shared and len(reads) > 1 and all(n > shared + 20 for n in reads[1:])
    assert sum(r.usd for r in rows) == 0.0
    assert set(deps.store.ledger.context_models("llm")) == {"local-model"}


def test_a_graph_build_with_no_entity_from_any_chunk_fails_and_is_retried(deps: Deps, openai_stub: OAStub) -> None:
    _ingest(deps)
    cfg = GraphConfig(builder="llm", min_phrase_chunks=1)
    llm = _local(openai_stub, deps)
    replies = iter(["I am sorry, I cannot find entities here."] * 100)
    openai_stub.state.responder = lambda body: next(replies)
    rep = build_graph(deps.store, cfg, llm=llm)
    failed = [n for n in rep.notes if n.startswith("graph build failed")]
    assert failed and "0 entities" in failed[0] and "not usable JSON" in failed[0] and rep.nodes == 0
    # Valid JSON with no entity is a failed build too.
    openai_stub.state.responder = lambda body: '{"entities": [], "relations": []}'
    rep = build_graph(deps.store, cfg, llm=llm)
    assert any("every reply was valid JSON with no entity" in n for n in rep.notes) and rep.nodes == 0
    # The chunks were never marked processed: a working model extracts them on the next update; one unusable
    # reply among them is counted and named, not fatal.
    calls = {"n": 0}

    def good(body: dict) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            return "```json\n{\"entities\": [{\"name\": \"Acme"  # cut off, recovered to nothing usable
        return "Here: " + json.dumps({"entities": [{"name": "Acme Industrial", "type": "org", "description": "x"},
                                                   {"name": "Lyon", "type": "place", "description": "y"}],
                                      "relations": [{"source": "Acme Industrial", "target": "Lyon",
                                                     "description": "plant", "weight": 5}]})
    openai_stub.state.responder = good
    rep = build_graph(deps.store, cfg, llm=llm)
    assert rep.nodes >= 2 and rep.chunks_added > 0
    assert not any(n.startswith("graph build failed") for n in rep.notes)
    assert any("gave no usable reply" in n for n in rep.notes)


def test_the_trace_usage_names_the_provider_and_model_that_answered(deps: Deps, openai_stub: OAStub) -> None:
    _ingest(deps)
    openai_stub.state.responder = lambda body: "Acme's Lyon plant makes brass valves [1]."
    deps.llm = _local(openai_stub, deps)
    cfg = PipelineConfig().with_overrides({"answer.mode": "llm", "answer_cache.enabled": False,
                                           "router.enabled": False})
    trace = run_query("What does the Lyon plant make?", cfg, deps, log=False)
    assert trace.usage.calls >= 1 and "openai-compatible:local-model" in trace.usage.models
    assert json.loads(json.dumps(trace.to_dict()))["usage"]["models"] == list(trace.usage.models)
    answer_rows = [r for r in deps.store.ledger.usage_ledger() if r.purpose == "answer"]
    assert answer_rows and all(r.provider == "openai-compatible" and r.usd == 0 for r in answer_rows)


def _llm_panel() -> None:
    # The sidebar panel alone: AppTest keeps no sidebar elements of workbench.py after its first rerun (see
    # tests/test_workspaces_page.py); the workbench's first run shows it.
    import streamlit as st

    from pages._llm_panel import llm_panel

    with st.sidebar:
        llm_panel()


def test_the_sidebar_says_who_answers_and_switches_the_provider(deps: Deps) -> None:
    at = AppTest.from_file(str(ROOT / "workbench.py"), default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    assert not at.exception and any(t.value == "LLM: offline" for t in at.sidebar.text)
    at = AppTest.from_function(_llm_panel, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    at.sidebar.selectbox(key="llm_provider").set_value("openai-compatible").run()
    at.sidebar.text_input(key="llm_base_url").input("http://127.0.0.1:8080/v1")
    at.sidebar.text_input(key="llm_model").input("qwen2.5")
    at.sidebar.button(key="llm_apply").click().run()
    llm = at.session_state[_state.CONFIG_KEY].llm
    assert (llm.provider, llm.base_url, llm.model) == ("openai-compatible", "http://127.0.0.1:8080/v1", "qwen2.5")
    at.sidebar.selectbox(key="llm_provider").set_value("gguf").run()
    at.sidebar.text_input(key="llm_gguf_path").input("/models/small.gguf")
    at.sidebar.button(key="llm_apply").click().run()
    llm = at.session_state[_state.CONFIG_KEY].llm
    assert (llm.provider, llm.gguf_path) == ("gguf", "/models/small.gguf") and not at.exception


def test_a_stage_answered_by_a_local_model_says_which_in_its_chips() -> None:
    from core.app.report import stage_chips
    from core.types import StageResult, Usage

    local = StageResult("answer", usage=Usage(10, 5, 0, 0, 0.0, 1, ("gguf:SmolLM2-135M-Instruct.Q4_1",)))
    claude = StageResult("answer", usage=Usage(10, 5, 0, 0, 0.01, 1, ("anthropic:claude-sonnet-4-6",)))
    assert "by gguf:SmolLM2-135M-Instruct.Q4_1" in stage_chips(local)
    assert not any(c.startswith("by ") for c in stage_chips(claude))
