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
from core.graph.view import subgraph_svg

__all__ = ["SynonymError", "build_graph", "decide_merge", "graph_stats", "plan_global", "set_synonyms",
           "subgraph_svg", "synonyms_text", "view"]
