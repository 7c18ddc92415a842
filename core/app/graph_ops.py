"""GraphRAG operations the Graph and Search Lab pages call: build and update, merge review, synonyms, the global
search plan and the view frames and pictures (core/graph does the work)."""
from __future__ import annotations

from core.graph import view
from core.graph.build import (
           build_graph,
           decide_merge,
           graph_stats,
           set_synonyms,
           synonyms_text,
)
from core.graph.resolve import SynonymError
from core.graph.search import plan_global
from core.graph.stages import GraphLocalInfo
from core.graph.view import subgraph_svg as _subgraph_svg
from core.types import StageResult

__all__ = ["SynonymError", "build_graph", "decide_merge", "graph_stats", "local_nodes", "plan_global",
           "set_synonyms", "subgraph_svg", "synonyms_text", "view"]


def local_nodes(stage: StageResult | None) -> tuple[str, ...]:
    """The entities the graph_local stage read for the query (none when it did not run)."""
    info = stage.own_info if stage is not None and stage.skipped is None else None
    return info.nodes if isinstance(info, GraphLocalInfo) else ()


def subgraph_svg(stage: StageResult, names: dict[str, str]) -> str:
    """The Search Lab's small picture of the graph_local stage's subgraph (core.graph.view.subgraph_svg); '' when the
    stage did not run."""
    info = stage.own_info
    if stage.skipped is not None or not isinstance(info, GraphLocalInfo):
        return ""
    return _subgraph_svg(info, stage.candidates, names)
