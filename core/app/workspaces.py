"""Workspaces: create, rename, switch and delete isolated corpora (each with its own configuration, graph, contexts,
eval runs, ledger, caches); the names users type are checked here, the rows live in core/store/workspaces.py."""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable

from core.config import ConfigError, PipelineConfig, dump_config, load_config_dict
from core.store import Store, StoreError
from core.types import DEFAULT_WORKSPACE

_NAME = re.compile(r"[\w][\w.\- ]{0,62}[\w]|[\w]", re.UNICODE)


class WorkspaceError(ValueError):
    """A workspace operation that cannot be done; the message is fit for the user."""


@dataclass(frozen=True)
class WorkspaceInfo:
    name: str
    documents: int
    chunks: int
    corpus_version: int
    created_at: str
    cached_answers: int
    cache_hits: int
    cache_misses: int
    cache_guarded_misses: int
    saved_ms: float
    saved_usd: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate_name(name: str) -> str:
    n = " ".join((name or "").split())
    if not n:
        raise WorkspaceError("a workspace needs a name")
    if not _NAME.fullmatch(n):
        raise WorkspaceError(f"workspace name {n!r} is not allowed: use 1-64 letters, digits, '-', '_', '.' or spaces, "
                             "starting and ending with a letter or digit")
    return n


def list_workspaces(store: Store) -> list[WorkspaceInfo]:
    out = []
    for w in store.workspaces_repo.list():
        c = store.answers.answer_cache_counts(w.workspace_id)
        out.append(WorkspaceInfo(w.workspace_id, w.documents, w.chunks, w.corpus_version,
                                 w.created_at.isoformat(sep=" ", timespec="seconds") if w.created_at else "",
                                 c.entries, c.hits, c.misses, c.guarded_misses, round(c.saved_ms, 1),
                                 round(c.saved_usd, 6)))
    return out


def workspace_names(store: Store) -> list[str]:
    return [w.workspace_id for w in store.workspaces_repo.list()]


def require_workspace(store: Store, name: str) -> str:
    """For read commands: a workspace that does not exist is an error with the list of those that do."""
    if not store.workspaces_repo.exists(name):
        known = ", ".join(workspace_names(store)) or "none"
        raise WorkspaceError(f"no workspace '{name}' (known: {known}); ingest into it or create it first "
                             f"(python -m core workspaces create '{name}')")
    return name


def create_workspace(store: Store, name: str) -> str:
    n = validate_name(name)
    if not store.workspaces_repo.create(n):
        raise WorkspaceError(f"workspace '{n}' already exists")
    return n


def rename_workspace(store: Store, old: str, new: str) -> int:
    """Rename: every row moves to the new name (one transaction). Returns the rows moved."""
    n = validate_name(new)
    if old == DEFAULT_WORKSPACE:
        raise WorkspaceError(f"the '{DEFAULT_WORKSPACE}' workspace cannot be renamed (it is recreated on every open); "
                             "create a new workspace and ingest there instead")
    try:
        return store.workspaces_repo.rename(old, n)
    except StoreError as exc:
        raise WorkspaceError(str(exc)) from exc


def delete_workspace(store: Store, name: str, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Delete the workspace and every row it owns in every table, its files on disk (sessions, configs, ANN graphs),
    then rewrite the database file (and the token-vector file) so no byte of its text or cached answers stays
    readable in them; `progress` hears each step. Crash-safe: a journal the next open finishes (core/store).
    Returns rows deleted per table."""
    if name == DEFAULT_WORKSPACE:
        raise WorkspaceError(f"the '{DEFAULT_WORKSPACE}' workspace cannot be deleted; delete its documents instead")
    try:
        return store.delete_workspace(name, progress)
    except StoreError as exc:
        raise WorkspaceError(str(exc)) from exc


def answer_cache_table(store: Store) -> list[dict[str, Any]]:
    """Rows for the Costs page: the semantic answer cache's counters per workspace."""
    rows = []
    for w in list_workspaces(store):
        lookups = w.cache_hits + w.cache_misses + w.cache_guarded_misses
        rows.append({"workspace": w.name, "cached answers": w.cached_answers, "hits": w.cache_hits,
                     "misses": w.cache_misses, "guarded misses": w.cache_guarded_misses,
                     "hit rate": round(w.cache_hits / lookups, 3) if lookups else None,
                     "saved ms": w.saved_ms, "saved $": w.saved_usd})
    return rows


def save_workspace_config(store: Store, workspace: str, config: PipelineConfig) -> None:
    """Remember the configuration a workspace was last used with (switching back restores it)."""
    if not store.read_only:
        store.workspaces_repo.save_config(workspace, dump_config(config))


def load_workspace_config(store: Store, workspace: str) -> tuple[PipelineConfig | None, str | None]:
    """The workspace's saved configuration, or None; a saved one the current code cannot read (a setting was removed
    or renamed since) gives None and a notice instead of an error."""
    raw = store.workspaces_repo.load_config(workspace)
    if raw is None:
        return None, None
    try:
        return load_config_dict(json.loads(raw)), None
    except (ConfigError, json.JSONDecodeError) as exc:
        return None, f"the saved configuration of '{workspace}' no longer fits this version ({exc}); using defaults"
