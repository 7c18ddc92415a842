"""RAPTOR operations the Graph page and the command line call: estimate, build or update (incremental), the tree as a
frame and as a drawing."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

from core.app.readiness import embed_seconds_per_chunk
from core.config import PipelineConfig
from core.deps import Deps
from core.graph.raptor import (
    ClaudeSummaries,
    RaptorPlan,
    Summarise,
    extractive_summariser,
    plan_raptor,
    update_tree,
)
from core.models.llm import call_limits
from core.store import Store
from core.types import RaptorNode


def _uses_claude(deps: Deps, cfg: PipelineConfig) -> bool:
    return cfg.raptor.summaries == "llm" or (cfg.raptor.summaries == "auto" and deps.llm.available)


def raptor_plan(deps: Deps, cfg: PipelineConfig, workspace: str) -> RaptorPlan:
    # A count, not the vectors: the Graph page plans on every rerun.
    n = sum(c for m, v, c in deps.store.corpus.vector_models(workspace) if m == deps.embedder.model_id and v == "raw")
    r = cfg.raptor
    claude = _uses_claude(deps, cfg) and deps.llm.available
    # A summary is embedded like a chunk (a few sentences, no longer): at the embedder's speed measured here.
    per = embed_seconds_per_chunk(deps.store, deps.embedder, cfg.embedding, workspace) if n else 0.0
    return plan_raptor(n, cluster_size=r.cluster_size, max_levels=r.max_levels, seconds_per_summary=per,
                       llm_model=r.llm_model if claude else "", max_usd=r.max_usd)


def _summariser(deps: Deps, cfg: PipelineConfig, workspace: str) -> tuple[Summarise, ClaudeSummaries | None, list[str]]:
    r = cfg.raptor
    if not _uses_claude(deps, cfg):
        return extractive_summariser(r.summary_sentences), None, []
    if not deps.llm.available:
        return extractive_summariser(r.summary_sentences), None, [
            f"raptor.summaries = llm but {deps.llm.reason}: extractive summaries instead"]
    claude = ClaudeSummaries(deps.llm, r.llm_model, r.max_usd, r.summary_sentences, workspace,
                             run_id=uuid.uuid4().hex, memo=deps.store.raptor)
    return claude, claude, []


@dataclass(frozen=True)
class RaptorBuild:
    """What a RAPTOR build or update did: the tree's size, how it was made (full, incremental, unchanged, empty) and
    why, the chunks added and removed, the summaries rewritten, and what Claude cost (`to_dict()`: the CLI's JSON)."""

    nodes: int
    levels: int
    seconds: float
    mode: str
    why: str = ""
    added: int = 0
    removed: int = 0
    rewritten: int = 0
    summaries: str = ""
    llm_calls: int = 0
    usd: float = 0.0
    notes: tuple[str, ...] = ()
    reused_summaries: int = 0  # Claude summaries an earlier (killed) build paid for, read back instead of paid again

    def to_dict(self) -> dict[str, Any]:
        if self.mode == "empty":
            return {"nodes": 0, "levels": 0, "seconds": 0.0, "mode": "empty", "notes": []}
        return {"nodes": self.nodes, "levels": self.levels, "seconds": self.seconds, "mode": self.mode,
                "why": self.why, "added": self.added, "removed": self.removed, "rewritten": self.rewritten,
                "summaries": self.summaries, "llm_calls": self.llm_calls, "reused_summaries": self.reused_summaries,
                "usd": self.usd, "notes": list(self.notes)}

    def label(self) -> str:
        """One line for the CLI and the page."""
        return (f"{self.mode} ({self.why or 'changes only'}): {self.nodes} summaries on {self.levels} level(s), "
                f"+{self.added} / -{self.removed} chunks, {self.rewritten} written in {self.seconds} s "
                f"({self.summaries}{f', ${self.usd:.4f}' if self.llm_calls else ''})")


def build_raptor(deps: Deps, cfg: PipelineConfig, workspace: str,
                 progress: Callable[[int, int], None] | None = None, *, full: bool = True) -> RaptorBuild:
    """Cluster the workspace's chunk vectors (the active embedder's) and store the tree. `full`: replace it; else
    update the stored tree for new and removed chunks (core.graph.raptor.update_tree), building afresh only when it
    must. Summaries by Claude when raptor.summaries asks for it and a key is set, under raptor.max_usd."""
    r = cfg.raptor
    ids, matrix = deps.store.corpus.vectors(deps.embedder.model_id, "raw", workspace)
    if not ids:
        return RaptorBuild(0, 0, 0.0, "empty")
    by_id = {c.chunk_id: c for c in deps.store.corpus.chunks(workspace)}
    keep = [i for i, cid in enumerate(ids) if cid in by_id]
    summarise, claude, notes = _summariser(deps, cfg, workspace)
    old, old_vecs = ([], None) if full else deps.store.raptor.nodes(workspace)
    t0 = time.perf_counter()
    with call_limits(usd=r.max_usd):  # the client refuses any call beyond the cap too
        nodes, vecs, rep = update_tree(old, old_vecs if old_vecs is not None else matrix[:0],
                                       [ids[i] for i in keep], [by_id[ids[i]].text for i in keep], matrix[keep],
                                       deps.embedder, cluster_size=r.cluster_size, max_levels=r.max_levels,
                                       summary_sentences=r.summary_sentences, seed=r.seed,
                                       corpus_version=deps.store.corpus.corpus_version(workspace), progress=progress,
                                       summarise=summarise)
    secs = time.perf_counter() - t0
    if rep.mode != "unchanged":
        deps.store.raptor.replace(workspace, nodes, vecs)
    if claude is not None:
        notes += claude.notes
    return RaptorBuild(len(nodes), max((n.level for n in nodes), default=0), round(secs, 2),
                       rep.mode if not full else "full", rep.why if not full else "asked for a full build",
                       rep.added, rep.removed, rep.rewritten, summary_label(nodes), claude.calls if claude else 0,
                       round(claude.spent, 6) if claude else 0.0, tuple(notes), claude.reused if claude else 0)


def summary_label(nodes: list[RaptorNode]) -> str:
    llm = sum(1 for n in nodes if n.mode == "llm")
    return "extractive" if not llm else f"{llm} by Claude, {len(nodes) - llm} extractive"


def raptor_frame(store: Store, workspace: str) -> pd.DataFrame:
    """One row per summary node, top level first: what it summarises and how many chunks lie under it."""
    nodes, _ = store.raptor.nodes(workspace)
    rows = [{"level": n.level, "node": n.node_id, "summary": n.text, "children": ", ".join(n.children[:8]) +
             (" …" if len(n.children) > 8 else ""), "chunks": len(n.chunk_ids), "mode": n.mode,
             "corpus version": n.corpus_version} for n in sorted(nodes, key=lambda n: (-n.level, n.node_id))]
    return pd.DataFrame(rows, columns=["level", "node", "summary", "children", "chunks", "mode", "corpus version"])


def raptor_dot(store: Store, workspace: str, *, max_nodes: int = 80, label_chars: int = 48) -> str:
    """The tree as Graphviz DOT, top level first, breadth first up to `max_nodes` summary nodes (chunks are counted
    on their level-1 parents, not drawn); an llm summary is drawn filled. '' when there is no tree."""
    nodes, _ = store.raptor.nodes(workspace)
    if not nodes:
        return ""
    by_id = {n.node_id: n for n in nodes}
    top = max(n.level for n in nodes)
    queue = sorted((n for n in nodes if n.level == top or not any(n.node_id in m.children for m in nodes)),
                   key=lambda n: (-n.level, n.node_id))
    shown: list[RaptorNode] = []
    seen: set[str] = set()
    while queue and len(shown) < max_nodes:
        n = queue.pop(0)
        if n.node_id in seen:
            continue
        seen.add(n.node_id)
        shown.append(n)
        queue += [by_id[c] for c in n.children if c in by_id]

    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")

    lines = ["digraph raptor {", "rankdir=TB;", 'node [shape=box, style="rounded", fontsize=10];']
    for n in shown:
        head = n.text[:label_chars] + ("…" if len(n.text) > label_chars else "")
        style = ', style="rounded,filled", fillcolor="#e8f0fe"' if n.mode == "llm" else ""
        lines.append(f'"{esc(n.node_id)}" [label="{esc(n.node_id)} · {len(n.chunk_ids)} chunks\\n{esc(head)}"'
                     f'{style}, tooltip="{esc(n.text[:400])}"];')
    ids = {n.node_id for n in shown}
    for n in shown:
        lines += [f'"{esc(n.node_id)}" -> "{esc(c)}";' for c in n.children if c in ids]
    hidden = len(nodes) - len(shown)
    if hidden > 0:
        lines.append(f'"more" [label="+{hidden} more nodes (see the table)", shape=plaintext];')
    lines.append("}")
    return "\n".join(lines)
