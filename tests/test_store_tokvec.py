"""Token vectors in the append-only file beside the database (core/store/tokvec_file.py via core.store.Caches):
round trip, crash safety (bytes without rows, rows without bytes), legacy blob rows, deletion and compaction."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.store import Store
from core.store.db import now
from core.store.tokvec_file import file_path, record_bytes


def _rows(n: int, dim: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 30000, size=n).astype(np.int32)
    vecs = rng.normal(size=(n, dim)).astype(np.float16)
    spans = np.stack([np.arange(n) * 5, np.arange(n) * 5 + 4], axis=1).astype(np.int32)
    return ids, vecs, spans


def _same(a: tuple, b: tuple) -> bool:
    return all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


def test_records_go_to_the_file_and_rows_hold_offset_length_and_model(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    items = {"a": _rows(3), "b": _rows(5, seed=1), "empty": _rows(0)}
    store.caches.cache_token_vectors("m", items)
    # 3 tokens x (4 id + 8 span + 4 dims x 2) = 60 bytes, padded to 64; 5 tokens: 100 -> 104; 0 tokens: 0
    assert record_bytes(3, 4) == 60 and record_bytes(5, 4) == 100
    assert file_path(str(db), 0).stat().st_size == 64 + 104
    rows = store.db.cursor().execute("SELECT text_sha256, model_id, file_offset, nbytes, n_tokens, dim FROM "
                                     "token_vector_slots ORDER BY file_offset, text_sha256").fetchall()
    assert rows == [("a", "m", 0, 64, 3, 4), ("b", "m", 64, 104, 5, 4), ("empty", "m", 168, 0, 0, 4)]
    assert store.db.cursor().execute("SELECT count(*) FROM token_vectors").fetchone()[0] == 0  # no blobs
    store.caches.cache_token_vectors("m", {"a": _rows(7, seed=9)})  # held already: nothing appended
    assert file_path(str(db), 0).stat().st_size == 168
    store.close()

    again = Store(db, read_only=True)
    got = again.caches.cached_token_vectors("m", ["b", "a", "empty", "zz"])
    assert set(got) == {"a", "b", "empty"}
    assert all(_same(got[k], items[k]) for k in got)
    assert again.caches.cached_token_vectors("other", ["a"]) == {}
    assert again.caches.cached_token_vectors("m", ["a"], workspace="elsewhere") == {}
    again.close()


def test_bytes_without_rows_are_cut_on_open_and_rows_past_the_end_vanish(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    store.caches.cache_token_vectors("m", {"a": _rows(3)})
    store.close()
    f = file_path(str(db), 0)
    with open(f, "ab") as fh:  # a crash after the bytes of a batch were written, before its rows were committed
        fh.write(b"\x01" * 37)
    store = Store(db)
    assert store.caches.held_token_vectors("m", ["a"]) == {"a"}
    assert f.stat().st_size == 64  # the torn tail is gone
    store.caches.cache_token_vectors("m", {"b": _rows(5, seed=1)})
    assert _same(store.caches.cached_token_vectors("m", ["b"])["b"], _rows(5, seed=1))  # appended at 64
    store.close()

    with open(f, "r+b") as fh:  # the file cut short by hand: b's row points past its end
        fh.truncate(100)
    ro = Store(db, read_only=True)
    assert set(ro.caches.cached_token_vectors("m", ["a", "b"])) == {"a"}  # never garbage
    assert ro.caches.held_token_vectors("m", ["a", "b"]) == {"a"}
    ro.close()
    store = Store(db)
    assert store.caches.held_token_vectors("m", ["a", "b"]) == {"a"}
    assert store.db.cursor().execute("SELECT count(*) FROM token_vector_slots").fetchone()[0] == 1  # b deleted
    assert f.stat().st_size == 64  # and the stray 36 bytes cut, so a new record cannot overlap a dead row
    store.caches.cache_token_vectors("m", {"b": _rows(5, seed=1)})
    assert _same(store.caches.cached_token_vectors("m", ["b"])["b"], _rows(5, seed=1))
    store.close()


def test_legacy_blob_rows_are_still_read_and_compaction_moves_them_into_the_file(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    ids, vecs, spans = _rows(6, seed=3)
    with store.db.transaction() as cur:  # a row as the code before the file wrote it
        cur.execute("INSERT INTO token_vectors VALUES (?,?,?,?,?,?,?,?,?)",
                    ["default", "m", "old", 6, 4, ids.tobytes(), vecs.tobytes(), spans.tobytes(), now()])
    store.caches.cache_token_vectors("m", {"new": _rows(2)})
    assert store.caches.held_token_vectors("m", ["old", "new"]) == {"old", "new"}
    assert _same(store.caches.cached_token_vectors("m", ["old"])["old"], (ids, vecs, spans))
    space = store.caches.token_vector_space()
    assert space["legacy_rows"] == 1 and space["legacy_bytes"] == 6 * 4 + 6 * 8 + 6 * 8 and space["rows"] == 1
    res = store.caches.compact_token_vectors()
    assert res["migrated_legacy_rows"] == 1 and res["generation"] == 1
    assert store.db.cursor().execute("SELECT count(*) FROM token_vectors").fetchone()[0] == 0
    got = store.caches.cached_token_vectors("m", ["old", "new"])
    assert _same(got["old"], (ids, vecs, spans)) and _same(got["new"], _rows(2))
    assert not file_path(str(db), 0).exists() and file_path(str(db), 1).stat().st_size == 40 + 120  # 2 x (12 + 8), 6 x (12 + 8)
    store.close()


def test_deleted_rows_leave_dead_bytes_until_compaction_frees_them(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    store.workspaces_repo.create("other")
    store.caches.cache_token_vectors("m", {"a": _rows(3), "b": _rows(5, seed=1)})
    store.caches.cache_token_vectors("m", {"c": _rows(3, seed=2)}, workspace="other")
    assert store.caches.token_vector_space()["file_bytes"] == 64 + 104 + 64
    store.workspaces_repo.delete("other")  # its rows go with the workspace; the bytes are marked dead
    assert store.caches.drop_token_vectors_except(["b"]) == 1  # "a" is no longer any chunk's text
    space = store.caches.token_vector_space()
    assert (space["rows"], space["live_bytes"], space["dead_bytes"]) == (1, 104, 128)
    res = store.caches.compact_token_vectors(batch_bytes=1)  # one record per batch: nothing is held whole
    assert (res["bytes_before"], res["bytes_after"], res["rows"]) == (232, 104, 1)
    assert _same(store.caches.cached_token_vectors("m", ["b"])["b"], _rows(5, seed=1))
    store.caches.cache_token_vectors("m", {"d": _rows(1, seed=4)})  # appends after the compacted data
    assert store.caches.token_vector_space()["file_bytes"] == 104 + 24
    store.close()
    store = Store(db)  # the generation is in the database: the compacted file is the one read
    assert set(store.caches.cached_token_vectors("m", ["a", "b", "d"])) == {"b", "d"}
    assert sorted(p.name for p in tmp_path.glob("w.duckdb.tokvec.*")) == ["w.duckdb.tokvec.1"]
    store.close()


def test_a_compaction_that_died_before_its_commit_leaves_the_old_generation_in_force(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    store.caches.cache_token_vectors("m", {"a": _rows(3), "b": _rows(5, seed=1)})

    def dies_before_commit():  # noqa: ANN202 - the process is killed once the new file is written
        raise KeyboardInterrupt

    monkeypatch.setattr(store.db, "transaction", dies_before_commit)
    with pytest.raises(KeyboardInterrupt):
        store.caches.compact_token_vectors()
    monkeypatch.undo()
    assert file_path(str(db), 0).exists() and not file_path(str(db), 1).exists()
    file_path(str(db), 1).write_bytes(b"\x02" * 50)  # as if the process had died with the new file half written
    store.close()
    store = Store(db)
    got = store.caches.cached_token_vectors("m", ["a", "b"])
    assert _same(got["a"], _rows(3)) and _same(got["b"], _rows(5, seed=1))
    assert not file_path(str(db), 1).exists()  # the stray generation is removed on a read-write open
    store.close()


def test_an_in_memory_database_keeps_token_vectors_in_a_temporary_file() -> None:
    store = Store(":memory:")
    store.caches.cache_token_vectors("m", {"a": _rows(3)})
    assert _same(store.caches.cached_token_vectors("m", ["a"])["a"], _rows(3))
    assert store.caches.clear_token_vectors() == 1 and store.caches.cached_token_vectors("m", ["a"]) == {}
    with pytest.raises(RuntimeError, match="in-memory"):
        store.caches.compact_token_vectors()
    store.close()


def _two_documents_with_token_vectors(db: Path) -> tuple[Store, list, list]:
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.models.tokens import text_key
    from tests.fakes import HashEmbedder

    store = Store(db)
    cfg = PipelineConfig().with_overrides({"chunking.size_tokens": 24, "chunking.overlap_tokens": 4})
    files = [(f"{n}.md", f"# {n}\n\n{n} one two three. {n} four five six seven.\n\nAnd {n} again eight nine.\n".encode())
             for n in ("alpha", "beta")]
    rep = ingest_files(files, store=store, embedder=HashEmbedder(), config=cfg)
    a, b = (store.corpus.chunks(doc_id=r.doc_id) for r in rep.results)
    store.caches.cache_token_vectors("m", {text_key("", c.text): _rows(3, seed=i) for i, c in enumerate([*a, *b])})
    return store, a, b


def test_cli_compact_prune_frees_a_deleted_documents_token_vectors(tmp_path: Path) -> None:
    from core.cli import main
    from core.models.tokens import text_key

    db = tmp_path / "w.duckdb"
    store, a, b = _two_documents_with_token_vectors(db)
    assert store.corpus.delete_document(a[0].doc_id)
    store.close()
    assert main(["cache", "compact", "--prune", "--json", "--db", str(db)]) == 0
    store = Store(db)
    keys_a, keys_b = [text_key("", c.text) for c in a], [text_key("", c.text) for c in b]
    assert store.caches.held_token_vectors("m", keys_a + keys_b) == set(keys_b)
    space = store.caches.token_vector_space()
    assert (space["rows"], space["file_bytes"], space["dead_bytes"]) == (len(keys_b), 64 * len(keys_b), 0)
    store.close()


def test_cli_compact_reports_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from core.cli import main

    db = tmp_path / "w.duckdb"
    store, a, b = _two_documents_with_token_vectors(db)
    store.close()
    assert main(["cache", "compact", "--json", "--db", str(db)]) == 0
    got = json.loads(capsys.readouterr().out)
    n = len(a) + len(b)
    assert got["token_vectors_dropped"] == 0 and got["rows"] == n and got["generation"] == 1
    assert got["bytes_before"] == got["bytes_after"] == 64 * n  # nothing was dead


def test_a_snapshot_copy_reads_the_token_vectors_through_a_link(tmp_path: Path) -> None:
    from core.cli import _snapshot_store

    db = tmp_path / "w.duckdb"
    store = Store(db)
    store.caches.cache_token_vectors("m", {"a": _rows(3)})
    store.close()
    snap = _snapshot_store(str(db))
    assert snap.read_only and _same(snap.caches.cached_token_vectors("m", ["a"])["a"], _rows(3))
    snap.close()


def test_a_missing_token_vector_file_is_reported_not_silently_recomputed(tmp_path: Path) -> None:
    """Issue #47: a database copied without its token-vector file dropped the rows and let rerank recompute every
    vector (21.5 s) without a word; now opening it says what was lost and why."""
    db = tmp_path / "w.duckdb"
    store = Store(db)
    store.caches.cache_token_vectors("m", {"a": _rows(3), "b": _rows(4, seed=2)})
    store.close()
    file_path(str(db), 0).unlink()  # copied without it
    store = Store(db)
    assert store.caches.cached_token_vectors("m", ["a", "b"]) == {}
    [notice] = store.caches.take_notices()
    assert "is missing" in notice and "2 token-vector records" in notice and "computes them again" in notice
    assert store.caches.take_notices() == []  # said once
    store.close()
    again = Store(db)
    again.caches.cached_token_vectors("m", ["a"])
    assert again.caches.take_notices() == []  # nothing left to lose: no notice on a sound file
    again.close()
