"""The LLM client's three guards (issue #33 items 1-3) against the loopback stub through the real SDK: an endpoint
that quotes the request headers reaches no stage, row, file, export or output; implausible usage is booked at our
own bound and flagged, so budgets hold within 1 %; each attempt has a total deadline and retries respect the
caller's."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from core.config import PipelineConfig
from core.models.llm import (
    AnthropicLLM,
    LLMError,
    LLMRequest,
    TextBlock,
    call_limits,
    input_token_bound,
    worst_usd,
)
from core.store import Store
from core.text import redact
from tests.anthropic_stub import Stub, start_stub

HAIKU = "claude-haiku-4-5"
# Not of the sk-ant- shape: only the registered-secret path can hide it.
KEY = "proxy-Token-7f3a9c1e5b2d4a6f8e0c"
USAGE_FAULTS = ["negative", "huge", "missing", "nonnumeric", "zero", "cache", "cache_1h"]


@pytest.fixture
def stub() -> Stub:
    s = start_stub(key=KEY)
    try:
        yield s
    finally:
        s.stop()


def _llm(stub: Stub, **kw) -> AnthropicLLM:  # noqa: ANN003
    kw.setdefault("sleep", lambda s: None)
    return AnthropicLLM(stub.key, base_url=stub.base_url, **kw)


def _req(text: str = "Where is the hub bolt torque written down?", **kw) -> LLMRequest:  # noqa: ANN003
    kw.setdefault("max_tokens", 200)
    return LLMRequest(HAIKU, (TextBlock("You are terse."),), (TextBlock(text),), purpose="answer", **kw)


# -- item 1: one redaction point -------------------------------------------------------------------------------------
def test_redact_hides_credential_headers_but_not_words() -> None:
    out = redact("Authorization: Bearer abcdefghijk1; x-api-key: zzzzzzzz9; {\"x-api-key\": \"qqqqqqqq1\"} "
                 "authorization: required. Bearer of news. sk-ant-api03-AbC_d-9")
    assert "abcdefghijk1" not in out and "zzzzzzzz9" not in out and "qqqqqqqq1" not in out and "sk-ant-api" not in out
    assert "authorization: required" in out and "Bearer of news" in out


def test_echoed_headers_are_redacted_in_text_data_and_tool_input(stub: Stub) -> None:
    stub.state.echo_headers = True
    llm = _llm(stub)
    plain = llm.complete(_req())
    assert "request headers" in plain.text and "[redacted]" in plain.text  # the echo arrived, the key did not
    schema = {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}}}
    structured = llm.complete(_req(json_schema=schema))
    assert "[redacted]" in json.dumps(structured.data)
    for resp in (plain, structured):
        assert KEY not in resp.text + json.dumps(resp.data) + resp.model + resp.cache_note + resp.stop_reason


def test_echoed_key_reaches_no_row_file_export_or_output(tmp_path: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Context build, LLM graph build, the LLM answer, multi-query transform, the agent's LLM grader and CAG, all
    against an endpoint that quotes the request headers in every reply: the key is in no database or token-vector
    byte, no trace, no exported span and nothing printed."""
    from core.app.trace_export import otlp_json, spans_from_trace
    from core.deps import build_deps
    from core.graph.build import build_graph
    from core.ingest.context import build_llm_contexts
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from tests.fakes import HashEmbedder

    stub.state.echo_headers = True
    db = tmp_path / "wb.duckdb"
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": stub.base_url}
    cfg = PipelineConfig().with_overrides({"answer.mode": "llm", "answer_cache.enabled": False,
                                           "graph.builder": "llm", "llm.max_retries": 0})
    deps = build_deps(cfg, env, db=str(db), embedder=HashEmbedder())
    docs = [(f"depot-{i}.md", (f"# Depot {i}\n\n## Torque\n\nThe hub bolt B{i} of Alice Brown's depot takes "
                               f"{40 + i} Nm.\n\n## Lamps\n\nLamp L{i} is checked nightly in Paris.\n").encode())
            for i in range(3)]
    ingest_files(docs, store=deps.store, embedder=deps.embedder, config=cfg)
    rep = build_llm_contexts(deps.store, deps.llm, model=HAIKU, budget_usd=1.0)
    assert rep.written > 0
    assert any("[redacted]" in c for c in deps.store.ledger.contexts("llm").values())
    build_graph(deps.store, cfg.graph, embedder=deps.embedder, llm=deps.llm)
    assert any("[redacted]" in repr(n) for n in deps.store.graph.nodes())  # the echo reached the graph, scrubbed
    runs = [cfg, cfg.with_overrides({"transforms.multi_query": "on"}),
            cfg.with_overrides({"agent.enabled": True, "agent.grader": "llm", "router.enabled": False}),
            cfg.with_overrides({"cag.enabled": True, "cag.model": HAIKU, "router.method": "offline",
                                "answer.mode": "extractive"})]
    traces = [run_query("What torque does the hub bolt B1 take?", c, deps) for c in runs]
    dumps = [json.dumps(t.to_dict()) for t in traces]
    exported = [json.dumps(otlp_json(spans_from_trace(t.to_dict(), run_id=f"r{i}"))) for i, t in enumerate(traces)]
    assert sum("[redacted]" in d for d in dumps) >= 2  # replies with the echo reached the traces, scrubbed
    deps.store.close()
    seen = len([r for r in stub.state.requests if r.path == "/v1/messages"])
    assert seen >= rep.written + 4  # every path above really called the endpoint
    import core.cli as cli

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    monkeypatch.setattr(cli, "build_deps", lambda c, **kw: build_deps(c, embedder=HashEmbedder(), **kw))
    before = capsys.readouterr()
    assert cli.main(["query", "What torque does the hub bolt B1 take?", "--db", str(db), "--json",
                     "--set", "answer.mode=llm", "--set", "answer_cache.enabled=false"]) == 0
    printed = capsys.readouterr()
    assert "[redacted]" in printed.out  # the CLI printed the scrubbed echo
    for text in (*dumps, *exported, before.out, before.err, printed.out, printed.err):
        assert KEY not in text
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert any(f.name.startswith("wb.duckdb") for f in files)
    for f in files:  # the database, its WAL and the token-vector files beside it
        assert KEY.encode() not in f.read_bytes(), f.name


# -- item 2: usage is validated --------------------------------------------------------------------------------------
def test_implausible_usage_is_booked_at_our_bound_and_flagged(stub: Stub) -> None:
    store = Store(":memory:")
    llm = _llm(stub, ledger=store.ledger)
    req = _req(max_tokens=50)
    for fault in USAGE_FAULTS:
        stub.state.usage_fault = fault
        resp = llm.complete(req)
        u = resp.usage
        assert min(u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens) >= 0, fault
        assert u.output_tokens <= req.max_tokens and u.input_tokens + u.cache_write_tokens + u.cache_read_tokens \
            <= input_token_bound(req), fault
        assert 0 < u.usd <= worst_usd(req) + 1e-12, fault
        assert resp.usage_flag.startswith("provider usage implausible") and resp.usage_flag in resp.cache_note
    rows = store.ledger.usage_ledger()
    assert len(rows) == len(USAGE_FAULTS) and all(r.usage_flag and 0 < r.usd <= worst_usd(req) for r in rows)


def test_honest_usage_is_kept_and_not_flagged(stub: Stub) -> None:
    store = Store(":memory:")
    resp = _llm(stub, ledger=store.ledger).complete(_req())
    assert resp.usage_flag == "" and store.ledger.usage_ledger()[0].usage_flag == ""
    assert resp.usage.input_tokens == sum(-(-len(t.encode()) // 4) for t in ("You are terse.", _req().user[0].text))


def _doc(n: int = 30) -> bytes:
    return ("# Depot manual\n\n" + "".join(f"## Part {i}\n\nThe torque for bolt B{i} is {40 + i} Nm; the crew "
                                          f"logs it before the morning shift and checks lamp L{i}.\n\n"
                                          for i in range(n))).encode()


def test_context_build_budget_holds_in_every_usage_fault(embedder, stub: Stub) -> None:  # noqa: ANN001
    from core.ingest.context import build_llm_contexts
    from core.ingest.pipeline import ingest_files

    store = Store(":memory:")
    ingest_files([("m.md", _doc())], store=store, embedder=embedder, config=PipelineConfig())
    llm = _llm(stub, ledger=store.ledger, max_retries=0)
    budget = 0.006
    for fault in (None, "negative", "huge", "cache", "cache_1h"):  # the other faults: the test above
        stub.state.usage_fault = fault
        run = f"run-{fault}"
        rep = build_llm_contexts(store, llm, model=HAIKU, budget_usd=budget, run_id=run)
        rows = store.ledger.usage_ledger(run_id=run)
        total = sum(e.usd for e in rows)
        assert rep.written > 0 and rep.stopped.startswith("budget"), fault  # it made calls; the budget stopped it
        assert 0 < total <= budget * 1.01 and rep.usd == pytest.approx(total), fault
        assert sum(bool(e.usage_flag) for e in rows) == (0 if fault is None else rep.written), fault
        store.ledger.delete_contexts("llm")  # the next build has the same work to do


def test_batch_build_budget_holds_under_huge_usage(embedder, stub: Stub) -> None:  # noqa: ANN001
    from core.ingest.context import build_llm_contexts_batch
    from core.ingest.pipeline import ingest_files

    store = Store(":memory:")
    ingest_files([("m.md", _doc())], store=store, embedder=embedder, config=PipelineConfig())
    stub.state.usage_fault = "huge"
    budget = 0.004
    rep = build_llm_contexts_batch(store, _llm(stub, ledger=store.ledger), model=HAIKU, budget_usd=budget, poll_s=1,
                                   max_wait_s=5, sleep=lambda s: None)
    rows = store.ledger.usage_ledger()
    assert rep.written > 0 and rows and all(e.usage_flag and e.batch for e in rows)
    assert 0 < sum(e.usd for e in rows) <= budget * 1.01


def test_call_limits_stop_calls_at_the_dollars_left(stub: Stub) -> None:
    store = Store(":memory:")
    llm = _llm(stub, ledger=store.ledger)
    req = _req("x " * 400, max_tokens=100)
    budget = 5 * worst_usd(req)
    for fault in ("negative", "huge", "zero", "cache", "cache_1h"):
        stub.state.usage_fault = fault
        calls = 0
        with call_limits(usd=budget), pytest.raises(LLMError) as info:
            for _ in range(100):
                llm.complete(req, run_id=fault)
                calls += 1
        assert info.value.kind == "budget" and calls >= 5, fault
        assert 0 < sum(e.usd for e in store.ledger.usage_ledger(run_id=fault)) <= budget * 1.01, fault


def test_agent_spend_holds_under_bad_usage(stub: Stub) -> None:
    from core.route.agent import Budget, LLMGrader, LLMWriter, run_agent
    from core.types import Candidate, StageResult, Trace

    store = Store(":memory:")
    llm = _llm(stub, ledger=store.ledger)

    def search(q: str) -> Trace:
        cands = tuple(Candidate(f"c{i}", f"d{i}", f"Alice Brown met person {i} in Paris ({q}).", 1.0 / (i + 1), i + 1)
                      for i in range(5))
        return Trace(q, "h", 1, (StageResult("fused", cands, 1.0),))

    budget = Budget(max_rounds=6, max_llm_calls=100, max_tokens=10**9, max_usd=0.004, max_seconds=60)
    for fault in ("negative", "huge", "cache"):
        stub.state.usage_fault = fault
        before = sum(e.usd for e in store.ledger.usage_ledger())
        out = run_agent("Who did Alice Brown meet in Paris?", search, budget=budget, grader=LLMGrader(llm, HAIKU),
                        writer=LLMWriter(llm, HAIKU), workspace="default")
        booked = sum(e.usd for e in store.ledger.usage_ledger()) - before
        assert 0 < booked <= budget.max_usd * 1.01, fault
        assert 0 <= out.spent["usd"] <= budget.max_usd * 1.01, fault


# -- item 3: a total deadline per request ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["trickle", "trickle_body"])
def test_a_trickling_server_is_cut_at_the_total_timeout(stub: Stub, kind: str) -> None:
    llm = _llm(stub, timeout_s=1.0, max_retries=0)
    stub.state.faults.append((kind, 0.2))
    t0 = time.monotonic()
    with pytest.raises(LLMError) as info:
        llm.complete(_req())
    took = time.monotonic() - t0
    assert info.value.kind == "timeout" and took < 2.5, took  # one byte per 0.2 s never resets the clock


def test_retries_do_not_start_past_the_callers_deadline(stub: Stub) -> None:
    llm = _llm(stub, timeout_s=1.0, max_retries=4)
    stub.state.faults.extend([("trickle_body", 0.2)] * 5)
    t0 = time.monotonic()
    with call_limits(deadline=time.monotonic() + 1.5), pytest.raises(LLMError) as info:
        llm.complete(_req())
    took = time.monotonic() - t0
    assert info.value.kind in ("deadline", "timeout") and took < 2.0, took  # not 5 attempts x 1 s
    assert llm.retries <= 1


def test_after_a_timeout_the_next_call_works(stub: Stub) -> None:
    llm = _llm(stub, timeout_s=1.0, max_retries=1)
    stub.state.faults.append(("trickle", 0.2))
    assert llm.complete(_req()).text and llm.retries == 1


def test_an_old_ledger_gains_the_flag_column(tmp_path: Path) -> None:
    import duckdb

    from core.store import SCHEMA_VERSION

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("""CREATE TABLE usage_ledger (workspace_id VARCHAR, call_id VARCHAR, purpose VARCHAR, model VARCHAR,
        input_tokens BIGINT, output_tokens BIGINT, cache_write_tokens BIGINT, cache_read_tokens BIGINT, usd DOUBLE,
        usd_uncached DOUBLE, latency_ms DOUBLE, ref_id VARCHAR, run_id VARCHAR, batch BOOLEAN, cache_ttl VARCHAR,
        note VARCHAR, created_at TIMESTAMP, PRIMARY KEY (workspace_id, call_id))""")
    con.execute("INSERT INTO usage_ledger VALUES ('default', 'c1', 'answer', 'm', 1, 2, 0, 0, 0.5, 0.5, 1.0, '', "
                "'', false, '5m', '', now())")
    con.close()
    with pytest.raises(Exception, match="open it once read-write"):
        Store.open(path, read_only=True)
    s = Store.open(path)
    assert s.schema_version() == SCHEMA_VERSION
    (old,) = s.ledger.usage_ledger()
    assert old.usd == 0.5 and old.usage_flag == "" and old.provider == ""  # v3: the provider column, empty
    s.close()


# -- issue #46 items 2 and 10: reply caps and a retry-after beyond what the caller waits -----------------------------
def test_a_reply_longer_than_max_tokens_allows_is_cut_and_flagged(stub: Stub) -> None:
    from core.models.llm import reply_char_cap

    stub.state.responder = lambda body: "x" * 100_000
    stub.state.ignore_max_tokens = True
    req = _req(max_tokens=150)
    resp = _llm(stub).complete(req)
    assert len(resp.text) == reply_char_cap(req) == 150 * 32
    assert "reply cut at 4,800 characters" in resp.cache_note and "100,000" in resp.cache_note


def test_a_huge_reply_body_is_not_read_past_its_cap_nor_retried(stub: Stub) -> None:
    from core.models.llm import reply_byte_cap

    stub.state.responder = lambda body: "y" * 3_000_000
    stub.state.ignore_max_tokens = True
    req = _req(max_tokens=10)
    with pytest.raises(LLMError, match="ran over") as err:
        _llm(stub).complete(req)
    assert err.value.kind == "oversized" and reply_byte_cap(req) < 3_000_000
    assert len(stub.state.messages()) == 1  # asked once: a retry would pay for the same flood again


def test_a_retry_after_beyond_what_the_caller_waits_falls_back_at_once(stub: Stub) -> None:
    sleeps: list[float] = []
    stub.state.faults.append(("retry_after", 3600))
    llm = _llm(stub, sleep=sleeps.append)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="retry after 3600") as err:
        llm.complete(_req())
    assert err.value.kind == "rate_limit" and sleeps == [] and time.monotonic() - t0 < 5
    # within a caller's deadline: a retry-after past it fails at once too
    stub.state.faults.append(("retry_after", 20))
    with call_limits(deadline=time.monotonic() + 10):
        with pytest.raises(LLMError, match="retry after 20"):
            llm.complete(_req())
    assert sleeps == []
    stub.state.faults.append(("retry_after", 1))  # a short one is waited out as before
    assert llm.complete(_req()).text and sleeps == [1.0]
