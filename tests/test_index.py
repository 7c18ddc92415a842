"""IndexCache under concurrency: a document committed during a dense rebuild is found by the next query, a build
holds no lock other indexes need, and a query writes nothing (vectors missing for the model are embedded in memory)."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.retrieve.bm25 import BM25Params
from core.retrieve.index import IndexCache, backfill_vectors
from core.store import Store
from tests.fakes import HashEmbedder

WAIT = 10.0  # seconds; only reached when the code under test is broken (a hang becomes a failure)


class PausingCorpus:
    """The real corpus repository, except that the first vectors() call reads its rows and then waits for
    `release` before returning them: a slow read whose rows predate whatever another thread commits meanwhile."""

    def __init__(self, corpus: Any) -> None:
        self._corpus = corpus
        self.entered = threading.Event()
        self.release = threading.Event()
        self._first = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._corpus, name)

    def vectors(self, *args: Any, **kwargs: Any) -> Any:
        rows = self._corpus.vectors(*args, **kwargs)
        if self._first:
            self._first = False
            self.entered.set()
            assert self.release.wait(WAIT), "the test never released the paused read"
        return rows


class Sources:
    """IndexSources over a real store, with the corpus repository swapped for a PausingCorpus."""

    def __init__(self, store: Store, corpus: Any) -> None:
        self.corpus, self.ledger, self.caches = corpus, store.ledger, store.caches
        self.index_files = store.index_files


def _ingest(store: Store, embedder: HashEmbedder, name: str, text: str, workspace: str = "default") -> str:
    report = ingest_files([(name, text.encode())], store=store, embedder=embedder, config=PipelineConfig(),
                          workspace=workspace)
    assert not report.errors
    return report.results[0].doc_id


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def test_document_committed_during_a_dense_rebuild_is_found_by_the_next_query(store: Store,
                                                                              embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "a.md", "# Alpha\n\nThe alpha valve opens at dawn.")
    paused = PausingCorpus(store.corpus)
    src = Sources(store, paused)
    indexes = IndexCache()
    builder, built = _in_thread(lambda: indexes.dense(src, embedder, "default"))
    assert paused.entered.wait(WAIT)
    # While the rebuild holds rows read before it, another session commits a document.
    doc_b = _ingest(store, embedder, "b.md", "# Beta\n\nThe beta pump stops at dusk.")
    b_chunks = {c.chunk_id for c in store.corpus.chunks(doc_id=doc_b)}
    # Other indexes stay usable meanwhile: the rebuild holds no lock they need.
    other, got = _in_thread(lambda: indexes.bm25(src, "default", BM25Params()))
    other.join(WAIT)
    assert not other.is_alive() and got and b_chunks <= set(got[0].chunk_ids)
    paused.release.set()
    builder.join(WAIT)
    assert not builder.is_alive()
    first = built[0]
    assert not b_chunks & set(first.chunk_ids)  # the race happened: the rebuild's rows predate b.md
    # The entry was stamped with the version read before the rows, so it is stale now and the next query rebuilds.
    again = indexes.dense(src, embedder, "default")
    assert again is not first and b_chunks <= set(again.chunk_ids)
    assert indexes.dense(src, embedder, "default") is again  # and then it is reused


def test_a_slow_dense_build_does_not_block_another_workspace(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "a.md", "# Alpha\n\nThe alpha valve opens at dawn.")
    _ingest(store, embedder, "c.md", "# Gamma\n\nThe gamma gauge reads zero.", workspace="other")
    paused = PausingCorpus(store.corpus)
    src = Sources(store, paused)
    indexes = IndexCache()
    builder, _ = _in_thread(lambda: indexes.dense(src, embedder, "default"))
    assert paused.entered.wait(WAIT)
    other, got = _in_thread(lambda: indexes.dense(src, embedder, "other"))
    other.join(WAIT)
    alive = other.is_alive()
    paused.release.set()
    builder.join(WAIT)
    assert not alive and len(got[0]) == store.corpus.count("chunks", "other")


def test_a_query_embeds_missing_vectors_in_memory_and_writes_nothing(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "a.md", "# Alpha\n\nThe alpha valve opens at dawn.\n\n## Later\n\nThe beta pump stops.")
    n = store.corpus.count("chunks")
    new_model = HashEmbedder(dim=64, model_id="hash-64")  # a model switch: no vector stored for it yet
    before = (store.corpus.vector_models(), store.caches.count_embeddings(), len(store.caches.cache_events()))
    indexes = IndexCache()
    index = indexes.dense(store, new_model, "default")
    assert len(index) == n and indexes.unstored("default") == n
    assert (store.corpus.vector_models(), store.caches.count_embeddings(), len(store.caches.cache_events())) == before
    # Same vectors a stored backfill would give, and after the (build-time) backfill nothing is embedded in memory.
    stats = backfill_vectors(store.corpus, store.ledger, store.caches, store.corpus, new_model, "default")
    assert stats.computed == n and store.caches.count_embeddings() == before[1] + n
    indexes.invalidate()
    stored = indexes.dense(store, new_model, "default")
    assert indexes.unstored("default") == 0
    q = new_model.encode(["alpha valve"])[0]
    assert stored.search(q, n) == index.search(q, n)
    np.testing.assert_allclose(sorted(s for _, s in stored.search(q, n)), sorted(s for _, s in index.search(q, n)))
