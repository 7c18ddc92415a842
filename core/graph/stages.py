"""The graph retrieval stages as the pipeline runs them ('graph_local', 'graph_global', 'raptor'): adapters over
narrow inputs (the graph snapshot, the store's graph repositories, the embedder, the RAPTOR nodes) that return the
tracer's StepOutput, and the reason each does not run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from core.config import GraphConfig
from core.graph.build import builder_label
from core.graph.raptor import raptor_search
from core.graph.search import global_search, local_search
from core.graph.snapshot import GraphCache, GraphSnapshot
from core.graph.sources import GraphSource
from core.models.llm import LLM, LLMError
from core.models.protocols import Embedder, model_languages
from core.trace import StepOutput
from core.types import Chunk, RaptorNode, Stage, StageInfo

LOCAL, GLOBAL = Stage.GRAPH_LOCAL.value, Stage.GRAPH_GLOBAL.value


@dataclass(frozen=True)
class GraphRead:
    """What both graph stages read of the stored graph for one query: the snapshot, the notes they share, and whether
    the embedder is blind to the question's language."""

    snap: GraphSnapshot
    common: tuple[str, ...]
    blind: bool


@dataclass(frozen=True)
class SeedHit:
    """A seed of local search: the entity, its name, its score and how it was found (name | embedding)."""

    node: str
    name: str
    score: float
    how: str


@dataclass(frozen=True, eq=False)
class GraphLocalInfo(StageInfo):
    """The graph_local stage: the graph version, the seeds, the entities and links of the neighbourhood it read (what
    the Graph page highlights), the hubs it did not expand, and whether seeds came by embedding."""

    graph_version: int
    seeds: tuple[SeedHit, ...]
    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str, float], ...]
    hubs: tuple[str, ...]
    hub_threshold: float | None
    capped: bool
    embedding_seeds: bool

    @classmethod
    def of(cls, d: Mapping[str, Any], embedding_seeds: bool) -> "GraphLocalInfo":
        return cls(int(d["graph_version"]), tuple(SeedHit(s["node"], s["name"], s["score"], s["how"])
                                                  for s in d["seeds"]),
                   tuple(d["nodes"]), tuple((a, b, w) for a, b, w in d["edges"]), tuple(d["hubs"]),
                   d["hub_threshold"], d["capped"], embedding_seeds)

    def to_dict(self) -> dict[str, Any]:
        return {"graph_version": self.graph_version,
                "seeds": [{"node": s.node, "name": s.name, "score": s.score, "how": s.how} for s in self.seeds],
                "nodes": list(self.nodes), "edges": [[a, b, w] for a, b, w in self.edges], "hubs": list(self.hubs),
                "hub_threshold": self.hub_threshold, "capped": self.capped, "embedding_seeds": self.embedding_seeds}


@dataclass(frozen=True)
class PartialHit:
    """One community's partial answer in global search's map: its id, title, usefulness score and text."""

    community: str
    title: str
    score: int
    text: str


@dataclass(frozen=True, eq=False)
class GraphGlobalInfo(StageInfo):
    """The graph_global stage: the map's plan (communities, cost), the reduced answer, the communities it cites and
    each community's partial answer."""

    plan: Mapping[str, Any]
    answer: str
    cited: tuple[str, ...]
    partials: tuple[PartialHit, ...]

    @property
    def reduced_by_llm(self) -> bool:
        """Whether Claude wrote the map and its cited reduce (`answer`, `cited`) is the answer."""
        return self.plan.get("mode") == "llm"

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "GraphGlobalInfo":
        return cls(dict(d["plan"]), d["answer"], tuple(d["cited"]),
                   tuple(PartialHit(p["community"], p["title"], p["score"], p["text"]) for p in d["partials"]))

    def to_dict(self) -> dict[str, Any]:
        return {"plan": dict(self.plan), "answer": self.answer, "cited": list(self.cited),
                "partials": [{"community": p.community, "title": p.title, "score": p.score, "text": p.text}
                             for p in self.partials]}


def graph_read(cfg: GraphConfig, store: GraphSource, embedder: Embedder, cache: GraphCache, workspace: str, *,
               query_lang: str | None = None) -> tuple[GraphRead | None, str | None]:
    """The stored graph as the graph stages read it (through the cache, reloaded when a build or update moved the
    graph version; never built or written here), or the reason neither stage runs."""
    if not cfg.enabled:
        return None, "graph.enabled = false"
    snap = cache.get(store, workspace, cfg.min_phrase_chunks)
    if snap is None:
        return None, "no graph built yet: run `python -m core graph build` or use the Graph page"
    common = [f"graph v{snap.version}, {builder_label(snap.builder)}, {len(snap)} active entities"]
    now = store.corpus.corpus_version(workspace)
    if snap.corpus_version != now:
        common.append(f"graph is behind the corpus (built at corpus v{snap.corpus_version}, now v{now}): update it")
    languages = model_languages(embedder)
    blind = languages is not None and query_lang is not None and query_lang not in languages
    return GraphRead(snap, tuple(common), blind), None


def local_skip(cfg: GraphConfig, read: GraphRead | None, why: str | None) -> str | None:
    """Why graph_local does not run (None: it runs)."""
    return why if read is None else None if cfg.mode in ("local", "both") else f"graph.mode = {cfg.mode}"


def global_skip(cfg: GraphConfig, read: GraphRead | None, why: str | None, llm: LLM | None,
                query_lang: str | None) -> str | None:
    """Why graph_global does not run (None: it runs). A query in a language the embedder does not cover skips the
    offline map, which ranks communities by embedder cosine (an LLM map reads any language)."""
    if read is None:
        return why
    if cfg.mode not in ("global", "both"):
        return f"graph.mode = {cfg.mode}"
    offline_map = not (cfg.llm_summaries and llm is not None and llm.available)
    if read.blind and offline_map:
        return (f"embedder does not cover '{query_lang}': the offline map would rank communities at random (an LLM "
                "map reads any language)")
    return None


def graph_local_step(query: str, cfg: GraphConfig, read: GraphRead, store: GraphSource, embedder: Embedder,
                     vector: Callable[[], np.ndarray], *, workspace: str, query_lang: str | None = None) -> StepOutput:
    """Local search: seeds (entity names the query contains, and by embedding unless the embedder is blind to the
    question's language) and their neighbourhood's chunks."""
    qvec = vector()
    seed_k = 0 if read.blind else cfg.seed_k
    lang_note = [f"embedding seeds off: embedder {embedder.model_id} does not cover "
                 f"'{query_lang}'; seeds are entity names the query contains"] if read.blind and cfg.seed_k else []
    names = read.snap.name_matrix(embedder) if seed_k else None
    res = local_search(query, read.snap, store, query_vec=qvec, name_matrix=names, hops=cfg.hops,
                       node_cap=cfg.node_cap, hub_percentile=cfg.hub_percentile, seed_k=seed_k,
                       seed_min_sim=cfg.seed_min_sim, k=cfg.k, workspace=workspace)
    return StepOutput(res.candidates, [*read.common, *lang_note, *res.notes],
                      info=GraphLocalInfo.of(res.info(read.snap), bool(seed_k)))


def graph_global_step(query: str, cfg: GraphConfig, read: GraphRead, store: GraphSource, embedder: Embedder,
                      vector: Callable[[], np.ndarray], llm: LLM | None, *, workspace: str) -> StepOutput:
    """Global search: communities ranked (by their summaries with an LLM, else by embedder cosine) and the chunks of
    the best; an LLM that fails for good falls back to the extractive map, saying so."""
    args: dict[str, Any] = dict(query_vec=vector(), embedder=embedder, level=cfg.level,
                                max_communities=cfg.global_max_communities, top=cfg.global_top, k=cfg.k,
                                max_usd=cfg.global_max_usd, llm=llm, model=cfg.llm_model, workspace=workspace)
    fallback = []
    try:
        gres = global_search(query, read.snap, store, use_llm=cfg.llm_summaries, **args)
    except LLMError as exc:  # a model that fails for good: say so and answer extractively instead
        gres = global_search(query, read.snap, store, use_llm=False, **args)
        fallback = [f"LLM failed ({exc}); extractive map-reduce instead"]
    return StepOutput(gres.candidates, [*read.common, *fallback, *gres.notes], gres.usage,
                      GraphGlobalInfo.of(gres.info()))


@dataclass(frozen=True)
class NodeHit:
    """A RAPTOR summary node the query hit: its id, its level and its cosine to the query."""

    node: str
    level: int
    cosine: float


@dataclass(frozen=True, eq=False)
class RaptorInfo(StageInfo):
    """The raptor stage: the summary nodes the query hit."""

    nodes_hit: tuple[NodeHit, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"nodes_hit": [{"node": h.node, "level": h.level, "cosine": h.cosine} for h in self.nodes_hit]}


def raptor_skip(enabled: bool, state: tuple[Any, ...] | None, model_id: str) -> str | None:
    """Why the raptor stage does not run: switched off, no tree, or a tree made with another embedder (`state`: the
    stored tree's (corpus version, model id, ...) or None)."""
    if not enabled:
        return "raptor.enabled = false"
    if state is None:
        return "no RAPTOR tree built yet: run `python -m core raptor build`"
    if state[1] != model_id:
        return f"the RAPTOR tree's vectors are {state[1]}'s, not {model_id}'s: rebuild it"
    return None


def raptor_step(vector: Callable[[], np.ndarray], nodes: Sequence[RaptorNode], node_vecs: np.ndarray,
                leaf_ids: Sequence[str], leaf_vecs: np.ndarray, fetch: Callable[[list[str]], dict[str, Chunk]], *,
                k: int, corpus_version: int) -> StepOutput:
    """RAPTOR's collapsed tree: summary nodes of every level and the leaf chunks, by cosine to the query."""
    hits = raptor_search(vector(), nodes, node_vecs, leaf_ids, leaf_vecs, fetch, k=k)
    version = max((n.corpus_version for n in nodes), default=corpus_version)  # an update rewrites only some nodes
    notes = [f"tree: {len(nodes)} summaries on {max((n.level for n in nodes), default=0)} level(s), built at corpus "
             f"v{version}"] + ([f"tree is behind the corpus (now v{corpus_version}): `python -m core raptor update`"]
                               if version != corpus_version else [])
    return StepOutput(hits.candidates, notes, info=RaptorInfo(tuple(NodeHit(n, lv, round(s, 4))
                                                                    for n, lv, s in hits.nodes_hit)))
