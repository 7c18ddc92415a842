"""CAG: prefix bytes stable across 100 queries and a restart, cache reads from the second query on (loopback stub),
the cost estimate and break-even by hand, refusal -> fallback note, and the offline route."""
from __future__ import annotations

import hashlib

import pytest

from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM, LLMError, OfflineLLM
from core.route.cag import (
    NOT_IN_CORPUS,
    answer,
    build_prefix,
    corpus_prefix,
    estimate,
    load_documents,
)
from core.store import Store
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture
from tests.fakes import HashEmbedder

MODEL = "claude-sonnet-4-6"  # the stub caches prefixes of >= 2,048 tokens for it


def _files() -> list[tuple[str, bytes]]:
    out = []
    for i in range(12):
        body = " ".join(f"Unit {i} of plant {j} runs pump P-{i}{j:02d} at {10 + j} bar." for j in range(14))
        out.append((f"plant-{i:02d}.md", f"# Plant {i}\n\n{body}\n".encode()))
    return out


def _ingest(path: str, files: list[tuple[str, bytes]]) -> Store:
    store = Store(path)
    ingest_files(files, store=store, embedder=HashEmbedder(), config=PipelineConfig())
    return store


def _system_sha(body: dict) -> str:
    return hashlib.sha256(repr(body["system"]).encode()).hexdigest()


def test_prefix_is_stable_and_cache_reads_dominate(anthropic_stub: Stub, tmp_path) -> None:  # noqa: ANN001, F811
    db = str(tmp_path / "cag.duckdb")
    store = _ingest(db, _files())
    prefix, tokens = corpus_prefix(store.corpus)
    assert tokens > 2048  # cacheable for the model
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url)
    shares = []
    for i in range(100):
        res = answer(f"Which pump runs at {10 + i % 14} bar in plant {i % 12}?", prefix, llm, model=MODEL)
        shares.append(res.cache_read_share)
    bodies = anthropic_stub.state.messages()
    assert len(bodies) == 100 and len({_system_sha(b) for b in bodies}) == 1  # identical prefix bytes
    assert shares[0] == 0.0 and min(shares[1:]) >= 0.9  # the first call writes, every later one reads
    store.close()

    # "Restart": a new process would open the file again and build a new client; the documents come back in
    # a different order from a fresh ingest of the same files too. The prefix bytes do not change.
    again = Store(db)
    prefix2, _ = corpus_prefix(again.corpus)
    assert prefix2 == prefix
    other = _ingest(str(tmp_path / "other.duckdb"), list(reversed(_files())))
    assert corpus_prefix(other.corpus)[0] == prefix
    llm2 = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url)
    res = answer("Which pump runs at 12 bar in plant 3?", prefix2, llm2, model=MODEL)
    assert res.cache_read_share >= 0.9 and _system_sha(anthropic_stub.state.messages()[-1]) == _system_sha(bodies[0])
    # nothing that varies per call sits in the prefix
    assert "run" not in prefix.split("</document>")[-1] and "2026" not in prefix


def test_documents_sorted_by_name_then_hash() -> None:
    from core.route.cag import CagDocument

    p = build_prefix([CagDocument("b.md", "2", "B"), CagDocument("a.md", "9", "A2"), CagDocument("a.md", "1", "A1")])
    assert p.index("A1") < p.index("A2") < p.index("B")


def test_refusal_says_fall_back(anthropic_stub: Stub) -> None:  # noqa: F811
    anthropic_stub.state.responder = lambda body: NOT_IN_CORPUS
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url)
    res = answer("What is the capital of Peru?", build_prefix([]), llm, model=MODEL)
    assert res.refused and "fall back to retrieval" in res.note


def test_estimate_by_hand() -> None:
    # sonnet-4-6: $3/M input, $15/M output, cache write 1.25x, read 0.1x (core/models/data/prices.toml)
    e = estimate(10_000, model=MODEL, limit_tokens=150_000, question_tokens=20, output_tokens=100,
                 rag_context_tokens=2_000, llm_available=True)
    assert e.first_query_usd == pytest.approx(20 * 3e-6 + 10_000 * 3.75e-6 + 100 * 15e-6)  # 0.03906
    assert e.next_query_usd == pytest.approx(20 * 3e-6 + 10_000 * 0.3e-6 + 100 * 15e-6)  # 0.00456
    assert e.rag_query_usd == pytest.approx(2_020 * 3e-6 + 100 * 15e-6)  # 0.00756
    assert e.break_even_queries == 12  # ceil((0.03906 - 0.00456) / (0.00756 - 0.00456)) = ceil(11.5)
    assert e.available and e.fits and e.note == ""
    big = estimate(200_000, model=MODEL, limit_tokens=150_000, question_tokens=20, output_tokens=100,
                   rag_context_tokens=2_000, llm_available=True)
    assert not big.fits and not big.available and "over the CAG limit" in big.note


def test_offline_route_unavailable_but_estimate_shows(tmp_path) -> None:  # noqa: ANN001
    store = _ingest(str(tmp_path / "o.duckdb"), _files()[:3])
    prefix, tokens = corpus_prefix(store.corpus)
    llm = OfflineLLM()
    e = estimate(tokens, model=MODEL, limit_tokens=150_000, question_tokens=10, output_tokens=100,
                 rag_context_tokens=1_500, llm_available=llm.available, llm_reason=llm.reason)
    assert not e.available and "unavailable" in e.note and e.first_query_usd > 0
    with pytest.raises(LLMError, match="CAG needs Claude"):
        answer("q", prefix, llm, model=MODEL)
    assert len(load_documents(store.corpus)) == 3



def test_workspace_estimate_reads_the_store(tmp_path) -> None:  # noqa: ANN001
    from core.route.cag import prefix_sha, workspace_estimate

    store = _ingest(str(tmp_path / "w.duckdb"), _files()[:4])
    prefix, tokens = corpus_prefix(store.corpus)
    chunks = store.corpus.chunks()
    est, sha = workspace_estimate(store.corpus, "default", model=MODEL, limit_tokens=150_000, max_chunks=8,
                                  output_tokens=100, llm=OfflineLLM())
    assert sha == prefix_sha(prefix) and est.corpus_tokens == tokens and not est.available
    avg = sum(c.n_tokens for c in chunks) / len(chunks)
    assert est.rag_query_usd == pytest.approx((int(avg * 8) + 20) * 3e-6 + 100 * 15e-6, abs=1e-6)


# -- the cag route through run_query ---------------------------------------------------------------------------------
def _deps(tmp_path, llm, n: int = 4):  # noqa: ANN001, ANN202
    from core.deps import Deps

    return Deps(store=_ingest(str(tmp_path / "r.duckdb"), _files()[:n]), embedder=HashEmbedder(), llm=llm)


def _is_cag(body: dict) -> bool:
    return '<document name="' in repr(body.get("system"))


CAG_ON = {"cag.enabled": True, "cag.model": MODEL, "router.method": "offline", "answer.mode": "extractive"}


def test_cag_route_answers_from_the_whole_corpus_without_retrieval(anthropic_stub: Stub, tmp_path) -> None:  # noqa: ANN001, F811
    from core.pipeline import run_query

    anthropic_stub.state.responder = lambda body: "Pump P-102 runs at 12 bar [plant-01.md]."
    deps = _deps(tmp_path, AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url))
    trace = run_query("Which pump runs at 12 bar in plant 1?", PipelineConfig().with_overrides(CAG_ON), deps)
    assert trace.route()["config"] == "cag" and trace.route()["class"] in ("factoid", "abstain")
    cag = trace.stage("cag")
    assert cag is not None and cag.skipped is None and cag.usage.calls == 1
    assert cag.info["prefix_sha256"] == hashlib.sha256(corpus_prefix(deps.store.corpus)[0].encode()).hexdigest()
    assert all(trace.stage(s).skipped for s in ("bm25", "dense", "fused"))
    assert trace.answer.text.startswith("Pump P-102") and trace.answer.mode == "cag"
    assert trace.answer.citations == ("plant-01.md",)
    route = trace.stage("route").info
    assert route["cag"]["available"] and route["cag"]["corpus_tokens"] > 0  # the estimate is in the trace
    sent = anthropic_stub.state.messages()
    assert len(sent) == 1 and _is_cag(sent[0])  # one call: the offline router, then CAG


def test_cag_refusal_falls_back_to_retrieval_and_says_so(anthropic_stub: Stub, tmp_path) -> None:  # noqa: ANN001, F811
    from core.pipeline import run_query

    anthropic_stub.state.responder = lambda body: NOT_IN_CORPUS
    deps = _deps(tmp_path, AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url))
    trace = run_query("Which pump runs at 12 bar in plant 1?", PipelineConfig().with_overrides(CAG_ON), deps)
    cag = trace.stage("cag")
    assert cag.info["refused"] and cag.info["fell_back"]
    assert any("answered by retrieval instead" in n for n in trace.notes)
    assert trace.stage("bm25").skipped is None and trace.final() is not None  # retrieval ran after all
    assert trace.answer is not None and trace.answer.mode != "cag"
    # with the fallback off, the refusal is the answer
    off = run_query("Which pump runs at 12 bar in plant 2?",
                    PipelineConfig().with_overrides({**CAG_ON, "cag.fallback_to_rag": False}), deps, log=False)
    assert off.answer.refused and off.answer.mode == "cag" and off.stage("bm25").skipped


def test_cag_offline_is_unavailable_with_a_note_and_the_estimate(tmp_path) -> None:  # noqa: ANN001
    from core.pipeline import run_query

    deps = _deps(tmp_path, OfflineLLM())
    for over in ({"cag.enabled": True}, {"router.override": "cag"}):
        trace = run_query("Which pump runs at 12 bar in plant 1?",
                          PipelineConfig().with_overrides({**over, "cag.model": MODEL}), deps, log=False)
        route = trace.stage("route")
        assert route.info["config"] != "cag" and "CAG needs Claude" in trace.stage("cag").skipped
        assert any("unavailable" in n and "CAG needs Claude" in n for n in route.notes)
        assert route.info["cag"]["first_query_usd"] > 0 and not route.info["cag"]["available"]
        assert trace.stage("bm25").skipped is None
    # not asked for: no estimate is made (it reads the whole corpus)
    plain = run_query("Which pump runs at 12 bar in plant 1?", PipelineConfig(), deps, log=False)
    assert "cag" not in plain.stage("route").info


def test_cag_over_the_token_limit_keeps_retrieval(anthropic_stub: Stub, tmp_path) -> None:  # noqa: ANN001, F811
    from core.pipeline import run_query

    deps = _deps(tmp_path, AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url), n=12)
    assert corpus_prefix(deps.store.corpus)[1] > 2000
    trace = run_query("Which pump runs at 12 bar in plant 1?",
                      PipelineConfig().with_overrides({**CAG_ON, "cag.max_corpus_tokens": 1000}), deps, log=False)
    assert "over the CAG limit" in trace.stage("cag").skipped and any("over the CAG limit" in n
                                                                      for n in trace.stage("route").notes)
    assert not any(_is_cag(b) for b in anthropic_stub.state.messages())
