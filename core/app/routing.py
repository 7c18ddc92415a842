"""The router as the pages see it: the route names it loads, the routes that skip retrieval, its test-split report,
Evaluate's routed / single-pipeline variants and a workspace's CAG estimate (core/route does the work)."""
from __future__ import annotations

from typing import Mapping

from core.config import PipelineConfig
from core.route.cag import workspace_estimate
from core.route.router import NO_RETRIEVAL, RouteError, load_routes, router_report
from core.route.stage import routed_variants
from core.types import Trace

__all__ = ["NO_RETRIEVAL", "STAGE_SWITCH", "route_names", "routed_stages", "routed_variants", "router_report",
           "workspace_estimate"]

# The setting that turns each stage on: a route that sets it (routes.toml overrides) runs the stage although the
# session's settings have it off.
STAGE_SWITCH: Mapping[str, str] = {
    "graph_local": "graph.enabled", "graph_global": "graph.enabled", "raptor": "raptor.enabled",
    "rerank": "rerank.enabled", "prune": "prune.enabled", "mmr": "mmr.enabled", "expand": "expand.enabled",
    "grade": "agent.enabled", "decide": "agent.enabled", "evidence": "agent.enabled"}
_GRAPH_MODE = {"graph_local": ("local", "both"), "graph_global": ("global", "both")}


def route_names(routes_file: str = "") -> list[str]:
    """Every route a question can be sent to, in the routes file's order ("" = core/route/routes.toml). A file that
    does not load offers the default routes; the query itself then reports the file's error."""
    try:
        return list(load_routes(routes_file or None))
    except RouteError:
        return list(load_routes(None))


def routed_stages(trace: Trace, config: PipelineConfig) -> dict[str, str]:
    """{stage: why} for each stage that ran only because the query's route turned it on: its switch (STAGE_SWITCH)
    is off in `config` (the session's settings) and the route's overrides set it on, or the route's graph.mode
    asked for a graph search the session's mode does not run. Empty when the router did not run."""
    route = trace.route_info()
    if route is None:
        return {}
    over = dict(route.overrides)
    out: dict[str, str] = {}
    for s in trace.stages:
        key = STAGE_SWITCH.get(s.stage)
        if s.skipped is not None or key is None:
            continue
        section, _, name = key.partition(".")
        if not getattr(getattr(config, section), name) and over.get(key) is True:
            out[s.stage] = f"turned on by route {route.config} ({key} = true there; off in your settings)"
        elif s.stage in _GRAPH_MODE and config.graph.enabled and config.graph.mode not in _GRAPH_MODE[s.stage] \
                and over.get("graph.mode") in _GRAPH_MODE[s.stage]:
            out[s.stage] = (f"turned on by route {route.config} (graph.mode = {over['graph.mode']} there; "
                            f"{config.graph.mode} in your settings)")
    return out
