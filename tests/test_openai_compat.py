"""The OpenAI-compatible client (issue #45 item 4) against a loopback stub: streaming and JSON bodies, usage and prefix
reuse, faults (429 with Retry-After, 500s, drips, malformed and hostile bodies), the Anthropic client's redaction and
deadline rules, and the ledger naming provider and model."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from core.models.llm import LLMError, LLMRequest, TextBlock, call_limits
from core.models.openai_compat import OpenAICompatLLM
from core.store import Store
from tests.openai_stub import OAStub, openai_stub, start_openai_stub, stub_tokens  # noqa: F401

KEY = "sk-local-stub-0123456789abcdef"
QA = {"type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
      "required": ["question", "answer"]}


def _llm(stub: OAStub, **kw) -> OpenAICompatLLM:  # noqa: ANN003
    kw.setdefault("sleep", lambda s: None)
    return OpenAICompatLLM(stub.base_url, "local-model", api_key=KEY, **kw)


def _req(user: str = "What is it?", *, system: str = "", cache: bool = False, **kw) -> LLMRequest:  # noqa: ANN003
    return LLMRequest(model="claude-haiku-4-5", system=(TextBlock(system, cache=cache),) if system else (),
                      user=(TextBlock(user),), **kw)


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_streamed_or_whole_gives_text_usage_and_model(openai_stub: OAStub, stream: bool) -> None:
    llm = _llm(openai_stub, stream=stream)
    resp = llm.complete(_req("Say something.", system="Be brief."))
    assert resp.text == "An answer from the local model."
    body = openai_stub.state.requests[-1]
    assert body["model"] == "local-model" and body["stream"] is stream and body["temperature"] == 0
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say something."}]
    prompt = "<system>Be brief.<user>Say something."
    assert resp.usage.input_tokens == stub_tokens(prompt) and resp.usage.output_tokens == stub_tokens(resp.text)
    assert resp.usage.usd == 0.0 and resp.usage.models == ("openai-compatible:local-model",)
    assert resp.model == "local-model" and resp.usage_flag == ""
    assert openai_stub.state.headers[-1]["authorization"] == f"Bearer {KEY}"


def test_structured_output_is_asked_for_and_recovered_from_a_fenced_reply(openai_stub: OAStub) -> None:
    openai_stub.state.responder = lambda body: 'Sure:\n```json\n{"result": {"question": "Q?", "answer": "A"}}\n```'
    resp = _llm(openai_stub).complete(_req(json_schema=QA, purpose="golden"))
    assert resp.data == {"question": "Q?", "answer": "A"}
    assert openai_stub.state.requests[-1]["response_format"]["json_schema"]["schema"] == QA


def test_the_document_prefix_is_reused_across_chunks_and_booked_as_cache_reads(openai_stub: OAStub,
                                                                               tmp_path: Path) -> None:
    store = Store(str(tmp_path / "w.duckdb"))
    llm = _llm(openai_stub, ledger=store.ledger)
    doc = "<document>" + "The plant in Lyon makes valves. " * 40 + "</document>"
    r1 = llm.complete(_req("Chunk one.", system=doc, cache=True, purpose="context", ref_id="d1"))
    r2 = llm.complete(_req("Chunk two.", system=doc, cache=True, purpose="context", ref_id="d1"))
    assert openai_stub.state.requests[-1]["cache_prompt"] is True
    assert r1.usage.cache_read_tokens == 0
    prefix = len(f"<system>{doc}<user>Chunk ".encode()) // 4
    assert r2.usage.cache_read_tokens == prefix and r2.usage.input_tokens == stub_tokens(
        f"<system>{doc}<user>Chunk two.") - prefix
    rows = store.ledger.usage_ledger()
    assert [(r.provider, r.model, r.cache_read_tokens) for r in rows] == [
        ("openai-compatible", "local-model", 0), ("openai-compatible", "local-model", prefix)]
    assert all(r.usd == 0.0 and r.latency_ms > 0 for r in rows)
    # Without a cache breakpoint the reused tokens are plain input (no cache read claimed).
    r3 = llm.complete(_req("Chunk two.", system=doc))
    assert r3.usage.cache_read_tokens == 0 and r3.usage.input_tokens == stub_tokens(f"<system>{doc}<user>Chunk two.")
    store.close()


def test_429_with_retry_after_is_waited_and_retried(openai_stub: OAStub) -> None:
    waits: list[float] = []
    openai_stub.state.faults.extend([("status", 429, 7), ("status", 503, None)])
    llm = _llm(openai_stub, sleep=waits.append)
    assert llm.complete(_req()).text
    assert waits[0] == 7.0 and len(waits) == 2 and llm.retries == 2


def test_500s_past_the_retries_fail_as_one_typed_error(openai_stub: OAStub) -> None:
    openai_stub.state.faults.extend([("status", 500, None)] * 3)
    with pytest.raises(LLMError) as err:
        _llm(openai_stub, max_retries=2).complete(_req())
    assert err.value.kind == "server" and "HTTP 500" in str(err.value)


def test_a_4xx_is_not_retried(openai_stub: OAStub) -> None:
    llm = OpenAICompatLLM(openai_stub.base_url, "local-model", api_key="sk-wrong-key-000000000000", sleep=lambda s: None)
    with pytest.raises(LLMError) as err:
        llm.complete(_req())
    assert err.value.kind == "auth" and llm.retries == 0


def test_a_retry_after_past_the_callers_deadline_fails_at_once(openai_stub: OAStub) -> None:
    openai_stub.state.faults.append(("status", 429, 30))
    waits: list[float] = []
    with call_limits(deadline=time.monotonic() + 5):
        with pytest.raises(LLMError) as err:
            _llm(openai_stub, sleep=waits.append).complete(_req())
    assert err.value.kind == "deadline" and waits == []


def test_a_dripping_server_is_cut_at_the_total_deadline(openai_stub: OAStub) -> None:
    openai_stub.state.faults.append(("drip", 0.05))
    t0 = time.monotonic()
    with pytest.raises(LLMError) as err:
        _llm(openai_stub, timeout_s=1.0, max_retries=0).complete(_req())
    assert err.value.kind == "timeout" and time.monotonic() - t0 < 3.0


def test_the_next_call_after_a_timeout_works(openai_stub: OAStub) -> None:
    openai_stub.state.faults.append(("latency", 2.0))
    llm = _llm(openai_stub, timeout_s=0.5, max_retries=1)
    assert llm.complete(_req()).text  # the first attempt timed out, the retry answered
    assert llm.retries == 1


@pytest.mark.parametrize("kind", ["html", "no_choices", "bad_event", "cut_stream", "huge"])
def test_a_malformed_200_is_retried_once_then_fails_malformed(openai_stub: OAStub, kind: str) -> None:
    openai_stub.state.faults.extend([("malformed", kind)] * 2)
    llm = _llm(openai_stub)
    with pytest.raises(LLMError) as err:
        llm.complete(_req())
    assert err.value.kind == "malformed" and llm.retries == 1
    openai_stub.state.faults.extend([("malformed", kind)])
    assert llm.complete(_req()).text  # one malformed reply, then a good one


@pytest.mark.parametrize("fault", ["negative", "huge", "missing", "string", "zero"])
def test_implausible_usage_is_booked_at_our_bound_and_flagged(openai_stub: OAStub, fault: str) -> None:
    openai_stub.state.faults.append(("usage", fault))
    req = _req("Q?", system="Answer in one short sentence. " * 20)  # long enough for a non-zero input floor
    resp = _llm(openai_stub).complete(req)
    assert resp.usage_flag.startswith("provider usage implausible")
    assert 0 < resp.usage.input_tokens < 10_000 and 0 < resp.usage.output_tokens <= req.max_tokens
    assert resp.usage.cache_read_tokens == 0 and resp.usage.cache_write_tokens == 0


def test_echoed_key_is_redacted_in_text_data_errors_and_the_ledger(openai_stub: OAStub, tmp_path: Path) -> None:
    store = Store(str(tmp_path / "w.duckdb"))
    llm = _llm(openai_stub, ledger=store.ledger)
    openai_stub.state.echo_headers = True
    resp = llm.complete(_req())
    assert KEY not in resp.text and "headers:" in resp.text
    openai_stub.state.echo_headers = False
    openai_stub.state.faults.append(("echo", 400))
    with pytest.raises(LLMError) as err:
        llm.complete(_req())
    assert KEY not in str(err.value) and KEY not in repr(llm)
    assert all(KEY not in json.dumps(r.__dict__, default=str) for r in store.ledger.usage_ledger())
    store.close()


def test_tool_use_and_batches_are_refused_with_a_reason(openai_stub: OAStub) -> None:
    llm = _llm(openai_stub)
    with pytest.raises(LLMError, match="tool use"):
        llm.complete(_req(tools=({"name": "t", "input_schema": {}},)))
    with pytest.raises(LLMError, match="batches"):
        llm.submit_batch([("a", _req())])


def test_the_servers_models_are_listed(openai_stub: OAStub) -> None:
    assert _llm(openai_stub).models() == ["local-model", "other-model"]


def test_a_closed_port_fails_as_connection_after_retries() -> None:
    stub = start_openai_stub()
    url = stub.base_url
    stub.stop()
    llm = OpenAICompatLLM(url, "m", sleep=lambda s: None, max_retries=1, timeout_s=2)
    with pytest.raises(LLMError) as err:
        llm.complete(_req())
    assert err.value.kind in ("connection", "timeout") and llm.retries == 1
