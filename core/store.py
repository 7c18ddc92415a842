"""The only module that imports duckdb: versioned schema, typed reads and writes, one transaction per document."""
from __future__ import annotations

import json
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import numpy as np

from core.types import DEFAULT_WORKSPACE, Chunk, Document, Trace

SCHEMA_VERSION = 1

# Every table carries workspace_id so separate workspaces (isolated corpora and caches) need no migration.
SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS workspaces (
        workspace_id VARCHAR PRIMARY KEY, name VARCHAR, corpus_version BIGINT DEFAULT 0, created_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS documents (
        workspace_id VARCHAR, doc_id VARCHAR, name VARCHAR, kind VARCHAR, size_bytes BIGINT,
        content_hash VARCHAR, lang VARCHAR, title VARCHAR, text VARCHAR, chunker VARCHAR, n_chunks INTEGER,
        ingested_at TIMESTAMP, PRIMARY KEY (workspace_id, doc_id))""",
    """CREATE TABLE IF NOT EXISTS chunks (
        workspace_id VARCHAR, chunk_id VARCHAR, doc_id VARCHAR, ordinal INTEGER, text VARCHAR,
        start_char INTEGER, end_char INTEGER, heading_path VARCHAR[], n_tokens INTEGER, lang VARCHAR,
        PRIMARY KEY (workspace_id, chunk_id))""",
    # variant names the text that was embedded: 'raw' now; contextualised variants sit beside it later.
    """CREATE TABLE IF NOT EXISTS vectors (
        workspace_id VARCHAR, chunk_id VARCHAR, model_id VARCHAR, variant VARCHAR, dim INTEGER, vec FLOAT[],
        PRIMARY KEY (workspace_id, chunk_id, model_id, variant))""",
    """CREATE TABLE IF NOT EXISTS embedding_cache (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, dim INTEGER, vec FLOAT[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
    """CREATE TABLE IF NOT EXISTS runs (
        workspace_id VARCHAR, run_id VARCHAR, kind VARCHAR, query VARCHAR, config_hash VARCHAR,
        corpus_version BIGINT, trace_json VARCHAR, created_at TIMESTAMP, PRIMARY KEY (workspace_id, run_id))""",
    """CREATE TABLE IF NOT EXISTS cache_events (
        workspace_id VARCHAR, cache VARCHAR, hits INTEGER, misses INTEGER, purpose VARCHAR, created_at TIMESTAMP)""",
)


class StoreError(RuntimeError):
    """A store operation failed; the message is fit for the user."""


@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    name: str
    kind: str
    size_bytes: int
    content_hash: str
    lang: str
    title: str
    chunker: str
    n_chunks: int
    ingested_at: datetime


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Store:
    """A DuckDB database. Reads use their own cursor; writes are serialised because Streamlit serves sessions
    from threads and DuckDB allows one writer per connection at a time."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        self._write_lock = threading.RLock()
        self._migrate()

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _cur(self) -> duckdb.DuckDBPyConnection:
        return self._con.cursor()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._write_lock:
            cur = self._cur()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    def _migrate(self) -> None:
        with self.transaction() as cur:
            for ddl in SCHEMA:
                cur.execute(ddl)
            row = cur.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                cur.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"database {self.path} has schema v{row[0]}, newer than this code (v{SCHEMA_VERSION})"
                )
        self.ensure_workspace(DEFAULT_WORKSPACE)

    def schema_version(self) -> int:
        row = self._cur().execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    def close(self) -> None:
        self._con.close()

    # -- workspaces ---------------------------------------------------------------------------------------------
    def ensure_workspace(self, workspace: str, name: str | None = None) -> None:
        with self._write_lock:
            self._cur().execute(
                "INSERT INTO workspaces VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING", [workspace, name or workspace, _now()]
            )

    def workspaces(self) -> list[str]:
        return [r[0] for r in self._cur().execute("SELECT workspace_id FROM workspaces ORDER BY 1").fetchall()]

    def corpus_version(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        row = self._cur().execute(
            "SELECT corpus_version FROM workspaces WHERE workspace_id = ?", [workspace]
        ).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _bump(cur: duckdb.DuckDBPyConnection, workspace: str) -> None:
        cur.execute("UPDATE workspaces SET corpus_version = corpus_version + 1 WHERE workspace_id = ?", [workspace])

    # -- documents ----------------------------------------------------------------------------------------------
    def put_document(
        self,
        doc: Document,
        chunks: Sequence[Chunk],
        vectors: np.ndarray | None,
        model_id: str,
        *,
        replace_doc_id: str | None = None,
    ) -> None:
        """Write one document, its chunks and their raw vectors in a single transaction (all or nothing).
        `replace_doc_id` removes an older version of the same file inside the same transaction."""
        ws = doc.workspace
        self.ensure_workspace(ws)
        if vectors is not None and len(vectors) != len(chunks):
            raise StoreError(f"{doc.name}: {len(chunks)} chunks but {len(vectors)} vectors")
        with self.transaction() as cur:
            if replace_doc_id is not None:
                self._delete_doc(cur, ws, replace_doc_id)
            cur.execute(
                "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [ws, doc.doc_id, doc.name, doc.kind, doc.size_bytes, doc.content_hash, doc.lang, doc.title,
                 doc.text, doc.chunker, len(chunks), _now()],
            )
            if chunks:
                cur.executemany(
                    "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                    [[ws, c.chunk_id, c.doc_id, c.ordinal, c.text, c.start, c.end, list(c.heading_path),
                      c.n_tokens, c.lang] for c in chunks],
                )
            if vectors is not None and len(chunks):
                self._put_vectors(cur, ws, [c.chunk_id for c in chunks], vectors, model_id, "raw")
            self._bump(cur, ws)

    @staticmethod
    def _put_vectors(
        cur: duckdb.DuckDBPyConnection, ws: str, chunk_ids: Sequence[str], vectors: np.ndarray, model_id: str,
        variant: str,
    ) -> None:
        dim = int(vectors.shape[1])
        cur.executemany(
            "INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?)",
            [[ws, cid, model_id, variant, dim, vec.tolist()] for cid, vec in zip(chunk_ids, vectors)],
        )

    def put_vectors(
        self, chunk_ids: Sequence[str], vectors: np.ndarray, model_id: str, variant: str = "raw",
        workspace: str = DEFAULT_WORKSPACE,
    ) -> None:
        """Add vectors for existing chunks (a newly chosen model or a new text variant)."""
        if not len(chunk_ids):
            return
        with self.transaction() as cur:
            self._put_vectors(cur, workspace, chunk_ids, vectors, model_id, variant)

    @staticmethod
    def _delete_doc(cur: duckdb.DuckDBPyConnection, ws: str, doc_id: str) -> None:
        cur.execute(
            "DELETE FROM vectors WHERE workspace_id = ? AND chunk_id IN "
            "(SELECT chunk_id FROM chunks WHERE workspace_id = ? AND doc_id = ?)",
            [ws, ws, doc_id],
        )
        cur.execute("DELETE FROM chunks WHERE workspace_id = ? AND doc_id = ?", [ws, doc_id])
        cur.execute("DELETE FROM documents WHERE workspace_id = ? AND doc_id = ?", [ws, doc_id])

    def delete_document(self, doc_id: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        with self.transaction() as cur:
            found = cur.execute(
                "SELECT count(*) FROM documents WHERE workspace_id = ? AND doc_id = ?", [workspace, doc_id]
            ).fetchone()[0]
            if not found:
                return False
            self._delete_doc(cur, workspace, doc_id)
            self._bump(cur, workspace)
        return True

    def documents(self, workspace: str = DEFAULT_WORKSPACE) -> list[DocumentRow]:
        rows = self._cur().execute(
            "SELECT doc_id, name, kind, size_bytes, content_hash, lang, title, chunker, n_chunks, ingested_at "
            "FROM documents WHERE workspace_id = ? ORDER BY name, doc_id",
            [workspace],
        ).fetchall()
        return [DocumentRow(*r) for r in rows]

    def find_document_by_name(self, name: str, workspace: str = DEFAULT_WORKSPACE) -> DocumentRow | None:
        return next((d for d in self.documents(workspace) if d.name == name), None)

    def document_text(self, doc_id: str, workspace: str = DEFAULT_WORKSPACE) -> str | None:
        row = self._cur().execute(
            "SELECT text FROM documents WHERE workspace_id = ? AND doc_id = ?", [workspace, doc_id]
        ).fetchone()
        return row[0] if row else None

    def count(self, table: str, workspace: str = DEFAULT_WORKSPACE) -> int:
        if table not in {"documents", "chunks", "vectors", "embedding_cache", "runs"}:
            raise StoreError(f"unknown table {table}")
        return int(self._cur().execute(f"SELECT count(*) FROM {table} WHERE workspace_id = ?", [workspace]).fetchone()[0])

    # -- chunks -------------------------------------------------------------------------------------------------
    _CHUNK_COLS = "chunk_id, doc_id, ordinal, text, start_char, end_char, heading_path, n_tokens, lang"

    @staticmethod
    def _chunk(row: tuple[Any, ...]) -> Chunk:
        cid, did, ordinal, text, s, e, hp, nt, lang = row
        return Chunk(cid, did, ordinal, text, s, e, tuple(hp or ()), nt, lang)

    def chunks(self, workspace: str = DEFAULT_WORKSPACE, doc_id: str | None = None) -> list[Chunk]:
        sql = f"SELECT {self._CHUNK_COLS} FROM chunks WHERE workspace_id = ?"
        params: list[Any] = [workspace]
        if doc_id is not None:
            sql += " AND doc_id = ?"
            params.append(doc_id)
        sql += " ORDER BY doc_id, ordinal"
        return [self._chunk(r) for r in self._cur().execute(sql, params).fetchall()]

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, Chunk]:
        if not chunk_ids:
            return {}
        rows = self._cur().execute(
            f"SELECT {self._CHUNK_COLS} FROM chunks WHERE workspace_id = ? AND list_contains(?, chunk_id)",
            [workspace, list(chunk_ids)],
        ).fetchall()
        return {r[0]: self._chunk(r) for r in rows}

    # -- vectors ------------------------------------------------------------------------------------------------
    def vectors(
        self, model_id: str, variant: str = "raw", workspace: str = DEFAULT_WORKSPACE
    ) -> tuple[list[str], np.ndarray]:
        """All vectors of one model and variant, in chunk order. Vectors of other models are never returned."""
        cur = self._cur()
        rows = cur.execute(
            "SELECT v.chunk_id, v.vec FROM vectors v JOIN chunks c USING (workspace_id, chunk_id) "
            "WHERE v.workspace_id = ? AND v.model_id = ? AND v.variant = ? ORDER BY c.doc_id, c.ordinal",
            [workspace, model_id, variant],
        ).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        ids = [r[0] for r in rows]
        return ids, np.asarray([r[1] for r in rows], dtype=np.float32)

    def chunks_missing_vectors(
        self, model_id: str, variant: str = "raw", workspace: str = DEFAULT_WORKSPACE
    ) -> list[Chunk]:
        rows = self._cur().execute(
            f"SELECT {', '.join('c.' + c.strip() for c in self._CHUNK_COLS.split(','))} FROM chunks c "
            "LEFT JOIN vectors v ON v.workspace_id = c.workspace_id AND v.chunk_id = c.chunk_id "
            "AND v.model_id = ? AND v.variant = ? WHERE c.workspace_id = ? AND v.chunk_id IS NULL "
            "ORDER BY c.doc_id, c.ordinal",
            [model_id, variant, workspace],
        ).fetchall()
        return [self._chunk(r) for r in rows]

    def vector_models(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, str, int]]:
        return [
            (r[0], r[1], int(r[2]))
            for r in self._cur().execute(
                "SELECT model_id, variant, count(*) FROM vectors WHERE workspace_id = ? GROUP BY 1, 2 ORDER BY 1, 2",
                [workspace],
            ).fetchall()
        ]

    # -- embedding cache ----------------------------------------------------------------------------------------
    def cached_embeddings(
        self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
    ) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        rows = self._cur().execute(
            "SELECT text_sha256, vec FROM embedding_cache WHERE workspace_id = ? AND model_id = ? "
            "AND list_contains(?, text_sha256)",
            [workspace, model_id, list(set(hashes))],
        ).fetchall()
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    def cache_embeddings(
        self, model_id: str, items: dict[str, np.ndarray], workspace: str = DEFAULT_WORKSPACE
    ) -> None:
        if not items:
            return
        now = _now()
        with self.transaction() as cur:
            cur.executemany(
                "INSERT OR IGNORE INTO embedding_cache VALUES (?,?,?,?,?,?)",
                [[workspace, model_id, h, int(v.shape[0]), v.tolist(), now] for h, v in items.items()],
            )

    def record_cache_event(
        self, cache: str, hits: int, misses: int, purpose: str, workspace: str = DEFAULT_WORKSPACE
    ) -> None:
        with self._write_lock:
            self._cur().execute(
                "INSERT INTO cache_events VALUES (?,?,?,?,?,?)", [workspace, cache, hits, misses, purpose, _now()]
            )

    def cache_events(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, int, int, str, datetime]]:
        return self._cur().execute(
            "SELECT cache, hits, misses, purpose, created_at FROM cache_events WHERE workspace_id = ? ORDER BY created_at",
            [workspace],
        ).fetchall()

    # -- runs ---------------------------------------------------------------------------------------------------
    def log_trace(self, trace: Trace, kind: str = "query") -> str:
        run_id = uuid.uuid4().hex
        with self._write_lock:
            self._cur().execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                [trace.workspace, run_id, kind, trace.query, trace.config_hash, trace.corpus_version,
                 json.dumps(trace.to_dict()), _now()],
            )
        return run_id

    def recent_runs(self, workspace: str = DEFAULT_WORKSPACE, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._cur().execute(
            "SELECT run_id, kind, query, config_hash, corpus_version, trace_json, created_at FROM runs "
            "WHERE workspace_id = ? ORDER BY created_at DESC LIMIT ?",
            [workspace, limit],
        ).fetchall()
        keys = ("run_id", "kind", "query", "config_hash", "corpus_version", "trace", "created_at")
        return [dict(zip(keys, (*r[:5], json.loads(r[5]), r[6]))) for r in rows]
