"""run_query(query, config, deps) -> Trace: the retrieval pipeline as straight-line code, one traced stage each."""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

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
from core.answer.e5_scorer import prefetch_question
from core.answer.synthesis import compared_items, pick_mode, synthesized_answer
from core.answer.support import late_sentence_scorer, load_support_model
from core.answer.versions import DocHead
from core.cascade.expand import expand
from core.cascade.guard import steps_aside
from core.cascade.prune import (
    SpanScorer,
    bm25_span_scorer,
    diversify,
    flow_info,
    hybrid_span_scorer,
    language_aware_similarity,
    prune_sentences,
    sentence_prefixes,
)
from core.cascade.rerank import (
    LateInteractionReranker,
    attach_contexts,
    covers,
    describe,
    embedder_span_scorer,
    model_languages,
    pooled_span_scorer,
    rerank,
    reranker_span_scorer,
)
from core.config import PipelineConfig
from core.deps import Deps
from core.graph.raptor import raptor_search
from core.graph.search import entity_neighbours
from core.graph.stages import graph_stages
from core.ingest.context import index_variant, prepare_variant
from core.models.embed import embed_with_cache, one_torch_thread
from core.models.llm import call_limits
from core.models.protocols import encode_query
from core.retrieve.ann import candidates as ann_candidates
from core.retrieve.ann import expansion as ann_expansion
from core.retrieve.bm25 import BM25Index, BM25Params
from core.retrieve.dense import MultilingualPlan, corpus_languages, multilingual_plan
from core.retrieve.filtered import bm25_in, dense_in
from core.retrieve.fusion import rrf
from core.route.agent import (
    BridgeWriter,
    Budget,
    LLMGrader,
    LLMWriter,
    OfflineGrader,
    run_agent,
)
from core.route.collections import ChunkFilter, choose_llm, choose_offline, forced, refresh_profiles
from core.route.condense import condense
from core.route.router import CAG_ROUTE
from core.route.sql import MAX_VALUES, SqlOutcome, sql_route, with_values
from core.route.sql import classify as classify_tables
from core.route.stage import (
    RouteDecision,
    bridge_found,
    cag_estimator,
    cag_stage,
    decide_route,
    hybrid_search,
    transform_stages,
)
from core.route.tools import Neighbours, Toolbox, ToolOutcome, plan_question, run_llm, run_offline
from core.route.tools import citations as tool_citations
from core.text import detect_language, guess_language, sha256_text
from core.types import (
    CONTEXT_KEY,
    DEFAULT_WORKSPACE,
    Answer,
    AnswerInfo,
    CacheKey,
    Candidate,
    Chunk,
    Stage,
    StageResult,
    Trace,
    Turn,
    Usage,
)


class QueryError(ValueError):
    """A query that cannot be run; the message is fit for the user."""


@dataclass(frozen=True)
class StepOutput:
    """What a stage function hands back to the tracer: its candidates plus what the trace should say about them."""

    candidates: Sequence[Candidate]
    notes: Sequence[str] = ()
    usage: Usage = Usage()
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CacheStep(StepOutput):
    """The answer-cache stage's output and its lookup (a hit serves the stored answer)."""

    lookup: CacheLookup


@dataclass(frozen=True, kw_only=True)
class AnswerStep(StepOutput):
    """The answer stage's output and the answer it gave."""

    answer: Answer


Out = TypeVar("Out", bound=StepOutput)


def off(enabled: bool, flag: str, pool: Sequence[Candidate] | None = None, empty: str = "") -> str | None:
    """The reason a stage does not run (its switch is off, or nothing reached it), or None when it runs."""
    if not enabled:
        return f"{flag} = false"
    if pool is not None and not pool:
        return empty
    return None


@dataclass(frozen=True)
class Kept:
    """One stage's result kept in a StageMemo: its output, the stages its function appended before it (the answer's
    map / reduce calls) and the time it took when it was computed."""

    out: StepOutput
    extra: tuple[StageResult, ...]
    ms: float


@dataclass
class StageMemo:
    """An evaluation run's stage results by key (see stage_key): a configuration that reads a stage with the same
    inputs as an earlier configuration of the run reuses its result instead of computing it again
    (core/eval/run.py), counted per stage."""

    kept: dict[str, Kept] = field(default_factory=dict)
    reused: Counter[str] = field(default_factory=Counter)
    computed: Counter[str] = field(default_factory=Counter)


def stage_key(stage: str, *parts: Any) -> str:
    """A stage's memo key: its name and everything its output is a function of (the query's facts, the config
    sections it reads, the candidate lists it reads, as digests of their content)."""
    h = hashlib.blake2b(stage.encode(), digest_size=16)
    for p in parts:
        h.update(b"\x1f" + repr(p).encode())
    return h.hexdigest()


def cands_digest(cands: Sequence[Candidate]) -> str:
    """A candidate list's content (ids, text, scores, ranks, meta), for a memo key."""
    return stage_key("cands", *[(c.chunk_id, c.doc_id, c.text, c.score, c.rank, sorted(c.meta.items()))
                                for c in cands])


@dataclass
class Tracer:
    """Collects StageResults in order; the collected record is what every view renders. With a `memo` (an
    evaluation run's), a stage run with a key reuses the result kept under it (the same record, with the time it
    took when computed), or computes and keeps it."""

    stages: list[StageResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memo: StageMemo | None = None

    def add(self, stage: str, candidates: Sequence[Candidate], ms: float, *, usage: Usage = Usage(),
            notes: Sequence[str] = (), info: Mapping[str, Any] | None = None) -> list[Candidate]:
        self.stages.append(StageResult(stage, tuple(candidates), ms, usage, None, tuple(notes),
                                       {} if info is None else info))
        return list(candidates)

    def skip(self, stage: str, reason: str) -> list[Candidate]:
        self.stages.append(StageResult(stage, (), 0.0, Usage(), reason))
        return []

    def run(self, stage: str, fn: Callable[[], Out], *, skip: str | None = None,
            key: Callable[[], str] | None = None) -> Out | None:
        """Run one stage and record it: skipped with `skip` as its reason (None back), or timed around `fn`, whose
        output (candidates, notes, usage, info and whatever else the stage hands on) it returns. Under a memo,
        `key()` names the result: one kept under it is replayed (with the time it took when computed)."""
        if skip is not None:
            self.skip(stage, skip)
            return None
        memo = self.memo if key is not None else None
        k = key() if memo is not None and key is not None else ""
        kept = memo.kept.get(k) if memo is not None else None
        if memo is not None and kept is not None:
            memo.reused[stage] += 1
            self.stages.extend(kept.extra)
            self.add(stage, kept.out.candidates, kept.ms, usage=kept.out.usage, notes=kept.out.notes,
                     info=kept.out.info)
            return kept.out  # type: ignore[return-value]
        before = len(self.stages)
        start = time.perf_counter()
        out = fn()
        ms = (time.perf_counter() - start) * 1000
        if memo is not None:
            memo.computed[stage] += 1
            memo.kept[k] = Kept(out, tuple(self.stages[before:]), ms)
        self.add(stage, out.candidates, ms, usage=out.usage, notes=out.notes, info=out.info)
        return out

    def step(self, stage: str, fn: Callable[[], StepOutput], *, skip: str | None = None,
             keep: Sequence[Candidate] = (), key: Callable[[], str] | None = None) -> list[Candidate]:
        """One stage of the candidate flow (see run): its candidates, or `keep` (the list the stage would have read)
        when it is skipped."""
        out = self.run(stage, fn, skip=skip, key=key)
        return list(keep) if out is None else list(out.candidates)

    def final(self) -> StageResult | None:
        """The last stage so far that ran with candidates: what the answer stage reads."""
        return Trace("", "", 0, tuple(self.stages)).final()


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


class ChunkSource(Protocol):
    """Where a stage's (chunk id, score) hits get their text (core.store's corpus repository implements it)."""

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = ...) -> dict[str, Chunk]: ...


def _to_candidates(hits: list[tuple[str, float]], source: ChunkSource, workspace: str, stage: str
                   ) -> list[Candidate]:
    chunks = source.chunks_by_id([cid for cid, _ in hits], workspace)
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
    chunks = deps.store.corpus.chunks_by_id([c.chunk_id for c in pool], workspace)
    prefixes = sentence_prefixes(pool, deps.store.corpus.document_titles([c.doc_id for c in pool], workspace),
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


def _facts(q: _Query) -> tuple[Any, ...]:
    """What a stage reads of the query beside the config (its memo key's part): text, language, workspace, corpus
    version, the text variants searched, the multilingual plan and the collections searched."""
    ml = (q.ml.run, q.ml.cross_lingual, q.ml.note) if q.ml is not None else None
    only = tuple(sorted(q.only.searched)) if q.only is not None else None
    return (q.text, q.lang, q.workspace, q.version, q.dense_blind, q.bm25_variant, q.dense_variant, ml, only)


def _finish(q: _Query, tracer: Tracer, config: PipelineConfig, deps: Deps, log: bool, answer: Answer | None = None,
            agent: Mapping[str, Any] | None = None) -> Trace:
    """The query's trace, written to the run log unless the run is unlogged (a measurement) or the store is
    read-only (a snapshot keeps no run log)."""
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


def _bm25(q: _Query, config: PipelineConfig, deps: Deps) -> StepOutput:
    index = _bm25_index(q, config, deps)
    found = (index.search(q.text, config.bm25.k) if q.only is None
             else bm25_in(index, q.text, config.bm25.k, q.only.mask(index.chunk_ids)))
    hits = _to_candidates(found, deps.store.corpus, q.workspace, "bm25")
    return StepOutput(hits, info={"indexed": len(index), "text": q.bm25_variant})


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
    dindex = deps.indexes.dense(deps.store, deps.embedder, q.workspace, variant=q.dense_variant)
    got = _query_vec(q, deps)  # the answer-cache stage may have encoded the query already
    encoded, reused = got == "encoded", got == "cached"
    found = (dindex.search(q.vec, config.dense.k) if q.only is None
             else dense_in(dindex, q.vec, config.dense.k, q.only.mask(dindex.chunk_ids)))
    hits = _to_candidates(found, deps.store.corpus, q.workspace, "dense")
    notes = [f"embedder does not cover '{q.lang}': this list is close to random"] if q.dense_blind else []
    search = "exact scan"
    if dindex.ann is not None and q.only is None:  # above the ANN threshold (core/retrieve/ann.py)
        search = f"approximate: HNSW graph, query width {ann_expansion(len(dindex.ann), ann_candidates(config.dense.k))}"
    # A question met before reuses its vector (deps.indexes.queries); an encode counts as one embedding computed.
    return StepOutput(hits, notes, info={"model": deps.embedder.model_id, "indexed": len(dindex),
                                         "text": q.dense_variant, "search": search,
                                         "embed_cache_misses": int(encoded), "embed_cache_hits": int(reused)})


def _ml_plan(q: _Query, config: PipelineConfig, deps: Deps) -> tuple[MultilingualPlan, str | None]:
    """The multilingual list's plan for this question (from the languages the corpus recorded) and the reason it
    does not run: switched off or not asked for, vectors not built (with the build to run), or no engine."""
    e = config.embedding
    plan = multilingual_plan(e.multilingual, q.lang, deps.indexes.languages(deps.store, q.workspace),
                             deps.embedder.languages)
    if not plan.run:
        return plan, plan.note
    total = deps.store.corpus.count("chunks", q.workspace)
    have = sum(n for m, v, n in deps.store.corpus.vector_models(q.workspace) if m == e.multilingual_model and v == "raw")
    if have < total:
        return plan, (f"{plan.note}; not built: {e.multilingual_model} vectors cover {have:,} of {total:,} chunks. "
                      "Build them (Search Lab: build; or `python -m core query ... --build`) - "
                      f"about {(total - have) * ML_EMBED_S_PER_CHUNK:,.0f} s")
    emb, notice = deps.multilingual_for(e.multilingual_model)
    if emb is None:
        return plan, f"{plan.note}; {notice}"
    return plan, None


# Seconds per chunk to embed with multilingual-e5 on this machine (bench/results/xquad.json measures it).
ML_EMBED_S_PER_CHUNK = 0.2


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
    model = config.embedding.multilingual_model
    emb, _ = deps.multilingual_for(model)
    assert emb is not None
    dindex = deps.indexes.dense(deps.store, emb, q.workspace, variant="raw")
    vec = encode_query(emb, q.text)
    found = (dindex.search(vec, config.dense.k) if q.only is None
             else dense_in(dindex, vec, config.dense.k, q.only.mask(dindex.chunk_ids)))
    hits = _to_candidates(found, deps.store.corpus, q.workspace, Stage.DENSE_ML)
    return StepOutput(hits, [q.ml.note], info={"model": emb.model_id, "indexed": len(dindex), "text": "raw",
                                               "question_lang": q.lang, "cross_lingual": q.ml.cross_lingual,
                                               "embed_cache_misses": 1})


def _raptor_skip(q: _Query, c: PipelineConfig, deps: Deps) -> str | None:
    """Why the raptor stage does not run: switched off, no tree, or a tree made with another embedder."""
    if not c.raptor.enabled:
        return "raptor.enabled = false"
    state = deps.store.raptor.state(q.workspace)
    if state is None:
        return "no RAPTOR tree built yet: run `python -m core raptor build`"
    if state[1] != deps.embedder.model_id:
        return f"the RAPTOR tree's vectors are {state[1]}'s, not {deps.embedder.model_id}'s: rebuild it"
    return None


def _raptor(q: _Query, c: PipelineConfig, deps: Deps) -> StepOutput:
    """RAPTOR's collapsed tree: summary nodes of every level and the leaf chunks, by cosine to the query."""
    nodes, node_vecs = deps.store.raptor.nodes(q.workspace)
    dindex = deps.indexes.dense(deps.store, deps.embedder, q.workspace, variant="raw")
    _query_vec(q, deps)
    hits = raptor_search(q.vec, nodes, node_vecs, dindex.chunk_ids, dindex.matrix,
                         lambda ids: deps.store.corpus.chunks_by_id(ids, q.workspace), k=c.raptor.k)
    version = max((n.corpus_version for n in nodes), default=q.version)  # an update rewrites only some nodes
    notes = [f"tree: {len(nodes)} summaries on {max((n.level for n in nodes), default=0)} level(s), built at corpus "
             f"v{version}"] + ([f"tree is behind the corpus (now v{q.version}): `python -m core raptor update`"]
                               if version != q.version else [])
    return StepOutput(hits.candidates, notes, info={"nodes_hit": [{"node": n, "level": lv, "cosine": round(s, 4)}
                                                                  for n, lv, s in hits.nodes_hit]})


def _fuse(q: _Query, config: PipelineConfig, lists: dict[str, list[Candidate]]) -> StepOutput:
    """RRF of BM25, dense and (graph.fuse_with_text) the graph lists; a dense list blind to the language is scaled."""
    f = config.fusion
    weights = [f.bm25_weight, f.dense_weight] if f.method == "weighted_rrf" else [1.0, 1.0]
    notes = []
    if q.dense_blind:
        weights[1] *= f.foreign_dense_weight
        notes.append(f"dense weight x{f.foreign_dense_weight:g}: embedder does not cover '{q.lang}'")
    transforms = [name for name in lists if name in (Stage.HYDE, Stage.MULTI_QUERY, Stage.DECOMPOSE)]
    ml = [name for name in lists if name == Stage.DENSE_ML]
    if ml and q.ml is not None and q.ml.cross_lingual:
        weights[0] *= f.cross_lingual_bm25_weight
        notes.append(f"bm25 weight x{f.cross_lingual_bm25_weight:g}: the question's language ({q.lang}) is none of the "
                     "corpus's, so BM25 matches only names, numbers and shared words (fusion.cross_lingual_bm25_weight)")
    weights += [f.multilingual_weight] * len(ml)  # the multilingual list comes right after dense (see _retrieve)
    graph = [name for name in lists if name not in (Stage.BM25, Stage.DENSE, Stage.DENSE_ML, *transforms)]
    # Graph lists lean on the same embedder (seeds, community map): the same foreign-language weight as dense.
    gw = config.graph.graph_weight * (f.foreign_dense_weight if q.dense_blind else 1.0)
    if graph and q.dense_blind:
        notes.append(f"graph weight x{f.foreign_dense_weight:g}: embedder does not cover '{q.lang}'")
    weights += [config.raptor.weight if name == Stage.RAPTOR else gw for name in graph]
    weights += [config.transforms.weight] * len(transforms)  # transform lists come last (see _retrieve)
    # The reranker reads rerank.top_n fused candidates: fusion hands on that many when it is deeper than fusion.k.
    depth = max(f.k, config.rerank.top_n) if config.rerank.enabled else f.k
    if depth > f.k:
        notes.append(f"kept the top {depth} for the reranker (rerank.top_n; fusion.k = {f.k})")
    fused = rrf(list(lists.values()), k=f.rrf_k, weights=weights, names=[str(n) for n in lists], top=depth)
    return StepOutput(fused, notes, info={"rrf_k": f.rrf_k, "weights": weights})


def _rerank(q: _Query, pool: list[Candidate], pool_from: str, config: PipelineConfig, deps: Deps) -> StepOutput:
    r = config.rerank
    reranker, notice = deps.reranker_for(r.method, r.model, r.llm_model)
    head = pool[: r.top_n]
    if r.use_context and q.bm25_variant != "raw":  # contextual retrieval on: the reranker reads context + chunk
        head = attach_contexts(head, deps.store.ledger.contexts(q.bm25_variant, q.workspace, [c.chunk_id for c in head]))
    out, rs = rerank(q.text, head, reranker, k=r.k, use_context=r.use_context, workspace=q.workspace,
                     query_lang=q.lang, combine=r.combine, input_weight=r.input_weight, rrf_k=r.rrf_k)
    return StepOutput(out, [n for n in (notice, *rs.notes) if n], rs.usage,
                      {"reranker": reranker.name, "input": pool_from, **describe(rs), **flow_info(head, out)})


def _prune(q: _Query, pool: list[Candidate], config: PipelineConfig, deps: Deps) -> StepOutput:
    p = config.prune
    notes, kind = [], p.scorer
    model_blind = q.dense_blind if kind != "reranker" else not covers(
        model_languages(deps.reranker_for(config.rerank.method, config.rerank.model, config.rerank.llm_model)[0]),
        q.lang)
    if model_blind:  # a model that cannot read the query scores its sentences at random: BM25 alone scores them
        notes.append(f"scorer {kind} -> bm25: its model does not cover '{q.lang}'")
        kind = "bm25"
    scorer = (bm25_span_scorer(_prefixes(pool, deps, q.workspace)) if kind == "bm25"
              else _span_scorer(kind, pool, config, deps, q.workspace, q.vec))
    pr = prune_sentences(q.text, pool, scorer, token_budget=p.token_budget, keep_neighbours=p.keep_neighbours,
                         max_unit_tokens=p.max_unit_tokens, chunk_weight=p.chunk_weight, keep_all=p.keep_all)
    notes += [f"no sentence of {', '.join(pr.dropped)} fit the budget of {p.token_budget} tokens"] if pr.dropped else []
    notes += [f"{len(pr.floored)} chunk(s) kept by their best sentence alone, {pr.over_budget_tokens} tokens over the "
              f"budget of {p.token_budget}"] if pr.floored else []
    return StepOutput(pr.candidates, notes, info={
        "scorer": kind, "sentences_in": pr.units_in, "sentences_kept": pr.units_kept, "pinned": pr.pinned,
        "dropped": pr.dropped, "floored": pr.floored, "over_budget_tokens": pr.over_budget_tokens,
        **flow_info(pool, pr.candidates)})


def _prefixes(pool: Sequence[Candidate], deps: Deps, workspace: str) -> dict[str, str]:
    chunks = deps.store.corpus.chunks_by_id([c.chunk_id for c in pool], workspace)
    return sentence_prefixes(pool, deps.store.corpus.document_titles([c.doc_id for c in pool], workspace),
                             {cid: ch.heading_path for cid, ch in chunks.items()})


def _mmr(q: _Query, pool: list[Candidate], config: PipelineConfig, deps: Deps) -> StepOutput:
    m = config.mmr
    # Duplicates are judged on whole chunks (their cached vectors), so a pruned draft still matches its final.
    chunks = deps.store.corpus.chunks_by_id([c.chunk_id for c in pool], q.workspace)
    texts = [chunks[c.chunk_id].text if c.chunk_id in chunks else c.text for c in pool]
    # Read-only cache lookup (query-time texts never grow the cache); its counts feed the Search Lab's counters.
    vecs, estats = embed_with_cache(texts, deps.embedder, deps.store.caches, q.workspace, write=False)
    # A chunk the embedder does not read is compared by its words (pairs with it use the lexical cosine).
    langs = deps.embedder.languages
    foreign = [not covers(langs, chunks[c.chunk_id].lang if c.chunk_id in chunks else detect_language(c.text))
               for c in pool]
    sims = language_aware_similarity(vecs, texts, foreign) if any(foreign) else None
    dv = diversify(pool, vecs, lam=m.lam, dedup_threshold=m.dedup_threshold, k=m.k, sims=sims)
    notes = [f"{d.dropped} dropped as {'an exact' if d.exact else 'a near'} duplicate of {d.kept} "
             f"(cosine {d.similarity:.3f})" for d in dv.duplicates]
    if any(foreign):
        notes.append(f"{sum(foreign)} chunk(s) in a language {deps.embedder.model_id} does not cover: compared by "
                     "word overlap (lexical cosine)")
    return StepOutput(dv.candidates, notes, info={"lam": m.lam, "duplicates": [d.__dict__ for d in dv.duplicates],
                                                  "embed_cache_hits": estats.cache_hits,
                                                  "embed_cache_misses": estats.computed,
                                                  **flow_info(pool, dv.candidates)})


def _expand(q: _Query, pool: list[Candidate], config: PipelineConfig, deps: Deps) -> StepOutput:
    e = config.expand
    ex = expand(pool, deps.store.corpus, mode=e.mode, window=e.window, parent_max_tokens=e.parent_max_tokens,
                workspace=q.workspace)
    notes = [f"{a} merged into {b}: their expansions overlap" for a, b in ex.merged]
    notes += [f"not expanded (document text or offsets missing): {', '.join(ex.unexpanded)}"] if ex.unexpanded else []
    return StepOutput(ex.candidates, notes, info={"mode": e.mode, "window": e.window,
                                                  **flow_info(pool, ex.candidates)})


def _answer(q: _Query, final: StageResult | None, config: PipelineConfig, deps: Deps,
            tracer: Tracer | None = None) -> AnswerStep:
    """The answer stage (core/answer/synthesis.py): its map / reduce / refine calls join the trace before it."""
    cands = final.candidates if final else ()
    seen = Trace("", "", 0, tuple(tracer.stages) if tracer is not None else ())
    route = seen.route_info()
    glob = seen.stage(Stage.GRAPH_GLOBAL) if config.graph.enabled and config.graph.mode == "global" else None
    # The offline answerer reads each sentence with its document title and scores it by late interaction (token
    # vectors of the embedder; none when the embedder does not read the question's language).
    late = deps.reranker_for("late-interaction")[0] if config.answer.mode != "llm" else None
    # The BM25 index's vocabulary tells the answerer which question words the corpus never uses.
    vocab = _bm25_index(q, config, deps).vocabulary() if late is not None and config.bm25.enabled else None
    syn = synthesized_answer(q.text, cands, config.answer, deps.llm, workspace=q.workspace,
                          route=route.config if route is not None else None, global_stage=glob,
                          query_id="q" + hashlib.sha1(q.text.encode()).hexdigest()[:12],
                          titles=deps.store.corpus.document_titles([c.doc_id for c in cands], q.workspace),
                          li_scorer=late_sentence_scorer(late, workspace=q.workspace)
                          if isinstance(late, LateInteractionReranker) else None, blind=q.dense_blind,
                          vocabulary=vocab, full_texts=_whole_chunks(cands, config, deps, q.workspace),
                          calibration=deps.store.calibrations.get(q.workspace),
                          sentence_vectors=deps.store.caches, documents=_doc_heads(cands, config, deps, q.workspace))
    if tracer is not None:
        tracer.stages.extend(syn.calls)
    res = syn.result
    source = syn.source or (final.stage if final else None)
    return AnswerStep((), res.notes, res.usage, res.info(source), answer=res.answer)


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


def _doc_heads(cands: Sequence[Candidate], config: PipelineConfig, deps: Deps, workspace: str
               ) -> dict[str, DocHead]:
    """Name, title and opening of the documents the offline answerer quotes: how it tells versions apart."""
    if config.answer.mode == "llm" or not cands:
        return {}
    heads = deps.store.corpus.document_heads([c.doc_id for c in cands[: config.answer.max_chunks]], workspace)
    return {d: DocHead(*h) for d, h in heads.items()}


def _whole_chunks(cands: Sequence[Candidate], config: PipelineConfig, deps: Deps, workspace: str) -> dict[str, str]:
    """Whole texts of the chunks the offline answerer reads (pruning may have cut the sentence that answers); Claude
    reads the pruned context, so nothing is fetched for it."""
    if config.answer.mode == "llm" or not cands:
        return {}
    top = [c.chunk_id for c in cands[: config.answer.max_chunks]]
    return {cid: ch.text for cid, ch in deps.store.corpus.chunks_by_id(top, workspace).items()}


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
                bm25: list[Candidate], dense: list[Candidate]) -> dict[str, list[Candidate]]:
    """HyDE (offline: pseudo-relevance feedback), multi-query and decomposition, each gated by the route or by a weak
    first retrieval; every generated query is searched with BM25 + dense (RRF) and each stage fuses its own lists."""
    if not c.bm25.enabled:
        for name in (Stage.HYDE, Stage.MULTI_QUERY, Stage.DECOMPOSE):
            tracer.skip(name, "query transforms search with BM25 (+ dense): bm25.enabled = false")
        return {}
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
    out: dict[str, list[Candidate]] = {}
    for ts in transform_stages(q.text, c, decision, deps.llm, search, feedback=feedback,
                               dense_top=dense[0].score if dense and not q.dense_blind else None,
                               workspace=q.workspace):
        if ts.skipped is not None:
            tracer.stages.append(StageResult(ts.stage, (), ts.ms, ts.usage, ts.skipped, ts.notes))
        else:
            out[ts.stage] = tracer.add(ts.stage, ts.candidates, ts.ms, usage=ts.usage, notes=ts.notes, info=ts.info)
    return out


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
    tracer.add(Stage.ROUTE, (), decision.ms, usage=decision.route.usage, notes=decision.notes, info=decision.info())
    return decision


def _no_retrieval(q: _Query, decision: RouteDecision, config: PipelineConfig, deps: Deps, tracer: Tracer,
                  log: bool) -> Trace | None:
    """Chitchat and out-of-scope: no retrieval; the route's reply (out-of-scope says what the corpus is about). The
    cag route: Claude answers from the whole corpus; None when it did not (retrieval then answers, as the trace says)."""
    cag = None
    if decision.named.name == CAG_ROUTE:
        if not config.answer.enabled:
            tracer.notes.append("cag route: answer.enabled = false, so no CAG call; retrieval runs instead")
            return None
        cag = cag_stage(q.text, decision, config, deps.llm, [d.name for d in deps.store.corpus.documents(q.workspace)],
                        workspace=q.workspace)
        tracer.add(CAG_ROUTE, (), cag.ms, usage=cag.usage, notes=cag.notes, info=cag.info)
        if cag.answer is None:
            tracer.notes.extend(cag.notes)
            return None
    why = f"route {decision.named.name}: no retrieval"
    for stage in (Stage.HYDE, Stage.MULTI_QUERY, Stage.DECOMPOSE, Stage.BM25, Stage.DENSE, Stage.DENSE_ML, Stage.FUSED,
                  Stage.RERANK,
                  Stage.PRUNE, Stage.MMR, Stage.EXPAND):
        tracer.skip(stage, why)
    answer = None
    if cag is not None and cag.answer is not None:
        answer = cag.answer
        tracer.add(Stage.ANSWER, (), 0.0, notes=["answered by CAG from the whole corpus (no retrieval)"],
                   info=AnswerInfo.of(answer, CAG_ROUTE))
    elif config.answer.enabled:
        answer = Answer(decision.reply, (), decision.route.cls == "out-of-scope", "route")
        tracer.add(Stage.ANSWER, (), 0.0, notes=[f"reply of route {decision.named.name} (routes.toml)"],
                   info=AnswerInfo.of(answer, Stage.ROUTE))
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
    for g in graph_stages(q.text, c.graph, deps.store, deps.embedder, deps.llm, deps.graph, q.workspace,
                          query_vec=q.vec, query_lang=q.lang):
        g = _in_collections(q, g)
        tracer.stages.append(g)
        if g.skipped is None and g.candidates and c.graph.fuse_with_text:
            graph[g.stage] = list(g.candidates)
    raptor = [h for h in tracer.step(Stage.RAPTOR, lambda: _raptor(q, c, deps), skip=_raptor_skip(q, c, deps),
                                     key=lambda: stage_key(Stage.RAPTOR, _facts(q), c.raptor))
              if q.only is None or q.only.allows(h.chunk_id)]
    graph.update({Stage.RAPTOR: raptor} if raptor else {})
    why = off(c.fusion.enabled, "fusion.enabled") or (
        None if sum(1 for hits in (bm25, dense, dense_ml) if hits) >= 2 else "needs both BM25 and dense results")
    extra = _transforms(q, c, deps, tracer, decision, bm25, dense)
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
    pool = tracer.step(Stage.RERANK, lambda: _rerank(q, pool, pool_from, c, deps),
                       keep=pool[: c.rerank.k] if Stage.RERANK in aside else pool,
                       skip=off(c.rerank.enabled, "rerank.enabled", pool, "no candidates to rerank")
                       or aside.get(Stage.RERANK),
                       key=lambda: stage_key(Stage.RERANK, _facts(q), c.rerank, pool_from, cands_digest(pool)))
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
             decision: RouteDecision | None = None) -> Mapping[str, Any]:
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
    start = time.perf_counter()
    out = run_agent(q.text, lambda text: run_query(text, inner if text == q.text else later, deps,
                                                   workspace=q.workspace, log=False,
                                                   reuse_route=decision if text == q.text else None,
                                                   memo=tracer.memo),
                    budget=Budget(a.max_rounds, a.max_llm_calls, a.max_tokens, a.max_usd, a.max_seconds),
                    grader=grader, writer=writer, workspace=q.workspace, k=a.k, head=a.head,
                    repeat_threshold=a.repeat_threshold, enough=bridge_found if a.stop_when_found else None)
    tracer.stages.extend(out.stages)
    label = "offline: calibrated grader + entity bridging (no LLM)" if not use_llm else f"LLM grader ({a.grader_model})"
    tracer.add(Stage.EVIDENCE, out.evidence, (time.perf_counter() - start) * 1000, notes=[label],
               info={"rounds": out.rounds, "stop_reason": out.stop_reason, "spent": dict(out.spent)})
    return out.as_dict()


@dataclass(frozen=True, kw_only=True)
class SqlStep(StepOutput):
    """The sql stage's output and its outcome (route, plan, rows)."""

    outcome: SqlOutcome


def _sql(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer) -> SqlOutcome | None:
    """The sql stage (core/route/sql.py), recorded only in a workspace that has tables: a question about them
    (table or mixed) gets a query, written by Claude with a key (router.method not offline) or by the template
    translator, run in the workspace's SQL sandbox."""
    tables = deps.store.tables.list(q.workspace)
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
    """A table question SQL answered: the rows are the answer, every retrieval stage skipped with the reason."""
    assert sql.result is not None
    rows = next(s.candidates for s in reversed(tracer.stages) if s.stage == Stage.SQL)
    why = "route table: answered by SQL over the workspace's tables"
    for stage in (Stage.HYDE, Stage.MULTI_QUERY, Stage.DECOMPOSE, Stage.BM25, Stage.DENSE, Stage.DENSE_ML, Stage.FUSED,
                  Stage.RERANK, Stage.PRUNE, Stage.MMR, Stage.EXPAND):
        tracer.skip(stage, why)
    answer = Answer(f"{sql.answer_text()} (SQL over the workspace's tables: {sql.result.sql})",
                    tuple(c.chunk_id for c in rows[:5]), False, "sql")  # the rows
    if config.answer.enabled:
        tracer.add(Stage.ANSWER, (), 0.0, notes=[f"the sql stage's rows ({sql.plan.translator} translator)"],
                   info=AnswerInfo.of(answer, Stage.SQL))
    else:
        tracer.skip(Stage.ANSWER, "answer.enabled = false")
        answer = None
    return _finish(q, tracer, config, deps, log, answer)


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
    if a.tools == "auto" and (plan.form not in ("lookup_aggregate", "text_then_sql") if plan is not None
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
    for stage in (Stage.BM25, Stage.DENSE, Stage.FUSED, Stage.RERANK, Stage.PRUNE, Stage.MMR, Stage.EXPAND):
        tracer.skip(stage, why)
    tracer.add(Stage.EVIDENCE, out.passages or out.rows, 0.0, notes=[why],
               info={"rows": len(out.rows), "passages": len(out.passages), "stop_reason": out.stop_reason})
    answer: Answer | None = None
    if not config.answer.enabled:
        tracer.skip(Stage.ANSWER, "answer.enabled = false")
    elif out.final_text:
        answer = Answer(out.final_text, tool_citations(out), False, "agent")
        tracer.add(Stage.ANSWER, (), 0.0, notes=[f"the model's answer after {out.calls} tool call(s)"],
                   info=AnswerInfo.of(answer, Stage.EVIDENCE))
    elif out.bridge and out.rows:  # the documents named the entity, SQL answered for it
        answer = Answer(f"{out.table_answer} (SQL over the workspace's tables: {' ; then '.join(out.sql)}), for "
                        f"{out.bridge['value']}: \"{out.bridge['sentence']}\" [{out.bridge['chunk_id']}]",
                        tool_citations(out), False, "sql")
        tracer.add(Stage.ANSWER, (), 0.0, notes=["the rows of the SQL step and the passage that named "
                                                 f"{out.bridge['value']}"], info=AnswerInfo.of(answer, Stage.EVIDENCE))
    elif not out.passages:
        early = f" (stopped early: {out.stop_reason})" if out.stop_reason != "answered" else ""
        answer = Answer(f"{out.table_answer} (SQL over the workspace's tables: {' ; then '.join(out.sql)}){early}",
                        tool_citations(out), False, "sql")
        tracer.add(Stage.ANSWER, (), 0.0, notes=[f"the rows of the last of {len(out.sql)} SQL step(s)"],
                   info=AnswerInfo.of(answer, Stage.EVIDENCE))
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
    return _finish(q, tracer, config, deps, log, answer, out.as_dict())


def _collections(q: _Query, c: PipelineConfig, deps: Deps, tracer: Tracer) -> None:
    """The collections stage, recorded only in a workspace with several collections: which of them the question is
    searched in (core/route/collections.py), and why; the retrieval stages then search only those (q.only)."""
    cols = deps.store.collections.list(q.workspace)
    if len(cols) < 2:
        return
    k = c.collections
    start = time.perf_counter()
    if not k.enabled or k.only.strip():
        choice = forced(cols, [n.strip() for n in k.only.split(",") if n.strip()] if k.enabled else [])
    else:
        index = _bm25_index(q, c, deps)
        cols = refresh_profiles(deps.store.corpus, deps.store.collections, lambda: deps.store.tables.list(q.workspace),
                                q.workspace, deps.embedder.model_id, index.tokens, write=not deps.store.read_only,
                                listed=cols)
        if not q.dense_blind and k.centroid_weight > 0:
            _query_vec(q, deps)
        choice = choose_offline(index.tokens(q.text), None if q.dense_blind else q.vec, cols, min_share=k.min_share,
                                temperature=k.temperature, centroid_weight=k.centroid_weight)
        if deps.llm.available and k.method != "offline":
            choice = choose_llm(q.text, cols, deps.llm, model=k.model, fallback=choice, workspace=q.workspace)
        elif k.method == "llm":
            choice = replace(choice, notes=(*choice.notes, "collections.method = llm without a key: the offline "
                                            "choice"))
    if choice.filters:
        q.only = ChunkFilter(deps.store.collections.chunk_collections(q.workspace), frozenset(choice.searched))
    tracer.add(Stage.COLLECTIONS, (), (time.perf_counter() - start) * 1000, usage=choice.usage,
               notes=[f"searched {', '.join(choice.searched)} of {len(choice.available)}: {choice.reason}",
                      *choice.notes], info=choice.info())


def _in_collections(q: _Query, g: StageResult) -> StageResult:
    """A graph stage's list kept to the collections searched."""
    if q.only is None or g.skipped is not None:
        return g
    kept = tuple(h for h in g.candidates if q.only.allows(h.chunk_id))
    return g if len(kept) == len(g.candidates) else replace(
        g, candidates=kept, notes=(*g.notes, f"{len(g.candidates) - len(kept)} outside the collections searched"))


def _answer_cache(q: _Query, config: PipelineConfig, deps: Deps, key: CacheKey) -> CacheStep:
    """Encode the query (dense and graph reuse the vector) and look it up in this workspace's answer cache."""
    # With the verifier on, the same forward keeps the query's token vectors for it (no second encode).
    encoded = _query_vec(q, deps, (lambda t: query_vector(deps.embedder, t))
                         if config.answer_cache.verifier else None) == "encoded"
    res = check_cache(q.text, q.vec, deps.store.answers, key, config.answer_cache,
                      covered_languages=deps.embedder.languages, writable=not deps.store.read_only,
                      word_similarity=embedder_word_similarity(deps.embedder),
                      verifier=make_verifier(deps.embedder, pair_model=config.answer_cache.pair_model)
                      if config.answer_cache.verifier else None)
    notes = [served_label(res)] if res.verdict == "hit" else [
        f"{res.verdict.replace('_', ' ')}: " + (f"nearest '{res.nearest_question}' (cosine {res.cosine:.3f}); "
                                                 if res.nearest_question else "") + res.reason]
    # The query was encoded here unless a question met before lent its vector: one embedding computed or none.
    return CacheStep((), notes, info={**res.info(), "embed_cache_misses": int(encoded),
                                      "embed_cache_hits": int(not encoded)}, lookup=res)


def _served_from_cache(q: _Query, res: CacheLookup, config: PipelineConfig, deps: Deps, tracer: Tracer,
                       log: bool) -> Trace:
    """The trace of a cache hit: the stored answer and citations, every retrieval stage skipped with the reason."""
    entry = res.entry
    assert entry is not None
    for stage in (Stage.ROUTE, Stage.BM25, Stage.DENSE, Stage.DENSE_ML, Stage.FUSED, Stage.RERANK, Stage.PRUNE,
                  Stage.MMR, Stage.EXPAND):
        tracer.skip(stage, "answer served from the answer cache")
    answer = Answer(entry.answer, entry.citations, entry.refused, entry.mode)
    tracer.add(Stage.ANSWER, (), 0.0, notes=[served_label(res)],
               info=AnswerInfo.of(answer, Stage.ANSWER_CACHE, cached=True))
    tracer.notes.append(served_label(res))
    stored = deps.store.answers.cached_trace(entry.key, entry.question)  # the stages that produced the answer
    trace = replace(_finish(q, tracer, config, deps, False, answer),
                    stored=trace_from_json(stored) if stored is not None else None)
    if log and not deps.store.read_only:  # logged with its stored trace: the run log knows the hit's route
        deps.store.runs.log_trace(trace)
    return trace


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
    if history:
        validate_query(query, config)
        t0 = time.perf_counter()
        cond = condense(query, history, deps.llm, use_llm=config.answer.mode != "extractive",
                        model=config.transforms.model, workspace=workspace)
        tracer.add(Stage.CONDENSE, (), (time.perf_counter() - t0) * 1000, usage=cond.usage,
                   notes=[f"condensed ({cond.method}): {cond.text}" if cond.changed else "stands alone", *cond.notes],
                   info=cond.info())
        query = cond.text
    q = _start(query, config, deps, workspace, tracer)
    q.guard_key = guard_key(config) if config.cascade_guard.enabled else ""
    c = config

    # First: the semantic answer cache (issue #15's contract: it is the first stage). Keyed by the requested
    # configuration: the route is a function of question and configuration, so it adds nothing to the key. A hit
    # serves the stored answer and every later stage is skipped. Unlogged runs are measurements (evaluation,
    # benches, agent rounds): a served answer would skip the stages they score and time, so they bypass the cache.
    key = CacheKey(workspace, q.version, answer_config_hash(c, deps.embedder.model_id))
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
    sql = _sql(q, c, deps, tracer) if reuse_route is None and tables else None
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
            decision = None
        else:
            served = _no_retrieval(q, decision, c, deps, tracer, log)
            if served is not None:
                return served
            decision = decision.without_cag(f"CAG gave no answer: route {decision.fallback.name} retrieves instead")

    if c.answer.enabled and (c.answer.mode == "extractive" or (c.answer.mode == "auto" and not deps.llm.available)) \
            and load_support_model().scorer:  # a support model without the e5 scorer never reads the vector
        prefetch_question(q.text)  # the offline answer's question vector, encoded beside retrieval on a spare core
    _collections(q, c, deps, tracer)
    agent = _agentic(q, c, deps, tracer, decision) if c.agent.enabled else None
    asked = _with_sql_values(q, sql)  # a mixed question searches, and is answered, with the values SQL found
    if agent is None:
        _retrieve(asked, c, deps, tracer, decision if decision is not None else reuse_route)

    # Last stage. Answer: reads the final candidates of whatever ran before (their original chunk text).
    answered = tracer.run(Stage.ANSWER, lambda: _answer(asked, tracer.final(), c, deps, tracer),
                          skip=off(c.answer.enabled, "answer.enabled"), key=lambda: _answer_key(asked, c, tracer))
    answer = answered.answer if answered is not None else None
    if answer is not None and sql is not None and sql.answered and not answer.refused:
        answer = replace(answer, text=f"From the tables: {sql.answer_text()}.\n\n{answer.text}")
    elif answer is not None and answer.refused and sql is not None and sql.untranslated():
        answer = replace(answer, text=f"{answer.text}\n\n{sql.untranslated()}")  # not "the corpus is silent"
    if cached is not None and answer is not None and q.vec is not None and not deps.store.read_only:
        if remember(deps.store.answers, key, q.text, q.vec, answer,
                    cost_usd=sum(s.usage.usd for s in tracer.stages), ms=sum(s.ms for s in tracer.stages)):
            deps.store.answers.put_trace(key, q.text, trace_json(Trace(
                q.text, config.stable_hash(), q.version, tuple(tracer.stages), q.workspace, q.lang,
                tuple(tracer.notes), answer, agent)))
    if agent is not None and answer is not None and answer.refused and agent["stop_reason"] == "answered":
        agent = {**agent, "stop_reason": "refused_no_evidence"}  # the loop ended, the answer found no support
    return _finish(q, tracer, config, deps, log, answer, agent)
