"""One contract per repository Protocol, run against the DuckDB repository and the in-memory fake (the Haystack
DocumentStore idea): whatever a stage is handed, it behaves the same. Oracles are hand-written rows."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from core.cascade.expand import DocumentSource
from core.graph.rules import merge_item_id, most_frequent, node_row
from core.store import Store
from core.types import (
    Candidate,
    Chunk,
    Document,
    GraphNode,
    LedgerEntry,
    NodeFacts,
    StageResult,
    Trace,
)
from tests.store_fakes import MemoryCaches, MemoryCorpus, MemoryLedger, MemoryRunLog

TEXT = "Alpha one. Beta two. Gamma three."


def _doc(doc_id: str, ws: str = "default", title: str = "") -> Document:
    return Document(doc_id, f"{doc_id}.md", "md", len(TEXT), "h" + doc_id, "en", TEXT, "test", ws, title)


def _chunks(doc_id: str) -> list[Chunk]:
    return [Chunk(f"{doc_id}-1", doc_id, 1, "Beta two.", 11, 20, ("H",), 2, "en"),
            Chunk(f"{doc_id}-0", doc_id, 0, "Alpha one.", 0, 10, ("H",), 2, "en")]


def _duck() -> Store:
    return Store(":memory:")


# Each factory returns (the object handed to stages, a writer used to fill it).
CORPORA: dict[str, Callable[[], tuple[object, Callable]]] = {
    "duckdb": lambda: (lambda s: (s.corpus, lambda d, c: s.corpus.put_document(d, c, None, "m")))(_duck()),
    "memory": lambda: (lambda m: (m, lambda d, c: m.put_document(d, c)))(MemoryCorpus()),
}
CACHES = {"duckdb": lambda: _duck().caches, "memory": MemoryCaches}
LEDGERS = {"duckdb": lambda: _duck().ledger, "memory": MemoryLedger}
RUNLOGS = {"duckdb": lambda: _duck().runs, "memory": MemoryRunLog}


# -- DocumentSource / ChunkSource / CorpusSource ------------------------------------------------------------------
@pytest.fixture(params=sorted(CORPORA))
def corpus(request: pytest.FixtureRequest) -> tuple[DocumentSource, Callable]:
    return CORPORA[request.param]()


def test_corpus_reads_what_was_written(corpus) -> None:
    source, put = corpus
    assert source.corpus_version() == 0 and source.chunks() == [] and source.document_text("d1") is None
    put(_doc("d1", title="Doc One"), _chunks("d1"))
    put(_doc("d2"), _chunks("d2"))
    assert source.corpus_version() == 2  # every document write moves the version
    assert source.document_text("d1") == TEXT
    # chunks come in (doc, ordinal) order whatever order they were written in
    assert [c.chunk_id for c in source.chunks()] == ["d1-0", "d1-1", "d2-0", "d2-1"]
    assert [c.chunk_id for c in source.chunks(doc_id="d2")] == ["d2-0", "d2-1"]
    got = source.chunks_by_id(["d2-1", "nope", "d1-0"])
    assert set(got) == {"d2-1", "d1-0"} and got["d2-1"] == _chunks("d2")[0]
    assert source.chunks_by_id([]) == {}
    # a title, else the file name
    assert source.document_titles(["d1", "d2", "zz"]) == {"d1": "Doc One", "d2": "d2.md"}


def test_corpus_workspaces_do_not_mix(corpus) -> None:
    source, put = corpus
    put(_doc("d1", ws="w2"), _chunks("d1"))
    assert source.chunks() == [] and source.chunks_by_id(["d1-0"]) == {} and source.document_text("d1") is None
    assert len(source.chunks("w2")) == 2 and source.corpus_version("w2") == 1 and source.corpus_version() == 0


def test_expand_gives_the_same_answer_on_either_corpus() -> None:
    from core.cascade.expand import expand

    outs = []
    for name in sorted(CORPORA):
        source, put = CORPORA[name]()
        put(_doc("d1"), _chunks("d1"))
        c = source.chunks_by_id(["d1-1"])["d1-1"]
        ex = expand([Candidate(c.chunk_id, c.doc_id, c.text, 1.0, 1)], source, mode="window", window=1)
        outs.append(ex.candidates[0].text)
    assert outs[0] == outs[1] == TEXT  # one sentence either side of "Beta two." is the whole document


# -- EmbeddingCacheStore and TokenStore -------------------------------------------------------------------------
@pytest.fixture(params=sorted(CACHES))
def caches(request: pytest.FixtureRequest):
    return CACHES[request.param]()


def test_embedding_cache_round_trip_first_write_wins_and_keys_by_model(caches) -> None:
    v = np.array([0.6, 0.8, 0.0], np.float32)
    caches.cache_embeddings("m1", {"h1": v})
    caches.cache_embeddings("m1", {"h1": np.zeros(3, np.float32)})  # a second write never replaces the first
    got = caches.cached_embeddings("m1", ["h1", "h2"])
    assert list(got) == ["h1"] and got["h1"].dtype == np.float32
    np.testing.assert_array_equal(got["h1"], v)
    assert caches.cached_embeddings("m2", ["h1"]) == {} and caches.cached_embeddings("m1", ["h1"], "other") == {}
    assert caches.cached_embeddings("m1", []) == {}


def test_token_cache_round_trip_keeps_dtypes_and_shapes(caches) -> None:
    ids = np.array([5, 7], np.int32)
    vecs = np.array([[1, 0], [0, 1]], np.float16)
    spans = np.array([[0, 3], [4, 9]], np.int32)
    caches.cache_token_vectors("m", {"t": (ids, vecs, spans)})
    got = caches.cached_token_vectors("m", ["t", "u"])
    assert list(got) == ["t"]
    gi, gv, gs = got["t"]
    assert (gi.dtype, gv.dtype, gs.dtype, gv.shape, gs.shape) == (np.int32, np.float16, np.int32, (2, 2), (2, 2))
    np.testing.assert_array_equal(gi, ids)
    np.testing.assert_array_equal(gv, vecs)
    np.testing.assert_array_equal(gs, spans)
    assert caches.cached_token_vectors("other-model", ["t"]) == {}


# -- LedgerSink (core.models.llm) --------------------------------------------------------------------------------------
@pytest.fixture(params=sorted(LEDGERS))
def ledger(request: pytest.FixtureRequest):
    return LEDGERS[request.param]()


def test_ledger_records_typed_entries_in_order_and_filters(ledger) -> None:
    a = LedgerEntry("context", "claude-x", input_tokens=100, usd=0.25, run_id="r1", ref_id="d1")
    b = LedgerEntry("answer", "claude-x", output_tokens=7, usd=0.5, run_id="r2")
    c = LedgerEntry("answer", "claude-x", usd=1.0, run_id="r2", workspace="w2")
    for e in (a, b, c):
        ledger.record_usage(e)
    rows = ledger.usage_ledger()
    assert [(r.purpose, r.usd) for r in rows] == [("context", 0.25), ("answer", 0.5)]
    assert rows[0] == a and rows[0].created_at is not None  # created_at is stamped, and not compared
    assert [r.run_id for r in ledger.usage_ledger(purpose="answer")] == ["r2"]
    assert [r.ref_id for r in ledger.usage_ledger(run_id="r1")] == ["d1"]
    assert sum(r.usd for r in ledger.usage_ledger("w2")) == 1.0
    assert len(ledger.usage_ledger(limit=1)) == 1


# -- run log -----------------------------------------------------------------------------------------------------
@pytest.fixture(params=sorted(RUNLOGS))
def runlog(request: pytest.FixtureRequest):
    return RUNLOGS[request.param]()


def test_run_log_returns_typed_records_newest_first(runlog) -> None:
    t1 = Trace("first", "cfg1", 3, (StageResult("bm25"),))
    t2 = Trace("second", "cfg2", 4, ())
    ids = [runlog.log_trace(t1), runlog.log_trace(t2)]
    runlog.log_trace(Trace("elsewhere", "cfg", 1, (), workspace="w2"))
    runs = runlog.recent_runs()
    assert [r.query for r in runs] == ["second", "first"] and [r.run_id for r in runs] == ids[::-1]
    assert runs[1].trace == t1.to_dict() and runs[1].config_hash == "cfg1" and runs[1].corpus_version == 3
    assert [r.query for r in runlog.recent_runs(limit=1)] == ["second"]
    assert [r.query for r in runlog.recent_runs("w2")] == ["elsewhere"]


# -- graph rules (core/graph/rules.py): the choices the store no longer makes ----------------------------------
def test_most_frequent_breaks_ties_alphabetically_whatever_the_order() -> None:
    assert most_frequent({"Harbor": 2, "harbor": 3}) == "harbor"
    assert most_frequent({"b": 2, "a": 2, "c": 1}) == "a" == most_frequent({"c": 1, "a": 2, "b": 2})
    assert most_frequent({}) == ""


def test_node_row_names_types_and_describes() -> None:
    facts = NodeFacts("acme", {"ACME": 1, "Acme": 3, "acme": 3}, {"org": 2, "phrase": 2}, 4, 7, 2,
                      ("acme", "acme corp"), ("d3", "", "d1", "d2", "d4", "d1"))
    row = node_row(facts)
    # surfaces tie at 3 -> "Acme" < "acme"; types tie at 2 -> "org"; three sorted distinct non-empty descriptions
    assert row == GraphNode("acme", "Acme", "org", "d1 | d2 | d3", 4, 7, 2, ("acme", "acme corp"))
    assert node_row(facts, {"acme": "ACME Corporation"}).name == "ACME Corporation"  # the synonym list wins


def test_merge_item_id_names_the_unordered_pair() -> None:
    assert merge_item_id("a", "b") == merge_item_id("b", "a") != merge_item_id("a", "c")
    assert len(merge_item_id("a", "b")) == 12


def test_review_queue_never_requeues_a_known_pair() -> None:
    s = _duck()
    item = merge_item_id("x", "y")
    assert s.review.add_suggestions([(item, "x", "y", "X", "Y", 0.95)]) == 1
    assert s.review.add_suggestions([(merge_item_id("y", "x"), "y", "x", "Y", "X", 0.99)]) == 0
    assert s.review.set_queue_status(item, "rejected") and not s.review.set_queue_status("nope", "approved")
    [q] = s.review.queue()
    assert (q.item_id, q.keep_id, q.status, q.score) == (item, "x", "rejected", 0.95) and q.decided_at is not None
    assert s.review.queue("pending") == []
