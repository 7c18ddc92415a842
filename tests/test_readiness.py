"""core.app.readiness token vectors: what late interaction would encode on first sight is offered as a build, counted
without reading the vectors, built with progress, and gone once built."""
from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

from core.app import readiness
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.cascade_fakes import ConceptEmbedder
from tests.fakes import HashEmbedder

DOCS = [
    ("garage.md", b"# Garage\n\nMending a car costs about 300 euros. The fee covers the fix. Opening hours are 8 to 5."),
    ("city.md", b"# City\n\nParking for every automobile owner is free on Sundays. Bus routes change in May."),
]


def _deps(store: Store, embedder=None) -> Deps:
    deps = Deps(store=store, embedder=embedder or ConceptEmbedder())
    assert not ingest_files(DOCS, store=store, embedder=deps.embedder, config=PipelineConfig()).errors
    return deps


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_held_token_vectors_names_only_the_stored_hashes(store: Store) -> None:
    rows = (np.array([1], np.int32), np.ones((1, 4), np.float16), np.array([[0, 1]], np.int32))
    store.caches.cache_token_vectors("m", {"a": rows, "b": rows})
    store.caches.cache_token_vectors("other-model", {"c": rows})
    assert store.caches.held_token_vectors("m", ["a", "c", "zz"]) == {"a"}
    assert store.caches.held_token_vectors("m", []) == set()
    assert store.caches.held_token_vectors("m", ["a"], workspace="elsewhere") == set()


def test_unbuilt_token_vectors_are_offered_then_built_with_progress_then_gone(store: Store) -> None:
    deps = _deps(store)
    chunks = store.corpus.chunks()
    cfg = PipelineConfig()
    readiness._RATES.clear()  # nothing measured here yet: the estimate is the config's fallback
    need = readiness.token_need(deps, cfg)
    assert need is not None and need.kind == "tokens"
    assert (need.todo, need.total) == (len(chunks), len(chunks))
    assert need.est_seconds == len(chunks) * cfg.embedding.estimate_token_s_per_chunk
    slow = cfg.with_overrides({"embedding.estimate_token_s_per_chunk": 0.7})  # one documented place: the config
    assert readiness.token_need(deps, slow).est_seconds == pytest.approx(len(chunks) * 0.7)
    assert slow.stable_hash() == cfg.stable_hash()  # an estimate, never part of a configuration's identity
    seen: list[tuple[int, int]] = []
    msg = readiness.build(need, cfg, deps, progress=lambda d, t: seen.append((d, t)))
    assert msg.startswith(f"token vectors: {len(chunks)} chunks encoded")
    assert seen[-1] == (len(chunks), len(chunks))
    # Stored under the hash of exactly the text the rerank stage reads (raw chunk text with no contexts on).
    late = deps.reranker_for("late-interaction")[0]
    assert store.caches.held_token_vectors(late.model_id, [_sha(c.text) for c in chunks]) == {
        _sha(c.text) for c in chunks}
    assert readiness.token_need(deps, cfg) is None
    # A fresh process (empty memory cache) finds them in the store, and the rate the build measured there.
    assert readiness.token_need(Deps(store=store, embedder=ConceptEmbedder()), cfg) is None
    kept = store.caches.rate("tokens", deps.embedder.model_id)
    readiness._RATES.clear()
    assert kept and readiness.token_seconds_per_chunk(store, deps.embedder.model_id, cfg.embedding) == kept


def test_contextual_variant_needs_the_context_plus_chunk_texts(store: Store) -> None:
    deps = _deps(store)
    readiness.build(readiness.token_need(deps, PipelineConfig()), PipelineConfig(), deps)
    heur = PipelineConfig().with_overrides({"context.variant": "heuristic"})
    ctx = store.ledger.contexts("heuristic")
    assert ctx  # written at ingest
    need = readiness.token_need(deps, heur)
    assert need is not None and need.todo == len(ctx)  # every chunk with a context reads another text


def test_no_offer_when_nothing_reads_token_vectors(store: Store) -> None:
    deps = _deps(store)
    off = PipelineConfig().with_overrides({"rerank.enabled": False, "prune.scorer": "embedder"})
    assert readiness.token_need(deps, off) is None
    # An embedder without token vectors reranks by cosine: there is nothing to warm.
    assert readiness.token_need(_deps(Store(":memory:"), HashEmbedder()), PipelineConfig()) is None


class _TimedEmbedder(HashEmbedder):
    """The hash fake at a known speed: `per` seconds of work for every text it encodes."""

    def __init__(self, per: float) -> None:
        super().__init__()
        self.per = per

    def encode(self, texts, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN201
        import time

        time.sleep(self.per * len(texts))
        return super().encode(texts, *a, **kw)


def test_context_estimate_is_read_off_the_embedder_and_the_build_reports_progress_per_batch(store: Store) -> None:
    """Issue #28: the estimate follows the embedder's measured speed (the probe), and the progress bar moves after
    every batch of vectors instead of once at the end."""
    docs = [(f"d{i}.md", f"# Doc {i}\n\n".encode() + b"".join(
        f"## Part {j}\n\nSection {j} of document {i} says the pump {j} runs at dawn.\n\n".encode() for j in range(10)))
            for i in range(8)]
    emb = _TimedEmbedder(0.002)
    assert not ingest_files(docs, store=store, embedder=emb, config=PipelineConfig()).errors
    deps = Deps(store=store, embedder=emb)
    readiness._RATES.clear()
    cfg = PipelineConfig().with_overrides({"context.variant": "heuristic", "rerank.enabled": False})
    [need] = [n for n in readiness.needs(store, cfg, "default", emb.model_id, embedder=emb) if n.kind == "context"]
    per_text = need.est_seconds / need.todo / readiness.CONTEXT_TEXT_FACTOR
    assert 0.002 <= per_text < 0.02, per_text  # the probe's figure, not the 0.13 s constant
    seen: list[tuple[int, int]] = []
    readiness.build(need, cfg, deps, "default", progress=lambda d, t: seen.append((d, t)))
    vec = [d for d, t in seen if t == need.todo]
    assert need.todo > 64 and vec[0] == 0 and len(vec) >= need.todo // 32 and vec[-1] == need.todo
    assert vec == sorted(vec)
    # the embedding's batches start small and double: its first step comes after FIRST_BATCH chunks
    steps = [d for d, t in seen[seen.index((0, need.todo)):]]
    assert steps[:3] == [0, readiness.FIRST_BATCH, 3 * readiness.FIRST_BATCH], steps[:6]
    assert not [n for n in readiness.needs(store, cfg, "default", emb.model_id) if n.kind == "context"]


def test_the_token_part_of_a_context_estimate_is_probed_beside_the_embedding(store: Store, monkeypatch) -> None:
    """Issue #28: the token vectors a contextual build chains were estimated from a fixed 0.1 s per chunk and took
    1.8x that under load; now one untimed warm-up and one timed batch of each give both rates at today's load."""
    calls: list[int] = []

    def slow_tokens(encoder, texts, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append(len(texts))
        time.sleep(0.01 * len(texts))
        return []

    monkeypatch.setattr(readiness, "encode_token_matrices", slow_tokens)
    monkeypatch.setattr(readiness, "window_encoder_for", lambda embedder: object())  # the fake gives no tokens
    docs = [(f"d{i}.md", f"# Doc {i}\n\n".encode() + b"".join(
        f"## Part {j}\n\nSection {j} of document {i} says the valve {j} shuts at noon.\n\n".encode() for j in range(6)))
            for i in range(4)]
    emb = _TimedEmbedder(0.002)
    assert not ingest_files(docs, store=store, embedder=emb, config=PipelineConfig()).errors
    readiness._RATES.clear()
    cfg = PipelineConfig().with_overrides({"context.variant": "heuristic", "rerank.enabled": True,
                                           "rerank.method": "late-interaction"})
    [need] = [n for n in readiness.needs(store, cfg, "default", emb.model_id, embedder=emb) if n.kind == "context"]
    assert calls == [readiness.PROBE_WARMUP, readiness.PROBE_CHUNKS]  # warm-up untimed, then one timed batch
    tok = readiness._RATES[("tokens-probe", emb.model_id)]
    assert 0.01 <= tok < 0.05, tok
    per = need.est_seconds / need.todo / readiness.CONTEXT_TEXT_FACTOR
    assert per == pytest.approx(readiness._RATES[("embed", emb.model_id)] + tok)
    assert per < cfg.embedding.estimate_token_s_per_chunk  # the probe's figures, not the fallback


def test_a_graph_estimate_reads_the_last_statistical_build_here_per_character_and_core_share(store: Store,
                                                                                           monkeypatch) -> None:
    """Before any graph build the estimate is the constant per chunk; after one, the rate it kept (seconds on a free
    core per UNIT_CHARS characters) times another workspace's characters over the share of a core now."""
    monkeypatch.setattr(readiness, "_RATES", {})
    monkeypatch.setattr(readiness, "_SHARE", [])
    docs = [(f"g{i}.md", f"# Plant {i}\n\nThe Valve {i} at Station {i} feeds Pump {i}. Pump {i} serves "
                         f"Reservoir {i}.".encode()) for i in range(12)]
    deps = Deps(store=store, embedder=HashEmbedder())
    assert not ingest_files(docs, store=store, embedder=deps.embedder, config=PipelineConfig()).errors
    assert not ingest_files(docs[:6], store=store, embedder=deps.embedder, config=PipelineConfig(),
                            workspace="half").errors
    cfg = PipelineConfig().with_overrides({"graph.enabled": True})
    [need] = [n for n in readiness.needs(store, cfg, "default") if n.kind == "graph"]
    assert need.est_seconds == pytest.approx(need.total * cfg.embedding.estimate_graph_s_per_chunk)
    monkeypatch.setattr(readiness, "measure_cpu_share", lambda window_s=0.25: 0.5)
    readiness.build(need, cfg, deps, "default")
    kept = store.caches.rate(readiness.GRAPH_RATE, "statistical")
    assert kept is not None and kept > 0
    readiness.note_cpu_share(1.0, 4.0)  # a quarter of a core now
    [half] = [n for n in readiness.needs(store, cfg, "half") if n.kind == "graph"]
    assert half.est_seconds == pytest.approx(kept * store.corpus.chunk_chars("half") / readiness.UNIT_CHARS / 0.25)
