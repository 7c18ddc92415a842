"""The retrieval stages as the pipeline runs them (bm25, dense, dense_ml, fused): adapters over narrow inputs (an
index, a chunk source, a query vector) that return the tracer's StepOutput."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from core.config import FusionConfig
from core.retrieve.ann import candidates as ann_candidates
from core.retrieve.ann import expansion as ann_expansion
from core.retrieve.bm25 import BM25Index
from core.retrieve.dense import DenseIndex
from core.retrieve.filtered import bm25_in, dense_in
from core.retrieve.fusion import rrf
from core.trace import TRANSFORMS, StepOutput
from core.types import Candidate, Chunk, Stage, StageInfo

Hits = list[tuple[str, float]]
# The question's vector and how it was had: "had" (an earlier stage set it), "cached" (a question met before) or
# "encoded" (now).
QueryVector = Callable[[], tuple[np.ndarray, str]]


class ChunkSource(Protocol):
    """Where a stage's (chunk id, score) hits get their text (core.store's corpus repository implements it)."""

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = ...) -> dict[str, Chunk]: ...


# Each stage's info: a frozen record (a StageInfo: read by attribute; `to_dict()` is what the JSON trace shows).
@dataclass(frozen=True, eq=False)
class Bm25Info(StageInfo):
    """The bm25 stage: how many chunks the index holds and which text variant it searched."""

    indexed: int
    text: str


@dataclass(frozen=True, eq=False)
class DenseInfo(StageInfo):
    """The dense stage: the embedder, the index, the search (exact or HNSW) and whether the question was encoded."""

    model: str
    indexed: int
    text: str
    search: str
    embed_cache_misses: int
    embed_cache_hits: int


@dataclass(frozen=True, eq=False)
class DenseMlInfo(StageInfo):
    """The multilingual list: its embedder, index, the question's language and whether it is cross-lingual."""

    model: str
    indexed: int
    question_lang: str
    cross_lingual: bool
    text: str = "raw"
    embed_cache_misses: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "indexed": self.indexed, "text": self.text, "question_lang": self.question_lang,
                "cross_lingual": self.cross_lingual, "embed_cache_misses": self.embed_cache_misses}


# The head of the fused list whose changes by the transforms' lists the fused stage records (the recall@5 cut the
# benches and the cascade guard read).
HEAD = 5


@dataclass(frozen=True, eq=False)
class FusedInfo(StageInfo):
    """The fused stage: RRF's k and the weight of each list, in the order of the lists. When the transforms' lists
    were fused: which of the first HEAD candidates of the question's own lists fused alone (BM25, dense, the
    multilingual, graph and RAPTOR lists) they pushed out of the fused first HEAD (`displaced`), and which they
    brought in (`lifted`), so a trace shows what the transforms changed at the head (issue #44 item 5)."""

    rrf_k: int
    weights: tuple[float, ...]
    displaced: tuple[str, ...] = ()
    lifted: tuple[str, ...] = ()
    transforms: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rrf_k": self.rrf_k, "weights": list(self.weights)}
        if self.transforms:
            out |= {"transforms": list(self.transforms), "displaced": list(self.displaced), "lifted": list(self.lifted)}
        return out


def to_candidates(hits: Hits, source: ChunkSource, workspace: str, stage: str) -> list[Candidate]:
    """Hits with their chunk's text, ranked from 1, each marked with the stage that found it (a chunk deleted
    meanwhile is left out)."""
    chunks = source.chunks_by_id([cid for cid, _ in hits], workspace)
    return [
        Candidate(cid, chunks[cid].doc_id, chunks[cid].text, score, rank, {"stage": stage})
        for rank, (cid, score) in enumerate(hits, start=1)
        if cid in chunks
    ]


def bm25_step(index: BM25Index, text: str, k: int, *, chunks: ChunkSource, workspace: str, variant: str,
              mask: Callable[[Sequence[str]], np.ndarray] | None = None) -> StepOutput:
    """The bm25 stage: the index's top k for the question (within `mask`'s chunks when collections were chosen)."""
    found = index.search(text, k) if mask is None else bm25_in(index, text, k, mask(index.chunk_ids))
    hits = to_candidates(found, chunks, workspace, Stage.BM25)
    return StepOutput(hits, info=Bm25Info(len(index), variant))


def dense_step(index: DenseIndex, vector: QueryVector, k: int, *, chunks: ChunkSource, workspace: str, variant: str,
               model_id: str, blind_lang: str | None = None,
               mask: Callable[[Sequence[str]], np.ndarray] | None = None) -> StepOutput:
    """The dense stage: the question's vector against the chunk vectors (exact, or the HNSW graph above the ANN
    threshold); `blind_lang` is the question's language when the embedder does not cover it."""
    vec, got = vector()
    encoded, reused = got == "encoded", got == "cached"
    found = index.search(vec, k) if mask is None else dense_in(index, vec, k, mask(index.chunk_ids))
    hits = to_candidates(found, chunks, workspace, Stage.DENSE)
    notes = [f"embedder does not cover '{blind_lang}': this list is close to random"] if blind_lang else []
    search = "exact scan"
    if index.ann is not None and mask is None:  # above the ANN threshold (core/retrieve/ann.py)
        search = f"approximate: HNSW graph, query width {ann_expansion(len(index.ann), ann_candidates(k))}"
    # A question met before reuses its vector; an encode counts as one embedding computed.
    return StepOutput(hits, notes, info=DenseInfo(model_id, len(index), variant, search, int(encoded), int(reused)))


def dense_ml_step(index: DenseIndex, vector: Callable[[], np.ndarray], k: int, *, chunks: ChunkSource, workspace: str,
                  model_id: str, note: str, question_lang: str, cross_lingual: bool,
                  mask: Callable[[Sequence[str]], np.ndarray] | None = None) -> StepOutput:
    """The multilingual list: the question's e5 query vector against the corpus's stored e5 passage vectors."""
    vec = vector()
    found = index.search(vec, k) if mask is None else dense_in(index, vec, k, mask(index.chunk_ids))
    hits = to_candidates(found, chunks, workspace, Stage.DENSE_ML)
    return StepOutput(hits, [note], info=DenseMlInfo(model_id, len(index), question_lang, cross_lingual))


def fuse_step(lists: Mapping[str, Sequence[Candidate]], f: FusionConfig, *, graph_weight: float, raptor_weight: float,
              transform_weight: float, rerank_top_n: int | None, blind_lang: str | None = None,
              cross_lingual_lang: str | None = None) -> StepOutput:
    """RRF of BM25, dense, the multilingual list, the graph and RAPTOR lists and the transforms' lists, in that
    order. A dense (and graph) list blind to the question's language (`blind_lang`) is scaled down, as is BM25 for a
    cross-lingual question (`cross_lingual_lang`: the question's language, none of the corpus's). `rerank_top_n`:
    the reranker's depth when it runs (fusion hands on that many when it is deeper than fusion.k)."""
    weights = [f.bm25_weight, f.dense_weight] if f.method == "weighted_rrf" else [1.0, 1.0]
    notes = []
    if blind_lang:
        weights[1] *= f.foreign_dense_weight
        notes.append(f"dense weight x{f.foreign_dense_weight:g}: embedder does not cover '{blind_lang}'")
    transforms = [name for name in lists if name in TRANSFORMS]
    ml = [name for name in lists if name == Stage.DENSE_ML]
    if ml and cross_lingual_lang:
        weights[0] *= f.cross_lingual_bm25_weight
        notes.append(f"bm25 weight x{f.cross_lingual_bm25_weight:g}: the question's language ({cross_lingual_lang}) "
                     "is none of the corpus's, so BM25 matches only names, numbers and shared words "
                     "(fusion.cross_lingual_bm25_weight)")
    weights += [f.multilingual_weight] * len(ml)  # the multilingual list comes right after dense
    graph = [name for name in lists if name not in (Stage.BM25, Stage.DENSE, Stage.DENSE_ML, *transforms)]
    # Graph lists lean on the same embedder (seeds, community map): the same foreign-language weight as dense.
    gw = graph_weight * (f.foreign_dense_weight if blind_lang else 1.0)
    if graph and blind_lang:
        notes.append(f"graph weight x{f.foreign_dense_weight:g}: embedder does not cover '{blind_lang}'")
    weights += [raptor_weight if name == Stage.RAPTOR else gw for name in graph]
    weights += [transform_weight] * len(transforms)  # transform lists come last
    depth = max(f.k, rerank_top_n) if rerank_top_n is not None else f.k
    if depth > f.k:
        notes.append(f"kept the top {depth} for the reranker (rerank.top_n; fusion.k = {f.k})")
    fused = rrf([list(v) for v in lists.values()], k=f.rrf_k, weights=weights, names=[str(n) for n in lists],
                top=depth)
    displaced: tuple[str, ...] = ()
    lifted: tuple[str, ...] = ()
    if transforms and any(w > 0 for n, w in zip(lists, weights) if n in transforms):
        # the question's own lists fused alone (same weights): what the transforms' lists changed at the head
        own_names = [n for n in lists if n not in transforms]
        own = rrf([list(lists[n]) for n in own_names], k=f.rrf_k,
                  weights=[w for n, w in zip(lists, weights) if n not in transforms], names=[str(n) for n in own_names],
                  top=HEAD)
        own_head, head = [c.chunk_id for c in own], [c.chunk_id for c in fused[:HEAD]]
        displaced = tuple(cid for cid in own_head if cid not in head)
        lifted = tuple(cid for cid in head if cid not in own_head)
        if displaced or lifted:
            notes.append(f"the transforms' lists ({', '.join(map(str, transforms))}; weight {transform_weight:g} "
                         f"each) brought {len(lifted)} candidate(s) into the first {HEAD} that the question's own "
                         f"lists did not rank there ({', '.join(lifted)})"
                         + (f", pushing out {', '.join(displaced)}" if displaced else ""))
    return StepOutput(fused, notes, info=FusedInfo(f.rrf_k, tuple(weights), displaced, lifted,
                                                   tuple(str(t) for t in transforms)))


def fusion_skip(enabled: bool, lists: Sequence[Sequence[Any]]) -> str | None:
    """Why fusion does not run: switched off, or fewer than two of BM25, dense and the multilingual list found
    anything."""
    if not enabled:
        return "fusion.enabled = false"
    return None if sum(1 for hits in lists if hits) >= 2 else "needs both BM25 and dense results"
