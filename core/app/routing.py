"""The router as the pages see it: the route names it loads, the routes that skip retrieval, its test-split report,
Evaluate's routed / single-pipeline variants and a workspace's CAG estimate (core/route does the work)."""
from __future__ import annotations

from core.route.cag import workspace_estimate
from core.route.router import NO_RETRIEVAL, RouteError, load_routes, router_report
from core.route.stage import routed_variants

__all__ = ["NO_RETRIEVAL", "route_names", "routed_variants", "router_report", "workspace_estimate"]


def route_names(routes_file: str = "") -> list[str]:
    """Every route a question can be sent to, in the routes file's order ("" = core/route/routes.toml). A file that
    does not load offers the default routes; the query itself then reports the file's error."""
    try:
        return list(load_routes(routes_file or None))
    except RouteError:
        return list(load_routes(None))
