"""Store contract on :memory: — schema version, typed round trips, model isolation, atomic writes, deletes."""
from __future__ import annotations

import duckdb
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
    with pytest.raises(duckdb.ConstraintException):  # the database's own error, raised inside the transaction
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
    s2 = Store.open(path)
    assert s2.corpus.corpus_version() == 1 and len(s2.corpus.chunks()) == 2
    s2.close()


def test_corpus_version_memo_sees_every_write_in_the_process(tmp_path) -> None:
    """corpus_version is memoised per write generation; every write path must still move what readers see,
    including a write through a second Store on the same file (DuckDB shares one database per file in a process)."""
    path = tmp_path / "w.duckdb"
    a, b = Store(path), Store(path)
    assert a.corpus.corpus_version() == 0 and b.corpus.corpus_version() == 0   # both memos filled
    b.corpus.put_document(_doc(), _chunks(), np.ones((2, 3), np.float32), "m1")
    assert a.corpus.corpus_version() == 1 and b.corpus.corpus_version() == 1
    a.corpus.put_document(_doc("d2", "b.md"), _chunks("d2"), np.ones((2, 3), np.float32), "m1")
    assert b.corpus.corpus_version() == 2
    b.corpus.delete_document("d1")
    assert a.corpus.corpus_version() == 3
    with pytest.raises(RuntimeError):             # a rolled-back write leaves the version where it was
        with a.db.transaction() as cur:
            cur.execute("UPDATE workspaces SET corpus_version = 99")
            raise RuntimeError("boom")
    assert b.corpus.corpus_version() == 3
    # In-memory stores are separate databases: their memos never mix.
    m1, m2 = Store(":memory:"), Store(":memory:")
    m1.corpus.put_document(_doc(), _chunks(), np.ones((2, 3), np.float32), "m1")
    assert (m1.corpus.corpus_version(), m2.corpus.corpus_version()) == (1, 0)
    a.close(), b.close()


# -- read-only mode and the multi-process rule (core/store/db.py docstring) ---------------------------------------
_CHILD = """
import sys
from core.store import Store, StoreError
try:
    s = Store.open(sys.argv[1], read_only=sys.argv[2] == "ro")
    print("OPEN", s.corpus.count("documents"), s.corpus.corpus_version())
    s.close()
except StoreError as exc:
    print("STOREERROR", exc)
"""


def _child(path, mode: str) -> str:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), mode], cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _filled(tmp_path):
    path = tmp_path / "shared.duckdb"
    s = Store(path)
    s.corpus.put_document(_doc(), _chunks(), np.ones((2, 3), np.float32), "m1")
    s.close()
    return path


def test_read_only_store_reads_and_refuses_writes_with_a_clear_error(tmp_path) -> None:
    path = _filled(tmp_path)
    ro = Store.open(path, read_only=True)
    assert ro.read_only and ro.corpus.count("documents") == 1 and len(ro.corpus.chunks()) == 2
    with pytest.raises(StoreError, match="read-only"):
        ro.corpus.delete_document("d1")
    with pytest.raises(StoreError, match="read-only"):
        ro.runs.delete_eval_run("x")  # any write, whichever repository
    assert ro.corpus.count("documents") == 1
    ro.close()


def test_read_only_needs_an_existing_file(tmp_path) -> None:
    with pytest.raises(StoreError, match="no such database file"):
        Store.open(tmp_path / "missing.duckdb", read_only=True)
    with pytest.raises(StoreError, match="in-memory"):
        Store(":memory:", read_only=True)


def test_many_read_only_processes_share_the_file(tmp_path) -> None:
    path = _filled(tmp_path)
    ro = Store.open(path, read_only=True)  # this process holds it read-only ...
    try:
        assert _child(path, "ro") == "OPEN 1 1"  # ... and another process reads it at the same time
    finally:
        ro.close()


def test_a_writer_process_excludes_every_other_process(tmp_path) -> None:
    path = _filled(tmp_path)
    rw = Store.open(path)  # a writer (e.g. the app) holds the file
    try:
        for mode in ("ro", "rw"):
            got = _child(path, mode)
            assert got.startswith("STOREERROR") and "in use by another process" in got, got
    finally:
        rw.close()
    assert _child(path, "ro") == "OPEN 1 1"  # once the writer is gone, readers get in


def test_a_reader_process_blocks_a_writer_process(tmp_path) -> None:
    path = _filled(tmp_path)
    ro = Store.open(path, read_only=True)
    try:
        got = _child(path, "rw")
        assert got.startswith("STOREERROR") and "in use by another process" in got, got
    finally:
        ro.close()


def test_read_only_open_of_an_older_file_says_to_migrate(tmp_path) -> None:
    import duckdb

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.close()
    with pytest.raises(StoreError, match="open it once read-write"):
        Store.open(path, read_only=True)
    Store.open(path).close()  # a read-write open creates the missing tables
    Store.open(path, read_only=True).close()


def test_newer_schema_is_refused(tmp_path) -> None:
    path = _filled(tmp_path)
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    for ro in (False, True):
        with pytest.raises(StoreError, match="newer than this code"):
            Store.open(path, read_only=ro)


def test_snapshot_copy_opens_read_only_with_the_same_rows(tmp_path) -> None:
    """core/store/snapshot.py: a read-write store is checkpointed and copied (the copy opens read-only beside the
    writer), a read-only store is copied as it is; a folder holds one snapshot; removing it leaves the original."""
    from core.store.snapshot import remove_snapshot, write_snapshot

    path = tmp_path / "w.duckdb"
    s = Store(path)
    s.corpus.put_document(_doc(), _chunks(), np.ones((2, 3), np.float32), "m1")
    copy = write_snapshot(s, tmp_path / "snap")
    s.corpus.put_document(_doc("d2", "b.md"), _chunks("d2"), np.ones((2, 3), np.float32), "m1")  # after the copy
    r = Store(copy, read_only=True)
    assert [d.name for d in r.corpus.documents()] == ["a.md"] and r.corpus.corpus_version() == 1
    with pytest.raises(StoreError, match="already exists"):
        write_snapshot(s, tmp_path / "snap")
    r.close()
    remove_snapshot(tmp_path / "snap")
    assert not (tmp_path / "snap").exists() and len(s.corpus.documents()) == 2
    with pytest.raises(StoreError, match="in-memory"):
        write_snapshot(Store(":memory:"), tmp_path / "mem")
    s.close()


def test_small_bound_lists_and_registered_tables_write_and_select_the_same_rows(monkeypatch) -> None:
    from datetime import datetime

    import core.store.db as db

    rows = [("a", 1, 0.5, True, datetime(2026, 1, 2, 3, 4, 5), None), ("b'q", None, None, False, None, "x"),
            ("ü", -(2**40), 2.0, None, datetime(2026, 1, 2), None)]
    mixed = [("a", [1, 2]), ("b", [])]  # a list column: never a bound list of plain values
    cols = ("s", "i", "f", "b", "t", "n")
    out = []
    for small in (True, False):
        if not small:
            monkeypatch.setattr(db, "SMALL_ROWS", 0)
            monkeypatch.setattr(db, "SMALL_IDS", 0)
        con = duckdb.connect()
        try:
            con.execute("CREATE TABLE t (s VARCHAR, i BIGINT, f DOUBLE, b BOOLEAN, t TIMESTAMP, n VARCHAR)")
            con.execute("CREATE TABLE l (s VARCHAR, v INTEGER[])")
            db.insert_rows(con, "t", cols, rows)
            db.insert_rows(con, "l", ("s", "v"), mixed)
            with db.id_relation(con, "_ids", "s", ["b'q", "ü", "none"]) as (rel, params):
                picked = con.execute(f"SELECT s FROM t WHERE s IN {rel} ORDER BY s", params).fetchall()
            with db.id_relation(con, "_ids", "s", []) as (rel, params):
                none = con.execute(f"SELECT s FROM t WHERE s IN {rel}", params).fetchall()
            out.append((con.execute("SELECT * FROM t ORDER BY s").fetchall(),
                        con.execute("SELECT * FROM l ORDER BY s").fetchall(), picked, none))
        finally:
            con.close()
    assert out[0] == out[1]
    assert out[0][0] == sorted(rows) and out[0][2] == [("b'q",), ("ü",)] and out[0][3] == []
    assert db._plain_columns(mixed) is None and db._plain_columns([(1,), ("x",)]) is None
