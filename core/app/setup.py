"""What a user interface needs to start: the database path in use and the Deps builder (core/deps.py, the one place
that reads environment variables, keys and model paths, does the work)."""
from __future__ import annotations

from core.deps import build_deps, db_path

__all__ = ["build_deps", "db_path"]
