"""Contexts beside the chunk: heuristic, late chunking, LLM with prompt caching, budget stop + resume, batches, and
the key never reaching the database or a trace."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from core.config import PipelineConfig
from core.deps import Deps, build_deps
from core.ingest.context import (
    BuildRequest,
    ContextError,
    build_heuristic,
    build_late,
    build_llm_contexts,
    build_llm_contexts_batch,
    chunk_spans,
    context_request,
    coverage,
    embed_variant,
    estimate_llm_contexts,
    heuristic_context,
    late_chunk_vectors,
    lead_sentence,
    run_build,
)
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM, OfflineLLM
from core.models.tokens import token_windows
from core.pipeline import run_query
from core.retrieve.bm25 import BM25Params
from core.store import Store
from core.types import Chunk
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture
from tests.cascade_fakes import ConceptEmbedder
from tests.fakes import HashEmbedder

HAIKU = "claude-haiku-4-5"


def _long_markdown(title: str, n_sections: int = 6) -> str:
    parts = [f"# {title}\n\nThis handbook describes how the Lindqvist rail depot schedules its overnight maintenance.\n"]
    for s in range(n_sections):
        parts.append(f"\n## Section {s} Brakes and bogies\n\n")
        for p in range(6):
            parts.append(" ".join(f"Depot crew {s}-{p} inspects wheelset w{s}{p}{k} and logs torque value "
                                  f"t{s}{p}{k} before the morning shift." for k in range(6)) + "\n\n")
    return "".join(parts)


@pytest.fixture
def corpus(store: Store, embedder: HashEmbedder, config: PipelineConfig) -> Store:
    files = [("depot_handbook.md", _long_markdown("Depot Handbook").encode()),
             ("short_note.md", b"# Short Note\n\n## Parking\n\nThe visitor car park closes at 22:00 on weekdays.\n")]
    report = ingest_files(files, store=store, embedder=embedder, config=config)
    assert not report.errors
    return store


def _stub_llm(stub: Stub, store: Store, **kw) -> AnthropicLLM:
    return AnthropicLLM(stub.key, base_url=stub.base_url, ledger=store.ledger, sleep=lambda s: None, **kw)


def _doc_chunks(store: Store, name: str) -> list[Chunk]:
    doc = store.corpus.find_document_by_name(name)
    return store.corpus.chunks(doc_id=doc.doc_id)


# -- heuristic ---------------------------------------------------------------------------------------------------
def test_heuristic_context_has_title_heading_path_and_lead(corpus: Store) -> None:
    # Ingest wrote them (build time); a build afterwards finds nothing left, and rebuilds after a delete.
    assert corpus.ledger.context_models("heuristic") == {"heuristic": corpus.corpus.count("chunks")}
    n = corpus.ledger.delete_contexts("heuristic")
    rep = build_heuristic(corpus)
    assert rep.written == corpus.corpus.count("chunks") == n
    chunks = _doc_chunks(corpus, "depot_handbook.md")
    ctx = corpus.ledger.contexts("heuristic")
    later = next(c for c in chunks if c.heading_path and "Section 3" in c.heading_path[-1])
    text = ctx[later.chunk_id]
    assert "Depot Handbook" in text and "Section 3 Brakes and bogies" in text
    assert "overnight maintenance" in text  # the document's lead sentence
    assert corpus.ledger.context_models("heuristic") == {"heuristic": corpus.corpus.count("chunks")}
    assert build_heuristic(corpus).written == 0  # idempotent: nothing left to write


def test_heuristic_helpers() -> None:
    assert lead_sentence("# Title\n\nShort.\n\nThe plant ships valves to twelve countries. More text.", "Title") \
        == "The plant ships valves to twelve countries."
    assert heuristic_context("T", "t.md", ("A", "B"), "Lead.") == "Document: T (t.md). Section: A > B. The document opens: Lead."


def test_contextual_bm25_index_switches_without_reindexing_raw(corpus: Store, embedder: HashEmbedder) -> None:
    deps = Deps(store=corpus, embedder=embedder)
    raw = deps.indexes.bm25(corpus, "default", BM25Params())
    # "handbook" occurs in the raw text of chunk 0 only; every heuristic context names the document title.
    assert len(raw.search("handbook", 100)) <= 2
    ctx_index = deps.indexes.bm25(corpus, "default", BM25Params(), variant="heuristic")
    n_handbook = len(_doc_chunks(corpus, "depot_handbook.md"))
    assert len(ctx_index.search("handbook", 100)) == n_handbook
    assert deps.indexes.bm25(corpus, "default", BM25Params()) is raw  # the raw index was not rebuilt
    assert deps.indexes.bm25(corpus, "default", BM25Params(), variant="heuristic") is ctx_index
    assert embed_variant(corpus, embedder, "heuristic") == corpus.corpus.count("chunks")
    dense = deps.indexes.dense(corpus, embedder, "default", variant="heuristic")
    assert len(dense) == corpus.corpus.count("chunks")


def test_pipeline_toggles_variant_and_notes_missing_llm_contexts(corpus: Store, embedder: HashEmbedder) -> None:
    deps = Deps(store=corpus, embedder=embedder)
    cfg = PipelineConfig().with_overrides({"context.variant": "heuristic"})
    t = run_query("depot handbook wheelset", cfg, deps)
    assert not any("heuristic" in n for n in t.notes)  # written at ingest: complete, nothing to say
    n_chunks = corpus.corpus.count("chunks")
    corpus.ledger.delete_contexts("heuristic")  # a corpus stored before ingest wrote them
    t1 = run_query("depot handbook wheelset", cfg, deps)
    assert any(f"no heuristic contexts exist yet" in n for n in t1.notes)
    assert corpus.ledger.context_models("heuristic") == {}  # the query wrote none
    build_heuristic(corpus, doc_ids=[_doc_chunks(corpus, "short_note.md")[0].doc_id])
    t1b = run_query("depot handbook wheelset", cfg, deps)
    short = len(_doc_chunks(corpus, "short_note.md"))
    assert any(f"heuristic contexts cover {short} of {n_chunks} chunks" in n for n in t1b.notes)
    t2 = run_query("depot handbook wheelset", cfg.with_overrides({"context.variant": "llm"}), deps)
    assert any("no LLM contexts exist yet" in n for n in t2.notes)


# -- LLM contexts through the stub ------------------------------------------------------------------------------
def test_prefix_bytes_identical_for_every_chunk_of_a_document(corpus: Store, anthropic_stub: Stub) -> None:
    llm = _stub_llm(anthropic_stub, corpus)
    rep = build_llm_contexts(corpus, llm, model=HAIKU, budget_usd=5.0)
    assert rep.remaining == 0 and not rep.stopped
    bodies = anthropic_stub.state.messages()
    handbook = [b for b in bodies if "Depot Handbook" in b["system"][1]["text"]]
    assert len(handbook) == len(_doc_chunks(corpus, "depot_handbook.md")) > 10
    prefixes = {json.dumps([b["model"], b["system"]], sort_keys=True) for b in handbook}
    assert len(prefixes) == 1  # nothing volatile before the breakpoint
    assert handbook[0]["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert len({json.dumps(b["messages"]) for b in handbook}) == len(handbook)  # only the chunk varies
    # rebuilding a request later gives the same bytes (no clock, no counter in it)
    c = _doc_chunks(corpus, "depot_handbook.md")[0]
    text = corpus.corpus.document_text(c.doc_id)
    first = json.dumps(context_request(text, c, model=HAIKU).params())
    time.sleep(0.01)
    assert json.dumps(context_request(text, c, model=HAIKU).params()) == first
    # the ledger: one write, then reads for the long document; the short one stays uncached and says why
    rows = [e for e in corpus.ledger.usage_ledger(run_id=rep.run_id) if e.ref_id == c.doc_id]
    assert rows[0].cache_write_tokens > 0 and all(e.cache_read_tokens > 0 for e in rows[1:])
    read = sum(e.cache_read_tokens for e in rows)
    total = sum(e.input_tokens + e.cache_write_tokens + e.cache_read_tokens for e in rows)
    assert read / total > 0.85
    assert rep.usd == pytest.approx(sum(e.usd for e in corpus.ledger.usage_ledger(run_id=rep.run_id)))


def test_short_document_warns_about_the_minimum_prefix(corpus: Store, anthropic_stub: Stub) -> None:
    est, warnings = estimate_llm_contexts(corpus, model=HAIKU)
    # the short note has a single chunk: one call, nothing to reuse, no warning; add a second short doc
    assert est.calls == corpus.corpus.count("chunks")
    assert est.with_cache_usd < est.without_cache_usd
    small = [d for d in est.docs if not d.cache_forms]
    assert small and all(d.input_with_cache_usd == d.input_without_cache_usd for d in small)
    long_doc = next(d for d in est.docs if d.cache_forms)
    assert long_doc.prefix_tokens >= 4096


def test_budget_stops_cleanly_and_resume_never_pays_twice(corpus: Store, anthropic_stub: Stub) -> None:
    llm = _stub_llm(anthropic_stub, corpus)
    total = corpus.corpus.count("chunks")
    first = build_llm_contexts(corpus, llm, model=HAIKU, budget_usd=0.02)
    assert first.stopped.startswith("budget") and 0 < first.written < total
    assert sum(e.usd for e in corpus.ledger.usage_ledger(run_id=first.run_id)) <= 0.02
    assert len(corpus.ledger.contexts("llm")) == first.written  # everything paid for is kept
    second = build_llm_contexts(corpus, llm, model=HAIKU, budget_usd=5.0)
    assert second.existing == first.written and second.written == total - first.written
    assert second.remaining == 0 and len(corpus.ledger.contexts("llm")) == total
    excerpts = [b["messages"][0]["content"][0]["text"] for b in anthropic_stub.state.messages()]
    assert len(excerpts) == total == len(set(excerpts))  # each chunk was paid for exactly once
    third = build_llm_contexts(corpus, llm, model=HAIKU, budget_usd=5.0)
    assert third.written == 0 and len(anthropic_stub.state.messages()) == total


def test_llm_error_stops_and_keeps_what_was_written(corpus: Store, anthropic_stub: Stub) -> None:
    llm = _stub_llm(anthropic_stub, corpus, max_retries=0)
    ok = build_llm_contexts(corpus, llm, model=HAIKU, budget_usd=0.011)
    anthropic_stub.state.faults.append(("status", 500))
    failed = build_llm_contexts(corpus, llm, model=HAIKU, budget_usd=5.0)
    assert failed.stopped.startswith("error") and failed.written == 0
    assert len(corpus.ledger.contexts("llm")) == ok.written


def test_offline_llm_refuses_llm_contexts(corpus: Store, embedder: HashEmbedder) -> None:
    with pytest.raises(ContextError, match="heuristic"):
        run_build(BuildRequest("llm"), corpus, embedder, OfflineLLM())


def test_batch_mode_polls_resumes_and_never_resubmits(corpus: Store, anthropic_stub: Stub, embedder: HashEmbedder) -> None:
    llm = _stub_llm(anthropic_stub, corpus)
    anthropic_stub.state.batch_polls_to_end = 4
    sleeps: list[float] = []
    first = build_llm_contexts_batch(corpus, llm, model=HAIKU, budget_usd=5.0, poll_s=10, max_wait_s=10,
                                     sleep=sleeps.append)
    assert first.batch_id and "still" in first.stopped and first.written == 0
    assert first.remaining == corpus.corpus.count("chunks")
    second = run_build(BuildRequest("llm", model=HAIKU, use_batches=True,
                                    extra={"poll_s": 10, "max_wait_s": 100, "sleep": sleeps.append}),
                       corpus, embedder, llm)
    submits = [r for r in anthropic_stub.state.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    assert len(submits) == 1  # the open batch was collected, not submitted again
    assert second.written == corpus.corpus.count("chunks") and second.remaining == 0
    assert second.vectors == corpus.corpus.count("chunks")
    rows = corpus.ledger.usage_ledger()
    assert rows and all(e.batch for e in rows)
    assert coverage(corpus, "llm") == (corpus.corpus.count("chunks"),) * 2


def test_batch_respects_budget(corpus: Store, anthropic_stub: Stub) -> None:
    llm = _stub_llm(anthropic_stub, corpus)
    rep = build_llm_contexts_batch(corpus, llm, model=HAIKU, budget_usd=0.01, poll_s=1, max_wait_s=5,
                                   sleep=lambda s: None)
    assert rep.stopped.startswith("budget") and 0 < rep.written < corpus.corpus.count("chunks")
    assert rep.usd <= 0.01


def test_key_never_reaches_the_database_or_a_trace(tmp_path: Path, anthropic_stub: Stub) -> None:
    db = tmp_path / "wb.duckdb"
    env = {"ANTHROPIC_API_KEY": anthropic_stub.key, "ANTHROPIC_BASE_URL": anthropic_stub.base_url}
    cfg = PipelineConfig().with_overrides({"answer.mode": "llm"})
    deps = build_deps(cfg, env, db=str(db), embedder=HashEmbedder())
    ingest_files([("a.md", _long_markdown("Key Test", 2).encode())], store=deps.store, embedder=deps.embedder,
                 config=cfg)
    build_llm_contexts(deps.store, deps.llm, model=HAIKU, budget_usd=1.0)
    anthropic_stub.state.responder = lambda body: json.dumps({"answer": "A torque value.", "citations": [],
                                                              "refused": False})
    trace = run_query("torque value", cfg, deps)
    assert trace.answer is not None and trace.answer.mode == "llm"
    dumped = json.dumps(trace.to_dict())
    deps.store.close()
    key = anthropic_stub.key.encode()
    assert key not in db.read_bytes() and anthropic_stub.key not in dumped
    for extra in (p for p in tmp_path.rglob("*") if p.is_file()):  # index files in folders too
        assert key not in extra.read_bytes()
    assert anthropic_stub.key not in repr(deps)


# -- late chunking ------------------------------------------------------------------------------------------------
class FakeTokenEncoder:
    """Word tokens; a token's vector is its own hashed vector plus the mean of its window: contextual, cheap."""

    def __init__(self, model_id: str = "fake-hash-64", window: int = 24, dim: int = 64) -> None:
        self.model_id, self.window_tokens, self.dim = model_id, window, dim
        self.windows: list[int] = []

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        spans = [(m.start(), m.end()) for m in re.finditer(r"\w+", text)]
        return [sum(map(ord, text[s:e])) * 31 % 9973 for s, e in spans], spans

    def _base(self, tid: int) -> np.ndarray:
        return np.random.default_rng(tid).standard_normal(self.dim).astype(np.float32)

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        out = []
        for w in windows:
            self.windows.append(len(w))
            base = np.stack([self._base(t) for t in w])
            out.append(base + 2.0 * base.mean(axis=0))
        return out


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_token_windows_cover_everything_with_overlap() -> None:
    assert token_windows(10, 24, 12) == [(0, 10)]
    wins = token_windows(100, 24, 12)
    assert wins[0] == (0, 24) and wins[-1][1] == 100
    assert all(b[0] == a[0] + 12 for a, b in zip(wins, wins[1:]))


def test_late_vectors_differ_from_plain_and_keep_chunk_order() -> None:
    text = " ".join(f"w{i} alpha{i % 7} beta{i % 5}" for i in range(120))
    cuts = [0, 100, 260, 420, 600, 800]  # the rest of the text is context only
    spans = [(a, b) for a, b in zip(cuts, cuts[1:])]
    enc = FakeTokenEncoder()
    late = late_chunk_vectors(text, spans, enc)
    assert len(enc.windows) > 1 and max(enc.windows) <= enc.window_tokens  # long document: several windows
    plain = np.stack([late_chunk_vectors(text[a:b], [(0, b - a)], FakeTokenEncoder())[0] for a, b in spans])
    assert late.shape == plain.shape == (5, 64)
    assert np.allclose(np.linalg.norm(late, axis=1), 1.0, atol=1e-5)
    for i in range(len(spans)):
        assert _cos(late[i], plain[i]) < 0.999  # the document around it changed the vector
        assert int(np.argmax([_cos(late[i], p) for p in plain])) == i  # and it is still its own chunk's


def test_chunk_spans_search_when_offsets_are_missing() -> None:
    text = "alpha beta gamma. delta epsilon. zeta"
    chunks = [Chunk("c0", "d", 0, "alpha beta gamma.", 0, 0), Chunk("c1", "d", 1, "delta epsilon.", 0, 0),
              Chunk("c2", "d", 2, "zeta", 33, 37)]
    assert chunk_spans(text, chunks) == [(0, 17), (18, 32), (33, 37)]


def test_build_late_stores_vectors_and_the_dense_index_uses_them(corpus: Store, embedder: HashEmbedder) -> None:
    enc = FakeTokenEncoder(model_id=embedder.model_id)
    rep = build_late(corpus, enc)
    n = corpus.corpus.count("chunks")
    assert rep.written == n and coverage(corpus, "late", model_id=embedder.model_id) == (n, n)
    ids, late = corpus.corpus.vectors(embedder.model_id, "late")
    raw_ids, raw = corpus.corpus.vectors(embedder.model_id, "raw")
    assert ids == raw_ids and not np.allclose(late, raw)
    assert build_late(corpus, enc).written == 0  # resumable: nothing left
    deps = Deps(store=corpus, embedder=embedder)
    trace = run_query("wheelset torque", PipelineConfig().with_overrides({"context.variant": "late"}), deps)
    assert not any("late" in n for n in trace.notes) and trace.stage("dense").candidates


@pytest.mark.slow
def test_late_chunking_with_the_bundled_minilm(store: Store, bundled_embedder) -> None:
    from core.models.tokens import TransformerTokenEncoder

    emb = bundled_embedder
    enc = TransformerTokenEncoder(emb)
    assert enc.window_tokens == emb.max_seq_length - 2
    text = ("Corvane Systems reported its third quarter. " * 3 + "Revenue grew 3% over the previous quarter. ") * 20
    spans = [(i * 200, min(len(text), (i + 1) * 200)) for i in range(len(text) // 200 + 1) if i * 200 < len(text)]
    late = late_chunk_vectors(text, spans, enc)
    plain = emb.encode([text[a:b] for a, b in spans])
    assert late.shape == plain.shape
    assert all(_cos(late[i], plain[i]) < 0.999 for i in range(len(spans)))
    assert all(_cos(late[i], plain[i]) > 0.5 for i in range(len(spans)))  # same vector space as query vectors


# -- CLI ------------------------------------------------------------------------------------------------------------
def test_cli_context_estimate_budget_resume_and_query_answer(tmp_path: Path, anthropic_stub: Stub,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import core.cli as cli
    from core.deps import build_deps as real_build_deps

    db = str(tmp_path / "cli.duckdb")
    s = Store(db)
    ingest_files([("depot_handbook.md", _long_markdown("Depot Handbook").encode())], store=s,
                 embedder=HashEmbedder(), config=PipelineConfig())
    s.close()
    monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_stub.key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_stub.base_url)
    monkeypatch.setattr(cli, "build_deps", lambda cfg, **kw: real_build_deps(cfg, embedder=HashEmbedder(), **kw))

    assert cli.main(["context", "--variant", "llm", "--db", db, "--estimate-only", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)["estimate"]
    assert est["with_cache_usd"] < est["without_cache_usd"] and "estimated" in est["tokens"]
    # above the confirmation threshold, not a terminal, no --yes: refuse to spend
    assert cli.main(["context", "--variant", "llm", "--db", db, "--set", "context.confirm_above_usd=0"]) == 3
    assert anthropic_stub.state.messages() == []
    assert cli.main(["context", "--variant", "llm", "--db", db, "--budget-usd", "0.012", "--yes", "--json"]) == 4
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["stopped"].startswith("budget") and first["remaining"] > 0
    assert cli.main(["context", "--variant", "llm", "--db", db, "--yes", "--json"]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["remaining"] == 0 and second["existing"] == first["written"]
    assert second["vectors"] == second["written"]  # only chunks whose text changed are re-embedded
    anthropic_stub.state.responder = lambda body: json.dumps({"answer": "Torque is logged.", "citations": [],
                                                              "refused": False})
    assert cli.main(["query", "torque value", "--db", db, "--json", "--set", "context.variant=llm"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"]["mode"] == "llm" and set(out["answer"]) == {"text", "citations", "refused", "mode"}
    assert anthropic_stub.key not in json.dumps(out)


def test_deleting_a_document_removes_its_contexts_and_variant_vectors(corpus: Store, embedder: HashEmbedder) -> None:
    build_heuristic(corpus)
    embed_variant(corpus, embedder, "heuristic")
    doc = corpus.corpus.find_document_by_name("short_note.md")
    n_short = len(corpus.corpus.chunks(doc_id=doc.doc_id))
    before = len(corpus.ledger.contexts("heuristic"))
    assert corpus.corpus.delete_document(doc.doc_id)
    assert len(corpus.ledger.contexts("heuristic")) == before - n_short
    assert len(corpus.corpus.vectors(embedder.model_id, "heuristic")[0]) == before - n_short
    assert corpus.ledger.delete_contexts("heuristic") == before - n_short
    assert corpus.ledger.contexts("heuristic") == {} and corpus.corpus.vectors(embedder.model_id, "heuristic")[0] == []


def test_late_build_uses_the_embedders_own_token_encoder(corpus: Store, embedder: HashEmbedder) -> None:
    """An embedder that brings its own token encoder (the ONNX runtimes do, through window_encoder()) gets late
    chunking from it; only an embedder with neither that nor a transformer behind it is refused, with a message."""
    own = ConceptEmbedder(model_id=embedder.model_id)
    rep = run_build(BuildRequest("late", embed=False), corpus, own, OfflineLLM())
    n = len(corpus.corpus.chunks())
    assert rep.written == n and coverage(corpus, "late", model_id=own.model_id) == (n, n)
    with pytest.raises(ContextError, match="no token vectors"):
        run_build(BuildRequest("late", embed=False), corpus, HashEmbedder(model_id="other-64"), OfflineLLM())
