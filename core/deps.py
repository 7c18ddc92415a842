"""build_deps(config, env) -> Deps: the only place that reads environment variables, keys and model paths."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from core.config import PipelineConfig
from core.embed import Embedder, load_embedder
from core.index import IndexCache
from core.store import Store

DEFAULT_DB = Path("data") / "workbench.duckdb"


@dataclass
class Deps:
    """Everything a pipeline run needs from the outside world, built once and injected."""

    store: Store
    embedder: Embedder
    indexes: IndexCache = field(default_factory=IndexCache)
    notices: list[str] = field(default_factory=list)  # user-facing: fallbacks, missing keys, ...


def db_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("RAG_DB", str(DEFAULT_DB))


def build_deps(
    config: PipelineConfig,
    env: Mapping[str, str] | None = None,
    *,
    db: str | None = None,
    store: Store | None = None,
    embedder: Embedder | None = None,
) -> Deps:
    env = os.environ if env is None else env
    notices: list[str] = []
    if store is None:
        store = Store(db or db_path(env))
    if embedder is None:
        loaded = load_embedder(env.get("RAG_EMBED_MODEL", config.embedding.model), batch_size=config.embedding.batch_size)
        embedder = loaded.embedder
        if loaded.notice:
            notices.append(loaded.notice)
    return Deps(store=store, embedder=embedder, notices=notices)
