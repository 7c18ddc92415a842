"""Hostile endpoints (issue #12): malformed 200 bodies, an error body that echoes the request headers (the key),
typed errors with redacted messages, fallback to the extractive answer, and the provider's token counter."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import PipelineConfig
from core.deps import build_deps
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM, LLMError, LLMRequest, TextBlock
from core.pipeline import run_query
from core.text import redact, register_secret
from tests.anthropic_stub import Stub, anthropic_stub, stub_tokens  # noqa: F401 - fixture
from tests.fakes import HashEmbedder

HAIKU = "claude-haiku-4-5"


def _req(text: str = "hello there") -> LLMRequest:
    return LLMRequest(HAIKU, (TextBlock("You are terse."),), (TextBlock(text),), max_tokens=20, purpose="answer")


def _llm(stub: Stub) -> AnthropicLLM:
    return AnthropicLLM(stub.key, base_url=stub.base_url, max_retries=3, sleep=lambda s: None, timeout_s=5)


@pytest.mark.parametrize("body", ["truncated", "no_content", "html"])
def test_malformed_200_is_one_typed_error_after_one_retry(anthropic_stub: Stub, body: str) -> None:
    llm = _llm(anthropic_stub)
    anthropic_stub.state.faults.extend([("malformed", body)] * 2)
    with pytest.raises(LLMError) as info:
        llm.complete(_req())
    assert info.value.kind == "malformed" and "200" in str(info.value)
    assert llm.retries == 1  # retried once, not max_retries times: the call may have been billed


def test_one_malformed_body_then_a_good_one_succeeds(anthropic_stub: Stub) -> None:
    llm = _llm(anthropic_stub)
    anthropic_stub.state.faults.append(("malformed", "html"))
    resp = llm.complete(_req())
    assert resp.text and llm.retries == 1


def test_echoed_key_is_redacted_from_the_error(anthropic_stub: Stub) -> None:
    llm = _llm(anthropic_stub)
    anthropic_stub.state.faults.extend([("echo", 500)] * 4)
    with pytest.raises(LLMError) as info:
        llm.complete(_req())
    text = str(info.value)
    assert info.value.kind == "server" and "upstream failed" in text  # the gateway's message is still shown
    assert anthropic_stub.key not in text and "sk-ant-" not in text
    anthropic_stub.state.faults.append(("echo", 400))
    with pytest.raises(LLMError) as info:
        llm.complete(_req())
    assert info.value.kind == "bad_request" and anthropic_stub.key not in str(info.value)


def test_redact_hides_registered_and_key_shaped_secrets() -> None:
    register_secret("my-private-proxy-token-123")
    out = redact("a my-private-proxy-token-123 b sk-ant-api03-AbC_d-9 c sk-ant-x")
    assert out == "a [redacted] b [redacted] c sk-ant-x"


def test_count_tokens_uses_the_provider_counter(anthropic_stub: Stub) -> None:
    llm = _llm(anthropic_stub)
    assert llm.count_tokens(_req("Привет, мир")) == stub_tokens("You are terse.") + stub_tokens("Привет, мир")


def test_llm_answer_falls_back_and_the_key_reaches_nothing(tmp_path: Path, anthropic_stub: Stub,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An echoing gateway on every attempt: the query still answers (extractively, saying why), and the key is in
    neither the exception text, the trace notes, `query --json`, the database file nor the ledger."""
    import core.cli as cli
    from core.deps import build_deps as real_build_deps

    db = tmp_path / "wb.duckdb"
    env = {"ANTHROPIC_API_KEY": anthropic_stub.key, "ANTHROPIC_BASE_URL": anthropic_stub.base_url}
    cfg = PipelineConfig().with_overrides({"answer.mode": "llm"})
    deps = build_deps(cfg, env, db=str(db), embedder=HashEmbedder())
    ingest_files([("a.md", b"# Torque\n\nThe torque value for the hub bolt is 45 Nm.\n")], store=deps.store,
                 embedder=deps.embedder, config=cfg)
    anthropic_stub.state.faults.extend([("echo", 500)] * 10)
    trace = run_query("torque value", cfg, deps)
    assert trace.answer is not None and trace.answer.mode == "extractive"
    notes = " ".join(n for s in trace.stages for n in s.notes)
    assert "Claude answer failed" in notes and "upstream failed" in notes
    assert anthropic_stub.key not in json.dumps(trace.to_dict())
    deps.store.close()

    monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_stub.key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_stub.base_url)
    monkeypatch.setattr(cli, "build_deps", lambda c, **kw: real_build_deps(c, embedder=HashEmbedder(), **kw))
    anthropic_stub.state.faults.clear()
    anthropic_stub.state.faults.extend([("echo", 500)] * 10)
    assert cli.main(["query", "torque value", "--db", str(db), "--json", "--set", "answer.mode=llm",
                     "--set", "answer_cache.enabled=false"]) == 0
    captured = capsys.readouterr()
    assert "upstream failed" in captured.out and anthropic_stub.key not in captured.out + captured.err
    for f in (p for p in tmp_path.rglob("*") if p.is_file()):  # the database, its WAL and index files
        assert anthropic_stub.key.encode() not in f.read_bytes()


# -- budgets -------------------------------------------------------------------------------------------------------
def _russian_doc() -> bytes:
    para = ("Депо Линдквиста планирует ночное обслуживание: бригада проверяет колёсные пары, записывает момент "
            "затяжки и передаёт журнал утренней смене. ")
    return ("# Регламент депо\n\n" + "\n\n".join(f"## Раздел {i}\n\n" + para * 3 for i in range(20))).encode()


def _ru_store(store, embedder):  # noqa: ANN001, ANN202 - fixtures from conftest
    rep = ingest_files([("ru.md", _russian_doc())], store=store, embedder=embedder, config=PipelineConfig())
    assert not rep.errors and len(_russian_doc().decode()) > 5_000
    return store


def _ledger_usd(store) -> float:  # noqa: ANN001
    return sum(e.usd for e in store.ledger.usage_ledger())


@pytest.mark.parametrize("counter_fails", [False, True])
def test_russian_budget_is_never_overshot(store, embedder, anthropic_stub: Stub, counter_fails: bool) -> None:  # noqa: ANN001
    """The case of issue #12: ~4 characters per token undercounted Cyrillic and $0.009 spent $0.0119. With the
    provider's counter (or, when it fails, the per-script upper bound) the run stops within the budget."""
    from core.ingest.context import build_llm_contexts

    _ru_store(store, embedder)
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, ledger=store.ledger,
                       sleep=lambda s: None, max_retries=0)
    if counter_fails:
        anthropic_stub.state.count_faults.extend([("status", 500)] * 100)
    rep = build_llm_contexts(store, llm, model=HAIKU, budget_usd=0.009)
    assert (rep.written > 0 or counter_fails) and rep.stopped.startswith("budget")  # the bound may refuse call 1
    assert rep.usd <= 0.009 and _ledger_usd(store) <= 0.009
    assert "of $0.0090" in rep.stopped  # enough digits to read the budget
    assert any("upper bound" in w for w in rep.warnings) == counter_fails


def test_workspace_budget_caps_several_runs(store, embedder, anthropic_stub: Stub) -> None:  # noqa: ANN001
    """Three runs at 0.05 / 0.02 / 0.03 used to add up with nothing watching the sum; a workspace budget of 0.008
    caps their total (the ledger is the running total)."""
    from core.ingest.context import build_llm_contexts

    _ru_store(store, embedder)
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, ledger=store.ledger,
                       sleep=lambda s: None, max_retries=0)
    reps = [build_llm_contexts(store, llm, model=HAIKU, budget_usd=b, workspace_budget_usd=0.008)
            for b in (0.05, 0.02, 0.03)]
    assert 0 < _ledger_usd(store) <= 0.008
    assert reps[0].written > 0 and all(r.stopped.startswith("workspace budget") for r in reps)
    assert "of $0.0080 for workspace 'default'" in reps[-1].stopped and reps[-1].written == 0


def test_fmt_usd_shows_enough_digits() -> None:
    from core.models.pricing import fmt_usd

    assert [fmt_usd(x) for x in (0.003, 0.0018, 0.00012, 0.0, 2.5)] == ["$0.0030", "$0.0018", "$0.00012", "$0",
                                                                         "$2.50"]


def test_budget_between_the_old_estimate_and_the_real_cost_is_kept(store, embedder, anthropic_stub: Stub) -> None:  # noqa: ANN001
    """A budget 1.3x the first call's bound under the old ~4-characters-per-token estimate: the real call costs
    about twice that for Cyrillic, so the old guard made the call and overshot; the counted bound refuses it."""
    from core.ingest.context import CONTEXT_INSTRUCTIONS, build_llm_contexts
    from core.models.pricing import worst_call_usd

    _ru_store(store, embedder)
    text = _russian_doc().decode()
    old_bound = worst_call_usd(HAIKU, (len(CONTEXT_INSTRUCTIONS) + len(text)) // 4, 60, 150)
    budget = 1.3 * old_bound
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, ledger=store.ledger,
                       sleep=lambda s: None, max_retries=0)
    rep = build_llm_contexts(store, llm, model=HAIKU, budget_usd=budget)
    assert rep.usd <= budget and _ledger_usd(store) <= budget and rep.stopped.startswith("budget")
