"""run_query(query, config, deps) -> Trace: the retrieval pipeline as straight-line code, one traced stage each."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from core.answer.cache import (
    CacheLookup,
    answer_config_hash,
    check_cache,
    embedder_word_similarity,
    remember,
    served_label,
    trace_from_json,
    trace_json,
)
from core.answer.cache_verifier import make_verifier, query_vector
from core.answer import e5_scorer
from core.answer.attributes import asked_attribute, header_gap, is_header, states_field, subject_terms
from core.answer.crosslingual import CrossReader
from core.answer.stage import verify_answer, verify_skip
from core.answer.synthesis import GlobalReduce, compared_items, pick_mode, synthesized_answer
from core.answer.support import late_sentence_scorer
from core.answer.verify import ChunkText, VerifyInfo
from core.answer.versions import DocHead
from core.cascade.guard import steps_aside
from core.cascade.prune import (
    SpanScorer,
    bm25_span_scorer,
    hybrid_span_scorer,
    sentence_prefixes,
)
from core.cascade.rerank import (
    LateInteractionReranker,
    covers,
    embedder_span_scorer,
    model_languages,
    pooled_span_scorer,
    reranker_span_scorer,
)
from core.cascade.stage import expand_step, mmr_step, prune_step, rerank_step
from core.config import PipelineConfig
from core.deps import Deps
from core.graph.search import entity_neighbours
from core.graph.stages import (
    GraphGlobalInfo,
    global_skip,
    graph_global_step,
    graph_local_step,
    graph_read,
    local_skip,
    raptor_skip,
    raptor_step,
)
from core.ingest.context import index_variant, prepare_variant
from core.models.embed import one_torch_thread
from core.models.llm import call_limits
from core.models.multilingual import UNIT_CHARS
from core.models.multilingual import RATE_KEY as ML_RATE_KEY
from core.models.protocols import encode_query
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.dense import MultilingualPlan, corpus_languages, multilingual_plan
from core.retrieve.filtered import bm25_in, dense_in
from core.retrieve.fusion import rrf
from core.retrieve.stage import (
    ChunkSource,
    bm25_step,
    dense_ml_step,
    dense_step,
    fuse_step,
    fusion_skip,
    to_candidates,
)
from core.route.agent import (
    AgentOutcome,
    EvidenceInfo,
    BridgeWriter,
    Budget,
    LLMGrader,
    LLMWriter,
    OfflineGrader,
    run_agent,
)
from core.route.collections import ChunkFilter, CollectionChoice, choose_llm, choose_offline, forced, refresh_profiles
from core.route.condense import Condensed, condense
from core.route.router import CAG_ROUTE
from core.route.sql import MAX_VALUES, SqlOutcome, sql_route, with_values
from core.route.sql import classify as classify_tables
from core.route.stage import (
    RouteDecision,
    TransformInfo,
    TransformRun,
    bridge_found,
    cag_estimator,
    cag_skip,
    cag_stage,
    decide_route,
    hybrid_search,
    route_step,
)
from core.route.tools import Neighbours, Toolbox, ToolOutcome, plan_question, run_llm, run_offline
from core.route.tools import citations as tool_citations
from core.text import guess_language, sha256_text, tokenize
from core.trace import (  # noqa: F401 - the names older callers import from here
    TRANSFORMS,
    Kept,
    StageMemo,
    StepOutput,
    Tracer,
    cands_digest,
    off,
    stage_key,
)
from core.types import (
    CONTEXT_KEY,
    DEFAULT_WORKSPACE,
    AgentRecord,
    Answer,
    AnswerInfo,
    CachedAnswer,
    CacheKey,
    Candidate,
    Chunk,
    Stage,
    StageResult,
    Trace,
    Turn,
)

__all__ = ["ChunkSource", "Kept", "QueryError", "StageMemo", "StepOutput", "Tracer", "cands_digest", "guard_key",
           "off", "run_query", "span_scorer_parts", "stage_key", "unjudged_language", "validate_query"]


class QueryError(ValueError):
    """A query that cannot be run; the message is fit for the user."""


@dataclass(frozen=True, kw_only=True)
class CacheStep(StepOutput):
    """The answer-cache stage's output and its lookup (a hit serves the stored answer)."""

    lookup: CacheLookup


@dataclass(frozen=True, kw_only=True)
class AnswerStep(StepOutput):
    """The answer stage's output and the answer it gave."""

    answer: Answer


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


_to_candidates = to_candidates  # the name the stages below (and older callers) use


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
    chunks = deps.store.corpus.chunks_by_id([c.chunk_id for c in pool], workspace)
    prefixes = sentence_prefixes(pool, deps.store.corpus.document_titles([c.doc_id for c in pool], workspace),
                                 {cid: ch.heading_path for cid, ch in chunks.items()})
    encoded = embedder_span_scorer(deps.embedder, prefixes)  # a model call over every 'title. section. sentence'
    if kind == "embedder":
        return [(encoded, 1.0)]
    if kind == "hybrid-encoded":  # the strongest under tight budgets, and the costliest: every sentence is encoded
        return [(encoded, 1.0), (bm25_span_scorer(prefixes), 1.0)]
    # hybrid: sentence BM25 plus the cosine of sentence token vectors pooled in context (free once the rerank stage
    # cached them). The reranker's own MaxSim scores changed recall@10 at 250-700 tokens by less than one question in
    # 45 when added (bench/cascade.py, archived), and a cross-encoder or an LLM would cost a model call per sentence.
    late = deps.reranker_for("late-interaction")[0]
    cosine = encoded
    if isinstance(late, LateInteractionReranker):
        cosine = pooled_span_scorer(late, deps.embedder, fallback=encoded, workspace=workspace, contexts=contexts,
                                    query_vec=query_vec)
    return [(cosine, 1.0), (bm25_span_scorer(prefixes), 1.0)]


@dataclass
class _Query:
    """One query's shared facts: its text, language, the text variant each index searches, and the query vector
    once the dense stage made it (graph and prune reuse it, so the query is encoded once)."""

    text: str
    lang: str
    workspace: str
    version: int  # the corpus version the query ran against
    dense_blind: bool
    bm25_variant: str
    dense_variant: str
    vec: Any = None
    guard_key: str = ""  # the requested configuration (core/cascade/guard.py reads evidence measured with it)
    ml: MultilingualPlan | None = None  # the multilingual list's plan, once _retrieve decided it
    only: ChunkFilter | None = None  # the collections searched, when the collections stage chose some of them
    rows: "_Rows" = field(default_factory=lambda: _Rows())  # chunk and document rows this query has read


@dataclass
class _Rows:
    """Chunk and document rows one query has read from the store, kept for its later stages: the answer reads the
    final chunks whole and their documents' heads, the verify stage the same chunks and heads again (each a DuckDB
    round trip that cost more than the check itself on a busy machine). A query never writes them, so they cannot
    go stale within it."""

    chunks: dict[str, Chunk] = field(default_factory=dict)
    heads: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    no_chunk: set[str] = field(default_factory=set)  # chunk ids asked for that the store does not hold
    no_doc: set[str] = field(default_factory=set)  # ... and document ids


def _chunk_rows(q: _Query, ids: Sequence[str], deps: Deps) -> dict[str, Chunk]:
    """The chunks of `ids` the store holds, each read from it at most once per query."""
    need = [i for i in dict.fromkeys(ids) if i not in q.rows.chunks and i not in q.rows.no_chunk]
    if need:
        got = deps.store.corpus.chunks_by_id(need, q.workspace)
        q.rows.chunks.update(got)
        q.rows.no_chunk.update(i for i in need if i not in got)
    return {i: q.rows.chunks[i] for i in ids if i in q.rows.chunks}


def _doc_head_rows(q: _Query, doc_ids: Sequence[str], deps: Deps) -> dict[str, tuple[str, str, str]]:
    """(file name, title, opening) of the documents of `doc_ids`, each read at most once per query."""
    need = [d for d in dict.fromkeys(doc_ids) if d not in q.rows.heads and d not in q.rows.no_doc]
    if need:
        got = deps.store.corpus.document_heads(need, q.workspace)
        q.rows.heads.update(got)
        q.rows.no_doc.update(d for d in need if d not in got)
    return {d: q.rows.heads[d] for d in doc_ids if d in q.rows.heads}


def _titles(q: _Query, doc_ids: Sequence[str], deps: Deps) -> dict[str, str]:
    """doc id -> title, the file name when it has none (what CorpusRepo.document_titles gives), from the heads."""
    return {d: h[1] or h[0] for d, h in _doc_head_rows(q, doc_ids, deps).items()}


def _facts(q: _Query) -> tuple[Any, ...]:
    """What a stage reads of the query beside the config (its memo key's part): text, language, workspace, corpus
    version, the text variants searched, the multilingual plan and the collections searched."""
    ml = (q.ml.run, q.ml.cross_lingual, q.ml.note) if q.ml is not None else None
    only = tuple(sorted(q.only.searched)) if q.only is not None else None
    return (q.text, q.lang, q.workspace, q.version, q.dense_blind, q.bm25_variant, q.dense_variant, ml, only)


def _finish(q: _Query, tracer: Tracer, config: PipelineConfig, deps: Deps, log: bool, answer: Answer | None = None,
            agent: AgentRecord | None = None) -> Trace:
    """The query's trace, written to the run log unless the run is unlogged (a measurement) or the store is
    read-only (a snapshot keeps no run log)."""
    if not any(s.stage == Stage.VERIFY for s in tracer.stages):  # a path that ends before the check says why
        ans = Trace("", "", 0, tuple(tracer.stages)).answer_info()
        tracer.skip(Stage.VERIFY, "answer.enabled = false" if not config.answer.enabled else
                    "no answer to check" if ans is None else
                    "the cached answer was checked against this question before it was served" if answer is not None
                    and ans.cached else f"answered by {ans.source or ans.mode}: not quoted from retrieved passages")
    trace = Trace(q.text, config.stable_hash(), q.version, tuple(tracer.stages), q.workspace, q.lang,
                  tuple(tracer.notes), answer, agent)
    if log and not deps.store.read_only:
        deps.store.runs.log_trace(trace)
    return trace


def _bm25_index(q: _Query, config: PipelineConfig, deps: Deps) -> BM25Index:
    """The workspace's BM25 index (bm25.* parameters) over the text variant this query searches; deps caches it."""
    b = config.bm25
    return deps.indexes.bm25(deps.store, q.workspace, BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem),
                             variant=q.bm25_variant)


def _mask(q: _Query) -> Callable[[Sequence[str]], Any] | None:
    """The collections searched as a mask over an index's chunk ids, or None when every chunk is searched."""
    return q.only.mask if q.only is not None else None


def _bm25(q: _Query, config: PipelineConfig, deps: Deps) -> StepOutput:
    return bm25_step(_bm25_index(q, config, deps), q.text, config.bm25.k, chunks=deps.store.corpus,
                     workspace=q.workspace, variant=q.bm25_variant, mask=_mask(q))


def _query_vec(q: _Query, deps: Deps, encode: Callable[[str], Any] | None = None) -> str:
    """Set q.vec, the question's vector under the main embedder: "had" (an earlier stage of this query set it),
    "cached" (a question met before: deps.indexes.queries in this process, else the store's embedding cache) or
    "encoded" (now, on one torch thread, and kept there).
    `encode` replaces the plain encode (the answer cache's verifier keeps the token vectors of the same forward)."""
    if q.vec is not None:
        return "had"
    model = deps.embedder.model_id
    q.vec = deps.indexes.queries.get(model, q.text)
    if q.vec is not None:
        return "cached"
    # The store's embedding cache, keyed by model and text like every chunk's: a fresh process (a CLI query) pays
    # no forward for a question asked before.
    key = sha256_text(q.text)
    q.vec = deps.store.caches.cached_embeddings(model, [key], q.workspace).get(key)
    if q.vec is None:
        with one_torch_thread():  # one short query: a second torch thread only waits for a core
            q.vec = encode(q.text) if encode is not None else deps.embedder.encode([q.text])[0]
        if not deps.store.read_only:
            deps.store.caches.cache_embeddings(model, {key: q.vec}, q.workspace)
        deps.indexes.queries.put(model, q.text, q.vec)
        return "encoded"
    deps.indexes.queries.put(model, q.text, q.vec)
    return "cached"


def _dense(q: _Query, config: PipelineConfig, deps: Deps) -> StepOutput:
    def vector() -> tuple[Any, str]:
        got = _query_vec(q, deps)  # the answer-cache stage may have encoded the query already
        return q.vec, got
    return dense_step(deps.indexes.dense(deps.store, deps.embedder, q.workspace, variant=q.dense_variant), vector,
                      config.dense.k, chunks=deps.store.corpus, workspace=q.workspace, variant=q.dense_variant,
                      model_id=deps.embedder.model_id, blind_lang=q.lang if q.dense_blind else None, mask=_mask(q))


def _ml_plan(q: _Query, config: PipelineConfig, deps: Deps) -> tuple[MultilingualPlan, str | None]:
    """The multilingual list's plan for this question (from the languages the corpus recorded) and the reason it
    does not run: switched off or not asked for, vectors not built (with the build to run), or no engine."""
    e = config.embedding
    plan = multilingual_plan(e.multilingual, q.lang, deps.indexes.languages(deps.store, q.workspace),
                             deps.embedder.languages)
    if not plan.run:
        return plan, plan.note
    total = deps.store.corpus.count("chunks", q.workspace)
    todo, chars = deps.store.corpus.missing_vector_chars(e.multilingual_model, "raw", q.workspace)
    if todo:
        rate = deps.store.caches.rate(ML_RATE_KEY, e.multilingual_model) or e.estimate_multilingual_s_per_unit
        return plan, (f"{plan.note}; not built: {e.multilingual_model} vectors cover {total - todo:,} of {total:,} "
                      "chunks. Build them (Search Lab: build; or "
                      f"`python -m core ingest --multilingual --workspace {q.workspace}`) - "
                      f"about {rate * max(chars, 1) / UNIT_CHARS:,.0f} s on a free core")
    emb, notice = deps.multilingual_for(e.multilingual_model)
    if emb is None:
        return plan, f"{plan.note}; {notice}"
    return plan, None


def _cross_lingual_aside(q: _Query, dense_ml: Sequence[Candidate]) -> str | None:
    """Why MMR steps aside for this question, or None: a cross-lingual question ranked by the multilingual list. MMR
    trades that ranking for diversity by the main embedder's vectors; on xquad de->en it cost recall@5
    (bench/results/xquad.json, 'cascade_ceiling')."""
    if not dense_ml or q.ml is None or not q.ml.cross_lingual:
        return None
    return (f"cross-lingual question ({q.ml.note.removeprefix('dense·e5: ').split(' (')[0]}): MMR steps aside, "
            "keeping the multilingual ranking")


def _dense_ml(q: _Query, config: PipelineConfig, deps: Deps) -> StepOutput:
    """The multilingual list: the question's e5 query vector against the corpus's stored e5 passage vectors."""
    assert q.ml is not None
    emb, _ = deps.multilingual_for(config.embedding.multilingual_model)
    assert emb is not None
    return dense_ml_step(deps.indexes.dense(deps.store, emb, q.workspace, variant="raw"),
                         lambda: encode_query(emb, q.text), config.dense.k, chunks=deps.store.corpus,
                         workspace=q.workspace, model_id=emb.model_id, note=q.ml.note, question_lang=q.lang,
                         cross_lingual=q.ml.cross_lingual, mask=_mask(q))


def _raptor(q: _Query, c: PipelineConfig, deps: Deps) -> StepOutput:
    """RAPTOR's collapsed tree (core/graph/stages.py) over the stored nodes and the raw chunk vectors."""
    nodes, node_vecs = deps.store.raptor.nodes(q.workspace)
    dindex = deps.indexes.dense(deps.store, deps.embedder, q.workspace, variant="raw")

    def vector() -> Any:
        _query_vec(q, deps)
        return q.vec
    return raptor_step(vector, nodes, node_vecs, dindex.chunk_ids, dindex.matrix,
                       lambda ids: deps.store.corpus.chunks_by_id(ids, q.workspace), k=c.raptor.k,
                       corpus_version=q.version)


def _fuse(q: _Query, config: PipelineConfig, lists: dict[str, list[Candidate]]) -> StepOutput:
    """RRF of BM25, dense and (graph.fuse_with_text) the graph lists; a dense list blind to the language is scaled."""
    return fuse_step(lists, config.fusion, graph_weight=config.graph.graph_weight, raptor_weight=config.raptor.weight,
                     transform_weight=config.transforms.weight,
                     rerank_top_n=config.rerank.top_n if config.rerank.enabled else None,
                     blind_lang=q.lang if q.dense_blind else None,
                     cross_lingual_lang=q.lang if q.ml is not None and q.ml.cross_lingual else None)


def _rerank(q: _Query, pool: list[Candidate], pool_from: str, config: PipelineConfig, deps: Deps,
            generated: Sequence[str] = ()) -> StepOutput:
    r = config.rerank
    reranker, notice = deps.reranker_for(r.method, r.model, r.llm_model)
    contexts = ((lambda ids: deps.store.ledger.contexts(q.bm25_variant, q.workspace, ids))
                if r.use_context and q.bm25_variant != "raw" else None)  # the reranker reads context + chunk
    return rerank_step(q.text, pool, pool_from, r, reranker, notice, workspace=q.workspace, lang=q.lang,
                       contexts=contexts, generated=generated if pool_from == Stage.FUSED else ())


def _prune(q: _Query, pool: list[Candidate], config: PipelineConfig, deps: Deps) -> StepOutput:
    p = config.prune
    notes, kind = [], p.scorer
    model_blind = q.dense_blind if kind != "reranker" else not covers(
        model_languages(deps.reranker_for(config.rerank.method, config.rerank.model, config.rerank.llm_model)[0]),
        q.lang)
    whole: list[Candidate] = []
    if model_blind:  # a model that cannot read the query scores its sentences at random: BM25 alone scores them
        notes.append(f"scorer {kind} -> bm25: its model does not cover '{q.lang}'")
        kind = "bm25"
        # ... but BM25 over another language matches only names and numbers: a chunk in another language than the
        # question's is handed on whole, never pruned by it (a cross-lingual question lost its passage so)
        langs = {cid: ch.lang for cid, ch in _chunk_rows(q, [c.chunk_id for c in pool], deps).items()}
        whole = [c for c in pool if langs.get(c.chunk_id, q.lang) != q.lang]
        if whole:
            notes.append(f"{len(whole)} chunk(s) in another language than the question's ('{q.lang}') handed on "
                         "unpruned: no sentence scorer here reads both languages")
    scorer = (bm25_span_scorer(_prefixes(pool, deps, q.workspace)) if kind == "bm25"
              else _span_scorer(kind, pool, config, deps, q.workspace, q.vec))
    return prune_step(q.text, pool, p, scorer, kind=kind, notes=notes, whole=[c.chunk_id for c in whole])


def _prefixes(pool: Sequence[Candidate], deps: Deps, workspace: str) -> dict[str, str]:
    chunks = deps.store.corpus.chunks_by_id([c.chunk_id for c in pool], workspace)
    return sentence_prefixes(pool, deps.store.corpus.document_titles([c.doc_id for c in pool], workspace),
                             {cid: ch.heading_path for cid, ch in chunks.items()})


def _mmr(q: _Query, pool: list[Candidate], config: PipelineConfig, deps: Deps) -> StepOutput:
    return mmr_step(pool, config.mmr, corpus=deps.store.corpus, embedder=deps.embedder, cache=deps.store.caches,
                    workspace=q.workspace)


def _expand(q: _Query, pool: list[Candidate], config: PipelineConfig, deps: Deps) -> StepOutput:
    return expand_step(pool, config.expand, corpus=deps.store.corpus, workspace=q.workspace)


def _header_fields(q: _Query, cands: Sequence[Candidate], config: PipelineConfig, deps: Deps) -> list[Candidate]:
    """Asked an attribute a header states as a field, when the answerer's chunks of a document hold its header's fields
    but not that line (core.answer.attributes.header_gap), the chunk of the same header that holds it (within two
    chunks of one handed on) joins them right after its neighbour (moved up when ranked below answer.max_chunks),
    at most two documents so."""
    top = list(cands[: config.answer.max_chunks])
    rows = _chunk_rows(q, [c.chunk_id for c in top], deps)
    of_doc: dict[str, list[str]] = {}  # a document's handed-on chunks: another package's header states its own field
    for c in top:
        if c.chunk_id in rows:
            of_doc.setdefault(c.doc_id, []).append(rows[c.chunk_id].text)
    gaps = {d: header_gap(q.text, texts) for d, texts in of_doc.items()}
    if not any(gaps.values()):
        return _record_field(q, cands, of_doc, config, deps)
    out, have, added = list(cands), {c.chunk_id for c in top}, 0
    for c in top:
        ch = rows.get(c.chunk_id)
        attr = gaps.get(c.doc_id)
        if ch is None or attr is None or not is_header(ch.text) or added >= 2:
            continue
        near = [x for x in deps.store.corpus.chunks(q.workspace, doc_id=c.doc_id) if x.chunk_id not in have and
                abs(x.ordinal - ch.ordinal) <= 2 and states_field(x.text, attr)]
        if near:
            x = min(near, key=lambda x: abs(x.ordinal - ch.ordinal))
            out = [o for o in out if o.chunk_id != x.chunk_id]  # ranked below the handed-on ones: moved up
            out.insert(out.index(c) + 1, Candidate(x.chunk_id, c.doc_id, x.text, c.score, c.rank,
                                                   {**c.meta, "header_field": ch.chunk_id}))
            have.add(x.chunk_id)
            added += 1
            gaps[c.doc_id] = None  # one line per document
    return [c.with_rank(i) for i, c in enumerate(out, start=1)][: max(len(cands), config.answer.max_chunks)]


def _record_field(q: _Query, cands: Sequence[Candidate], of_doc: Mapping[str, Sequence[str]], config: PipelineConfig,
                  deps: Deps) -> list[Candidate]:
    """Asked an attribute a header states as a field of the record the question names ('Who is the author of
    Narwhals?': the document whose file name or title holds the question's subject terms is among the candidates),
    when none of that document's chunks handed on states it: the document's header chunk that does joins the
    answerer's chunks right after that document's first one (at the answerer's last place when it ranks below the cut).
    Why: a multi-hop route's bridging round filled the pool with its own hits and pushed the header, ninth of ten,
    out; a question-shaped chunk (a table of contents) outranks a header of 'Classifier' lines. One line per query."""
    attr = asked_attribute(q.text)
    subj = subject_terms(q.text, attr) if attr is not None and attr.keys else set()
    if attr is None or not subj:
        return list(cands)
    heads = _doc_head_rows(q, [c.doc_id for c in cands], deps)
    anchor = next((i for i, c in enumerate(cands) if c.doc_id in heads and
                   subj <= set(tokenize(" ".join(heads[c.doc_id][:2])))), None)
    if anchor is None or any(states_field(t, attr) for t in of_doc.get(cands[anchor].doc_id, ())):
        return list(cands)
    doc = cands[anchor].doc_id
    have = {c.chunk_id for c in cands[: config.answer.max_chunks]}
    found = next((x for x in deps.store.corpus.chunks(q.workspace, doc_id=doc) if x.chunk_id not in have and
                  is_header(x.text) and states_field(x.text, attr)), None)
    if found is None:
        return list(cands)
    c = cands[anchor]
    out = [o for o in cands if o.chunk_id != found.chunk_id]
    at = min(out.index(c) + 1, config.answer.max_chunks - 1)
    out.insert(at, Candidate(found.chunk_id, doc, found.text, c.score, c.rank, {**c.meta, "record_field": c.chunk_id}))
    return [x.with_rank(i) for i, x in enumerate(out, start=1)][: max(len(cands), config.answer.max_chunks)]


def _answer(q: _Query, final: StageResult | None, config: PipelineConfig, deps: Deps,
            tracer: Tracer | None = None) -> AnswerStep:
    """The answer stage (core/answer/synthesis.py): its map / reduce / refine calls join the trace before it."""
    cands = final.candidates if final else ()
    if cands:
        cands = tuple(_header_fields(q, cands, config, deps))
    seen = Trace("", "", 0, tuple(tracer.stages) if tracer is not None else ())
    route = seen.route_info()
    glob = seen.stage(Stage.GRAPH_GLOBAL) if config.graph.enabled and config.graph.mode == "global" else None
    # The offline answerer reads each sentence with its document title and scores it by late interaction (token
    # vectors of the embedder; none when the embedder does not read the question's language).
    late = deps.reranker_for("late-interaction")[0] if config.answer.mode != "llm" else None
    # The BM25 index's vocabulary tells the answerer which question words the corpus never uses.
    vocab = _bm25_index(q, config, deps).vocabulary() if late is not None and config.bm25.enabled else None
    syn = synthesized_answer(q.text, cands, config.answer, deps.llm, workspace=q.workspace,
                          route=route.config if route is not None else None, global_reduce=_global_reduce(glob),
                          query_id="q" + hashlib.sha1(q.text.encode()).hexdigest()[:12],
                          titles=_titles(q, [c.doc_id for c in cands], deps),
                          li_scorer=late_sentence_scorer(late, workspace=q.workspace)
                          if isinstance(late, LateInteractionReranker) else None, blind=q.dense_blind,
                          vocabulary=vocab, full_texts=_whole_chunks(cands, config, deps, q.workspace, q),
                          calibration=deps.store.calibrations.get(q.workspace),
                          documents=_doc_heads(cands, config, deps, q.workspace, q),
                          headings=_chunk_headings(cands, config, deps, q),
                          cross=_cross_reader(q, [c.chunk_id for c in cands[: config.answer.max_chunks]], deps))
    if tracer is not None:
        tracer.stages.extend(syn.calls)
    res = syn.result
    source = syn.source or (final.stage if final else None)
    return AnswerStep((), res.notes, res.usage, res.info(source), answer=res.answer)


def _global_reduce(glob: StageResult | None) -> GlobalReduce | None:
    """What the answer stage reads of graph global search's map (None when it did not run)."""
    g = glob.own_info if glob is not None and glob.skipped is None else None  # the agentic loop's round 1 wraps it
    if glob is None or not isinstance(g, GraphGlobalInfo):
        return None
    return GlobalReduce(glob.stage, tuple(glob.candidates), g.partials, g.answer if g.reduced_by_llm else "",
                        tuple(str(c) for c in g.cited))


def _verify(q: _Query, answer: Answer | None, deps: Deps) -> AnswerStep:
    """The verify stage: the answer's cited chunks (whole text, heading path, document title) are its evidence."""
    assert answer is not None
    chunks = _chunk_rows(q, list(answer.citations), deps)
    # a document's title and opening lines (its date, its subject) are every chunk's context
    heads = _doc_head_rows(q, list(dict.fromkeys(ch.doc_id for ch in chunks.values())), deps)
    got = verify_answer(q.text, answer, {cid: ChunkText(ch.text, " / ".join(ch.heading_path),
                                                        " / ".join(x for x in heads[ch.doc_id][:2] if x)
                                                        if ch.doc_id in heads else "",
                                                        heads[ch.doc_id][2] if ch.doc_id in heads else "")
                                         for cid, ch in chunks.items()},
                        cross=_cross_reader(q, list(chunks), deps),
                        known=sorted({h[1] for h in q.rows.heads.values() if h[1]}))  # the documents read
    return AnswerStep((), got.notes, info=got.info, answer=got.answer)


def _cross_reader(q: _Query, chunk_ids: Sequence[str], deps: Deps) -> CrossReader | None:
    """The multilingual reader when some of the chunks are in another language than the question's (what the offline
    answer and the check read across languages, core/answer/crosslingual.py), or when the embedder does not read the
    question's language (a Russian question's lexical answer is read by it, core.answer.stage.blind_reading; a German
    one is answered by it, core.answer.crosslingual.reads_across); None when all are in the question's language and
    the embedder reads it, or when the engine does not load. Its sentence vectors come from the workspace's stored
    ones."""
    langs = {ch.lang for ch in _chunk_rows(q, chunk_ids, deps).values()}
    if not (langs - {q.lang} or q.dense_blind) or not e5_scorer.available():
        return None
    return e5_scorer.E5Reader(deps.store.caches, q.workspace)


def _answer_key(q: _Query, config: PipelineConfig, tracer: Tracer) -> str:
    """The answer stage's memo key: what _answer reads (the final list, the synthesis its route picks, the global
    stage, the answer, bm25 and llm settings)."""
    final = tracer.final()
    seen = Trace("", "", 0, tuple(tracer.stages))
    route = seen.route_info()
    a = config.answer
    mode = pick_mode(a.synthesis, route.config if route is not None else None,
                     compared_items(q.text) if a.synthesis == "auto" else [])
    glob = seen.stage(Stage.GRAPH_GLOBAL) if config.graph.enabled and config.graph.mode == "global" else None
    return stage_key(Stage.ANSWER, _facts(q), a, config.bm25, config.llm, mode,
                     (final.stage, cands_digest(final.candidates)) if final else None,
                     (glob.skipped, cands_digest(glob.candidates), repr(glob.info)) if glob else None)


def _doc_heads(cands: Sequence[Candidate], config: PipelineConfig, deps: Deps, workspace: str,
               q: _Query | None = None) -> dict[str, DocHead]:
    """Name, title and opening of the documents the offline answerer quotes: how it tells versions apart (read
    through the query's rows when `q` is given)."""
    if config.answer.mode == "llm" or not cands:
        return {}
    ids = [c.doc_id for c in cands[: config.answer.max_chunks]]
    heads = _doc_head_rows(q, ids, deps) if q is not None else deps.store.corpus.document_heads(ids, workspace)
    return {d: DocHead(*h) for d, h in heads.items()}


def _whole_chunks(cands: Sequence[Candidate], config: PipelineConfig, deps: Deps, workspace: str,
                  q: _Query | None = None) -> dict[str, str]:
    """Whole texts of the chunks the offline answerer reads (pruning may have cut the sentence that answers); Claude
    reads the pruned context, so nothing is fetched for it. Read through the query's rows when `q` is given."""
    if config.answer.mode == "llm" or not cands:
        return {}
    top = [c.chunk_id for c in cands[: config.answer.max_chunks]]
    got = _chunk_rows(q, top, deps) if q is not None else deps.store.corpus.chunks_by_id(top, workspace)
    return {cid: ch.text for cid, ch in got.items()}


def _chunk_headings(cands: Sequence[Candidate], config: PipelineConfig, deps: Deps,
                    q: _Query) -> dict[str, tuple[str, ...]]:
    """Heading paths of the chunks the offline answerer reads (a changelog item's release, see
    core.answer.stage.release_heads); nothing for Claude."""
    if config.answer.mode == "llm" or not cands:
        return {}
    got = _chunk_rows(q, [c.chunk_id for c in cands[: config.answer.max_chunks]], deps)
    return {cid: tuple(ch.heading_path) for cid, ch in got.items() if ch.heading_path}


def _start(query: str, config: PipelineConfig, deps: Deps, workspace: str, tracer: Tracer) -> _Query:
    """Validate the query, detect its language and say which text each index searches."""
    text = validate_query(query, config)
    lang = guess_language(text)
    covered = deps.embedder.languages
    blind = covered is not None and lang not in covered
    if blind:
        tracer.notes.append(
            f"query language '{lang}' is not covered by embedder {deps.embedder.model_id} "
            f"(covers {', '.join(sorted(covered or ()))}); dense list weighted {config.fusion.foreign_dense_weight:g} "
            "in fusion"
        )
    # Which text the indexes search (context.variant): contexts live beside the chunks, so a switch re-indexes nothing.
    bm25_variant, dense_variant = index_variant(config.context.variant)
    tracer.notes.extend(prepare_variant(deps.store, config.context.variant, workspace, deps.embedder.model_id))
    return _Query(text, lang, workspace, deps.store.corpus.corpus_version(workspace), blind, bm25_variant,
                  dense_variant)


def _transforms(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer, decision: RouteDecision | None,
                bm25: list[Candidate], dense: list[Candidate]) -> tuple[dict[str, list[Candidate]], tuple[str, ...]]:
    """HyDE (offline: pseudo-relevance feedback), multi-query and decomposition, each gated by the route or by a weak
    first retrieval; every generated query is searched with BM25 + dense (RRF) and each stage fuses its own lists.
    Returns the lists and the questions generated (multi-query's and decomposition's; HyDE's text is a guessed
    passage, not a question), which the rerank reads beside the question."""
    if not c.bm25.enabled:
        for name in TRANSFORMS:
            tracer.skip(name, "query transforms search with BM25 (+ dense): bm25.enabled = false")
        return {}, ()
    index = _bm25_index(q, c, deps)
    dindex = (deps.indexes.dense(deps.store, deps.embedder, q.workspace, variant=q.dense_variant)
              if c.dense.enabled and c.transforms.dense and not q.dense_blind else None)

    def dense_hits(text: str, k: int) -> list[tuple[str, float]]:
        assert dindex is not None
        with one_torch_thread():
            vec = deps.embedder.encode([text])[0]
        return dindex.search(vec, k) if q.only is None else dense_in(dindex, vec, k, q.only.mask(dindex.chunk_ids))

    def bm25_hits(text: str, k: int) -> list[tuple[str, float]]:
        return index.search(text, k) if q.only is None else bm25_in(index, text, k, q.only.mask(index.chunk_ids))

    search = hybrid_search(bm25_hits, dense_hits if dindex is not None else None,
                           lambda hits, stage: _to_candidates(hits, deps.store.corpus, q.workspace, stage),
                           k=c.bm25.k, rrf_k=c.fusion.rrf_k,
                           keep=max(10, c.transforms.per_query_k))  # what the stages read
    feedback = rrf([bm25, dense], k=c.fusion.rrf_k, names=["bm25", "dense"], top=10) if bm25 or dense else []
    run = TransformRun(q.text, c, decision, deps.llm, search, feedback=feedback,
                       dense_top=dense[0].score if dense and not q.dense_blind else None, workspace=q.workspace)
    out: dict[str, list[Candidate]] = {}
    asked: list[str] = []
    for name in TRANSFORMS:
        ran = tracer.run(name, lambda: run.step(name), skip=run.skip(name),
                         key=lambda: stage_key(name, _facts(q), c.transforms, c.fusion.rrf_k, c.bm25.k, c.dense.enabled,
                                               run.key()))
        if ran is not None:
            run.after(ran)
            if ran.skipped is None:
                out[name] = list(ran.candidates)
                if name != Stage.HYDE and isinstance(ran.info, TransformInfo):
                    asked.extend(ran.info.queries)
    return out, tuple(dict.fromkeys(asked))


def unjudged_language(question_lang: str, counts: Mapping[str, int]) -> str:
    """Why the corpus's vocabulary cannot judge a question in `question_lang` for the router ("" when it can), from
    the corpus's chunks per language: its language is not the corpus's main one. In a mixed corpus the vocabulary of
    the question's language is only its minority part's, and a question in it may well be about the rest (a Russian
    question about an English policy in a mostly English corpus with a few Russian reports)."""
    langs = corpus_languages(counts)
    if not langs or question_lang == langs[0]:
        return ""
    total = sum(counts.values())
    share = counts.get(question_lang, 0) / total if total else 0.0
    return (f"a '{question_lang}' question, corpus {'+'.join(langs)}" if question_lang not in langs else
            f"a '{question_lang}' question, corpus mostly {langs[0]} ({question_lang} {share:.0%} of its chunks)")


def _unjudged(q: _Query, deps: Deps) -> str:
    """unjudged_language for this query's workspace."""
    return unjudged_language(q.lang, deps.indexes.languages(deps.store, q.workspace))


def _dense_top(q: _Query, c: PipelineConfig, deps: Deps) -> Callable[[], float | None]:
    """The question's best cosine with the workspace's chunk vectors (raw text, the main embedder), for the router's
    dense guard; None when dense search is off or the embedder does not read the question's language."""
    def top() -> float | None:
        if not c.dense.enabled or q.dense_blind:
            return None
        dindex = deps.indexes.dense(deps.store, deps.embedder, q.workspace, variant="raw")
        _query_vec(q, deps)
        hits = dindex.search(q.vec, 1)
        return hits[0][1] if hits else None
    return top


def _route(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer) -> RouteDecision:
    """The first stage: which class of question this is, hence which named configuration it runs with."""
    index = _bm25_index(q, c, deps)
    decision = decide_route(q.text, c, deps.llm, vocabulary=index.vocabulary(), tokenizer=index.tokens,
                            titles=lambda: [d.title or d.name for d in deps.store.corpus.documents(q.workspace)],
                            workspace=q.workspace,
                            cag_estimate=cag_estimator(deps.store.corpus, q.workspace, c, deps.llm, q.text),
                            evidence=index.best_passage_terms, unjudged=_unjudged(q, deps),
                            dense_top=_dense_top(q, c, deps))
    ran = tracer.run(Stage.ROUTE, lambda: route_step(decision))
    assert ran is not None
    return ran.decision


def _no_retrieval(q: _Query, decision: RouteDecision, config: PipelineConfig, deps: Deps, tracer: Tracer,
                  log: bool) -> Trace | None:
    """Chitchat and out-of-scope: no retrieval; the route's reply (out-of-scope says what the corpus is about). The
    cag route: Claude answers from the whole corpus; None when it did not (retrieval then answers, as the trace says)."""
    cag = None
    if decision.named.name == CAG_ROUTE:
        if not config.answer.enabled:
            tracer.notes.append("cag route: answer.enabled = false, so no CAG call; retrieval runs instead")
            tracer.skip(Stage.CAG, cag_skip(config, decision) or "")
            return None
        docs = [d.name for d in deps.store.corpus.documents(q.workspace)]
        cag = tracer.run(Stage.CAG, lambda: cag_stage(q.text, decision, config, deps.llm, docs, workspace=q.workspace))
        assert cag is not None
        if cag.answer is None:
            tracer.notes.extend(cag.notes)
            return None
    else:
        tracer.skip(Stage.CAG, cag_skip(config, decision) or "")
    tracer.skip_rest(f"route {decision.named.name}: no retrieval", before=Stage.ANSWER)
    answer = None
    if cag is not None and cag.answer is not None:
        answer = cag.answer
        tracer.run(Stage.ANSWER, lambda: AnswerStep((), ["answered by CAG from the whole corpus (no retrieval)"],
                                                    info=AnswerInfo.of(cag.answer, CAG_ROUTE), answer=cag.answer))
    elif config.answer.enabled:
        answer = Answer(decision.reply, (), decision.route.cls == "out-of-scope", "route")
        tracer.run(Stage.ANSWER, lambda: AnswerStep((), [f"reply of route {decision.named.name} (routes.toml)"],
                                                    info=AnswerInfo.of(answer, Stage.ROUTE), answer=answer))
    else:
        tracer.skip(Stage.ANSWER, "answer.enabled = false")
    return _finish(q, tracer, config, deps, log, answer)


def _retrieve(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer,
              decision: RouteDecision | None = None) -> list[Candidate]:
    """One pass of retrieval and the compression cascade, each stage traced; returns what the answer would read."""
    bm25 = tracer.step(Stage.BM25, lambda: _bm25(q, c, deps), skip=off(c.bm25.enabled, "bm25.enabled"),
                       key=lambda: stage_key(Stage.BM25, _facts(q), c.bm25))
    dense = tracer.step(Stage.DENSE, lambda: _dense(q, c, deps), skip=off(c.dense.enabled, "dense.enabled"),
                        key=lambda: stage_key(Stage.DENSE, _facts(q), c.dense))
    if dense and q.vec is None:  # the dense list was reused from the memo: later stages read the query's vector
        _query_vec(q, deps)
    q.ml, ml_skip = _ml_plan(q, c, deps)
    dense_ml = tracer.step(Stage.DENSE_ML, lambda: _dense_ml(q, c, deps), skip=ml_skip,
                           key=lambda: stage_key(Stage.DENSE_ML, _facts(q), c.dense, c.embedding))
    ml_list = {Stage.DENSE_ML: dense_ml} if dense_ml else {}
    graph: dict[str, list[Candidate]] = {}
    read, why_not = graph_read(c.graph, deps.store, deps.embedder, deps.graph, q.workspace, query_lang=q.lang)
    gvec: list[Any] = []

    def graph_vec() -> Any:  # the query's vector when dense made it; else encoded here, once for both stages
        if q.vec is not None:
            return q.vec
        if not gvec:
            gvec.append(deps.embedder.encode([q.text])[0])
        return gvec[0]

    version = (read.snap.version, read.snap.corpus_version) if read is not None else None
    local = tracer.step(Stage.GRAPH_LOCAL, lambda: _in_collections(q, graph_local_step(
        q.text, c.graph, read, deps.store, deps.embedder, graph_vec, workspace=q.workspace, query_lang=q.lang)),
        skip=local_skip(c.graph, read, why_not),
        key=lambda: stage_key(Stage.GRAPH_LOCAL, _facts(q), c.graph, version))
    glob = tracer.step(Stage.GRAPH_GLOBAL, lambda: _in_collections(q, graph_global_step(
        q.text, c.graph, read, deps.store, deps.embedder, graph_vec, deps.llm, workspace=q.workspace)),
        skip=global_skip(c.graph, read, why_not, deps.llm, q.lang),
        key=lambda: stage_key(Stage.GRAPH_GLOBAL, _facts(q), c.graph, version, deps.llm.available))
    for name, hits in ((Stage.GRAPH_LOCAL, local), (Stage.GRAPH_GLOBAL, glob)):
        if hits and c.graph.fuse_with_text:
            graph[name] = hits
    raptor = [h for h in tracer.step(Stage.RAPTOR, lambda: _raptor(q, c, deps),
                                     skip=raptor_skip(c.raptor.enabled, deps.store.raptor.state(q.workspace)
                                                      if c.raptor.enabled else None, deps.embedder.model_id),
                                     key=lambda: stage_key(Stage.RAPTOR, _facts(q), c.raptor))
              if q.only is None or q.only.allows(h.chunk_id)]
    graph.update({Stage.RAPTOR: raptor} if raptor else {})
    why = fusion_skip(c.fusion.enabled, (bm25, dense, dense_ml))
    extra, generated = _transforms(q, c, deps, tracer, decision, bm25, dense)
    lists = {Stage.BM25: bm25, Stage.DENSE: dense, **ml_list, **graph, **extra}
    fused = tracer.step(Stage.FUSED, lambda: _fuse(q, c, lists), skip=why,
                        key=lambda: stage_key(Stage.FUSED, _facts(q), c.fusion, c.rerank, c.graph.graph_weight,
                                              c.raptor.weight, c.transforms.weight,
                                              [(str(n), cands_digest(v)) for n, v in lists.items()]))

    # The compression cascade: rerank -> prune -> mmr -> expand, each reading what the stage before handed on.
    # With fusion off it starts from the best list that ran (dense unless the embedder is blind to the language).
    pool, pool_from = (fused, "fused") if fused else (
        (dense_ml, "dense_ml") if dense_ml and q.dense_blind else
        (dense, "dense") if dense and not (q.dense_blind and bm25) else (bm25, "bm25"))
    aside = _guarded(q, c, deps)
    # A stage that steps aside hands on what it would have handed on had it kept the order it read (the top k), so
    # the stages after it read a list of the length they expect.
    # Each cascade stage's memo key: the query, its own sections and the list it reads (hence every stage before).
    pool = tracer.step(Stage.RERANK, lambda: _rerank(q, pool, pool_from, c, deps, generated),
                       keep=pool[: c.rerank.k] if Stage.RERANK in aside else pool,
                       skip=off(c.rerank.enabled, "rerank.enabled", pool, "no candidates to rerank")
                       or aside.get(Stage.RERANK),
                       key=lambda: stage_key(Stage.RERANK, _facts(q), c.rerank, pool_from, cands_digest(pool),
                                             generated))
    pool = tracer.step(Stage.PRUNE, lambda: _prune(q, pool, c, deps), keep=pool,
                       skip=off(c.prune.enabled, "prune.enabled", pool, "no candidates to prune")
                       or aside.get(Stage.PRUNE),
                       key=lambda: stage_key(Stage.PRUNE, _facts(q), c.prune, c.rerank, cands_digest(pool)))
    mmr_aside = aside.get(Stage.MMR)
    pool = tracer.step(Stage.MMR, lambda: _mmr(q, pool, c, deps), keep=pool[: c.mmr.k] if mmr_aside else pool,
                       skip=off(c.mmr.enabled, "mmr.enabled", pool, "no candidates to diversify")
                       or _cross_lingual_aside(q, dense_ml) or mmr_aside,
                       key=lambda: stage_key(Stage.MMR, _facts(q), c.mmr, cands_digest(pool)))
    pool = tracer.step(Stage.EXPAND, lambda: _expand(q, pool, c, deps), keep=pool,
                       skip=off(c.expand.enabled, "expand.enabled", pool, "no candidates to expand"),
                       key=lambda: stage_key(Stage.EXPAND, _facts(q), c.expand, cands_digest(pool)))

    return pool


def guard_key(config: PipelineConfig | Mapping[str, Any]) -> str:
    """The configuration an evaluation run measured, its cascade_guard settings left out (a run made with the guard
    off is evidence for the same configuration with the guard on)."""
    data = dict(config.model_dump(mode="json") if isinstance(config, PipelineConfig) else config)
    data.pop("cascade_guard", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def _guarded(q: _Query, c: PipelineConfig, deps: Deps) -> dict[str, str]:
    """{cascade stage: why it steps aside} from the workspace's own evaluation runs (core/cascade/guard.py)."""
    g = c.cascade_guard
    if not g.enabled:
        return {}
    evidence = deps.guards.evidence(deps.store.runs, q.workspace, k=g.k, config_key=q.guard_key, key_of=guard_key)
    return steps_aside(evidence, z=g.z, min_loss=g.min_loss, min_questions=g.min_questions)


def _agentic(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer,
             decision: RouteDecision | None = None) -> AgentRecord:
    """The agentic loop (core/route/agent.py) around single passes of this pipeline: each round's stages, its grade
    and decide records join the trace, then the fused evidence pool as the stage the answer reads. Rounds run with
    the router off, so the transforms this question's route asked for (auto) are switched on for them."""
    a = c.agent
    asked = decision.named.transforms if decision is not None else ()
    fire = {f"transforms.{t}": "on" for t in asked if getattr(c.transforms, t, "off") == "auto"}
    # The cascade guard judges a stage by the single-pass list it hands the answer; inside the loop a stage's order
    # feeds the grader and the next round instead, which that evidence does not measure (bench/results/guard.json).
    inner = c.with_overrides({"agent.enabled": False, "answer.enabled": False, "answer_cache.enabled": False,
                              "router.enabled": False, "cascade_guard.enabled": False, **fire})
    use_llm = a.grader == "llm" or (a.grader == "auto" and deps.llm.available)
    grader = LLMGrader(deps.llm, a.grader_model) if use_llm else OfflineGrader()
    writer = LLMWriter(deps.llm, a.grader_model, a.per_round) if use_llm else BridgeWriter(a.per_round)
    # Bridging queries (every query after the question itself) may search BM25 alone (agent.bridge_dense = false).
    # Their lists then are BM25's own (no fusion, no transform of a bag of names).
    later = inner if a.bridge_dense else inner.with_overrides({"dense.enabled": False, "transforms.hyde": "off",
                                                                "transforms.multi_query": "off",
                                                                "transforms.decompose": "off"})
    label = "offline: calibrated grader + entity bridging (no LLM)" if not use_llm else f"LLM grader ({a.grader_model})"

    def loop() -> AgentStep:
        out = run_agent(q.text, lambda text: run_query(text, inner if text == q.text else later, deps,
                                                       workspace=q.workspace, log=False,
                                                       reuse_route=decision if text == q.text else None,
                                                       memo=tracer.memo),
                        budget=Budget(a.max_rounds, a.max_llm_calls, a.max_tokens, a.max_usd, a.max_seconds),
                        grader=grader, writer=writer, workspace=q.workspace, k=a.k, head=a.head,
                        repeat_threshold=a.repeat_threshold, enough=bridge_found if a.stop_when_found else None)
        tracer.stages.extend(out.stages)  # the rounds' stages, grade and decide records sit before the evidence
        return AgentStep(out.evidence, [label], info=EvidenceInfo(out.rounds, out.stop_reason, dict(out.spent)),
                         outcome=out)

    ran = tracer.run(Stage.EVIDENCE, loop)
    assert ran is not None
    return ran.outcome.record()


@dataclass(frozen=True, kw_only=True)
class AgentStep(StepOutput):
    """The evidence stage's output (the pool the agentic loop fused across its rounds) and the loop's outcome."""

    outcome: AgentOutcome


@dataclass(frozen=True, kw_only=True)
class SqlStep(StepOutput):
    """The sql stage's output and its outcome (route, plan, rows)."""

    outcome: SqlOutcome


def _sql(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer, tables: Sequence[Any]) -> SqlOutcome | None:
    """The sql stage (core/route/sql.py), recorded only in a workspace that has tables: a question about them
    (table or mixed) gets a query, written by Claude with a key (router.method not offline) or by the template
    translator, run in the workspace's SQL sandbox."""
    if not tables:
        return None

    seen: dict[tuple[str, str], list[Any]] = {}

    def values(table: str, column: str) -> list[Any]:  # the route and the translator read each column's values
        if (table, column) not in seen:
            seen[(table, column)] = deps.store.tables.values(q.workspace, table, column, MAX_VALUES)
        return seen[(table, column)]

    route = classify_tables(q.text, tables, values)

    def step() -> SqlStep:
        out = sql_route(q.text, tables, values, deps.store.tables.sandbox(q.workspace),
                        llm=deps.llm if c.router.method != "offline" else None, model=c.router.model,
                        route=route, workspace=q.workspace)
        doc = {t.name: t.doc_id for t in tables}.get(out.plan.table, tables[0].doc_id)
        rows = out.result.rows if out.result is not None else ()
        cands = [Candidate(f"sql:{out.plan.table or 'result'}:{i}", doc,
                           "; ".join(f"{col}: {v}" for col, v in zip(out.result.columns, row)), 1.0, i,
                           {"stage": Stage.SQL}) for i, row in enumerate(rows[:50], start=1)] if out.result else []
        return SqlStep(cands, [out.route.reason, *out.notes], out.plan.usage, out.info(), outcome=out)

    try:
        ran = tracer.run(Stage.SQL, step, skip=None if route.kind != "text" else f"a text question ({route.reason}): "
                         "the documents answer it")
    except Exception as exc:  # noqa: BLE001 - the tables failing (memory, a damaged table) costs the sql stage only
        tracer.skip(Stage.SQL, f"the SQL sandbox failed ({type(exc).__name__}: {str(exc)[:200]}); the documents "
                               "answer instead")
        return None
    return ran.outcome if ran is not None else None


def _answered_by_sql(q: _Query, sql: SqlOutcome, config: PipelineConfig, deps: Deps, tracer: Tracer,
                     log: bool) -> Trace:
    """A table question SQL answered: the rows are the answer, every later stage skipped with the reason."""
    assert sql.result is not None
    rows = next(s.candidates for s in reversed(tracer.stages) if s.stage == Stage.SQL)
    tracer.skip_rest("route table: answered by SQL over the workspace's tables", before=Stage.ANSWER)
    answer = Answer(f"{sql.answer_text()} (SQL over the workspace's tables: {sql.result.sql})",
                    tuple(c.chunk_id for c in rows[:5]), False, "sql")  # the rows
    ran = tracer.run(Stage.ANSWER, lambda: AnswerStep((), [f"the sql stage's rows ({sql.plan.translator} translator)"],
                                                      info=AnswerInfo.of(answer, Stage.SQL), answer=answer),
                     skip=off(config.answer.enabled, "answer.enabled"))
    return _finish(q, tracer, config, deps, log, ran.answer if ran is not None else None)


def _with_sql_values(q: _Query, sql: SqlOutcome | None) -> _Query:
    """A mixed question's retrieval also searches the values SQL found (the code with the most tickets: its code),
    so the passage about them is retrieved."""
    if sql is None or not sql.answered or sql.route.kind != "mixed" or sql.result is None:
        return q
    found = [str(v) for row in sql.result.rows[:5] for v in row[:1] if v is not None]
    return replace(q, text=with_values(q.text, found), vec=None) if found else q


def _toolbox(q: _Query, c: PipelineConfig, deps: Deps) -> Toolbox:
    """The agent's tools over this workspace: a retrieval pass (answer, cache, router, agent and the sql stage off:
    SQL is its own tool), the SQL sandbox with the template translator, and the graph's neighbours."""
    inner = c.with_overrides({"agent.enabled": False, "agent.tools": "off", "answer.enabled": False,
                              "answer_cache.enabled": False, "router.enabled": False})
    tables = deps.store.tables.list(q.workspace)
    seen: dict[tuple[str, str], list[Any]] = {}

    def values(table: str, column: str) -> list[Any]:
        if (table, column) not in seen:
            seen[(table, column)] = deps.store.tables.values(q.workspace, table, column, MAX_VALUES)
        return seen[(table, column)]

    box = deps.store.tables.sandbox(q.workspace) if tables else None

    def graph(entity: str) -> Neighbours | None:
        snap = deps.graph.get(deps.store, q.workspace, c.graph.min_phrase_chunks)
        if snap is None:
            return None
        got = entity_neighbours(entity, snap, deps.store, k=10, workspace=q.workspace)
        if got is None:
            return Neighbours(entity, False)
        texts = deps.store.corpus.chunks_by_id([n[3] for n in got.neighbours if n[3]], q.workspace)
        cands = tuple(Candidate(cid, doc, texts[cid].text, w, i, {"stage": "graph", "entity": name})
                      for i, (name, _, w, cid, doc) in enumerate(got.neighbours, start=1) if cid in texts)
        return Neighbours(got.name, True, tuple((n, t, w) for n, t, w, _, _ in got.neighbours), cands)

    return Toolbox(
        search=lambda text, coll: run_query(text, inner.with_overrides({"collections.only": coll}) if coll else inner,
                                            deps, workspace=q.workspace, log=False, tables=False),
        sql_question=(lambda text: sql_route(text, tables, values, box, llm=None, model=c.router.model,
                                             workspace=q.workspace)) if box is not None else None,
        sql_run=box.run if box is not None else None, graph=graph, tables=tables, values=values,
        exclude_docs=frozenset(t.doc_id for t in tables))


def _tool_agent(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer, sql: SqlOutcome | None
                ) -> ToolOutcome | None:
    """The agent's tools (core/route/tools.py) when agent.tools asks for them: with a key Claude chooses them,
    offline the planner chains them from the question's form. auto runs them only where one pass cannot answer,
    in a workspace with tables: offline a multi-step form; with a key a mixed question, or a table question the
    sql stage did not answer."""
    a = c.agent
    if a.tools == "off" or (a.tools == "auto" and sql is None):
        return None
    box = _toolbox(q, c, deps)
    use_llm = deps.llm.available and c.router.method != "offline"
    plan = None if use_llm else plan_question(q.text, box)
    multi = ("lookup_aggregate", "text_then_sql") + (("chain",) if plan is not None and plan.chain is not None
                                                     and plan.chain.steps > 1 else ())
    if a.tools == "auto" and (plan.form not in multi if plan is not None
                              else sql is None or sql.route.kind == "text"
                              or (sql.route.kind == "table" and sql.answered)):
        return None  # offline: the one-shot sql stage keeps its forms; with a key: what it answered alone
    budget = Budget(a.max_rounds, a.max_llm_calls, a.max_tokens, a.max_usd, a.max_seconds)
    with call_limits(deadline=time.monotonic() + a.max_seconds, usd=a.max_usd):
        out = (run_llm(q.text, box, deps.llm, model=a.tools_model, budget=budget, workspace=q.workspace) if use_llm
               else run_offline(q.text, box, budget=budget, plan=plan))
    tracer.stages.extend(out.stages)
    if sql is not None:
        tracer.notes.append(f"the agent's tools ({out.planner}, form {out.form}) answer this question; the sql "
                            "stage's one-shot query is kept for comparison")
    return out


def _answered_by_tools(q: _Query, out: ToolOutcome, config: PipelineConfig, c: PipelineConfig, deps: Deps,
                       tracer: Tracer, log: bool) -> Trace:
    """The answer from the tools: Claude's own (citing rows and passages), else the rows (a table-only plan), else
    the answer stage over the passages the tools found, read as the question with what SQL found in it."""
    why = f"answered by the agent's tools ({out.planner} planner, form {out.form})"
    tracer.skip_rest(why, before=Stage.EVIDENCE)
    tracer.run(Stage.EVIDENCE, lambda: StepOutput(out.passages or out.rows, [why], info=out.evidence_info()))

    def given(text: str, note: str, mode: str) -> AnswerStep:
        a = Answer(text, tool_citations(out), False, mode)
        return AnswerStep((), [note], info=AnswerInfo.of(a, Stage.EVIDENCE), answer=a)

    answer: Answer | None = None
    if not config.answer.enabled:
        tracer.skip(Stage.ANSWER, "answer.enabled = false")
    elif out.final_text:
        ran = tracer.run(Stage.ANSWER, lambda: given(out.final_text, f"the model's answer after {out.calls} tool "
                                                                     "call(s)", "agent"))
        answer = ran.answer if ran is not None else None
    elif out.bridge and out.rows:  # the documents named the entity, SQL answered for it
        ran = tracer.run(Stage.ANSWER, lambda: given(
            f"{out.table_answer} (SQL over the workspace's tables: {' ; then '.join(out.sql)}), for "
            f"{out.bridge['value']}: \"{out.bridge['sentence']}\" [{out.bridge['chunk_id']}]",
            f"the rows of the SQL step and the passage that named {out.bridge['value']}", "sql"))
        answer = ran.answer if ran is not None else None
    elif not out.passages:
        early = (f" ({out.stopped_early()}: this is that step's result, not yet the answer to the question)"
                 if out.stopped_early() else "")
        ran = tracer.run(Stage.ANSWER, lambda: given(
            f"{out.table_answer} (SQL over the workspace's tables: {' ; then '.join(out.sql)}){early}",
            f"the rows of the last of {len(out.sql)} SQL step(s)", "sql"))
        answer = ran.answer if ran is not None else None
    else:
        asked = replace(q, text=out.asked, vec=None) if out.asked != q.text else q
        ran = tracer.run(Stage.ANSWER, lambda: _answer(asked, tracer.final(), c, deps, tracer))
        answer = ran.answer if ran is not None else None
        if answer is not None and out.rows and not answer.refused:
            answer = replace(answer, text=f"From the tables: {out.table_answer}.\n\n{answer.text}",
                             citations=tool_citations(out, answer.citations))
        elif answer is not None and out.rows:  # the rows answer their part; the documents did not answer the rest
            answer = replace(answer, text=f"From the tables: {out.table_answer}. The documents do not answer the "
                                          f"rest: {answer.text}", citations=tool_citations(out), refused=False)
    return _finish(q, tracer, config, deps, log, answer, out.record())


@dataclass(frozen=True, kw_only=True)
class CollectionsStep(StepOutput):
    """The collections stage's output and its choice."""

    choice: CollectionChoice


def _collections(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer, cols: Sequence[Any]) -> None:
    """The collections stage, recorded only in a workspace with several collections (`cols`): which of them the
    question is searched in (core/route/collections.py), and why; the retrieval stages then search only those
    (q.only)."""
    if len(cols) < 2:
        return
    k = c.collections

    def choose() -> CollectionsStep:
        listed = cols
        if not k.enabled or k.only.strip():
            choice = forced(listed, [n.strip() for n in k.only.split(",") if n.strip()] if k.enabled else [])
        else:
            index = _bm25_index(q, c, deps)
            listed = refresh_profiles(deps.store.corpus, deps.store.collections,
                                      lambda: deps.store.tables.list(q.workspace), q.workspace,
                                      deps.embedder.model_id, index.tokens, write=not deps.store.read_only,
                                      listed=listed)
            if not q.dense_blind and k.centroid_weight > 0:
                _query_vec(q, deps)
            choice = choose_offline(index.tokens(q.text), None if q.dense_blind else q.vec, listed,
                                    min_share=k.min_share, temperature=k.temperature,
                                    centroid_weight=k.centroid_weight)
            if deps.llm.available and k.method != "offline":
                choice = choose_llm(q.text, listed, deps.llm, model=k.model, fallback=choice, workspace=q.workspace)
            elif k.method == "llm":
                choice = replace(choice, notes=(*choice.notes, "collections.method = llm without a key: the "
                                                "offline choice"))
        return CollectionsStep((), [f"searched {', '.join(choice.searched)} of {len(choice.available)}: "
                                    f"{choice.reason}", *choice.notes], choice.usage, choice.info(), choice=choice)

    ran = tracer.run(Stage.COLLECTIONS, choose)
    assert ran is not None
    if ran.choice.filters:
        q.only = ChunkFilter(deps.store.collections.chunk_collections(q.workspace), frozenset(ran.choice.searched))


def _in_collections(q: _Query, out: StepOutput) -> StepOutput:
    """A graph stage's list kept to the collections searched."""
    if q.only is None:
        return out
    kept = tuple(h for h in out.candidates if q.only.allows(h.chunk_id))
    return out if len(kept) == len(out.candidates) else replace(
        out, candidates=kept, notes=(*out.notes, f"{len(out.candidates) - len(kept)} outside the collections searched"))


def _answer_cache(q: _Query, config: PipelineConfig, deps: Deps, key: CacheKey) -> CacheStep:
    """Encode the query (dense and graph reuse the vector) and look it up in this workspace's answer cache."""
    # With the verifier on, the same forward keeps the query's token vectors for it (no second encode).
    encoded = _query_vec(q, deps, (lambda t: query_vector(deps.embedder, t))
                         if config.answer_cache.verifier else None) == "encoded"
    res = check_cache(q.text, q.vec, deps.store.answers, key, config.answer_cache,
                      covered_languages=deps.embedder.languages, writable=not deps.store.read_only,
                      word_similarity=embedder_word_similarity(deps.embedder),
                      verifier=make_verifier(deps.embedder, pair_model=config.answer_cache.pair_model)
                      if config.answer_cache.verifier else None,
                      vet=(lambda e: _vet_cached(q, e, deps)) if config.answer.verify else None)
    notes = [served_label(res)] if res.verdict == "hit" else [
        f"{res.verdict.replace('_', ' ')}: " + (f"nearest '{res.nearest_question}' (cosine {res.cosine:.3f}); "
                                                 if res.nearest_question else "") + res.reason]
    # The query was encoded here unless a question met before lent its vector: one embedding computed or none.
    return CacheStep((), notes, info=res.info(embed_cache_misses=int(encoded), embed_cache_hits=int(not encoded)),
                     lookup=res)


def answer_cache_key(c: PipelineConfig, deps: Deps, workspace: str, version: int) -> CacheKey:
    """The key a question's answer is cached under: workspace, corpus version, the answer-relevant configuration and
    the stage data it reads (_stage_data_stamp)."""
    return CacheKey(workspace, version, answer_config_hash(c, deps.embedder.model_id) +
                    _stage_data_stamp(c, deps, workspace))


def _stage_data_stamp(c: PipelineConfig, deps: Deps, workspace: str) -> str:
    """What the stages this configuration reads have built for the workspace beyond its documents (graph, multilingual
    vectors, contexts, RAPTOR tree): part of the answer cache's key, so a build that adds or changes such data makes
    the answers cached before it stale for the configurations that read it ('' when none is read)."""
    parts: list[str] = []
    if c.graph.enabled:
        st = deps.store.graph.state(workspace)
        parts.append(f"graph {st.version}:{st.corpus_version}:{st.built_at}" if st is not None else "graph -")
    if c.embedding.multilingual != "off":
        parts.append("ml " + ",".join(f"{m}:{n}" for m, v, n in deps.store.corpus.vector_models(workspace)
                                      if m == c.embedding.multilingual_model))
    if c.context.variant in ("heuristic", "llm"):
        parts.append(f"ctx {c.context.variant} " + deps.store.ledger.context_state(c.context.variant, workspace))
    elif c.context.variant == "late":
        parts.append("late " + ",".join(f"{m}:{n}" for m, v, n in deps.store.corpus.vector_models(workspace)
                                        if v == "late"))
    if c.raptor.enabled:
        parts.append(f"raptor {deps.store.raptor.state(workspace)}")
    return ":" + hashlib.sha1("|".join(parts).encode()).hexdigest()[:8] if parts else ""


def _vet_cached(q: _Query, entry: CachedAnswer, deps: Deps) -> str | None:
    """The verify stage's check of a stored answer against this question: why it may not be served, or None."""
    got = _verify(q, Answer(entry.answer, entry.citations, entry.refused, entry.mode), deps)
    info = got.info
    return info.reason if isinstance(info, VerifyInfo) and info.action in ("refused", "flagged") else None


def _served_from_cache(q: _Query, res: CacheLookup, config: PipelineConfig, deps: Deps, tracer: Tracer,
                       log: bool) -> Trace:
    """The trace of a cache hit: the stored answer and citations, every later stage skipped with the reason."""
    entry = res.entry
    assert entry is not None
    tracer.skip_rest("answer served from the answer cache", before=Stage.ANSWER)
    answer = Answer(entry.answer, entry.citations, entry.refused, entry.mode)
    tracer.run(Stage.ANSWER, lambda: AnswerStep((), [served_label(res)],
                                                info=AnswerInfo.of(answer, Stage.ANSWER_CACHE, cached=True),
                                                answer=answer))
    tracer.notes.append(served_label(res))
    stored = deps.store.answers.cached_trace(entry.key, entry.question)  # the stages that produced the answer
    trace = replace(_finish(q, tracer, config, deps, False, answer),
                    stored=trace_from_json(stored) if stored is not None else None)
    if log and not deps.store.read_only:  # logged with its stored trace: the run log knows the hit's route
        deps.store.runs.log_trace(trace)
    return trace


@dataclass(frozen=True, kw_only=True)
class CondenseStep(StepOutput):
    """The condense stage's output and the standalone question it wrote."""

    condensed: Condensed


def _condense(query: str, history: Sequence[Turn], config: PipelineConfig, deps: Deps, workspace: str
              ) -> CondenseStep:
    """A conversation's follow-up rewritten as a standalone question (core/route/condense.py)."""
    cond = condense(query, history, deps.llm, use_llm=config.answer.mode != "extractive",
                    model=config.transforms.model, workspace=workspace)
    return CondenseStep((), [f"condensed ({cond.method}): {cond.text}" if cond.changed else "stands alone",
                             *cond.notes], cond.usage, cond.info(), condensed=cond)


def run_query(query: str, config: PipelineConfig, deps: Deps, *, workspace: str = DEFAULT_WORKSPACE,
              log: bool = True, reuse_route: RouteDecision | None = None, use_cache: bool | None = None,
              history: Sequence[Turn] = (), tables: bool = True, memo: StageMemo | None = None) -> Trace:
    """One query through every stage, each recorded by the tracer (run, or skipped with its reason).
    `reuse_route` (the agentic loop's first round, run with the router off): the question's own route, whose
    sub-queries and spent LLM call the transforms read, so a round never pays for a second rewrite.
    `use_cache`: None = the answer cache serves logged runs only (an unlogged run is a measurement); True = it
    serves this run though unlogged (the Search Lab's re-run after a settings change); False = it is skipped for
    this query, saying so (the Search Lab's "recompute").
    `history` (a conversation's earlier turns): the query is first condensed into a standalone question (the
    `condense` stage), which every later stage, the answer cache's key included, reads.
    `tables` False: no sql stage (the agent's search tool: SQL is its own tool there).
    `memo` (an evaluation run's StageMemo): stages whose inputs an earlier configuration of the run read reuse its
    results."""
    tracer = Tracer(memo=memo)
    # The conditional stages of the list this trace records (core/trace.py): the condense stage in a conversation,
    # the sql stage in a workspace with tables (not in the agent's rounds or its search tool), the collections stage
    # in a workspace with several collections.
    table_list = deps.store.tables.list(workspace) if reuse_route is None and tables else []
    cols = deps.store.collections.list(workspace)
    tracer.plan = {name for name, on in ((Stage.CONDENSE, bool(history)), (Stage.SQL, bool(table_list)),
                                         (Stage.COLLECTIONS, len(cols) >= 2)) if on}
    if history:
        validate_query(query, config)
        ran = tracer.run(Stage.CONDENSE, lambda: _condense(query, history, config, deps, workspace))
        assert ran is not None
        query = ran.condensed.text
    q = _start(query, config, deps, workspace, tracer)
    q.guard_key = guard_key(config) if config.cascade_guard.enabled else ""
    c = config

    # First: the semantic answer cache (issue #15's contract: it is the first stage). Keyed by the requested
    # configuration: the route is a function of question and configuration, so it adds nothing to the key. A hit
    # serves the stored answer and every later stage is skipped. Unlogged runs are measurements (evaluation,
    # benches, agent rounds): a served answer would skip the stages they score and time, so they bypass the cache.
    key = answer_cache_key(c, deps, workspace, q.version)
    cached = tracer.run(Stage.ANSWER_CACHE, lambda: _answer_cache(q, c, deps, key),
                        skip=off(c.answer_cache.enabled, "answer_cache.enabled")
                        or off(c.answer.enabled, "answer.enabled")
                        or (None if log or use_cache else "unlogged measurement run (evaluation, bench): the "
                                                          "answer cache is bypassed")
                        or (None if use_cache is not False
                            else "recompute asked for: the answer cache is bypassed for this query"))
    if cached is not None and cached.lookup.verdict == "hit":
        return _served_from_cache(q, cached.lookup, config, deps, tracer, log)

    # Then the router picks the path and this route's settings; chitchat and out-of-scope stop at the route's reply.
    decision = _route(q, c, deps, tracer) if c.router.enabled else None
    if decision is None:
        tracer.skip(Stage.ROUTE, "router.enabled = false" if reuse_route is None
                    else f"agent round: the question's route ({reuse_route.named.name}) is reused")
    else:
        c = decision.config
    # The workspace's tables: a question about them gets a query (and the table route its answer from the rows),
    # whatever the router made of it (a count is no chitchat, and a table is in scope).
    sql = _sql(q, c, deps, tracer, table_list) if reuse_route is None and tables else None
    tools = _tool_agent(q, c, deps, tracer, sql) if reuse_route is None and tables else None
    if tools is not None and tools.found:
        return _answered_by_tools(q, tools, config, c, deps, tracer, log)
    if tools is not None:
        tracer.notes.append(f"the agent's tools found nothing ({tools.declined or tools.stop_reason}): answered as "
                            "usual")
    if sql is not None and sql.route.kind == "table" and sql.answered:
        return _answered_by_sql(q, sql, config, deps, tracer, log)
    if decision is not None and not decision.retrieves:
        if sql is not None and sql.route.kind != "text":
            tracer.notes.append(f"route {decision.named.name} set aside: the question is about the workspace's "
                                "tables; retrieval runs")
            tracer.skip(Stage.CAG, f"route {decision.named.name} set aside: the question is about the workspace's "
                                   "tables")
            decision = None
        else:
            served = _no_retrieval(q, decision, c, deps, tracer, log)
            if served is not None:
                return served
            decision = decision.without_cag(f"CAG gave no answer: route {decision.fallback.name} retrieves instead")

    if not any(s.stage == Stage.CAG for s in tracer.stages):
        tracer.skip(Stage.CAG, cag_skip(c, decision) or "")
    _collections(q, c, deps, tracer, cols)
    agent = _agentic(q, c, deps, tracer, decision) if c.agent.enabled else None
    asked = _with_sql_values(q, sql)  # a mixed question searches, and is answered, with the values SQL found
    if agent is None:
        _retrieve(asked, c, deps, tracer, decision if decision is not None else reuse_route)
        tracer.skip(Stage.EVIDENCE, "agent.enabled = false")

    # Last stage. Answer: reads the final candidates of whatever ran before (their original chunk text).
    answered = tracer.run(Stage.ANSWER, lambda: _answer(asked, tracer.final(), c, deps, tracer),
                          skip=off(c.answer.enabled, "answer.enabled"), key=lambda: _answer_key(asked, c, tracer))
    answer = answered.answer if answered is not None else None
    if c.answer.enabled:  # the answer checked against what the question pins down (core/answer/verify.py)
        checked = tracer.run(Stage.VERIFY, lambda: _verify(asked, answer, deps),
                             skip=off(c.answer.verify, "answer.verify") or verify_skip(
                                 answer, answered.notes if answered is not None else (),
                                 answered.info.source if answered is not None and isinstance(answered.info, AnswerInfo)
                                 else None))
        answer = checked.answer if checked is not None else answer
    if answer is not None and sql is not None and sql.answered and not answer.refused:
        answer = replace(answer, text=f"From the tables: {sql.answer_text()}.\n\n{answer.text}")
    elif answer is not None and answer.refused and sql is not None and sql.untranslated():
        # what the SQL stage knew comes first: not "the corpus does not say" for a table the question is about
        answer = replace(answer, text=f"{sql.untranslated()}\n\n{answer.text}")
    if cached is not None and answer is not None and q.vec is not None and not deps.store.read_only:
        if remember(deps.store.answers, key, q.text, q.vec, answer,
                    cost_usd=sum(s.usage.usd for s in tracer.stages), ms=sum(s.ms for s in tracer.stages)):
            deps.store.answers.put_trace(key, q.text, trace_json(Trace(
                q.text, config.stable_hash(), q.version, tuple(tracer.stages), q.workspace, q.lang,
                tuple(tracer.notes), answer, agent)))
    if agent is not None and answer is not None and answer.refused and agent.stop_reason == "answered":
        agent = replace(agent, stop_reason="refused_no_evidence")  # the loop ended, the answer found no support
    return _finish(q, tracer, config, deps, log, answer, agent)
