"""Golden sets: line-by-line problems, the sample set, gold resolution, pre-chunked ingest, and the public loaders."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import PipelineConfig
from core.eval.datasets import (
    DatasetError,
    PreDoc,
    anthropic_set,
    code_outline,
    enclosing_definitions,
    ensure_corpus,
    ingest_predocs,
    load_dataset,
    parse_jsonl,
    resolve_gold,
    sample_set,
    scifact_set,
)
from core.eval.metrics import span_in_text
from core.ingest.pipeline import ingest_files, read_paths
from core.types import Chunk, Document

GOOD = {"id": "g1", "query": "How long did the outage last?", "type": "factoid", "answerable": True,
        "gold": [{"doc": "ops.md", "span": "The outage lasted 3 hours and 40 minutes."}], "answer": "3 h 40 min"}


def _jsonl(*lines: object) -> str:
    return "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)


def test_malformed_lines_are_reported_one_by_one_and_the_rest_loads() -> None:
    text = _jsonl(
        GOOD,
        '{"id": "bad-json", "query": "unterminated',
        {"id": "e1", "query": "   ", "gold": []},
        {"id": "g2", "query": "Second?", "gold": "ops.md"},
        {"id": "g1", "query": "duplicate id"},
        {"id": "u1", "query": "Who is the CEO of Mars?", "type": "unanswerable", "answerable": False, "gold": []},
        "",
        {"id": "w1", "query": "Answerable but no gold", "answerable": True},
        [1, 2, 3],
        {"id": "gr", "query": "graded", "gold": [{"doc": "x", "grade": -1}]},
    )
    gs = parse_jsonl(text, "t.jsonl")
    assert [q.qid for q in gs.queries] == ["g1", "u1", "w1"]
    by_line = {p.line: p for p in gs.problems}
    assert "not valid JSON" in by_line[2].message
    assert by_line[3].message == "empty query" and by_line[3].qid == "e1"
    assert "gold must be a list" in by_line[4].message
    assert "duplicate id" in by_line[5].message
    assert by_line[8].severity == "warning" and "no gold" in by_line[8].message
    assert "expected a JSON object" in by_line[9].message
    assert "grade" in by_line[10].message
    assert str(by_line[3]) == "line 3 (e1): empty query"
    q = gs.queries[0]
    assert q.gold[0].doc == "ops.md" and q.gold[0].match == "span" and q.reference == "3 h 40 min"
    assert not gs.queries[1].answerable and gs.queries[1].qtype == "unanswerable"


def test_gold_with_a_document_but_no_span_is_document_level() -> None:
    gs = parse_jsonl(_jsonl({"query": "q", "gold": [{"doc": "a.md"}], "id": "d"}))
    assert gs.queries[0].gold[0].match == "doc"


def test_undecodable_or_empty_file_is_refused_whole() -> None:
    with pytest.raises(DatasetError, match="not UTF-8"):
        parse_jsonl(b"\xff\xfe\x00garbage", "bin.jsonl")
    with pytest.raises(DatasetError, match="no questions"):
        parse_jsonl("\n\n", "empty.jsonl")


def test_unknown_document_drops_that_question_only(store, embedder) -> None:
    ingest_files([("ops.md", b"# Ops\n\nThe outage lasted 3 hours and 40 minutes. Then it was fixed.\n")],
                 store=store, embedder=embedder, config=PipelineConfig())
    text = _jsonl(GOOD, {"id": "g9", "query": "Other?", "gold": [{"doc": "missing.md", "span": "x y z"}]})
    gs = resolve_gold(parse_jsonl(text), store, "default")
    assert [q.qid for q in gs.queries] == ["g1"]
    assert gs.queries[0].gold[0].doc_ids == frozenset({store.corpus.documents()[0].doc_id})
    assert any(p.line == 2 and "unknown document 'missing.md'" in p.message for p in gs.problems)


def test_load_dataset_resolves_names_and_paths(tmp_path: Path) -> None:
    p = tmp_path / "mine.jsonl"
    p.write_text(_jsonl(GOOD))
    assert load_dataset(str(p), tmp_path).queries[0].qid == "g1"
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_dataset("no_such_set", tmp_path)
    with pytest.raises(DatasetError, match="anthropic_codebase not found"):
        load_dataset("anthropic_codebase", tmp_path)  # absent: a clean message, not a traceback


# -- the shipped sample set ----------------------------------------------------------------------------------------
def test_sample_set_loads_clean_with_every_question_type() -> None:
    gs = sample_set()
    assert len(gs.queries) >= 40 and not [p for p in gs.problems if p.severity == "error"]
    assert {"factoid", "exact-id", "multi-hop", "global", "unanswerable"} <= {q.qtype for q in gs.queries}
    assert all(not q.gold for q in gs.queries if not q.answerable)


@pytest.mark.parametrize(("strategy", "size", "overlap"), [("structure", 180, 30), ("fixed", 40, 0)])
def test_sample_gold_survives_rechunking(store, embedder, strategy: str, size: int, overlap: int) -> None:
    """Every gold span is found (by the span rule) in some chunk of its own document, whatever the chunker."""
    cfg = PipelineConfig().with_overrides({"chunking.strategy": strategy, "chunking.size_tokens": size,
                                           "chunking.overlap_tokens": overlap})
    gs = sample_set()
    ensure_corpus(gs, store=store, embedder=embedder, workspace="default", config=cfg)
    gs = resolve_gold(gs, store, "default")
    assert not [p for p in gs.problems if p.severity == "error"]
    chunks = store.corpus.chunks("default")
    lost = []
    for q in gs.queries:
        for g in q.gold:
            if not any(c.doc_id in g.doc_ids and span_in_text(g.text, c.text) for c in chunks):
                lost.append((q.qid, g.doc, g.text[:60]))
    assert not lost, lost


# -- pre-chunked corpora -------------------------------------------------------------------------------------------
RUST = """//! Executor for differential fuzzing.
use core::fmt;

pub struct DiffExecutor<A, B> {
    primary: A,
}

impl<A, B> DiffExecutor<A, B> {
    pub fn new(primary: A) -> Self {
        Self { primary }
    }

    fn run_target(&mut self) {
        let x = 1;
    }
}
"""


def test_code_outline_and_enclosing_definitions() -> None:
    assert code_outline(RUST) == ["struct DiffExecutor<A, B>", "impl<A, B> DiffExecutor<A, B>"]
    pos = RUST.index("let x")
    assert enclosing_definitions(RUST, pos) == ("impl<A, B> DiffExecutor<A, B>", "fn run_target")
    assert enclosing_definitions(RUST, 10) == ()
    py = "class Cipher:\n    def decode(self, text):\n        return text[::-1]\n"
    assert code_outline(py) == ["class Cipher"]
    assert enclosing_definitions(py, py.index("return")) == ("class Cipher", "def decode")


def _predocs(texts: dict[str, list[str]]) -> list[PreDoc]:
    out = []
    for did, parts in texts.items():
        content = "\n".join(parts)
        chunks = tuple(Chunk(f"{did}_chunk_{i}", did, i, t, 0, len(t)) for i, t in enumerate(parts))
        out.append(PreDoc(Document(did, did, "txt", len(content), f"h-{content}", "en", content, "as-given",
                                   "ws", "", len(chunks)), chunks))
    return out


def test_prechunked_ingest_keeps_ids_and_a_second_run_costs_nothing(store, embedder) -> None:
    pre = _predocs({"doc_1": ["alpha beta gamma", "delta epsilon"], "doc_2": ["zeta eta theta"]})
    first = ingest_predocs(pre, store=store, embedder=embedder, workspace="ws", batch_chunks=2)
    assert (first.added, first.present, first.embedded) == (2, 0, 3)
    assert [c.chunk_id for c in store.corpus.chunks("ws")] == ["doc_1_chunk_0", "doc_1_chunk_1", "doc_2_chunk_0"]
    assert store.corpus.count("vectors", "ws") == 3
    calls = embedder.encoded
    again = ingest_predocs(pre, store=store, embedder=embedder, workspace="ws")
    assert (again.added, again.present, again.embedded) == (0, 2, 0) and embedder.encoded == calls


# -- the public sets (skipped when ../shared/datasets is absent) -----------------------------------------------------
@pytest.mark.datasets
def test_anthropic_codebase_loader_matches_the_published_shape(datasets_dir: Path) -> None:
    gs = anthropic_set(datasets_dir)
    assert len(gs.queries) == 248 and not gs.problems and gs.pass_k
    assert PipelineConfig().with_overrides(gs.overrides).rerank.k >= 20  # the set's needs are real settings
    assert sum(len(q.gold) for q in gs.queries) == 306
    pre = gs.predocs()
    assert len(pre) == 90 and sum(len(p.chunks) for p in pre) == 737
    assert pre[0].chunks[0].chunk_id == "doc_1_chunk_0" and pre[0].doc.doc_id == "doc_1"
    corpus_texts = {c.text.strip() for p in pre for c in p.chunks}
    assert all(g.text.strip() in corpus_texts for q in gs.queries for g in q.gold)  # the cookbook's join holds


@pytest.mark.datasets
def test_beir_scifact_loader_reads_qrels_and_one_chunk_per_abstract(datasets_dir: Path) -> None:
    gs = scifact_set(datasets_dir)
    assert len(gs.queries) == 300 and sum(len(q.gold) for q in gs.queries) == 339
    assert gs.unit == "doc" and 100 in gs.ks and gs.overrides["fusion.k"] == 100
    assert PipelineConfig().with_overrides(gs.overrides).fusion.k == 100
    pre = gs.predocs()
    assert len(pre) == 5183 and all(len(p.chunks) == 1 for p in pre)
    ids = {p.doc.doc_id for p in pre}
    assert all(g.doc in ids for q in gs.queries for g in q.gold)


def test_sample_corpus_folder_holds_only_documents() -> None:
    gs = sample_set()
    names = [n for n, _ in read_paths([gs.corpus_dir])]
    assert "README.md" not in names and "eval.jsonl" not in names and not any(n.startswith("_") for n in names)
    assert {g.doc for q in gs.queries for g in q.gold} <= set(names)  # every gold document ships


def test_sample_corpus_is_never_mixed_into_a_foreign_workspace(store, embedder) -> None:
    ingest_files([("my_own_notes.md", b"# Notes\n\nNothing to do with the sample company at all.\n")],
                 store=store, embedder=embedder, config=PipelineConfig())
    rep = ensure_corpus(sample_set(), store=store, embedder=embedder, workspace="default")
    assert rep is not None and rep.added == 0 and "holds other documents" in rep.errors[0]
    assert [d.name for d in store.corpus.documents()] == ["my_own_notes.md"]
    gs = resolve_gold(sample_set(), store, "default")
    assert not gs.scorable and any("unknown document" in p.message for p in gs.problems)


# -- golden sets as users bring them (issue #11) --------------------------------------------------------------------
def test_csv_golden_set_with_documents_spans_and_chunk_ids() -> None:
    from core.eval.datasets import parse_csv

    text = ("Question,gold_docs,gold_spans,gold_ids,id\n"
            "How long was the outage?,ops.md,The outage lasted 3 hours,,c1\n"
            "Which two files?,a.md|b.md,,,c2\n"
            "By id,,,ops-0001|ops-0002,c3\n"
            ",a.md,,,c4\n")
    gs = parse_csv(text, "mine.csv")
    assert [q.qid for q in gs.queries] == ["c1", "c2", "c3"]
    q1, q2, q3 = gs.queries
    assert (q1.gold[0].doc, q1.gold[0].text, q1.gold[0].match) == ("ops.md", "The outage lasted 3 hours", "span")
    assert [(g.doc, g.match) for g in q2.gold] == [("a.md", "doc"), ("b.md", "doc")]
    assert [(g.text, g.match) for g in q3.gold] == [("ops-0001", "chunk"), ("ops-0002", "chunk")]
    assert [(p.line, p.message) for p in gs.problems] == [(5, "empty query")]  # the CSV's own line number
    with pytest.raises(DatasetError, match="'question'"):
        parse_csv("foo,bar\n1,2\n", "bad.csv")


def test_jsonl_accepts_question_and_gold_shorthands() -> None:
    gs = parse_jsonl(_jsonl({"id": "s", "question": "Q?", "gold_docs": ["a.md"], "gold_ids": ["a-0001"],
                             "gold": [{"chunk_id": "a-0002"}]}))
    assert [(g.doc, g.text, g.match) for g in gs.queries[0].gold] == [
        ("", "a-0002", "chunk"), ("a.md", "", "doc"), ("", "a-0001", "chunk")]


def test_document_level_scores_spans_and_chunk_ids_as_their_documents(store, embedder) -> None:
    from core.eval.datasets import at_level
    from core.eval.metrics import is_relevant

    ingest_files([("ops.md", b"# Ops\n\nThe outage lasted 3 hours and 40 minutes. Then it was fixed.\n"),
                  ("hr.md", b"# HR\n\nLeave is 25 days a year.\n")], store=store, embedder=embedder,
                 config=PipelineConfig())
    docs = {d.name: d.doc_id for d in store.corpus.documents()}
    chunk = store.corpus.chunks("default", docs["hr.md"])[0].chunk_id
    text = _jsonl({"id": "a", "query": "outage?", "gold": [{"doc": "ops.md", "span": "words not in the file"}]},
                  {"id": "b", "query": "leave?", "gold_ids": [chunk]},
                  {"id": "c", "query": "by store id", "gold_docs": [docs["hr.md"]]},
                  {"id": "d", "query": "stale", "gold_ids": ["no-such-chunk"]})
    chunk_level = resolve_gold(parse_jsonl(text), store, "default")
    assert [q.qid for q in chunk_level.queries] == ["a", "b", "c"]
    assert any("no-such-chunk" in p.message and p.line == 4 for p in chunk_level.problems)
    a, b, c = chunk_level.queries
    assert not is_relevant(a.gold[0], docs["ops.md"], "The outage lasted 3 hours")  # span absent: not relevant
    assert is_relevant(b.gold[0], docs["hr.md"], "", chunk_id=chunk) and not is_relevant(b.gold[0], docs["hr.md"], "")
    doc_level = resolve_gold(at_level(parse_jsonl(text), "document", [1, 2]), store, "default")
    a, b, c = doc_level.queries
    assert doc_level.unit == "doc" and doc_level.ks == (1, 2)
    assert is_relevant(a.gold[0], docs["ops.md"], "anything") and not is_relevant(a.gold[0], docs["hr.md"], "x")
    assert b.gold[0].match == "doc" and is_relevant(b.gold[0], docs["hr.md"], "other chunk text")
    assert c.gold[0].doc_ids == frozenset({docs["hr.md"]})


def test_beir_folder_loads_as_a_set_with_its_corpus(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(_jsonl({"_id": "d1", "title": "Cats", "text": "Cats purr."},
                                                  {"_id": "d2", "title": "", "text": "Dogs bark."}))
    (tmp_path / "queries.jsonl").write_text(_jsonl({"_id": "q1", "text": "why purr"}, {"_id": "q2", "text": "bark"},
                                                   {"_id": "q9", "text": "train split only"}))
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t0\nbad row\n")
    gs = load_dataset(f"beir:{tmp_path}", tmp_path)
    assert [q.qid for q in gs.queries] == ["q1"] and gs.queries[0].gold[0].grade == 2 and gs.unit == "doc"
    assert {p.message for p in gs.problems} >= {"no relevant documents in the qrels; left out"}
    assert any("unreadable row" in p.message for p in gs.problems)
    pre = gs.predocs()
    assert [(p.doc.doc_id, p.chunks[0].text) for p in pre] == [("d1", "Cats\nCats purr."), ("d2", "Dogs bark.")]
    assert gs.workspace and gs.workspace.startswith("beir_")
    with pytest.raises(DatasetError, match="not a BEIR folder"):
        load_dataset(f"beir:{tmp_path / 'qrels'}", tmp_path)


def test_subsample_keeps_the_gold_documents_and_fills_with_seeded_distractors(tmp_path: Path) -> None:
    from core.eval.datasets import subsample

    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(_jsonl(*[{"_id": f"d{i}", "text": f"text {i}"} for i in range(50)]))
    (tmp_path / "queries.jsonl").write_text(_jsonl(*[{"_id": f"q{i}", "text": f"query {i}"} for i in range(10)]))
    (tmp_path / "qrels" / "test.tsv").write_text("".join(f"q{i}\td{i * 3}\t1\n" for i in range(10)))
    gs = load_dataset(f"beir:{tmp_path}", tmp_path)
    small = subsample(gs, max_docs=12, max_questions=4, seed=7)
    again = subsample(gs, max_docs=12, max_questions=4, seed=7)
    ids = [p.doc.doc_id for p in small.predocs()]
    assert len(small.queries) == 4 and len(ids) == 12 and ids == [p.doc.doc_id for p in again.predocs()]
    assert {g.doc for q in small.queries for g in q.gold} <= set(ids)
    assert small.workspace != gs.workspace and "s7" in small.workspace
    assert subsample(gs, max_questions=4, seed=7).workspace == gs.workspace  # same corpus, same workspace


@pytest.mark.datasets
def test_twowiki_loader_reads_titles_as_document_gold(datasets_dir: Path) -> None:
    from core.eval.datasets import twowiki_set

    gs = twowiki_set(datasets_dir)
    assert len(gs.queries) == 300 and gs.unit == "doc" and gs.ks[:2] == (1, 2)
    assert sum(len(q.gold) for q in gs.queries) == 231 * 2 + 69 * 4
    pre = gs.predocs()
    assert len(pre) == 2086 and {g.doc for q in gs.queries for g in q.gold} <= {p.doc.name for p in pre}
