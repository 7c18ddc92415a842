"""Ingest path: several files, one broken, nothing half-written; re-ingest computes zero embeddings."""
from __future__ import annotations

import numpy as np

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from tests.bad_inputs import pdf_with_text
from tests.fakes import HashEmbedder

GOOD = [
    ("a.md", b"# Gateway\n\n## TLS\n\nSet TLS_VERSION_MIN to 1.2 for every listener.\n\n## Retries\n\nretryBackoffMs is 250."),
    ("b.txt", "Выручка выросла на 5% во втором квартале.".encode()),
    ("c.pdf", pdf_with_text("Quarterly revenue grew 3 percent")),
]


def _ingest(deps: Deps, files, cfg: PipelineConfig | None = None):
    return ingest_files(files, store=deps.store, embedder=deps.embedder, config=cfg or PipelineConfig())


def test_broken_file_is_reported_and_others_ingest(deps: Deps) -> None:
    seen: list[tuple[int, int, str]] = []
    files = GOOD[:1] + [("broken.pdf", b"%PDF-1.4 garbage"), ("huge.txt", b"x " * 5000)] + GOOD[1:]
    cfg = PipelineConfig().with_overrides({"limits.max_file_mb": 0.005})  # 5 kB
    report = ingest_files(files, store=deps.store, embedder=deps.embedder, config=cfg,
                          progress=lambda i, n, name: seen.append((i, n, name)))
    status = {r.name: r.status for r in report.results}
    assert status["broken.pdf"] == "error" and status["huge.txt"] == "error"
    assert [e.name for e in report.errors] == ["broken.pdf", "huge.txt"]
    assert "broken.pdf" in report.errors[0].message and "5.0 kB" in report.errors[1].message
    assert {d.name for d in deps.store.corpus.documents()} == {n for n, s in status.items() if s == "ingested"}
    assert seen[0] == (0, 5, "a.md") and seen[-1] == (5, 5, "")


def test_reingest_unchanged_computes_zero_embeddings(deps: Deps) -> None:
    emb: HashEmbedder = deps.embedder  # type: ignore[assignment]
    first = _ingest(deps, GOOD)
    assert first.embedded > 0 and not first.errors
    before = emb.encoded
    again = _ingest(deps, GOOD)
    assert {r.status for r in again.results} == {"unchanged"}
    assert emb.encoded == before and again.embedded == 0
    # A different chunker re-chunks; identical chunk texts come from the embedding cache.
    rechunk = _ingest(deps, GOOD, PipelineConfig().with_overrides({"chunking.strategy": "sentence"}))
    assert {r.status for r in rechunk.results} == {"replaced"}
    assert rechunk.cache_hits > 0
    assert len(deps.store.corpus.documents()) == 3


def test_changed_file_replaces_old_version(deps: Deps) -> None:
    _ingest(deps, GOOD[:1])
    old = deps.store.corpus.documents()[0].doc_id
    _ingest(deps, [("a.md", b"# Gateway\n\nNew text only.")])
    docs = deps.store.corpus.documents()
    assert len(docs) == 1 and docs[0].doc_id != old
    assert all(c.doc_id == docs[0].doc_id for c in deps.store.corpus.chunks())


def test_store_failure_mid_document_leaves_nothing(deps: Deps, monkeypatch) -> None:
    class Exploding(HashEmbedder):
        def encode(self, texts):  # noqa: ANN001, ANN201
            return np.zeros((len(texts) - 1, self.dim), np.float32)  # one vector short -> store refuses

    d2 = Deps(store=deps.store, embedder=Exploding())
    report = _ingest(d2, GOOD[:1])
    assert report.results[0].status == "error"
    assert deps.store.corpus.documents() == [] and deps.store.corpus.chunks() == []
