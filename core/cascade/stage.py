"""The compression cascade as the pipeline runs it (rerank -> prune -> mmr -> expand): adapters over narrow inputs (a
reranker, a sentence scorer, the embedder and its cache, the corpus) that return the tracer's StepOutput."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from core.cascade.expand import DocumentSource, expand
from core.cascade.prune import diversify, language_aware_similarity, llm_tokens, prune_sentences
from core.cascade.rerank import QueryTokensReranker, Reranker, attach_contexts, covers, rerank
from core.config import ExpandConfig, MMRConfig, PruneConfig, RerankConfig
from core.models.embed import EmbeddingCacheStore, embed_with_cache
from core.models.protocols import Embedder
from core.text import detect_language
from core.trace import StepOutput
from core.types import Candidate, SpanScorer, StageInfo


@dataclass(frozen=True)
class Flow:
    """Candidates and tokens into and out of a cascade stage, and the share of tokens kept: the numbers beside it."""

    candidates_in: int
    candidates_out: int
    tokens_in: int
    tokens_out: int
    kept_share: float

    @classmethod
    def of(cls, before: Sequence[Candidate], after: Sequence[Candidate]) -> "Flow":
        t_in, t_out = llm_tokens(before), llm_tokens(after)
        return cls(len(before), len(after), t_in, t_out, round(t_out / t_in, 4) if t_in else 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"candidates_in": self.candidates_in, "candidates_out": self.candidates_out,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "kept_share": self.kept_share}


class CascadeInfo(StageInfo):
    """What every cascade stage records beside its own facts: the flow of candidates and tokens through it (each
    subclass's `flow` field)."""

    __slots__ = ()
    flow: Flow


@dataclass(frozen=True, eq=False)
class RerankInfo(CascadeInfo):
    """The rerank stage: the reranker, the list it read, its token-vector cache and the flow."""

    reranker: str
    input: str
    cache_hits: int
    computed: int
    flow: Flow
    queries: tuple[str, ...] = ()  # the generated queries it read beside the question (rerank.read_queries)
    lifted: int = 0  # candidates whose best score came from one of them

    def to_dict(self) -> dict[str, Any]:
        return {"reranker": self.reranker, "input": self.input, "cache_hits": self.cache_hits,
                "computed": self.computed, **self.flow.to_dict(),
                **({"queries": list(self.queries), "lifted": self.lifted} if self.queries else {})}


@dataclass(frozen=True, eq=False)
class PruneInfo(CascadeInfo):
    """The prune stage: the sentence scorer, sentences in and kept, and the chunks it dropped or kept whole."""

    scorer: str
    sentences_in: int
    sentences_kept: int
    pinned: int
    dropped: tuple[str, ...]
    floored: tuple[str, ...]
    over_budget_tokens: int
    flow: Flow
    unpruned: tuple[str, ...] = ()  # chunks handed on whole: in another language than the question's

    def to_dict(self) -> dict[str, Any]:
        return {"scorer": self.scorer, "sentences_in": self.sentences_in, "sentences_kept": self.sentences_kept,
                "pinned": self.pinned, "dropped": list(self.dropped), "floored": list(self.floored),
                "over_budget_tokens": self.over_budget_tokens, **self.flow.to_dict(),
                **({"unpruned": list(self.unpruned)} if self.unpruned else {})}


MMR_HEAD = 5  # the head whose changes by diversity the mmr stage records


@dataclass(frozen=True, eq=False)
class MmrInfo(CascadeInfo):
    """The mmr stage: its lambda, the duplicates it dropped, the embedding cache and the flow."""

    lam: float
    duplicates: tuple[Mapping[str, Any], ...]
    embed_cache_hits: int
    embed_cache_misses: int
    flow: Flow
    # diversity's own change at the head (duplicates aside): the incoming first MMR_HEAD it pushed below them and the
    # ones it brought up into them (issue #44 item 5: MMR's loss read item by item)
    pushed_out: tuple[str, ...] = ()
    brought_in: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {"lam": self.lam, "duplicates": [dict(d) for d in self.duplicates],
               "embed_cache_hits": self.embed_cache_hits, "embed_cache_misses": self.embed_cache_misses,
               **self.flow.to_dict()}
        if self.pushed_out or self.brought_in:
            out |= {"pushed_out": list(self.pushed_out), "brought_in": list(self.brought_in)}
        return out


@dataclass(frozen=True, eq=False)
class ExpandInfo(CascadeInfo):
    """The expand stage: its mode, its window and the flow."""

    mode: str
    window: int
    flow: Flow

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "window": self.window, **self.flow.to_dict()}


def rerank_step(text: str, pool: Sequence[Candidate], pool_from: str, r: RerankConfig, reranker: Reranker,
                notice: str | None = None, *, workspace: str, lang: str,
                contexts: Callable[[list[str]], Mapping[str, str]] | None = None,
                generated: Sequence[str] = ()) -> StepOutput:
    """The rerank stage over the head of `pool` (the list of stage `pool_from`); `contexts` (contextual retrieval
    on) gives each chunk's context, which the reranker reads before the chunk. `generated`: the queries the
    transforms searched with for this question (sub-questions, rewrites), read beside it when rerank.read_queries is
    on and the reranker pays only a query's encoding for one more (QueryTokensReranker)."""
    head = list(pool[: r.top_n])
    if contexts is not None:
        head = attach_contexts(head, contexts([c.chunk_id for c in head]))
    extra = tuple(dict.fromkeys(g for g in generated if g.strip() and g != text))
    why_not = ("" if not extra else "rerank.read_queries = false" if not r.read_queries else
               "" if isinstance(reranker, QueryTokensReranker) else
               f"{reranker.name} would score the whole list once more per query")
    read = extra if extra and not why_not else ()
    out, rs = rerank(text, head, reranker, k=r.k, use_context=r.use_context, workspace=workspace, query_lang=lang,
                     combine=r.combine, input_weight=r.input_weight, rrf_k=r.rrf_k, keep_top=r.keep_top,
                     keep_within=r.keep_within, queries=read)
    notes = [n for n in (notice, *rs.notes) if n]
    if why_not:
        notes.append(f"the {len(extra)} generated quer{'y' if len(extra) == 1 else 'ies'} this list was searched "
                     f"with not read ({why_not}): candidates they found are judged by the question alone")
    lifted = sum(1 for c in out if "rerank_query" in c.meta)
    return StepOutput(out, notes, rs.usage, RerankInfo(reranker.name, pool_from, rs.cache_hits, rs.computed,
                                                        Flow.of(head, out), read, lifted))


def prune_step(text: str, pool: Sequence[Candidate], p: PruneConfig, scorer: SpanScorer, *, kind: str,
               notes: Sequence[str] = (), whole: Sequence[str] = ()) -> StepOutput:
    """The prune stage: each chunk cut to its best sentences under prune.token_budget, scored by `scorer` (of
    prune.scorer's `kind`, or the one it fell back to, said in `notes`). `whole`: chunk ids handed on unpruned, in
    their places (a chunk in another language than the question's, which no scorer here reads), with the scorer's
    verdict beside them as their kept spans (the offline answer reads it as a signal)."""
    out = list(notes)
    pr = prune_sentences(text, pool, scorer, token_budget=p.token_budget, keep_neighbours=p.keep_neighbours,
                         max_unit_tokens=p.max_unit_tokens, chunk_weight=p.chunk_weight, keep_all=p.keep_all)
    if whole:
        keep = set(whole)
        pruned = {c.chunk_id: c for c in pr.candidates}
        merged = []
        for c in pool:
            got = pruned.get(c.chunk_id)
            if c.chunk_id in keep:
                spans = [(0, 0)] if got is None else got.meta.get("kept_spans")
                merged.append(replace(c, meta={**c.meta, **({"kept_spans": spans} if spans else {})}))
            elif got is not None:
                merged.append(got)
        pr = replace(pr, candidates=[replace(c, rank=i) for i, c in enumerate(merged, 1)],
                     dropped=[d for d in pr.dropped if d not in keep])
    out += [f"no sentence of {', '.join(pr.dropped)} fit the budget of {p.token_budget} tokens"] if pr.dropped else []
    out += [f"{len(pr.floored)} chunk(s) kept by their best sentence alone, {pr.over_budget_tokens} tokens over the "
            f"budget of {p.token_budget}"] if pr.floored else []
    return StepOutput(pr.candidates, out, info=PruneInfo(kind, pr.units_in, pr.units_kept, pr.pinned,
                                                         tuple(pr.dropped), tuple(pr.floored), pr.over_budget_tokens,
                                                         Flow.of(pool, pr.candidates), tuple(whole)))


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
    dv = diversify(pool, vecs, lam=m.lam, dedup_threshold=m.dedup_threshold, k=m.k, sims=sims,
                   keep_top=m.keep_top, keep_within=m.keep_within)
    notes = [f"{d.dropped} dropped as {'an exact' if d.exact else 'a near'} duplicate of {d.kept} "
             f"(cosine {d.similarity:.3f})" for d in dv.duplicates]
    if m.keep_top:
        moved = ", ".join(f"{c.chunk_id} (diversified to #{c.meta['mmr_floored']})" for c in dv.candidates
                          if "mmr_floored" in c.meta)
        notes.append(f"floor: the incoming first {m.keep_top} stay within the first {m.keep_within}"
                     + (f"; moved back up: {moved}" if moved else "; none had to move"))
    if any(foreign):
        notes.append(f"{sum(foreign)} chunk(s) in a language {embedder.model_id} does not cover: compared by "
                     "word overlap (lexical cosine)")
    dropped = {d.dropped for d in dv.duplicates}
    head_in = [c.chunk_id for c in pool if c.chunk_id not in dropped][:MMR_HEAD]
    head_out = [c.chunk_id for c in dv.candidates[:MMR_HEAD]]
    rank_in = {c.chunk_id: i for i, c in enumerate(pool, start=1)}
    rank_out = {c.chunk_id: i for i, c in enumerate(dv.candidates, start=1)}
    pushed = tuple(cid for cid in head_in if cid not in head_out)
    brought = tuple(cid for cid in head_out if cid not in head_in)
    if pushed or brought:
        down = [f"{cid} down (#{rank_in[cid]} -> {f'#{rank_out[cid]}' if cid in rank_out else 'cut'})"
                for cid in pushed]
        up = [f"{cid} up (#{rank_in[cid]} -> #{rank_out[cid]})" for cid in brought]
        notes.append(f"diversity changed the first {MMR_HEAD}: {', '.join(down + up)}")
    return StepOutput(dv.candidates, notes, info=MmrInfo(m.lam, tuple(dict(d.__dict__) for d in dv.duplicates),
                                                         estats.cache_hits, estats.computed,
                                                         Flow.of(pool, dv.candidates), pushed, brought))


def expand_step(pool: Sequence[Candidate], e: ExpandConfig, *, corpus: DocumentSource, workspace: str) -> StepOutput:
    """The expand stage: each chunk grown to its sentence window or its parent section."""
    ex = expand(list(pool), corpus, mode=e.mode, window=e.window, parent_max_tokens=e.parent_max_tokens,
                workspace=workspace)
    notes = [f"{a} merged into {b}: their expansions overlap" for a, b in ex.merged]
    notes += [f"not expanded (document text or offsets missing): {', '.join(ex.unexpanded)}"] if ex.unexpanded else []
    return StepOutput(ex.candidates, notes, info=ExpandInfo(e.mode, e.window, Flow.of(pool, ex.candidates)))
