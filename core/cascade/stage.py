"""The compression cascade as the pipeline runs it (rerank -> prune -> mmr -> expand): adapters over narrow inputs (a
reranker, a sentence scorer, the embedder and its cache, the corpus) that return the tracer's StepOutput."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from core.cascade.expand import DocumentSource, expand
from core.cascade.prune import diversify, flow_info, language_aware_similarity, prune_sentences
from core.cascade.rerank import Reranker, attach_contexts, covers, describe, rerank
from core.config import ExpandConfig, MMRConfig, PruneConfig, RerankConfig
from core.models.embed import EmbeddingCacheStore, embed_with_cache
from core.models.protocols import Embedder
from core.text import detect_language
from core.trace import StepOutput
from core.types import Candidate, SpanScorer


def rerank_step(text: str, pool: Sequence[Candidate], pool_from: str, r: RerankConfig, reranker: Reranker,
                notice: str | None = None, *, workspace: str, lang: str,
                contexts: Callable[[list[str]], Mapping[str, str]] | None = None) -> StepOutput:
    """The rerank stage over the head of `pool` (the list of stage `pool_from`); `contexts` (contextual retrieval
    on) gives each chunk's context, which the reranker reads before the chunk."""
    head = list(pool[: r.top_n])
    if contexts is not None:
        head = attach_contexts(head, contexts([c.chunk_id for c in head]))
    out, rs = rerank(text, head, reranker, k=r.k, use_context=r.use_context, workspace=workspace, query_lang=lang,
                     combine=r.combine, input_weight=r.input_weight, rrf_k=r.rrf_k)
    return StepOutput(out, [n for n in (notice, *rs.notes) if n], rs.usage,
                      {"reranker": reranker.name, "input": pool_from, **describe(rs), **flow_info(head, out)})


def prune_step(text: str, pool: Sequence[Candidate], p: PruneConfig, scorer: SpanScorer, *, kind: str,
               notes: Sequence[str] = ()) -> StepOutput:
    """The prune stage: each chunk cut to its best sentences under prune.token_budget, scored by `scorer` (of
    prune.scorer's `kind`, or the one it fell back to, said in `notes`)."""
    out = list(notes)
    pr = prune_sentences(text, pool, scorer, token_budget=p.token_budget, keep_neighbours=p.keep_neighbours,
                         max_unit_tokens=p.max_unit_tokens, chunk_weight=p.chunk_weight, keep_all=p.keep_all)
    out += [f"no sentence of {', '.join(pr.dropped)} fit the budget of {p.token_budget} tokens"] if pr.dropped else []
    out += [f"{len(pr.floored)} chunk(s) kept by their best sentence alone, {pr.over_budget_tokens} tokens over the "
            f"budget of {p.token_budget}"] if pr.floored else []
    return StepOutput(pr.candidates, out, info={
        "scorer": kind, "sentences_in": pr.units_in, "sentences_kept": pr.units_kept, "pinned": pr.pinned,
        "dropped": pr.dropped, "floored": pr.floored, "over_budget_tokens": pr.over_budget_tokens,
        **flow_info(pool, pr.candidates)})


def mmr_step(pool: Sequence[Candidate], m: MMRConfig, *, corpus: DocumentSource, embedder: Embedder,
             cache: EmbeddingCacheStore | None, workspace: str) -> StepOutput:
    """The mmr stage: near duplicates dropped and the rest reordered for diversity, judged on whole chunks (their
    cached vectors, so a pruned draft still matches its final); a chunk the embedder does not read is compared by its
    words."""
    chunks = corpus.chunks_by_id([c.chunk_id for c in pool], workspace)
    texts = [chunks[c.chunk_id].text if c.chunk_id in chunks else c.text for c in pool]
    # Read-only cache lookup (query-time texts never grow the cache); its counts feed the Search Lab's counters.
    vecs, estats = embed_with_cache(texts, embedder, cache, workspace, write=False)
    langs = embedder.languages
    foreign = [not covers(langs, chunks[c.chunk_id].lang if c.chunk_id in chunks else detect_language(c.text))
               for c in pool]
    sims = language_aware_similarity(vecs, texts, foreign) if any(foreign) else None
    dv = diversify(pool, vecs, lam=m.lam, dedup_threshold=m.dedup_threshold, k=m.k, sims=sims)
    notes = [f"{d.dropped} dropped as {'an exact' if d.exact else 'a near'} duplicate of {d.kept} "
             f"(cosine {d.similarity:.3f})" for d in dv.duplicates]
    if any(foreign):
        notes.append(f"{sum(foreign)} chunk(s) in a language {embedder.model_id} does not cover: compared by "
                     "word overlap (lexical cosine)")
    return StepOutput(dv.candidates, notes, info={"lam": m.lam, "duplicates": [d.__dict__ for d in dv.duplicates],
                                                  "embed_cache_hits": estats.cache_hits,
                                                  "embed_cache_misses": estats.computed,
                                                  **flow_info(pool, dv.candidates)})


def expand_step(pool: Sequence[Candidate], e: ExpandConfig, *, corpus: DocumentSource, workspace: str) -> StepOutput:
    """The expand stage: each chunk grown to its sentence window or its parent section."""
    ex = expand(list(pool), corpus, mode=e.mode, window=e.window, parent_max_tokens=e.parent_max_tokens,
                workspace=workspace)
    notes = [f"{a} merged into {b}: their expansions overlap" for a, b in ex.merged]
    notes += [f"not expanded (document text or offsets missing): {', '.join(ex.unexpanded)}"] if ex.unexpanded else []
    return StepOutput(ex.candidates, notes, info={"mode": e.mode, "window": e.window,
                                                  **flow_info(pool, ex.candidates)})
