"""Application services the pages call: corpus operations, readiness, workspaces, counters, costs, frames."""
