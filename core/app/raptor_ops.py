"""RAPTOR operations the Graph page and the command line call: estimate, build (replacing the tree), the tree as a
frame."""
from __future__ import annotations

from typing import Callable

import pandas as pd

from core.config import PipelineConfig
from core.deps import Deps
from core.graph.raptor import RaptorPlan, plan_raptor, timed_build
from core.store import Store


def raptor_plan(deps: Deps, cfg: PipelineConfig, workspace: str) -> RaptorPlan:
    # A count, not the vectors: the Graph page plans on every rerun.
    n = sum(c for m, v, c in deps.store.corpus.vector_models(workspace) if m == deps.embedder.model_id and v == "raw")
    return plan_raptor(n, cluster_size=cfg.raptor.cluster_size, max_levels=cfg.raptor.max_levels)


def build_raptor(deps: Deps, cfg: PipelineConfig, workspace: str,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, float | int]:
    """Cluster the workspace's chunk vectors (the active embedder's) and store the tree, replacing the old one."""
    r = cfg.raptor
    ids, matrix = deps.store.corpus.vectors(deps.embedder.model_id, "raw", workspace)
    if not ids:
        return {"nodes": 0, "levels": 0, "seconds": 0.0}
    nodes, vecs, secs = timed_build(deps.store.corpus.chunks(workspace), ids, matrix, deps.embedder,
                                    cluster_size=r.cluster_size, max_levels=r.max_levels,
                                    summary_sentences=r.summary_sentences, seed=r.seed,
                                    corpus_version=deps.store.corpus.corpus_version(workspace), progress=progress)
    deps.store.raptor.replace(workspace, nodes, vecs)
    return {"nodes": len(nodes), "levels": max((n.level for n in nodes), default=0), "seconds": round(secs, 2)}


def raptor_frame(store: Store, workspace: str) -> pd.DataFrame:
    """One row per summary node, top level first: what it summarises and how many chunks lie under it."""
    nodes, _ = store.raptor.nodes(workspace)
    rows = [{"level": n.level, "node": n.node_id, "summary": n.text, "children": ", ".join(n.children[:8]) +
             (" …" if len(n.children) > 8 else ""), "chunks": len(n.chunk_ids), "mode": n.mode,
             "corpus version": n.corpus_version} for n in sorted(nodes, key=lambda n: (-n.level, n.node_id))]
    return pd.DataFrame(rows, columns=["level", "node", "summary", "children", "chunks", "mode", "corpus version"])
