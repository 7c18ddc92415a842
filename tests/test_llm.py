"""AnthropicLLM through the real SDK against the loopback stub: auth, prompt caching, TTL, retries, JSON, batches."""
from __future__ import annotations

import json

import pytest

from core.config import PipelineConfig
from core.deps import build_deps
from core.models.llm import (
    AnthropicLLM,
    LLMError,
    LLMRequest,
    LLMUnavailable,
    OfflineLLM,
    TextBlock,
)
from core.models.pricing import tokens_usd
from core.store import Store
from tests.anthropic_stub import Stub, anthropic_stub, stub_tokens  # noqa: F401 - fixture
from tests.fakes import HashEmbedder

HAIKU = "claude-haiku-4-5"
LONG_DOC = " ".join(f"token{i}" for i in range(5000))  # ~ 8,900 stub tokens: above Haiku's 4,096 minimum


def _llm(stub: Stub, **kw) -> tuple[AnthropicLLM, list[float]]:
    sleeps: list[float] = []
    llm = AnthropicLLM(stub.key, base_url=stub.base_url, sleep=sleeps.append, **kw)
    return llm, sleeps


def _req(doc: str, chunk: str, **kw) -> LLMRequest:
    return LLMRequest(HAIKU, (TextBlock("Situate the excerpt."), TextBlock(doc, cache=True)), (TextBlock(chunk),),
                      max_tokens=100, purpose="context", ref_id="d1", **kw)


def test_sdk_sends_the_key_as_bearer_and_a_wrong_key_fails_cleanly(anthropic_stub: Stub) -> None:
    llm, _ = _llm(anthropic_stub)
    llm.complete(_req("doc", "chunk"))
    sent = anthropic_stub.state.requests[0].headers
    assert sent.get("Authorization") == f"Bearer {anthropic_stub.key}"
    bad = AnthropicLLM("sk-wrong-key-777", base_url=anthropic_stub.base_url, sleep=lambda s: None)
    with pytest.raises(LLMError) as err:
        bad.complete(_req("doc", "chunk"))
    assert "401" in str(err.value) and "sk-wrong-key-777" not in str(err.value)
    assert "sk-wrong-key-777" not in repr(bad)


def test_prompt_cache_write_then_reads_with_usage_and_ledger(anthropic_stub: Stub) -> None:
    store = Store(":memory:")
    llm, _ = _llm(anthropic_stub, ledger=store.ledger)
    r1 = llm.complete(_req(LONG_DOC, "first chunk"), run_id="run1")
    r2 = llm.complete(_req(LONG_DOC, "second chunk"), run_id="run1")
    prefix = stub_tokens("Situate the excerpt.") + stub_tokens(LONG_DOC)
    assert (r1.usage.cache_write_tokens, r1.usage.cache_read_tokens) == (prefix, 0)
    assert (r2.usage.cache_write_tokens, r2.usage.cache_read_tokens) == (0, prefix)
    assert r2.usage.input_tokens == stub_tokens("second chunk")
    expected = tokens_usd(HAIKU, input_tokens=r2.usage.input_tokens, output_tokens=r2.usage.output_tokens,
                          cache_read_tokens=prefix)
    assert r2.usage.usd == pytest.approx(expected)
    rows = store.ledger.usage_ledger(run_id="run1")
    assert [(e.cache_write_tokens, e.cache_read_tokens) for e in rows] == [(prefix, 0), (0, prefix)]
    assert all(e.purpose == "context" and e.ref_id == "d1" and e.usd > 0 for e in rows)
    assert rows[1].usd < rows[1].usd_uncached


def test_short_prefix_forms_no_cache_and_the_ledger_says_so(anthropic_stub: Stub) -> None:
    store = Store(":memory:")
    llm, _ = _llm(anthropic_stub, ledger=store.ledger)
    for chunk in ("a", "b"):
        r = llm.complete(_req("a short document", chunk))
    assert (r.usage.cache_write_tokens, r.usage.cache_read_tokens) == (0, 0)
    assert "4,096" in r.cache_note
    assert all(e.cache_read_tokens == 0 and "minimum" in e.note for e in store.ledger.usage_ledger())


def test_ttl_expiry_and_one_hour_cache(anthropic_stub: Stub) -> None:
    llm, _ = _llm(anthropic_stub)
    llm.complete(_req(LONG_DOC, "x"))
    anthropic_stub.state.advance(301)  # past the 5-minute TTL
    again = llm.complete(_req(LONG_DOC, "y"))
    assert again.usage.cache_write_tokens > 0 and again.usage.cache_read_tokens == 0
    hour, _ = _llm(anthropic_stub, cache_ttl="1h")
    first = hour.complete(_req(LONG_DOC + " v2", "x"))
    assert first.usage.usd == pytest.approx(tokens_usd(HAIKU, input_tokens=first.usage.input_tokens,
                                                       output_tokens=first.usage.output_tokens,
                                                       cache_write_tokens=first.usage.cache_write_tokens, ttl="1h"))
    anthropic_stub.state.advance(301)
    later = hour.complete(_req(LONG_DOC + " v2", "y"))
    assert later.usage.cache_read_tokens == first.usage.cache_write_tokens


def test_retries_429_and_500_with_backoff_then_success(anthropic_stub: Stub) -> None:
    llm, sleeps = _llm(anthropic_stub, max_retries=3)
    anthropic_stub.state.faults.extend([("status", 429), ("status", 500), ("status", 529)])
    r = llm.complete(_req("doc", "chunk"))
    assert r.text and llm.retries == 3 and len(sleeps) == 3
    assert len(anthropic_stub.state.messages()) == 1  # faults were never processed as calls


def test_retries_give_up_and_400_is_not_retried(anthropic_stub: Stub) -> None:
    llm, sleeps = _llm(anthropic_stub, max_retries=2)
    anthropic_stub.state.faults.extend([("status", 503)] * 3)
    with pytest.raises(LLMError, match="503"):
        llm.complete(_req("doc", "chunk"))
    assert len(sleeps) == 2
    anthropic_stub.state.faults.append(("status", 400))
    with pytest.raises(LLMError, match="400"):
        llm.complete(_req("doc", "chunk"))
    assert len(sleeps) == 2


def test_backoff_grows_exponentially_without_retry_after() -> None:
    llm = AnthropicLLM("k", base_url="http://127.0.0.1:9", backoff_s=1.0, backoff_cap_s=8.0, sleep=lambda s: None)
    delays = [llm._delay(a, RuntimeError()) for a in range(5)]
    assert all(0.5 * min(8, 2 ** a) <= d <= min(8, 2 ** a) for a, d in enumerate(delays))


def test_timeout_is_retried(anthropic_stub: Stub) -> None:
    llm, sleeps = _llm(anthropic_stub, timeout_s=0.3, max_retries=2)
    anthropic_stub.state.faults.append(("stall", 1.0))
    r = llm.complete(_req("doc", "chunk"))
    assert r.text and len(sleeps) == 1


def test_structured_json_output(anthropic_stub: Stub) -> None:
    llm, _ = _llm(anthropic_stub)
    anthropic_stub.state.responder = lambda body: json.dumps({"route": "factoid"})
    schema = {"type": "object", "properties": {"route": {"type": "string"}}, "required": ["route"],
              "additionalProperties": False}
    r = llm.complete(LLMRequest(HAIKU, (), (TextBlock("classify"),), json_schema=schema))
    assert r.data == {"route": "factoid"}
    body = anthropic_stub.state.messages()[-1]
    assert body["output_config"]["format"] == {"type": "json_schema", "schema": schema}
    anthropic_stub.state.responder = lambda body: "not json at all"
    with pytest.raises(LLMError, match="JSON"):
        llm.complete(LLMRequest(HAIKU, (), (TextBlock("classify"),), json_schema=schema))


def test_at_most_four_breakpoints() -> None:
    req = LLMRequest(HAIKU, tuple(TextBlock(str(i), cache=True) for i in range(5)), (TextBlock("q"),))
    with pytest.raises(ValueError, match="4"):
        req.params()


def test_message_batches_poll_and_half_price(anthropic_stub: Stub) -> None:
    store = Store(":memory:")
    llm, _ = _llm(anthropic_stub, ledger=store.ledger)
    anthropic_stub.state.batch_polls_to_end = 2
    reqs = {f"r{i}": _req(LONG_DOC, f"chunk {i}") for i in range(3)}
    bid = llm.submit_batch(list(reqs.items()))
    assert not llm.poll_batch(bid).ended
    assert llm.poll_batch(bid).ended
    results = llm.batch_results(bid, reqs, run_id="b1")
    assert set(results) == set(reqs)
    r = results["r1"]
    assert r.usage.cache_read_tokens > 0  # same prefix inside the batch reads the cache
    full = tokens_usd(HAIKU, input_tokens=r.usage.input_tokens, output_tokens=r.usage.output_tokens,
                      cache_read_tokens=r.usage.cache_read_tokens)
    assert r.usage.usd == pytest.approx(full / 2)
    assert all(e.batch for e in store.ledger.usage_ledger(run_id="b1")) and len(store.ledger.usage_ledger(run_id="b1")) == 3


def test_offline_llm_is_honest() -> None:
    off = OfflineLLM()
    assert not off.available
    with pytest.raises(LLMUnavailable):
        off.complete(_req("d", "c"))


def test_build_deps_reads_key_and_base_url_from_env(anthropic_stub: Stub) -> None:
    store = Store(":memory:")
    env = {"ANTHROPIC_API_KEY": anthropic_stub.key, "ANTHROPIC_BASE_URL": anthropic_stub.base_url}
    deps = build_deps(PipelineConfig(), env, store=store, embedder=HashEmbedder())
    assert deps.llm.available and deps.llm.base_url == anthropic_stub.base_url
    assert anthropic_stub.key not in repr(deps)
    deps.llm.complete(_req("doc", "c"))
    assert len(store.ledger.usage_ledger()) == 1  # the store is the ledger
    offline = build_deps(PipelineConfig(), {}, store=store, embedder=HashEmbedder())
    assert not offline.llm.available
    assert any("ANTHROPIC_API_KEY" in n for n in offline.notices)
    passed = build_deps(PipelineConfig(), {"ANTHROPIC_BASE_URL": anthropic_stub.base_url}, store=store,
                        embedder=HashEmbedder(), api_key=anthropic_stub.key)
    assert passed.llm.available
