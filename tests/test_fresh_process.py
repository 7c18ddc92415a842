"""Issue #47 item 7: a fresh process pays nothing that grows with the corpus. The BM25 index and the rerank IDF table
are saved per corpus version beside the database and loaded by the next process (oracle: the index bm25s builds);
each chunk's language is stored at ingest (and filled once for a file of the older schema); an up-to-date database
opens without a write."""
from __future__ import annotations

from pathlib import Path

import bm25s
import duckdb
import numpy as np
import pytest

import core.retrieve.bm25 as bm25_mod
import core.store.corpus as corpus_mod
from core.cascade.rerank import LateInteractionReranker
from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.index import IndexCache
from core.store import SCHEMA_VERSION, Store
from core.store.db import _GENERATIONS
from tests.cascade_fakes import ConceptWindowEncoder
from tests.fakes import HashEmbedder

TEXTS = ["The gateway logs every request.", "A gateway port is 8443; the TLS version is 1.3.",
         "Kraken rotates keys nightly.", "Der Schlüssel wird jede Nacht gewechselt und die Tür bleibt zu.",
         "gateway gateway kraken"]
QUERIES = ["gateway", "kraken keys", "gateway gateway port", "nothing matches this", "TLS 1.3 version"]


def _ingest(store: Store, docs: dict[str, str], workspace: str = "default") -> None:
    report = ingest_files([(n, t.encode()) for n, t in docs.items()], store=store, embedder=HashEmbedder(),
                          config=PipelineConfig(), workspace=workspace)
    assert not report.errors


@pytest.mark.parametrize("method", ["lucene", "bm25l"])
def test_saved_bm25_index_scores_as_bm25s_does(tmp_path: Path, method: str) -> None:
    params = BM25Params(method=method)
    built = BM25Index([f"c{i}" for i in range(len(TEXTS))], TEXTS, params)
    oracle = bm25s.BM25(k1=params.k1, b=params.b, method=method)
    oracle.index([built.tokens(t) for t in TEXTS], show_progress=False)
    store = Store(tmp_path / "w.duckdb")
    assert store.index_files.save("bm25", "default", "k", 3, built.to_arrays())
    loaded = BM25Index.from_arrays(store.index_files.load("bm25", "default", "k", 3), params)
    assert loaded is not None and loaded.chunk_ids == built.chunk_ids and loaded.vocabulary() == built.vocabulary()
    for q in QUERIES:
        toks = [t for t in built.tokens(q) if t in oracle.vocab_dict]
        want = oracle.get_scores(toks) if toks else np.zeros(len(TEXTS))
        assert np.allclose(loaded.scores(q), want, atol=1e-6), q
        assert loaded.search(q, 3) == built.search(q, 3)
        assert loaded.best_passage_terms(q) == built.best_passage_terms(q)
    assert BM25Index.from_arrays(store.index_files.load("bm25", "default", "k", 3), BM25Params(k1=0.9)) is None
    assert store.index_files.load("bm25", "default", "k", 4) is None  # another corpus version: no file
    store.close()


def test_a_fresh_index_cache_loads_the_saved_bm25_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.duckdb"
    store = Store(path)
    _ingest(store, {"a.md": TEXTS[0], "b.md": TEXTS[1]})
    first = IndexCache().bm25(store, "default", BM25Params())
    built = first.search("gateway", 5)
    files = sorted(p.name for p in (tmp_path / "w.duckdb.index").iterdir())
    assert len(files) == 1 and files[0].startswith("bm25-")

    def no_build(*_a: object, **_k: object) -> None:
        raise AssertionError("a fresh process rebuilt the BM25 index of an unchanged corpus")

    monkeypatch.setattr(bm25_mod, "_build", no_build)
    assert IndexCache().bm25(store, "default", BM25Params()).search("gateway", 5) == built
    monkeypatch.undo()
    _ingest(store, {"c.md": TEXTS[2]})  # the corpus version moves: a new file, the old one removed
    fresh = IndexCache().bm25(store, "default", BM25Params())
    assert len(fresh) == 3 and fresh.search("kraken", 1)[0][0] != built[0][0]
    assert len(list((tmp_path / "w.duckdb.index").iterdir())) == 1
    store.delete_workspace("default")
    assert not list((tmp_path / "w.duckdb.index").iterdir())  # a workspace delete takes its index files
    store.close()


def test_an_index_file_of_other_chunks_is_not_loaded(tmp_path: Path) -> None:
    """A database replaced at the same path restarts its versions: the file's chunk fingerprint tells them apart."""
    path = tmp_path / "w.duckdb"
    store = Store(path)
    _ingest(store, {"a.md": TEXTS[0]})
    IndexCache().bm25(store, "default", BM25Params())
    store.close()
    saved = list((tmp_path / "w.duckdb.index").iterdir())
    for p in path.parent.glob("w.duckdb*"):
        if p.is_file():
            p.unlink()
    store = Store(path)  # a new database, the old index folder beside it
    _ingest(store, {"z.md": TEXTS[2]})
    assert store.corpus.corpus_version() == 1 and saved[0].exists()
    assert IndexCache().bm25(store, "default", BM25Params()).search("kraken", 1)  # built from the new chunks
    store.close()


def test_rerank_idf_table_is_saved_per_corpus_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "w.duckdb")
    _ingest(store, {"a.md": TEXTS[0], "b.md": TEXTS[1], "c.md": TEXTS[4]})
    first = LateInteractionReranker(ConceptWindowEncoder(), corpus=store.corpus, files=store.index_files)
    _, w = first.query_matrix("the gateway kraken")
    enc = ConceptWindowEncoder()
    fresh = LateInteractionReranker(enc, corpus=store.corpus, files=store.index_files)
    calls: list[str] = []
    orig = enc.tokenize
    monkeypatch.setattr(enc, "tokenize", lambda text: (calls.append(text), orig(text))[1])
    _, w2 = fresh.query_matrix("the gateway kraken")
    assert np.array_equal(w, w2) and calls == ["the gateway kraken"]  # the query alone: no chunk tokenised
    store.close()


def test_languages_are_stored_at_ingest_and_filled_once_for_an_older_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.duckdb"
    store = Store(path)
    _ingest(store, {"a.md": TEXTS[0], "d.md": TEXTS[3], "r.md": "Ключи меняются каждую ночь, дверь закрыта."})
    want = {"en": 1, "de": 1, "ru": 1}
    calls: list[str] = []
    real = corpus_mod.guess_language
    monkeypatch.setattr(corpus_mod, "guess_language", lambda t: (calls.append(t), real(t))[1])
    assert store.corpus.language_counts() == want and not calls  # a count, no text read
    store.close()
    con = duckdb.connect(str(path))  # the file as schema v3 left it: no language column
    con.execute("ALTER TABLE chunks DROP COLUMN language")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    assert store.corpus.language_counts() == want and len(calls) == 2  # guessed once (Latin-script chunks)...
    assert store.corpus.language_counts() == want and len(calls) == 2  # ...and written
    store.close()


def test_an_up_to_date_database_opens_without_a_write(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    Store(path).close()
    key = str(path.resolve())
    before = _GENERATIONS.get(key, 0)
    s = Store(path)
    assert _GENERATIONS.get(key, 0) == before and s.schema_version() == SCHEMA_VERSION
    s.close()


def test_a_fresh_index_cache_reads_the_saved_dense_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "w.duckdb")
    _ingest(store, {"a.md": TEXTS[0], "b.md": TEXTS[1], "c.md": TEXTS[2]})
    emb = HashEmbedder()
    q = emb.encode(["gateway port"])[0]
    want = IndexCache().dense(store, emb, "default").search(q, 3)
    monkeypatch.setattr(store.corpus, "vectors", lambda *a, **k: pytest.fail("read every vector row again"))
    assert IndexCache().dense(store, emb, "default").search(q, 3) == want
    monkeypatch.undo()
    store.corpus.delete_document(store.corpus.documents()[0].doc_id)  # a new version: read from the rows again
    assert len(IndexCache().dense(store, emb, "default")) == len(store.corpus.chunks())
    store.close()


def test_a_renamed_workspace_leaves_no_index_files_under_its_old_name(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.duckdb")
    _ingest(store, {"a.md": TEXTS[0]}, workspace="old")
    IndexCache().bm25(store, "old", BM25Params())
    folder = tmp_path / "w.duckdb.index"
    assert len(list(folder.iterdir())) == 1
    store.workspaces_repo.rename("old", "new")
    assert not list(folder.iterdir())
    assert IndexCache().bm25(store, "new", BM25Params()).search("gateway", 1)
    store.close()
