"""Tables repository: a workspace's table files as typed DuckDB tables (one physical table each, listed in
`ws_tables`), their samples and column values, and the SQL sandbox over them (core/store/sql.py)."""
from __future__ import annotations

import hashlib
import json
import threading
import uuid
from datetime import timedelta
from typing import Any, Sequence

from core.store.db import Cursor, Database, StoreError, now
from core.store.sql import SqlSandbox
from core.types import DEFAULT_WORKSPACE, TableInfo

TABLES: tuple[str, ...] = (
    # One row per table of a workspace: its SQL name (the file's stem), the document its text form is, and the
    # physical table that holds its rows. Rows of the physical table carry workspace_id too, so deleting or renaming
    # a workspace (core/store/workspaces.py walks every table with that column) takes them along.
    """CREATE TABLE IF NOT EXISTS ws_tables (
        workspace_id VARCHAR, name VARCHAR, doc_id VARCHAR, source VARCHAR, physical VARCHAR, columns_json VARCHAR,
        n_rows BIGINT, created_at TIMESTAMP, PRIMARY KEY (workspace_id, name))""",
)
COLUMN_TYPES = frozenset({"BIGINT", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP", "VARCHAR"})
PHYSICAL_PREFIX = "wstbl_"
IN_FLIGHT = timedelta(hours=1)  # a table row younger than this without its document may be a file still on its way
_ARROW = {"BIGINT": "int64", "DOUBLE": "float64", "BOOLEAN": "bool_", "DATE": "date32", "VARCHAR": "string"}


def _physical(workspace: str, name: str, doc_id: str) -> str:
    """A new physical table for every write: an edited file keeps its doc_id (core/ingest/identity.py), and the
    sandbox and value caches rely on a physical table never changing once written."""
    nonce = uuid.uuid4().hex
    return PHYSICAL_PREFIX + hashlib.sha256(f"{workspace}\x00{name}\x00{doc_id}\x00{nonce}".encode()).hexdigest()[:16]


def _quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def _arrow_table(columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> Any:
    import pyarrow as pa

    arrays = []
    for i, (_, typ) in enumerate(columns):
        t = pa.timestamp("us") if typ == "TIMESTAMP" else getattr(pa, _ARROW[typ])()
        arrays.append(pa.array([r[i] for r in rows], type=t))
    return pa.Table.from_arrays(arrays, names=[c for c, _ in columns])


class Tables:
    """Written by ingest (core/ingest/pipeline.py) before the document of the same file; listed only while that
    document is live, so a failed document write leaves no visible half."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._sandboxes: dict[str, tuple[tuple[tuple[str, str], ...], SqlSandbox]] = {}
        self._live_memo: dict[str, tuple[int, dict[str, str]]] = {}
        self._values: dict[tuple[str, str, int], list[Any]] = {}  # (physical, column, limit): written once, never changed
        self._lock = threading.Lock()

    # -- writes -----------------------------------------------------------------------------------------------------
    def put_table(self, workspace: str, doc_id: str, source: str, name: str, columns: Sequence[tuple[str, str]],
                  rows: Sequence[Sequence[Any]]) -> TableInfo:
        """Create (or replace) table `name` with these typed columns and rows, in one transaction. A table of the
        same name from another file that is still in the workspace is not replaced: StoreError says which."""
        if not columns:
            raise StoreError(f"table {name}: no columns")
        bad = [t for _, t in columns if t not in COLUMN_TYPES]
        if bad:
            raise StoreError(f"table {name}: unsupported column types {sorted(set(bad))}")
        physical = _physical(workspace, name, doc_id)
        frame = _arrow_table(columns, rows)
        with self._db.transaction() as cur:
            old = cur.execute("SELECT source, physical, doc_id, created_at > ? FROM ws_tables WHERE workspace_id = ? "
                              "AND name = ?", [now() - IN_FLIGHT, workspace, name]).fetchone()
            # Another file's table: kept while its document lives, or while it may still be on its way (a file of
            # the same ingest whose document is not written yet).
            if old is not None and old[0] != source and (self._live(cur, workspace, old[2]) or old[3]):
                raise StoreError(f"{source}: a table named '{name}' already comes from {old[0]}; rename one of the "
                                 "files (a table is named after its file's stem)")
            if old is not None:
                cur.execute(f"DROP TABLE IF EXISTS {_quote(old[1])}")
                cur.execute("DELETE FROM ws_tables WHERE workspace_id = ? AND name = ?", [workspace, name])
            cols = ", ".join(f"{_quote(c)} {t}" for c, t in columns)
            cur.execute(f"DROP TABLE IF EXISTS {_quote(physical)}")
            cur.execute(f"CREATE TABLE {_quote(physical)} (workspace_id VARCHAR, {cols})")
            cur.register("_table_rows", frame)
            try:
                names = ", ".join(_quote(c) for c, _ in columns)
                cur.execute(f"INSERT INTO {_quote(physical)} SELECT ?, {names} FROM _table_rows", [workspace])
            finally:
                cur.unregister("_table_rows")
            cur.execute("INSERT INTO ws_tables VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [workspace, name, doc_id, source, physical, json.dumps([list(c) for c in columns]),
                         len(rows), now()])
            self._drop_orphans(cur)
        return TableInfo(name, doc_id, source, tuple((c, t) for c, t in columns), len(rows))

    def drop_orphans(self) -> int:
        """Drop physical tables no live table row points to (a deleted document or workspace); returns how many."""
        with self._db.transaction() as cur:
            return self._drop_orphans(cur)

    @staticmethod
    def _live(cur: Cursor, workspace: str, doc_id: str) -> bool:
        return bool(cur.execute("SELECT count(*) FROM documents WHERE workspace_id = ? AND doc_id = ?",
                                [workspace, doc_id]).fetchone()[0])

    @staticmethod
    def _drop_orphans(cur: Cursor) -> int:
        # A row is written before its document (ingest), so a young row without a live document may be another
        # thread's file in flight: only rows older than IN_FLIGHT are judged orphans.
        cur.execute("DELETE FROM ws_tables t WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.workspace_id = "
                    "t.workspace_id AND d.doc_id = t.doc_id) AND t.created_at < ?", [now() - IN_FLIGHT])
        kept = {r[0] for r in cur.execute("SELECT physical FROM ws_tables").fetchall()}
        have = [r[0] for r in cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE starts_with(table_name, ?)",
            [PHYSICAL_PREFIX]).fetchall()]
        gone = [t for t in have if t not in kept]
        for t in gone:
            cur.execute(f"DROP TABLE {_quote(t)}")
        return len(gone)

    # -- reads ------------------------------------------------------------------------------------------------------
    def list(self, workspace: str = DEFAULT_WORKSPACE) -> list[TableInfo]:
        """The workspace's tables whose document is live, by name."""
        rows = self._db.cursor().execute(
            "SELECT t.name, t.doc_id, t.source, t.columns_json, t.n_rows, t.created_at FROM ws_tables t "
            "JOIN documents d ON d.workspace_id = t.workspace_id AND d.doc_id = t.doc_id WHERE t.workspace_id = ? "
            "ORDER BY t.name", [workspace]).fetchall()
        return [TableInfo(r[0], r[1], r[2], tuple((str(c), str(t)) for c, t in json.loads(r[3])), int(r[4]), r[5])
                for r in rows]

    def _physical_of(self, workspace: str, name: str) -> tuple[TableInfo, str]:
        info = next((t for t in self.list(workspace) if t.name == name), None)
        if info is None:
            raise StoreError(f"no table '{name}' in workspace '{workspace}'")
        row = self._db.cursor().execute("SELECT physical FROM ws_tables WHERE workspace_id = ? AND name = ?",
                                        [workspace, name]).fetchone()
        return info, str(row[0])

    def sample(self, workspace: str, name: str, n: int = 5) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """The table's first `n` rows, with its column names."""
        info, physical = self._physical_of(workspace, name)
        cols = [c for c, _ in info.columns]
        rows = self._db.cursor().execute(
            f"SELECT {', '.join(_quote(c) for c in cols)} FROM {_quote(physical)} LIMIT ?", [int(n)]).fetchall()
        return tuple(cols), [tuple(r) for r in rows]

    def values(self, workspace: str, name: str, column: str, limit: int = 500) -> list[Any]:
        """Distinct non-null values of a column, most frequent first (at most `limit`)."""
        physical = self._live_physical(workspace).get(name, "")
        memo = (physical, column, int(limit))
        if memo in self._values:  # read by the translator for every question: a physical table never changes
            return self._values[memo]
        info, physical = self._physical_of(workspace, name)
        if column not in {c for c, _ in info.columns}:
            raise StoreError(f"table '{name}' has no column '{column}'")
        q = _quote(column)
        rows = self._db.cursor().execute(
            f"SELECT {q} FROM {_quote(physical)} WHERE {q} IS NOT NULL GROUP BY {q} ORDER BY count(*) DESC, {q} "
            "LIMIT ?", [int(limit)]).fetchall()
        with self._lock:
            if len(self._values) > 4096:
                self._values.clear()
            self._values[memo] = [r[0] for r in rows]
        return self._values[memo]

    def sandbox(self, workspace: str = DEFAULT_WORKSPACE) -> SqlSandbox:
        """The workspace's SQL sandbox: a private connection holding copies of its tables, kept while its set of
        tables is the same (a physical table never changes once written: new content is a new one)."""
        live = self._live_physical(workspace)
        key = tuple(sorted(live.items()))
        with self._lock:
            hit = self._sandboxes.get(workspace)
            if hit is not None and hit[0] == key:
                return hit[1]
        frames = {}
        for info in self.list(workspace):
            cols = ", ".join(_quote(c) for c, _ in info.columns)
            frames[info.name] = self._db.cursor().execute(
                f"SELECT {cols} FROM {_quote(live[info.name])}").fetch_arrow_table()
        box = SqlSandbox(frames)
        with self._lock:
            old = self._sandboxes.get(workspace)
            self._sandboxes[workspace] = (key, box)
        if old is not None and old[1] is not box:
            old[1].close()
        return box

    def _live_physical(self, workspace: str) -> dict[str, str]:
        """{table name: physical table} of the workspace's live tables, re-read after any write to the database."""
        gen = self._db.generation
        hit = self._live_memo.get(workspace)
        if hit is not None and hit[0] == gen:
            return hit[1]
        rows = self._db.cursor().execute(
            "SELECT t.name, t.physical FROM ws_tables t JOIN documents d ON d.workspace_id = t.workspace_id AND "
            "d.doc_id = t.doc_id WHERE t.workspace_id = ?", [workspace]).fetchall()
        live = {r[0]: r[1] for r in rows}
        self._live_memo[workspace] = (gen, live)
        return live
