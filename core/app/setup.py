"""What a user interface needs to start: the database path in use and the Deps builder (core/deps.py, the one place
that reads environment variables, keys and model paths, does the work)."""
from __future__ import annotations

from core.deps import build_deps, db_path, with_llm_provider
from core.models.providers import PROVIDERS, provider_label

__all__ = ["PROVIDERS", "build_deps", "db_path", "provider_label", "with_llm_provider"]
