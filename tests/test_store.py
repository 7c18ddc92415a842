"""Store contract on :memory: — schema version, typed round trips, model isolation, atomic writes, deletes."""
from __future__ import annotations

import numpy as np
import pytest

from core.store import SCHEMA_VERSION, Store, StoreError
from core.types import Chunk, Document


def _doc(doc_id: str = "d1", name: str = "a.md", ws: str = "default") -> Document:
    return Document(doc_id, name, "md", 10, "hash-" + doc_id, "en", "alpha beta gamma", "structure:180/30", ws, "A")


def _chunks(doc_id: str = "d1", n: int = 2) -> list[Chunk]:
    return [Chunk(f"{doc_id}-{i:04d}", doc_id, i, f"text {i}", i * 5, i * 5 + 4, ("H", f"S{i}"), 2, "en") for i in range(n)]


def test_schema_version_and_default_workspace(store: Store) -> None:
    assert store.schema_version() == SCHEMA_VERSION
    assert "default" in store.workspaces()
    assert store.corpus.corpus_version() == 0


def test_round_trip_and_version_bump(store: Store) -> None:
    vecs = np.eye(2, 3, dtype=np.float32)
    store.corpus.put_document(_doc(), _chunks(), vecs, "m1")
    assert store.corpus.corpus_version() == 1
    [row] = store.corpus.documents()
    assert (row.name, row.n_chunks, row.kind) == ("a.md", 2, "md")
    chunks = store.corpus.chunks(doc_id="d1")
    assert chunks == _chunks()
    ids, matrix = store.corpus.vectors("m1")
    assert ids == ["d1-0000", "d1-0001"]
    np.testing.assert_allclose(matrix, vecs)
    assert store.corpus.chunks_by_id(["d1-0001", "nope"]) == {"d1-0001": _chunks()[1]}
    assert store.corpus.document_titles(["d1", "nope", "d1"]) == {"d1": "A"} and store.corpus.document_titles([]) == {}


def test_vectors_of_other_models_never_mix(store: Store) -> None:
    store.corpus.put_document(_doc(), _chunks(), np.ones((2, 3), np.float32), "m1")
    ids, matrix = store.corpus.vectors("m2")
    assert ids == [] and matrix.size == 0
    assert [c.chunk_id for c in store.corpus.chunks_missing_vectors("m2")] == ["d1-0000", "d1-0001"]
    store.corpus.put_vectors(["d1-0000", "d1-0001"], np.zeros((2, 5), np.float32), "m2")
    assert store.corpus.vectors("m2")[1].shape == (2, 5) and store.corpus.vectors("m1")[1].shape == (2, 3)
    assert store.corpus.chunks_missing_vectors("m2") == []
    assert {(m, v) for m, v, _ in store.corpus.vector_models()} == {("m1", "raw"), ("m2", "raw")}


def test_failed_write_leaves_nothing(store: Store) -> None:
    with pytest.raises(StoreError):
        store.corpus.put_document(_doc(), _chunks(n=3), np.ones((2, 3), np.float32), "m1")  # 3 chunks, 2 vectors
    bad = _chunks(n=2)
    bad[1] = bad[0]  # duplicate primary key fails inside the transaction, after the document row went in
    with pytest.raises(Exception):
        store.corpus.put_document(_doc(), bad, np.ones((2, 3), np.float32), "m1")
    assert store.corpus.documents() == [] and store.corpus.chunks() == [] and store.corpus.count("vectors") == 0
    assert store.corpus.corpus_version() == 0


def test_delete_removes_chunks_and_vectors(store: Store) -> None:
    store.corpus.put_document(_doc("d1"), _chunks("d1"), np.ones((2, 3), np.float32), "m1")
    store.corpus.put_document(_doc("d2", "b.md"), _chunks("d2"), np.ones((2, 3), np.float32), "m1")
    assert store.corpus.delete_document("d1")
    assert [d.doc_id for d in store.corpus.documents()] == ["d2"]
    assert {c.doc_id for c in store.corpus.chunks()} == {"d2"} and store.corpus.count("vectors") == 2
    assert not store.corpus.delete_document("d1")


def test_replace_is_atomic(store: Store) -> None:
    store.corpus.put_document(_doc("d1"), _chunks("d1"), np.ones((2, 3), np.float32), "m1")
    store.corpus.put_document(_doc("d9"), _chunks("d9", 3), np.ones((3, 3), np.float32), "m1", replace_doc_id="d1")
    assert [d.doc_id for d in store.corpus.documents()] == ["d9"] and store.corpus.count("chunks") == 3


def test_workspaces_are_isolated(store: Store) -> None:
    store.corpus.put_document(_doc(ws="w2"), _chunks(), np.ones((2, 3), np.float32), "m1")
    assert store.corpus.documents() == [] and len(store.corpus.documents("w2")) == 1
    store.caches.cache_embeddings("m1", {"h": np.ones(3, np.float32)}, workspace="w2")
    assert store.caches.cached_embeddings("m1", ["h"]) == {}
    assert list(store.caches.cached_embeddings("m1", ["h"], workspace="w2")) == ["h"]


def test_file_store_persists(tmp_path) -> None:
    path = tmp_path / "sub" / "w.duckdb"
    s = Store(path)
    s.corpus.put_document(_doc(), _chunks(), np.ones((2, 3), np.float32), "m1")
    s.close()
    s2 = Store(path)
    assert s2.corpus_version() == 1 and len(s2.chunks()) == 2
    s2.close()
