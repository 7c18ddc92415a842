"""run_query(query, config, deps) -> Trace: the retrieval pipeline as straight-line code, one traced stage each."""
from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from core.answer import answer_question
from core.compress import (SpanScorer, bm25_span_scorer, cached_vectors, diversify, flow_info, hybrid_span_scorer,
                           prune_sentences, sentence_prefixes)
from core.config import PipelineConfig
from core.context import index_variant, prepare_variant
from core.deps import Deps
from core.embed import one_torch_thread
from core.expand import expand
from core.graph.stages import graph_stages
from core.retrieve.bm25 import BM25Params
from core.rerank import (LateInteractionReranker, attach_contexts, describe, embedder_span_scorer, pooled_span_scorer,
                         rerank, reranker_span_scorer)
from core.retrieve.fusion import rrf
from core.store import Store
from core.text import detect_language
from core.types import CONTEXT_KEY, DEFAULT_WORKSPACE, Candidate, StageResult, Trace, Usage


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


def _span_scorer(kind: str, pool: Sequence[Candidate], config: PipelineConfig, deps: Deps, workspace: str,
                 query_vec: Any = None) -> SpanScorer:
    """The sentence scorer prune.scorer names (see span_scorer_parts)."""
    parts = span_scorer_parts(kind, pool, config, deps, workspace, query_vec)
    return parts[0][0] if len(parts) == 1 else hybrid_span_scorer(parts)


def span_scorer_parts(kind: str, pool: Sequence[Candidate], config: PipelineConfig, deps: Deps, workspace: str,
                      query_vec: Any = None) -> list[tuple[SpanScorer, float]]:
    """The weighted sentence signals behind prune.scorer. Token-vector signals read what the rerank stage read
    (context + chunk), so they reuse its cached token vectors; BM25 and the embedder cosine read each sentence
    under its document title, section path and the title line above it."""
    r = config.rerank
    contexts = {c.text: c.meta[CONTEXT_KEY] for c in pool if c.meta.get(CONTEXT_KEY)}
    if kind == "reranker":
        reranker = deps.reranker_for(r.method, r.model, r.llm_model)[0]
        return [(reranker_span_scorer(reranker, workspace=workspace, contexts=contexts), 1.0)]
    chunks = deps.store.chunks_by_id([c.chunk_id for c in pool], workspace)
    prefixes = sentence_prefixes(pool, deps.store.document_titles([c.doc_id for c in pool], workspace),
                                 {cid: ch.heading_path for cid, ch in chunks.items()})
    encoded = embedder_span_scorer(deps.embedder, prefixes)  # a model call over every 'title. section. sentence'
    if kind == "embedder":
        return [(encoded, 1.0)]
    if kind == "hybrid-encoded":  # the strongest under tight budgets, at about 1.5 s per query on this CPU
        return [(encoded, 1.0), (bm25_span_scorer(prefixes), 1.0)]
    # hybrid: sentence BM25 plus the cosine of sentence token vectors pooled in context (free once the rerank stage
    # cached them). The reranker's own MaxSim scores changed recall@10 at 250-700 tokens by less than one question in
    # 45 when added (bench/cascade.py), and a cross-encoder or an LLM would cost a model call per sentence.
    late = deps.reranker_for("late-interaction")[0]
    cosine = encoded
    if isinstance(late, LateInteractionReranker):
        cosine = pooled_span_scorer(late, deps.embedder, fallback=encoded, workspace=workspace, contexts=contexts,
                                    query_vec=query_vec)
    return [(cosine, 1.0), (bm25_span_scorer(prefixes), 1.0)]


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

    # Which text the indexes search (context.variant): contexts live beside the chunks, so a switch re-indexes nothing.
    bm25_variant, dense_variant = index_variant(config.context.variant)
    tracer.notes.extend(prepare_variant(store, config.context.variant, workspace, deps.embedder.model_id))

    # 1. BM25
    if config.bm25.enabled:
        b = config.bm25
        with _timed() as t:
            index = deps.indexes.bm25(store, workspace, BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem),
                                      variant=bm25_variant)
            bm25 = _to_candidates(index.search(q, b.k), store, workspace, "bm25")
        tracer.add("bm25", bm25, t.ms, indexed=len(index), text=bm25_variant)
    else:
        bm25 = tracer.skip("bm25", "bm25.enabled = false")

    # 2. Dense
    if config.dense.enabled:
        with _timed() as t:
            dindex = deps.indexes.dense(store, deps.embedder, workspace, variant=dense_variant)
            with one_torch_thread():  # one short query: a second torch thread only waits for a core
                qvec = deps.embedder.encode([q])[0]
            dense = _to_candidates(dindex.search(qvec, config.dense.k), store, workspace, "dense")
        notes = [f"embedder does not cover '{lang}': this list is close to random"] if dense_blind else []
        tracer.add("dense", dense, t.ms, notes=notes, model=deps.embedder.model_id, indexed=len(dindex),
                   text=dense_variant)
    else:
        dense = tracer.skip("dense", "dense.enabled = false")

    # 2b. Graph (GraphRAG): local search around the entities the query names, global map-reduce over communities
    graph_lists: dict[str, list[Candidate]] = {}
    # The dense stage's query vector is reused when it ran (qvec exists only then), so the query is encoded once.
    for g in graph_stages(q, config.graph, store, deps.embedder, deps.llm, deps.graph, workspace,
                          query_vec=qvec if config.dense.enabled else None):
        if g.skipped is not None:
            tracer.skip(g.stage, g.skipped)
        else:
            graph_lists[g.stage] = tracer.add(g.stage, g.candidates, g.ms, usage=g.usage, notes=g.notes, **g.info)
    graph_fused = {n: c for n, c in graph_lists.items() if c} if config.graph.fuse_with_text else {}

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
        weights += [config.graph.graph_weight] * len(graph_fused)  # graph lists join when graph.fuse_with_text
        # The reranker reads rerank.top_n fused candidates: fusion hands on that many when it is deeper than fusion.k.
        depth = max(f.k, config.rerank.top_n) if config.rerank.enabled else f.k
        if depth > f.k:
            notes.append(f"kept the top {depth} for the reranker (rerank.top_n; fusion.k = {f.k})")
        with _timed() as t:
            fused = rrf([bm25, dense, *graph_fused.values()], k=f.rrf_k, weights=weights,
                        names=["bm25", "dense", *graph_fused], top=depth)
        tracer.add("fused", fused, t.ms, notes=notes, rrf_k=f.rrf_k, weights=weights)

    # 4-7. The compression cascade: rerank -> prune -> mmr -> expand, each reading what the stage before handed on.
    # With fusion off it starts from the best list that ran (dense unless the embedder is blind to the language).
    pool, pool_from = (fused, "fused") if fused else (
        (dense, "dense") if dense and not (dense_blind and bm25) else (bm25, "bm25"))
    r = config.rerank
    if not r.enabled:
        tracer.skip("rerank", "rerank.enabled = false")
    elif not pool:
        tracer.skip("rerank", "no candidates to rerank")
    else:
        reranker, notice = deps.reranker_for(r.method, r.model, r.llm_model)
        head = pool[: r.top_n]
        if r.use_context and bm25_variant != "raw":  # contextual retrieval on: the reranker reads context + chunk
            head = attach_contexts(head, store.contexts(bm25_variant, workspace, [c.chunk_id for c in head]))
        with _timed() as t:
            pool, rs = rerank(q, head, reranker, k=r.k, use_context=r.use_context, workspace=workspace)
        tracer.add("rerank", pool, t.ms, usage=rs.usage, notes=[n for n in (notice, *rs.notes) if n],
                   reranker=reranker.name, input=pool_from, **describe(rs), **flow_info(head, pool))
    p = config.prune
    if not p.enabled:
        tracer.skip("prune", "prune.enabled = false")
    elif not pool:
        tracer.skip("prune", "no candidates to prune")
    else:
        with _timed() as t:
            scorer = _span_scorer(p.scorer, pool, config, deps, workspace, qvec if config.dense.enabled else None)
            pr = prune_sentences(q, pool, scorer, token_budget=p.token_budget, keep_neighbours=p.keep_neighbours,
                                 max_unit_tokens=p.max_unit_tokens, chunk_weight=p.chunk_weight)
        notes = [f"no sentence of {', '.join(pr.dropped)} fit the budget of {p.token_budget} tokens"] if pr.dropped else []
        tracer.add("prune", pr.candidates, t.ms, notes=notes, scorer=p.scorer, sentences_in=pr.units_in,
                   sentences_kept=pr.units_kept, pinned=pr.pinned, dropped=pr.dropped, **flow_info(pool, pr.candidates))
        pool = pr.candidates
    m = config.mmr
    if not m.enabled:
        tracer.skip("mmr", "mmr.enabled = false")
    elif not pool:
        tracer.skip("mmr", "no candidates to diversify")
    else:
        with _timed() as t:
            # Duplicates are judged on whole chunks (their cached vectors), so a pruned draft still matches its final.
            chunks = store.chunks_by_id([c.chunk_id for c in pool], workspace)
            vecs = cached_vectors([chunks[c.chunk_id].text if c.chunk_id in chunks else c.text for c in pool],
                                  deps.embedder, store, workspace)
            dv = diversify(pool, vecs, lam=m.lam, dedup_threshold=m.dedup_threshold, k=m.k)
        notes = [f"{d.dropped} dropped as {'an exact' if d.exact else 'a near'} duplicate of {d.kept} "
                 f"(cosine {d.similarity:.3f})" for d in dv.duplicates]
        tracer.add("mmr", dv.candidates, t.ms, notes=notes, lam=m.lam, duplicates=[d.__dict__ for d in dv.duplicates],
                   **flow_info(pool, dv.candidates))
        pool = dv.candidates
    e = config.expand
    if not e.enabled:
        tracer.skip("expand", "expand.enabled = false")
    elif not pool:
        tracer.skip("expand", "no candidates to expand")
    else:
        with _timed() as t:
            ex = expand(pool, store, mode=e.mode, window=e.window, parent_max_tokens=e.parent_max_tokens,
                        workspace=workspace)
        notes = [f"{a} merged into {b}: their expansions overlap" for a, b in ex.merged]
        notes += [f"not expanded (document text or offsets missing): {', '.join(ex.unexpanded)}"] if ex.unexpanded else []
        tracer.add("expand", ex.candidates, t.ms, notes=notes, mode=e.mode, window=e.window,
                   **flow_info(pool, ex.candidates))

    # Last stage. Answer: reads the final candidates of whatever ran before (their original chunk text).
    answer = None
    if config.answer.enabled:
        final = Trace(q, "", version, tuple(tracer.stages)).final()
        with _timed() as t:
            res = answer_question(q, final.candidates if final else (), config.answer, deps.llm, workspace=workspace,
                                  query_id="q" + hashlib.sha1(q.encode()).hexdigest()[:12])
        answer = res.answer
        tracer.add("answer", (), t.ms, usage=res.usage, notes=res.notes, mode=answer.mode, refused=answer.refused,
                   citations=list(answer.citations), support=res.support, source=final.stage if final else None)
    else:
        tracer.skip("answer", "answer.enabled = false")

    trace = Trace(q, config.stable_hash(), version, tuple(tracer.stages), workspace, lang, tuple(tracer.notes),
                  answer)
    if log:
        store.log_trace(trace)
    return trace
