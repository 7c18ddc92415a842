"""Workspaces repository: list, create, rename and delete whole workspaces across every table that has rows of one.

Every table carries workspace_id; the tables are found from the schema at call time (information_schema), so a table
added later by any repository is renamed and deleted with the rest without a list to keep in step.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.store.db import Cursor, Database, StoreError, _fsync_dir, now

# A deleted workspace leaves its last corpus version behind (meta row), so a workspace later created under the same
# name starts above it: in-process caches keyed by (workspace, corpus version) can never mistake new for old.
FLOOR_KEY = "corpus_version_floor:"  # the same key core.store.db.insert_workspace reads
CONFIG_KEY = "workspace_config:"  # meta row: the workspace's last configuration (JSON), restored on switching back


JOURNAL_SUFFIX = ".delete-journal"  # workspaces whose delete began and has not finished (issue #46 item 1)


def journal_path(db_path: str | Path) -> Path:
    return Path(str(db_path) + JOURNAL_SUFFIX)


def workspace_dir(db_path: str | Path, workspace: str) -> Path:
    """The folder of files a workspace owns beside the database (session files, saved configurations): removed with
    the workspace. An in-memory database keeps them under the working directory."""
    base = Path(db_path).parent if str(db_path) not in ("", ":memory:") else Path.cwd()
    return base / "workspaces" / workspace


def workspace_tag(workspace: str) -> str:
    """A file-name-safe tag of a workspace: files of one (the ANN graphs) carry it, so a delete finds them."""
    return hashlib.sha256(workspace.encode("utf-8")).hexdigest()[:12]


def ann_dir(db_path: str | Path) -> Path:
    return Path(str(db_path) + ".ann")


def index_dir(db_path: str | Path) -> Path:
    """Where core/store/index_files.py keeps the BM25 and IDF arrays of each workspace's corpus version."""
    return Path(str(db_path) + ".index")


def remove_workspace_files(db_path: str | Path, workspace: str) -> list[Path]:
    """Delete the files a workspace owns on disk: its folder (sessions, configs), its ANN graph files and its index
    files (BM25, IDF)."""
    gone: list[Path] = []
    if str(db_path) in ("", ":memory:"):
        return gone
    folder = workspace_dir(db_path, workspace)
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
        gone.append(folder)
    ann = ann_dir(db_path)
    if ann.is_dir():
        for p in sorted(ann.glob(f"dense-{workspace_tag(workspace)}-*")):
            p.unlink(missing_ok=True)
            gone.append(p)
    idx = index_dir(db_path)
    if idx.is_dir():
        for p in sorted(idx.glob(f"*-{workspace_tag(workspace)}-*")):
            p.unlink(missing_ok=True)
            gone.append(p)
    return gone


def _read_journal(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return []  # a journal cut short while written: its delete had not begun (rows are written after it)
    names = data.get("workspaces") if isinstance(data, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _write_journal(path: Path, names: list[str]) -> None:
    if not names:
        path.unlink(missing_ok=True)
        _fsync_dir(str(path))
        return
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"workspaces": names}, ensure_ascii=False))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(str(path))


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
        if self._db.path != ":memory:" and index_dir(self._db.path).is_dir():  # tagged by the old name: never read
            for f in index_dir(self._db.path).glob(f"*-{workspace_tag(old)}-*"):
                f.unlink(missing_ok=True)
        return moved

    # -- the delete journal ----------------------------------------------------------------------------------------
    def pending_deletes(self) -> list[str]:
        """Workspaces whose delete began in an earlier run and did not finish (the next read-write open finishes)."""
        return [] if self._db.path == ":memory:" else _read_journal(journal_path(self._db.path))

    def begin_delete(self, workspace: str) -> None:
        """Record the delete before any row goes (fsynced), so a kill at any later moment is finished next time."""
        if self._db.path != ":memory:":
            names = self.pending_deletes()
            if workspace not in names:
                _write_journal(journal_path(self._db.path), [*names, workspace])

    def end_delete(self, workspace: str) -> None:
        if self._db.path != ":memory:":
            _write_journal(journal_path(self._db.path), [n for n in self.pending_deletes() if n != workspace])

    def delete(self, workspace: str, *, missing_ok: bool = False) -> dict[str, int]:
        """Delete every row of the workspace in every table, in one transaction; returns rows deleted per table.
        `missing_ok`: finishing a journalled delete whose rows already went is no error."""
        deleted: dict[str, int] = {}
        with self._db.transaction() as cur:
            row = cur.execute("SELECT corpus_version FROM workspaces WHERE workspace_id = ?", [workspace]).fetchone()
            if row is None and not missing_ok:
                raise StoreError(f"no workspace '{workspace}'")
            if row is None:
                floor = cur.execute("SELECT value FROM meta WHERE key = ?", [FLOOR_KEY + workspace]).fetchone()
                row = (int(floor[0]) - 1 if floor else 0,)
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
