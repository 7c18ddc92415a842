"""Expansion: sentence windows from document offsets, parent sections by heading path, overlap merging."""
from __future__ import annotations

import pytest

from core.cascade.expand import capped_parent, expand, parent_span, window_spans
from core.cascade.prune import GAP
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from core.text import sentence_spans
from core.types import Candidate, Chunk, Document
from tests.fakes import HashEmbedder

DOC = ("S0 opens. S1 follows. S2 is the chunk. S3 is next. S4 is later. "
       "S5 starts part two. S6 is the middle. S7 ends it.")


def _doc(store: Store, text: str, chunks: list[tuple[int, int, tuple[str, ...]]], doc_id: str = "d1") -> list[Chunk]:
    cs = [Chunk(f"{doc_id}-{i}", doc_id, i, text[s:e], s, e, hp, 0) for i, (s, e, hp) in enumerate(chunks)]
    store.corpus.put_document(Document(doc_id, f"{doc_id}.md", "md", len(text), doc_id, "en", text, "test"), cs, None, "m")
    return cs


def _cand(chunk: Chunk, rank: int = 1, **meta) -> Candidate:
    return Candidate(chunk.chunk_id, chunk.doc_id, chunk.text, 1.0 / rank, rank, meta)


def test_window_adds_n_sentences_each_side(store: Store) -> None:
    s2 = DOC.index("S2")
    chunk = _doc(store, DOC, [(s2, DOC.index("S3") - 1, ())])[0]
    out = expand([_cand(chunk)], store.corpus, mode="window", window=1)
    assert out.candidates[0].text == "S1 follows. S2 is the chunk. S3 is next."
    wide = expand([_cand(chunk)], store.corpus, mode="window", window=10)
    assert wide.candidates[0].text == DOC
    zero = expand([_cand(chunk)], store.corpus, mode="window", window=0)
    assert zero.candidates[0].text == "S2 is the chunk."
    assert out.candidates[0].meta["expanded"] == "window" and out.candidates[0].meta["rank_before"] == 1


def test_window_grows_around_the_sentences_pruning_kept(store: Store) -> None:
    start, end = DOC.index("S1"), DOC.index("S7") - 1
    chunk = _doc(store, DOC, [(start, end, ())])[0]
    # The prune stage kept S6 only (span relative to the chunk).
    s6 = DOC.index("S6") - start
    pruned = _cand(chunk, kept_spans=[(s6, s6 + len("S6 is the middle."))])
    out = expand([pruned], store.corpus, mode="window", window=1)
    assert out.candidates[0].text == "S5 starts part two. S6 is the middle. S7 ends it."


def test_parent_is_the_run_of_chunks_under_the_same_heading(store: Store) -> None:
    text = "# Guide\n\n## Install\n\nStep one. Step two.\n\nStep three.\n\n## Usage\n\nRun it."
    a, b = text.index("## Install"), text.index("Step three.")
    u = text.index("## Usage")
    chunks = _doc(store, text, [(0, a - 2, ("Guide",)), (a, b - 2, ("Guide", "Install")),
                                (b, u - 2, ("Guide", "Install")), (u, len(text), ("Guide", "Usage"))])
    out = expand([_cand(chunks[2])], store.corpus, mode="parent")
    assert out.candidates[0].text == text[a : u - 2]
    assert parent_span(chunks[3], chunks, len(text)) == (u, len(text))
    flat = Chunk("x", "d", 0, "", 5, 9, (), 0)
    assert parent_span(flat, [flat], 40) == (0, 40)  # no heading path: the whole document


def test_a_long_parent_is_capped_around_the_chunk() -> None:
    sents = sentence_spans(DOC)
    s4 = DOC.index("S4")
    anchor = (s4, s4 + len("S4 is later."))
    (span,) = capped_parent(DOC, sents, (0, len(DOC)), anchor, max_tokens=9)
    piece = DOC[span[0] : span[1]]
    assert "S4 is later." in piece and len(piece) < len(DOC) and max(len(piece) // 4, len(piece.split())) <= 9


def test_overlapping_expansions_merge_into_the_better_ranked(store: Store) -> None:
    s1, s3 = DOC.index("S1"), DOC.index("S3")
    chunks = _doc(store, DOC, [(s1, s1 + len("S1 follows."), ()), (s3, s3 + len("S3 is next."), ())])
    out = expand([_cand(chunks[1], 1), _cand(chunks[0], 2)], store.corpus, mode="window", window=1)
    assert len(out.candidates) == 1 and out.merged == [(chunks[0].chunk_id, chunks[1].chunk_id)]
    assert out.candidates[0].text == "S0 opens. S1 follows. S2 is the chunk. S3 is next. S4 is later."
    assert out.candidates[0].meta["merged"] == chunks[0].chunk_id


def test_separate_expansions_are_joined_with_a_gap(store: Store) -> None:
    s1, s6 = DOC.index("S1"), DOC.index("S6")
    chunk = _doc(store, DOC, [(s1, DOC.index("S7") - 1, ())])[0]
    kept = [(0, len("S1 follows.")), (s6 - s1, s6 - s1 + len("S6 is the middle."))]
    out = expand([_cand(chunk, kept_spans=kept)], store.corpus, mode="window", window=0)
    assert out.candidates[0].text == f"S1 follows.{GAP}S6 is the middle."


def test_missing_documents_pass_through_unexpanded(store: Store) -> None:
    ghost = Candidate("nope", "nodoc", "text", 1.0, 1)
    out = expand([ghost], store.corpus, mode="parent")
    assert out.unexpanded == ["nope"] and out.candidates[0].text == "text"
    with pytest.raises(ValueError):
        expand([ghost], store.corpus, mode="sideways")


def test_window_spans_merge_touching_runs() -> None:
    sents = [(0, 5), (6, 10), (11, 15), (16, 20)]
    assert window_spans(sents, [(6, 10), (16, 20)], 1) == [(0, 20)]
    assert window_spans(sents, [(0, 5)], 0) == [(0, 5)]


def test_expand_stage_in_the_pipeline(store: Store) -> None:
    deps = Deps(store=store, embedder=HashEmbedder())
    doc = (b"# Policy\n\nEmployees may work remotely for up to three days per week. Managers approve the plan. "
           b"Core hours run from 10:00 to 15:00. Equipment is provided by the company.")
    ingest_files([("policy.md", doc)], store=store, embedder=deps.embedder,
                 config=PipelineConfig().with_overrides({"chunking.strategy": "fixed", "chunking.size_tokens": 16,
                                                         "chunking.overlap_tokens": 0}))
    cfg = PipelineConfig().with_overrides({"expand.enabled": True, "expand.mode": "window", "expand.window": 1,
                                           "prune.enabled": False, "rerank.enabled": False})
    trace = run_query("core hours", cfg, deps)
    ex = trace.stage("expand")
    assert ex.skipped is None and ex.info["tokens_out"] >= ex.info["tokens_in"] > 0
    assert any("Core hours run from 10:00 to 15:00." in c.text for c in ex.candidates)
