"""Workspaces repository: list, create, rename and delete whole workspaces across every table that has rows of one.

Every table carries workspace_id; the tables are found from the schema at call time (information_schema), so a table
added later by any repository is renamed and deleted with the rest without a list to keep in step.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.store.db import Cursor, Database, StoreError, now

# A deleted workspace leaves its last corpus version behind (meta row), so a workspace later created under the same
# name starts above it: in-process caches keyed by (workspace, corpus version) can never mistake new for old.
FLOOR_KEY = "corpus_version_floor:"  # the same key core.store.db.insert_workspace reads
CONFIG_KEY = "workspace_config:"  # meta row: the workspace's last configuration (JSON), restored on switching back


@dataclass(frozen=True)
class WorkspaceRow:
    workspace_id: str
    name: str
    corpus_version: int
    created_at: datetime | None
    documents: int
    chunks: int


def _tables_with_workspace(cur: Cursor) -> list[str]:
    rows = cur.execute("SELECT DISTINCT table_name FROM information_schema.columns WHERE column_name = 'workspace_id' "
                       "AND table_schema = 'main' ORDER BY 1").fetchall()
    return [r[0] for r in rows]


class Workspaces:
    def __init__(self, db: Database) -> None:
        self._db = db

    def list(self) -> list[WorkspaceRow]:
        rows = self._db.cursor().execute(
            "SELECT w.workspace_id, w.name, w.corpus_version, w.created_at, "
            "(SELECT count(*) FROM documents d WHERE d.workspace_id = w.workspace_id), "
            "(SELECT count(*) FROM chunks c WHERE c.workspace_id = w.workspace_id) "
            "FROM workspaces w ORDER BY w.workspace_id").fetchall()
        return [WorkspaceRow(*r) for r in rows]

    def exists(self, workspace: str) -> bool:
        return self._db.cursor().execute("SELECT count(*) FROM workspaces WHERE workspace_id = ?",
                                         [workspace]).fetchone()[0] > 0

    def create(self, workspace: str) -> bool:
        """Create an empty workspace; False when it already exists."""
        with self._db.transaction() as cur:
            if cur.execute("SELECT count(*) FROM workspaces WHERE workspace_id = ?", [workspace]).fetchone()[0]:
                return False
            cur.execute("INSERT INTO workspaces VALUES (?, ?, ?, ?)",
                        [workspace, workspace, self._floor(cur, workspace), now()])
        return True

    @staticmethod
    def _floor(cur: Cursor, workspace: str) -> int:
        row = cur.execute("SELECT value FROM meta WHERE key = ?", [FLOOR_KEY + workspace]).fetchone()
        return int(row[0]) if row else 0

    def row_counts(self, workspace: str) -> dict[str, int]:
        """Rows of this workspace per table (the delete test compares these before and after)."""
        cur = self._db.cursor()
        return {t: int(cur.execute(f'SELECT count(*) FROM "{t}" WHERE workspace_id = ?', [workspace]).fetchone()[0])
                for t in _tables_with_workspace(cur)}

    def rename(self, old: str, new: str) -> int:
        """Move every row of `old` to `new` in one transaction; returns the rows moved."""
        moved = 0
        with self._db.transaction() as cur:
            if cur.execute("SELECT count(*) FROM workspaces WHERE workspace_id = ?", [new]).fetchone()[0]:
                raise StoreError(f"workspace '{new}' already exists")
            if not cur.execute("SELECT count(*) FROM workspaces WHERE workspace_id = ?", [old]).fetchone()[0]:
                raise StoreError(f"no workspace '{old}'")
            for t in _tables_with_workspace(cur):
                n = cur.execute(f'SELECT count(*) FROM "{t}" WHERE workspace_id = ?', [old]).fetchone()[0]
                if n:
                    cur.execute(f'UPDATE "{t}" SET workspace_id = ? WHERE workspace_id = ?', [new, old])
                    moved += int(n)
            cur.execute("UPDATE workspaces SET name = ? WHERE workspace_id = ?", [new, new])
            cur.execute("UPDATE meta SET key = ? WHERE key = ?", [CONFIG_KEY + new, CONFIG_KEY + old])
            # The new name must not start below what the old one reached (see FLOOR_KEY).
            floor = max(self._floor(cur, new), self._floor(cur, old))
            cur.execute("UPDATE workspaces SET corpus_version = greatest(corpus_version, ?) WHERE workspace_id = ?",
                        [floor, new])
        return moved

    def delete(self, workspace: str) -> dict[str, int]:
        """Delete every row of the workspace in every table, in one transaction; returns rows deleted per table."""
        deleted: dict[str, int] = {}
        with self._db.transaction() as cur:
            row = cur.execute("SELECT corpus_version FROM workspaces WHERE workspace_id = ?", [workspace]).fetchone()
            if row is None:
                raise StoreError(f"no workspace '{workspace}'")
            for t in _tables_with_workspace(cur):
                n = int(cur.execute(f'SELECT count(*) FROM "{t}" WHERE workspace_id = ?', [workspace]).fetchone()[0])
                if n:
                    cur.execute(f'DELETE FROM "{t}" WHERE workspace_id = ?', [workspace])
                deleted[t] = n
            cur.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [FLOOR_KEY + workspace, str(int(row[0]) + 1)])
            cur.execute("DELETE FROM meta WHERE key = ?", [CONFIG_KEY + workspace])
        return deleted

    def save_config(self, workspace: str, config_json: str) -> None:
        with self._db.writer() as cur:
            cur.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [CONFIG_KEY + workspace, config_json])

    def load_config(self, workspace: str) -> str | None:
        row = self._db.cursor().execute("SELECT value FROM meta WHERE key = ?", [CONFIG_KEY + workspace]).fetchone()
        return row[0] if row else None
