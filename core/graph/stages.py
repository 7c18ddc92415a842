"""The graph retrieval stages as the pipeline runs them: 'graph_local' and 'graph_global' StageResults."""
from __future__ import annotations

import time
from typing import Any

from core.config import GraphConfig
from core.graph.build import builder_label
from core.graph.search import global_search, local_search
from core.graph.snapshot import GraphCache
from core.graph.sources import GraphSource
from core.models.llm import LLM, LLMError
from core.models.protocols import Embedder, model_languages
from core.types import StageResult, Usage

LOCAL, GLOBAL = "graph_local", "graph_global"


def graph_stages(query: str, cfg: GraphConfig, store: GraphSource, embedder: Embedder, llm: LLM | None, cache: GraphCache,
                 workspace: str, *, query_vec: Any = None, query_lang: str | None = None) -> list[StageResult]:
    """Both graph stages, each run or skipped with its reason. Reads the stored graph through the cache (reloaded
    when a build or update moved the graph version); never builds or writes the graph itself.
    A query in a language the embedder does not cover (`query_lang`) seeds local search by entity names only, and
    the offline global map (which ranks communities by embedder cosine) does not run."""
    languages = model_languages(embedder)
    blind = languages is not None and query_lang is not None and query_lang not in languages
    if not cfg.enabled:
        return [StageResult(LOCAL, skipped="graph.enabled = false"), StageResult(GLOBAL, skipped="graph.enabled = false")]
    snap = cache.get(store, workspace, cfg.min_phrase_chunks)
    if snap is None:
        why = "no graph built yet: run `python -m core graph build` or use the Graph page"
        return [StageResult(LOCAL, skipped=why), StageResult(GLOBAL, skipped=why)]
    common = [f"graph v{snap.version}, {builder_label(snap.builder)}, {len(snap)} active entities"]
    now = store.corpus.corpus_version(workspace)
    if snap.corpus_version != now:
        common.append(f"graph is behind the corpus (built at corpus v{snap.corpus_version}, now v{now}): update it")
    out = []
    qvec = query_vec
    if cfg.mode in ("local", "both"):
        t0 = time.perf_counter()
        if qvec is None:
            qvec = embedder.encode([query])[0]
        seed_k = 0 if blind else cfg.seed_k
        lang_note = [f"embedding seeds off: embedder {embedder.model_id} does not cover "
                     f"'{query_lang}'; seeds are entity names the query contains"] if blind and cfg.seed_k else []
        names = snap.name_matrix(embedder) if seed_k else None
        res = local_search(query, snap, store, query_vec=qvec, name_matrix=names, hops=cfg.hops,
                           node_cap=cfg.node_cap, hub_percentile=cfg.hub_percentile, seed_k=seed_k,
                           seed_min_sim=cfg.seed_min_sim, k=cfg.k, workspace=workspace)
        out.append(StageResult(LOCAL, tuple(res.candidates), (time.perf_counter() - t0) * 1000, Usage(), None,
                               tuple(common + lang_note + res.notes), {**res.info(snap), "embedding_seeds": bool(seed_k)}))
    else:
        out.append(StageResult(LOCAL, skipped=f"graph.mode = {cfg.mode}"))
    offline_map = not (cfg.llm_summaries and llm is not None and llm.available)
    if cfg.mode in ("global", "both") and blind and offline_map:
        out.append(StageResult(GLOBAL, skipped=f"embedder does not cover '{query_lang}': the offline map would rank "
                                               "communities at random (an LLM map reads any language)"))
    elif cfg.mode in ("global", "both"):
        t0 = time.perf_counter()
        if qvec is None:
            qvec = embedder.encode([query])[0]
        args = dict(query_vec=qvec, embedder=embedder, level=cfg.level, max_communities=cfg.global_max_communities,
                    top=cfg.global_top, k=cfg.k, max_usd=cfg.global_max_usd, llm=llm, model=cfg.llm_model,
                    workspace=workspace)
        fallback = []
        try:
            gres = global_search(query, snap, store, use_llm=cfg.llm_summaries, **args)
        except LLMError as exc:  # a model that fails for good: say so and answer extractively instead
            gres = global_search(query, snap, store, use_llm=False, **args)
            fallback = [f"LLM failed ({exc}); extractive map-reduce instead"]
        out.append(StageResult(GLOBAL, tuple(gres.candidates), (time.perf_counter() - t0) * 1000, gres.usage, None,
                               tuple(common + fallback + gres.notes), gres.info()))
    else:
        out.append(StageResult(GLOBAL, skipped=f"graph.mode = {cfg.mode}"))
    return out
