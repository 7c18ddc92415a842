"""Collections repository: which collection (knowledge base) each document of a workspace belongs to, each
collection's description and its computed profile (issue #29). A document nobody assigned is in the default
collection; assignments of deleted documents are never listed (read joined with the live documents)."""
from __future__ import annotations

import json
import re
from typing import Mapping, Sequence

from core.store.corpus import bump_version
from core.store.db import Cursor, Database, StoreError, now
from core.types import DEFAULT_COLLECTION, DEFAULT_WORKSPACE, Collection, CollectionProfile

TABLES: tuple[str, ...] = (
    # One row per document that was put in a collection (ingest --collection, a folder, the Corpus page's choice).
    """CREATE TABLE IF NOT EXISTS doc_collections (
        workspace_id VARCHAR, doc_id VARCHAR, collection VARCHAR, assigned_at TIMESTAMP,
        PRIMARY KEY (workspace_id, doc_id))""",
    # One row per collection that has a description or a computed profile.
    """CREATE TABLE IF NOT EXISTS collections (
        workspace_id VARCHAR, name VARCHAR, description VARCHAR DEFAULT '', profile_json VARCHAR,
        updated_at TIMESTAMP, PRIMARY KEY (workspace_id, name))""",
)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
MAX_DESCRIPTION = 2000


def check_name(name: str) -> str:
    """A collection name as given, or StoreError saying what a name may hold."""
    if not NAME_RE.match(name or ""):
        raise StoreError(f"collection name {name!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a letter "
                         "or digit")
    return name


_LIVE = ("SELECT d.doc_id, coalesce(a.collection, ?) AS collection FROM documents d LEFT JOIN doc_collections a "
         "ON a.workspace_id = d.workspace_id AND a.doc_id = d.doc_id WHERE d.workspace_id = ?")


class Collections:
    def __init__(self, db: Database) -> None:
        self._db = db
        # Memos keyed by (corpus version, this repository's writes): every query writes its run log, so the write
        # generation moves on every query, while these change only with the documents, an assignment or a profile.
        self._chunk_memo: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}
        self._list_memo: dict[str, tuple[tuple[int, int], list[Collection]]] = {}
        self._writes = 0

    def _key(self, workspace: str) -> tuple[int, int]:
        row = self._db.cursor().execute("SELECT corpus_version FROM workspaces WHERE workspace_id = ?",
                                        [workspace]).fetchone()
        return (int(row[0]) if row else -1, self._writes)

    # -- writes -----------------------------------------------------------------------------------------------------
    def assign(self, workspace: str, collection: str, doc_ids: Sequence[str]) -> int:
        """Put these documents of the workspace in `collection` (moving them out of any other); returns how many of
        them the workspace holds. A move changes what a query searches, so the corpus version moves (caches keyed by
        it, the answer cache among them, never serve the old layout)."""
        check_name(collection)
        with self._db.transaction() as cur:
            moved = [r[0] for r in cur.execute(
                "SELECT d.doc_id FROM documents d LEFT JOIN doc_collections a ON a.workspace_id = d.workspace_id AND "
                "a.doc_id = d.doc_id WHERE d.workspace_id = ? AND list_contains(?, d.doc_id) AND "
                "coalesce(a.collection, ?) <> ?", [workspace, list(doc_ids), DEFAULT_COLLECTION, collection]).fetchall()]
            live = cur.execute("SELECT count(*) FROM documents WHERE workspace_id = ? AND list_contains(?, doc_id)",
                               [workspace, list(doc_ids)]).fetchone()[0]
            stamp = now()
            if moved:
                cur.execute("INSERT OR REPLACE INTO doc_collections SELECT ?, unnest(?), ?, ?",
                            [workspace, moved, collection, stamp])
                bump_version(cur, workspace)
        self._writes += 1
        return int(live)

    def assign_names(self, workspace: str, names: Mapping[str, str]) -> int:
        """Document key (its name) -> collection, for the documents an ingest just wrote; returns how many moved."""
        by_coll: dict[str, list[str]] = {}
        for name, coll in names.items():
            by_coll.setdefault(check_name(coll), []).append(name)
        n = 0
        for coll, keys in by_coll.items():
            ids = [r[0] for r in self._db.cursor().execute(
                "SELECT doc_id FROM documents WHERE workspace_id = ? AND list_contains(?, name)",
                [workspace, keys]).fetchall()]
            n += self.assign(workspace, coll, ids)
        return n

    def set_description(self, workspace: str, name: str, description: str) -> str:
        """The person's description of a collection (the LLM router reads it), cut at MAX_DESCRIPTION characters;
        returns the note saying so when it was cut, else ""."""
        if name not in {c.name for c in self.list(workspace)}:
            raise StoreError(f"no collection {name!r} in workspace {workspace!r}")
        text = description.strip()
        note = (f"the description was cut at {MAX_DESCRIPTION:,} characters (MAX_DESCRIPTION); it had {len(text):,}"
                if len(text) > MAX_DESCRIPTION else "")
        text = text[:MAX_DESCRIPTION]
        with self._db.writer() as cur:
            cur.execute("INSERT INTO collections (workspace_id, name, description, updated_at) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT DO UPDATE SET description = excluded.description, updated_at = excluded.updated_at",
                        [workspace, name, text, now()])
        self._writes += 1
        return note

    def put_profiles(self, workspace: str, profiles: Mapping[str, CollectionProfile]) -> None:
        """Store computed profiles (one transaction), replacing earlier ones."""
        with self._db.transaction() as cur:
            for name, p in profiles.items():
                _upsert_profile(cur, workspace, name, json.dumps(p.to_dict(), separators=(",", ":")))
        self._writes += 1

    # -- reads ------------------------------------------------------------------------------------------------------
    def doc_collections(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        """doc_id -> collection for every live document of the workspace."""
        rows = self._db.cursor().execute(_LIVE, [DEFAULT_COLLECTION, workspace]).fetchall()
        return {r[0]: r[1] for r in rows}

    def chunk_collections(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        """chunk_id -> collection for every chunk of the workspace (memoised: the retrieval stages' filter reads it on
        every query)."""
        gen = self._key(workspace)
        got = self._chunk_memo.get(workspace)
        if got is not None and got[0] == gen:
            return got[1]
        rows = self._db.cursor().execute(
            "SELECT c.chunk_id, coalesce(a.collection, ?) FROM chunks c LEFT JOIN doc_collections a "
            "ON a.workspace_id = c.workspace_id AND a.doc_id = c.doc_id WHERE c.workspace_id = ?",
            [DEFAULT_COLLECTION, workspace]).fetchall()
        out = {r[0]: r[1] for r in rows}
        self._chunk_memo[workspace] = (gen, out)
        return out

    def list(self, workspace: str = DEFAULT_WORKSPACE) -> list[Collection]:
        """The workspace's collections that hold documents, by name, with description and stored profile."""
        gen = self._key(workspace)
        got = self._list_memo.get(workspace)
        if got is not None and got[0] == gen:
            return got[1]
        rows = self._db.cursor().execute(
            f"SELECT l.collection, count(*), any_value(c.description), any_value(c.profile_json) FROM ({_LIVE}) l "
            "LEFT JOIN collections c ON c.workspace_id = ? AND c.name = l.collection GROUP BY 1 ORDER BY 1",
            [DEFAULT_COLLECTION, workspace, workspace]).fetchall()
        out = [Collection(workspace, r[0], r[2] or "", int(r[1]),
                          CollectionProfile.from_dict(json.loads(r[3])) if r[3] else None) for r in rows]
        self._list_memo[workspace] = (gen, out)
        return out

    def get(self, workspace: str, name: str) -> Collection | None:
        return next((c for c in self.list(workspace) if c.name == name), None)


def _upsert_profile(cur: Cursor, workspace: str, name: str, blob: str) -> None:
    cur.execute("INSERT INTO collections (workspace_id, name, description, profile_json, updated_at) "
                "VALUES (?, ?, '', ?, ?) ON CONFLICT DO UPDATE SET profile_json = excluded.profile_json, "
                "updated_at = excluded.updated_at", [workspace, name, blob, now()])
