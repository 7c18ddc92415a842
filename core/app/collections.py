"""Collection operations for the CLI and the pages: which collection an ingested file goes to, assigning it,
refreshing the profiles and the rows the views show."""
from __future__ import annotations

from typing import Any, Sequence

from core.config import PipelineConfig
from core.route.collections import refresh_profiles
from core.store import Store, StoreError
from core.store.collections import check_name
from core.text import tokenize
from core.types import Collection


def collection_for_key(key: str, chosen: str | None = None) -> str | None:
    """The collection a file goes to: the one chosen (ingest --collection, the upload's choice), else the top folder
    of its key (a path relative to the folder ingested), else None (it stays where it is; new files: default)."""
    if chosen:
        return check_name(chosen)
    if "/" in key:
        top = key.split("/", 1)[0]
        try:
            return check_name(top)
        except StoreError:
            return None
    return None


def name_problem(name: str) -> str:
    """Why a collection name cannot be used ("" when it can)."""
    try:
        check_name(name)
    except StoreError as exc:
        return str(exc)
    return ""


def assign_ingested(store: Store, names: Sequence[str], workspace: str, chosen: str | None = None) -> dict[str, str]:
    """Put each ingested document (by its key) in its collection; returns key -> collection for those moved."""
    plan = {n: c for n in names if (c := collection_for_key(n, chosen)) is not None}
    if plan:
        store.collections.assign_names(workspace, plan)
    return plan


def listed(store: Store, workspace: str) -> list[Collection]:
    """The workspace's collections as stored (profiles as last computed)."""
    return store.collections.list(workspace)


def set_description(store: Store, workspace: str, name: str, text: str) -> str:
    """Store a collection's description; the note when it was cut at its cap, else ""."""
    return store.collections.set_description(workspace, name, text)


def vector_model(store: Store, workspace: str) -> str:
    """The embedder whose raw vectors cover most of the workspace (the profiles' centroids use it)."""
    raw = [v for v in store.corpus.vector_models(workspace) if v.variant == "raw"]
    return max(raw, key=lambda v: v.count).model_id if raw else ""


def refresh(store: Store, workspace: str, model_id: str | None = None, config: PipelineConfig | None = None
            ) -> list[Collection]:
    """The collections with profiles of the current corpus version (computed and stored when stale; computed only
    when the store is read-only)."""
    b = (config or PipelineConfig()).bm25

    def tokens(text: str) -> list[str]:
        return tokenize(text, split_identifiers=b.split_identifiers, stem=b.stem)

    return refresh_profiles(store.corpus, store.collections, store.tables.list(workspace), workspace,
                            model_id or vector_model(store, workspace), tokens, write=not store.read_only)


def rows(cols: Sequence[Collection]) -> list[dict[str, Any]]:
    """One row per collection for a table view."""
    out = []
    for c in cols:
        p = c.profile
        out.append({"collection": c.name, "documents": c.n_docs, "chunks": p.n_chunks if p else None,
                    "languages": ", ".join(f"{k} {v}" for k, v in sorted(p.languages.items(), key=lambda kv: -kv[1]))
                    if p else "", "top terms": ", ".join(p.top_terms[:10]) if p else "",
                    "tables": ", ".join(p.tables) if p else "", "description": c.description})
    return out


def describe(c: Collection) -> dict[str, Any]:
    """A collection as `collections describe --json` prints it (the vocabulary and the centroid summarised)."""
    p = c.profile
    prof = None if p is None else {
        "documents": p.n_docs, "chunks": p.n_chunks, "terms": p.n_terms, "vocabulary": len(p.df),
        "languages": dict(p.languages), "top_terms": list(p.top_terms), "tables": {k: list(v) for k, v in p.tables.items()},
        "centroid": {"model": p.model_id, "dims": len(p.centroid)}, "corpus_version": p.corpus_version}
    return {"workspace": c.workspace, "name": c.name, "description": c.description, "documents": c.n_docs,
            "profile": prof}
