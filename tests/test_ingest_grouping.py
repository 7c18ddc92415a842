"""Grouped embedding in ingest_files: one encode call for many documents, per-document accounting unchanged."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pytest

import core.ingest.pipeline as ingest_pipeline
from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.models.embed import embed_groups_with_cache, embed_with_cache
from core.store import Store
from tests.fakes import HashEmbedder

FILES = [
    ("alpha.txt", b"The pump station in Harlow failed twice in March."),
    ("beta.txt", b"Set TLS_VERSION_MIN to 1.2 before the audit."),
    ("gamma.md", b"# Billing\n\nInvoices go out on the first working day."),
    ("delta.txt", b"The pump station in Harlow failed twice in March."),  # same text as alpha, other name
]


class PoisonEmbedder(HashEmbedder):
    """Refuses any batch holding the word POISON, like a model choking on one input."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if any("POISON" in t for t in texts):
            raise RuntimeError("cannot embed this text")
        return super().encode(texts)


def _ingest(store: Store, emb: HashEmbedder, files, config: PipelineConfig | None = None):
    return ingest_files(files, store=store, embedder=emb, config=config or PipelineConfig())


def test_small_documents_share_one_encode_call(store: Store) -> None:
    emb = HashEmbedder()
    report = _ingest(store, emb, FILES)
    assert [r.name for r in report.results] == [n for n, _ in FILES]
    assert {r.status for r in report.results} == {"ingested"}
    assert emb.calls == 1
    # delta repeats alpha's text: computed once for alpha, a cache hit for delta, as if one after the other.
    by_name = {r.name: r for r in report.results}
    assert (by_name["alpha.txt"].embedded, by_name["alpha.txt"].cache_hits) == (1, 0)
    assert (by_name["delta.txt"].embedded, by_name["delta.txt"].cache_hits) == (0, 1)
    assert emb.encoded == report.embedded == 3


def test_group_stats_and_vectors_match_one_document_at_a_time() -> None:
    groups = [["a b", "c d"], ["c d", "e f", "a b"], [], ["g h", "g h"]]
    grouped_store, single_store = Store(), Store()
    emb = HashEmbedder()
    grouped = embed_groups_with_cache(groups, emb, grouped_store.caches, "default")
    singles = [embed_with_cache(g, emb, single_store.caches, "default") for g in groups]
    for (gv, gs), (sv, ss) in zip(grouped, singles):
        assert gs == ss
        assert np.array_equal(gv, sv)


def test_group_boundary_splits_encode_calls(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_pipeline, "GROUP_CHUNKS", 2)
    emb = HashEmbedder()
    report = _ingest(store, emb, FILES)
    assert emb.calls == 2 and not report.errors
    assert len(store.corpus.documents()) == 4


@pytest.mark.parametrize("second, status", [(FILES[0][1], "unchanged"), (b"Entirely new words here.", "replaced")])
def test_same_name_twice_in_one_upload(store: Store, second: bytes, status: str) -> None:
    report = _ingest(store, HashEmbedder(), [FILES[0], ("alpha.txt", second), FILES[1]])
    assert [r.status for r in report.results] == ["ingested", status, "ingested"]
    assert sorted(d.name for d in store.corpus.documents()) == ["alpha.txt", "beta.txt"]


def test_a_failing_text_costs_only_its_own_file(store: Store) -> None:
    files = [FILES[0], ("bad.txt", b"This line holds POISON for the model."), FILES[1]]
    report = _ingest(store, PoisonEmbedder(), files)
    assert [r.status for r in report.results] == ["ingested", "error", "ingested"]
    assert "bad.txt" in report.results[1].message and "RuntimeError" in report.results[1].message
    assert sorted(d.name for d in store.corpus.documents()) == ["alpha.txt", "beta.txt"]
    assert {c.doc_id for c in store.corpus.chunks()} == {report.results[0].doc_id, report.results[2].doc_id}


def test_one_ledger_row_per_group(store: Store) -> None:
    _ingest(store, HashEmbedder(), FILES)
    events = [e for e in store.caches.cache_events() if e[3] == "ingest"]
    assert [(hits, misses) for _, hits, misses, _, _ in events] == [(1, 3)]
