"""run_query(query, config, deps) -> Trace: the retrieval pipeline as straight-line code, one traced stage each."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from core.config import PipelineConfig
from core.deps import Deps
from core.retrieve.bm25 import BM25Params
from core.retrieve.fusion import rrf
from core.store import Store
from core.text import detect_language
from core.types import DEFAULT_WORKSPACE, Candidate, StageResult, Trace, Usage


class QueryError(ValueError):
    """A query that cannot be run; the message is fit for the user."""


@dataclass
class _Timer:
    ms: float = 0.0


@contextmanager
def _timed() -> Iterator[_Timer]:
    t = _Timer()
    start = time.perf_counter()
    try:
        yield t
    finally:
        t.ms = (time.perf_counter() - start) * 1000


@dataclass
class Tracer:
    """Collects StageResults in order; the collected record is what every view renders."""

    stages: list[StageResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, stage: str, candidates: Sequence[Candidate], ms: float, *, usage: Usage = Usage(),
            notes: Sequence[str] = (), **info: Any) -> list[Candidate]:
        self.stages.append(StageResult(stage, tuple(candidates), ms, usage, None, tuple(notes), info))
        return list(candidates)

    def skip(self, stage: str, reason: str) -> list[Candidate]:
        self.stages.append(StageResult(stage, (), 0.0, Usage(), reason))
        return []


def validate_query(query: str, config: PipelineConfig) -> str:
    q = " ".join(query.split())
    if not q:
        raise QueryError("the query is empty: type a question")
    if len(q) > config.limits.max_query_chars:
        raise QueryError(
            f"the query is {len(q):,} characters long; the limit is {config.limits.max_query_chars:,} "
            "(limits.max_query_chars). Shorten it to the question itself."
        )
    return q


def _to_candidates(hits: list[tuple[str, float]], store: Store, workspace: str, stage: str) -> list[Candidate]:
    chunks = store.chunks_by_id([cid for cid, _ in hits], workspace)
    return [
        Candidate(cid, chunks[cid].doc_id, chunks[cid].text, score, rank, {"stage": stage})
        for rank, (cid, score) in enumerate(hits, start=1)
        if cid in chunks
    ]


def run_query(query: str, config: PipelineConfig, deps: Deps, *, workspace: str = DEFAULT_WORKSPACE,
              log: bool = True) -> Trace:
    q = validate_query(query, config)
    store, tracer = deps.store, Tracer()
    version = store.corpus_version(workspace)
    lang = detect_language(q)
    covered = deps.embedder.languages
    dense_blind = covered is not None and lang not in covered
    if dense_blind:
        tracer.notes.append(
            f"query language '{lang}' is not covered by embedder {deps.embedder.model_id} "
            f"(covers {', '.join(sorted(covered or ()))}); dense list weighted {config.fusion.foreign_dense_weight:g} "
            "in fusion"
        )

    # 1. BM25
    if config.bm25.enabled:
        b = config.bm25
        with _timed() as t:
            index = deps.indexes.bm25(store, workspace, BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem))
            bm25 = _to_candidates(index.search(q, b.k), store, workspace, "bm25")
        tracer.add("bm25", bm25, t.ms, indexed=len(index))
    else:
        bm25 = tracer.skip("bm25", "bm25.enabled = false")

    # 2. Dense
    if config.dense.enabled:
        with _timed() as t:
            dindex = deps.indexes.dense(store, deps.embedder, workspace)
            qvec = deps.embedder.encode([q])[0]
            dense = _to_candidates(dindex.search(qvec, config.dense.k), store, workspace, "dense")
        notes = [f"embedder does not cover '{lang}': this list is close to random"] if dense_blind else []
        tracer.add("dense", dense, t.ms, notes=notes, model=deps.embedder.model_id, indexed=len(dindex))
    else:
        dense = tracer.skip("dense", "dense.enabled = false")

    # 3. Fusion
    f = config.fusion
    if not f.enabled:
        fused = tracer.skip("fused", "fusion.enabled = false")
    elif not (bm25 and dense):
        fused = tracer.skip("fused", "needs both BM25 and dense results")
    else:
        weights = [f.bm25_weight, f.dense_weight] if f.method == "weighted_rrf" else [1.0, 1.0]
        notes = []
        if dense_blind:
            weights[1] *= f.foreign_dense_weight
            notes.append(f"dense weight x{f.foreign_dense_weight:g}: embedder does not cover '{lang}'")
        with _timed() as t:
            fused = rrf([bm25, dense], k=f.rrf_k, weights=weights, names=["bm25", "dense"], top=f.k)
        tracer.add("fused", fused, t.ms, notes=notes, rrf_k=f.rrf_k, weights=weights)

    trace = Trace(q, config.stable_hash(), version, tuple(tracer.stages), workspace, lang, tuple(tracer.notes))
    if log:
        store.log_trace(trace)
    return trace
