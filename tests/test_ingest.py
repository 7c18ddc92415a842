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
    before = deps.store.corpus.documents()[0]
    _ingest(deps, [("a.md", b"# Gateway\n\nNew text only.")])
    docs = deps.store.corpus.documents()
    # A new version keeps its document's id (core/ingest/identity.py) with the new content.
    assert len(docs) == 1 and docs[0].doc_id == before.doc_id and docs[0].content_hash != before.content_hash
    assert [c.text for c in deps.store.corpus.chunks()] == ["# Gateway\n\nNew text only."]
    assert all(c.doc_id == docs[0].doc_id for c in deps.store.corpus.chunks())


def test_store_failure_mid_document_leaves_nothing(deps: Deps, monkeypatch) -> None:
    class Exploding(HashEmbedder):
        def encode(self, texts):  # noqa: ANN001, ANN201
            return np.zeros((len(texts) - 1, self.dim), np.float32)  # one vector short -> store refuses

    d2 = Deps(store=deps.store, embedder=Exploding())
    report = _ingest(d2, GOOD[:1])
    assert report.results[0].status == "error"
    assert deps.store.corpus.documents() == [] and deps.store.corpus.chunks() == []


def test_group_is_written_in_one_transaction(deps: Deps, monkeypatch) -> None:
    """Consecutive small files go in with one put_documents call (one commit), not one put_document each."""
    calls: list[int] = []
    real = deps.store.corpus.put_documents
    monkeypatch.setattr(deps.store.corpus, "put_documents", lambda items, m: (calls.append(len(items)), real(items, m)))
    monkeypatch.setattr(deps.store.corpus, "put_document", lambda *a, **k: calls.append(-1))
    report = _ingest(deps, GOOD)
    assert calls == [3] and not report.errors
    docs = deps.store.corpus.documents()
    assert sorted(d.name for d in docs) == ["a.md", "b.txt", "c.pdf"]
    assert sum(d.n_chunks for d in docs) == len(deps.store.corpus.chunks()) == sum(r.chunks for r in report.results)
    by_doc = {d.doc_id: d.name for d in docs}
    assert {c.heading_path for c in deps.store.corpus.chunks() if by_doc[c.doc_id] == "a.md"} >= {("Gateway", "TLS")}


def test_put_documents_rolls_back_every_document_of_the_call(deps: Deps) -> None:
    """A failure inside the group's transaction (here the third document reuses the first one's chunk id, a primary
    key violation at the bulk insert) leaves none of the group's documents, chunks or vectors."""
    from core.store import StoreError  # noqa: F401 - the error type callers see for a refused write
    from core.types import Chunk, Document

    def doc(i: int) -> Document:
        return Document(f"d{i}", f"f{i}.txt", "txt", 10, f"h{i}", "en", "text", "fixed:1/0", "default", "", 1)

    chunk = Chunk("c1", "d1", 0, "text", 0, 4, (), 1, "en")
    vec = np.ones((1, 4), np.float32)
    items = [(doc(1), [chunk], vec, None), (doc(2), [Chunk("c2", "d2", 0, "x", 0, 1, (), 1, "en")], vec, None),
             (doc(3), [Chunk("c1", "d3", 0, "y", 0, 1, (), 1, "en")], vec, None)]
    version = deps.store.corpus.corpus_version()
    try:
        deps.store.corpus.put_documents(items, "m")
    except Exception:  # noqa: BLE001 - duckdb's constraint error
        pass
    else:
        raise AssertionError("a duplicate chunk id must fail the group")
    assert deps.store.corpus.documents() == [] and deps.store.corpus.chunks() == []
    assert deps.store.corpus.corpus_version() == version
    deps.store.corpus.put_documents(items[:2], "m")  # the same call without the bad document goes in whole
    assert [d.doc_id for d in deps.store.corpus.documents()] == ["d1", "d2"]
    assert deps.store.corpus.corpus_version() == version + 2  # one step per document, as put_document makes


def test_crash_in_group_write_leaves_nothing_and_rerun_embeds_nothing(deps: Deps, monkeypatch) -> None:
    """Killed between the group's inserts and its commit (simulated: the version bump, the last statement of both
    the group write and the per-document fallback, raises): no document, chunk or vector is visible. A re-run then
    ingests every file and takes all vectors from the embedding cache, written before the documents."""
    import core.store.corpus as corpus_mod

    def crash(cur, ws, by=1):  # noqa: ANN001, ANN202
        raise RuntimeError("simulated crash before commit")

    monkeypatch.setattr(corpus_mod, "bump_version", crash)
    first = _ingest(deps, GOOD)
    assert {r.status for r in first.results} == {"error"}
    assert deps.store.corpus.documents() == [] and deps.store.corpus.chunks() == []
    monkeypatch.undo()
    emb: HashEmbedder = deps.embedder  # type: ignore[assignment]
    before = emb.encoded
    again = _ingest(deps, GOOD)
    assert {r.status for r in again.results} == {"ingested"}
    assert emb.encoded == before and again.embedded == 0 and again.cache_hits == sum(r.chunks for r in again.results)


def test_group_failure_falls_back_to_one_transaction_per_document(deps: Deps, monkeypatch) -> None:
    """If the group write fails, each file is written alone, so one bad document costs only itself."""
    def refuse(items, model_id):  # noqa: ANN001, ANN202
        raise RuntimeError("group write refused")

    real = deps.store.corpus.put_document

    def one(doc, chunks, vectors, model_id, **kw):  # noqa: ANN001, ANN202
        if doc.name == "b.txt":
            raise RuntimeError("bad document")
        return real(doc, chunks, vectors, model_id, **kw)

    monkeypatch.setattr(deps.store.corpus, "put_documents", refuse)
    monkeypatch.setattr(deps.store.corpus, "put_document", one)
    report = _ingest(deps, GOOD)
    assert {r.name: r.status for r in report.results} == {"a.md": "ingested", "b.txt": "error", "c.pdf": "ingested"}
    assert "bad document" in report.errors[0].message
    assert sorted(d.name for d in deps.store.corpus.documents()) == ["a.md", "c.pdf"]
