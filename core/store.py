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
    # Evaluation: one row per configuration run over a golden set (metrics are means over repeats), and one row
    # per question with its scores and a compact per-stage record (ids, ranks, gold hits) to reopen it later.
    """CREATE TABLE IF NOT EXISTS eval_runs (
        workspace_id VARCHAR, eval_id VARCHAR, dataset VARCHAR, config_name VARCHAR, config_hash VARCHAR,
        config_json VARCHAR, corpus_version BIGINT, repeats INTEGER, n_queries INTEGER, summary_json VARCHAR,
        created_at TIMESTAMP, PRIMARY KEY (workspace_id, eval_id))""",
    """CREATE TABLE IF NOT EXISTS eval_results (
        workspace_id VARCHAR, eval_id VARCHAR, query_id VARCHAR, query VARCHAR, qtype VARCHAR, answerable BOOLEAN,
        result_json VARCHAR, PRIMARY KEY (workspace_id, eval_id, query_id))""",
    # LLM layer (core/llm.py, core/context.py): chunk contexts live apart from the chunk text, one per variant
    # ('heuristic', 'llm'); every LLM call is a usage_ledger row; a submitted Message Batch is remembered so a
    # resumed run polls it instead of paying for it twice.
    """CREATE TABLE IF NOT EXISTS chunk_contexts (
        workspace_id VARCHAR, chunk_id VARCHAR, variant VARCHAR, context VARCHAR, model VARCHAR,
        created_at TIMESTAMP, PRIMARY KEY (workspace_id, chunk_id, variant))""",
    """CREATE TABLE IF NOT EXISTS usage_ledger (
        workspace_id VARCHAR, call_id VARCHAR, purpose VARCHAR, model VARCHAR, input_tokens BIGINT,
        output_tokens BIGINT, cache_write_tokens BIGINT, cache_read_tokens BIGINT, usd DOUBLE, usd_uncached DOUBLE,
        latency_ms DOUBLE, ref_id VARCHAR, run_id VARCHAR, batch BOOLEAN, cache_ttl VARCHAR, note VARCHAR,
        created_at TIMESTAMP, PRIMARY KEY (workspace_id, call_id))""",
    """CREATE TABLE IF NOT EXISTS llm_batches (
        workspace_id VARCHAR, batch_id VARCHAR, purpose VARCHAR, variant VARCHAR, model VARCHAR, run_id VARCHAR,
        n_requests INTEGER, status VARCHAR, chunk_ids VARCHAR[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, batch_id))""",
    # GraphRAG (core/graph/). Per-chunk extractions (graph_mentions, graph_relations) are the chunk provenance of
    # every node and edge; node_id / src_id / dst_id hold the current resolution. graph_nodes and graph_edges are
    # aggregates over them, rewritten in bulk for the affected keys (no primary key: an index would only slow the
    # rewrites). Synonyms and review decisions are user data and survive rebuilds. Summaries are keyed by the
    # community's membership hash, so a community whose members did not change keeps its summary.
    """CREATE TABLE IF NOT EXISTS graph_chunks (
        workspace_id VARCHAR, chunk_id VARCHAR, doc_id VARCHAR, builder VARCHAR, extracted_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS graph_mentions (
        workspace_id VARCHAR, chunk_id VARCHAR, doc_id VARCHAR, norm VARCHAR, surface VARCHAR, type VARCHAR,
        count INTEGER, description VARCHAR, node_id VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS graph_relations (
        workspace_id VARCHAR, chunk_id VARCHAR, doc_id VARCHAR, src_norm VARCHAR, dst_norm VARCHAR, weight DOUBLE,
        description VARCHAR, src_id VARCHAR, dst_id VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS graph_nodes (
        workspace_id VARCHAR, node_id VARCHAR, name VARCHAR, type VARCHAR, description VARCHAR, n_chunks INTEGER,
        n_mentions INTEGER, n_docs INTEGER, aliases VARCHAR[])""",
    """CREATE TABLE IF NOT EXISTS graph_edges (
        workspace_id VARCHAR, src VARCHAR, dst VARCHAR, weight DOUBLE, n_chunks INTEGER, description VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS graph_synonyms (
        workspace_id VARCHAR, line_no INTEGER, names VARCHAR[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, line_no))""",
    """CREATE TABLE IF NOT EXISTS graph_merge_queue (
        workspace_id VARCHAR, item_id VARCHAR, keep_id VARCHAR, other_id VARCHAR, keep_name VARCHAR,
        other_name VARCHAR, score DOUBLE, status VARCHAR, created_at TIMESTAMP, decided_at TIMESTAMP,
        PRIMARY KEY (workspace_id, item_id))""",
    """CREATE TABLE IF NOT EXISTS graph_communities (
        workspace_id VARCHAR, level INTEGER, community_id VARCHAR, parent_id VARCHAR, node_id VARCHAR,
        members_hash VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS graph_community_summaries (
        workspace_id VARCHAR, members_hash VARCHAR, level INTEGER, community_id VARCHAR, title VARCHAR,
        summary VARCHAR, mode VARCHAR, usage_json VARCHAR, created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, members_hash))""",
    # Node-name vectors (merge suggestions, seeding local search), bulk-written: there are many short names.
    """CREATE TABLE IF NOT EXISTS graph_name_vectors (
        workspace_id VARCHAR, model_id VARCHAR, name_sha256 VARCHAR, vec FLOAT[])""",
    """CREATE TABLE IF NOT EXISTS graph_state (
        workspace_id VARCHAR PRIMARY KEY, version BIGINT, corpus_version BIGINT, builder VARCHAR,
        settings_json VARCHAR, stats_json VARCHAR, built_at TIMESTAMP)""",
    # Late-interaction rerank (core/rerank.py): token vectors of a text (float16), their token ids and character
    # spans, keyed by model and sha256 of the exact text, so a restart does not re-read every candidate.
    """CREATE TABLE IF NOT EXISTS token_vectors (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, n_tokens INTEGER, dim INTEGER,
        ids BLOB, vecs BLOB, spans BLOB, created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
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
        if vectors is not None and len(vectors) != len(chunks):
            raise StoreError(f"{doc.name}: {len(chunks)} chunks but {len(vectors)} vectors")
        with self.transaction() as cur:
            # ensure_workspace inside the document's transaction: on its own it was one more commit (an fsync) per file.
            cur.execute("INSERT INTO workspaces VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING", [ws, ws, _now()])
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
        cur.register("_new_vectors", Store._vector_frame(chunk_ids, vectors))
        try:
            cur.execute("INSERT OR REPLACE INTO vectors SELECT ?, key, ?, ?, ?, vec FROM _new_vectors",
                        [ws, model_id, variant, dim])
        finally:
            cur.unregister("_new_vectors")

    @staticmethod
    def _vector_frame(keys: Sequence[str], vectors: np.ndarray) -> Any:
        """(key, vec) rows as one scan-able frame. Why: executemany binds FLOAT[] lists row by row, measured here
        at several ms per row; one INSERT ... SELECT from a frame costs about as much as one row (bench/README.md)."""
        import pandas as pd

        rows = np.asarray(vectors, dtype=np.float32)
        return pd.DataFrame({"key": pd.Series(list(keys), dtype="object"),
                             "vec": pd.Series(list(rows), dtype="object")})

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
        cur.execute(
            "DELETE FROM chunk_contexts WHERE workspace_id = ? AND chunk_id IN "
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

    def document_titles(self, doc_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        """doc_id -> title (the file name when the document has no title), for the documents asked about."""
        if not doc_ids:
            return {}
        rows = self._cur().execute(
            "SELECT doc_id, coalesce(nullif(title, ''), name) FROM documents WHERE workspace_id = ? "
            "AND doc_id IN (SELECT unnest(?))", [workspace, list(dict.fromkeys(doc_ids))]).fetchall()
        return {r[0]: r[1] for r in rows}

    def find_document_by_name(self, name: str, workspace: str = DEFAULT_WORKSPACE) -> DocumentRow | None:
        # Filtered in SQL: ingest asks once per file, and listing every document each time grew as N^2.
        row = self._cur().execute(
            "SELECT doc_id, name, kind, size_bytes, content_hash, lang, title, chunker, n_chunks, ingested_at "
            "FROM documents WHERE workspace_id = ? AND name = ? ORDER BY doc_id LIMIT 1",
            [workspace, name],
        ).fetchone()
        return DocumentRow(*row) if row else None

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
        hashes = list(items)
        matrix = np.stack([np.asarray(items[h], dtype=np.float32).ravel() for h in hashes])
        with self.transaction() as cur:
            cur.register("_new_cache", self._vector_frame(hashes, matrix))
            try:
                cur.execute("INSERT OR IGNORE INTO embedding_cache SELECT ?, ?, key, ?, vec, ? FROM _new_cache",
                            [workspace, model_id, int(matrix.shape[1]), now])
            finally:
                cur.unregister("_new_cache")

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

    # -- evaluation runs (owned by the evaluation lab: core/eval_run.py) ------------------------------------------
    def save_eval_run(self, workspace: str, run: dict[str, Any], results: Sequence[dict[str, Any]]) -> str:
        """Store one configuration's run over a golden set and its per-question results in one transaction.
        `run` holds eval_id, dataset, config_name, config_hash, config (dict), corpus_version, repeats and the rest
        of its summary (metrics, spread, stage recall, ...), which is kept as JSON."""
        eval_id = run.get("eval_id") or uuid.uuid4().hex
        fixed = {"eval_id", "dataset", "config_name", "config_hash", "config", "corpus_version", "repeats"}
        summary = {k: v for k, v in run.items() if k not in fixed}
        self.ensure_workspace(workspace)
        with self.transaction() as cur:
            cur.execute(
                "INSERT INTO eval_runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [workspace, eval_id, run["dataset"], run["config_name"], run["config_hash"],
                 json.dumps(run["config"], sort_keys=True), int(run["corpus_version"]), int(run["repeats"]),
                 len(results), json.dumps(summary), _now()],
            )
            if results:
                cur.executemany(
                    "INSERT INTO eval_results VALUES (?,?,?,?,?,?,?)",
                    [[workspace, eval_id, r["qid"], r["query"], r["qtype"], bool(r["answerable"]), json.dumps(r)]
                     for r in results],
                )
        return eval_id

    def eval_runs(self, workspace: str = DEFAULT_WORKSPACE, dataset: str | None = None,
                  limit: int = 200, *, eval_id: str | None = None) -> list[dict[str, Any]]:
        """Past runs, newest first, without their per-question results."""
        sql = ("SELECT eval_id, dataset, config_name, config_hash, config_json, corpus_version, repeats, n_queries, "
               "summary_json, created_at FROM eval_runs WHERE workspace_id = ?")
        params: list[Any] = [workspace]
        for col, value in (("dataset", dataset), ("eval_id", eval_id)):
            if value is not None:
                sql += f" AND {col} = ?"
                params.append(value)
        sql += " ORDER BY created_at DESC LIMIT ?"
        params.append(limit)
        out = []
        for r in self._cur().execute(sql, params).fetchall():
            out.append({"eval_id": r[0], "dataset": r[1], "config_name": r[2], "config_hash": r[3],
                        "config": json.loads(r[4]), "corpus_version": r[5], "repeats": r[6], "n_queries": r[7],
                        **json.loads(r[8]), "created_at": r[9]})
        return out

    def eval_run(self, eval_id: str, workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any] | None:
        """One run with its per-question results (key 'results'), or None."""
        found = self.eval_runs(workspace, eval_id=eval_id)
        if not found:
            return None
        rows = self._cur().execute(
            "SELECT result_json FROM eval_results WHERE workspace_id = ? AND eval_id = ? ORDER BY query_id",
            [workspace, eval_id],
        ).fetchall()
        return {**found[0], "results": [json.loads(r[0]) for r in rows]}

    def delete_eval_run(self, eval_id: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        with self.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM eval_runs WHERE workspace_id = ? AND eval_id = ?",
                            [workspace, eval_id]).fetchone()[0]
            cur.execute("DELETE FROM eval_results WHERE workspace_id = ? AND eval_id = ?", [workspace, eval_id])
            cur.execute("DELETE FROM eval_runs WHERE workspace_id = ? AND eval_id = ?", [workspace, eval_id])
        return bool(n)

    # -- LLM layer: chunk contexts, usage ledger, message batches (owned by core/llm.py and core/context.py) -----
    def put_contexts(
        self, items: Sequence[tuple[str, str]], variant: str, model: str, workspace: str = DEFAULT_WORKSPACE
    ) -> None:
        """Store (chunk_id, context) pairs of one variant; written as soon as each arrives so a stopped run keeps
        everything it paid for."""
        if not items:
            return
        now = _now()
        with self.transaction() as cur:
            cur.executemany(
                "INSERT OR REPLACE INTO chunk_contexts VALUES (?,?,?,?,?,?)",
                [[workspace, cid, variant, ctx, model, now] for cid, ctx in items],
            )
            # A vector embedded before this context existed no longer matches the variant's text.
            cur.execute("DELETE FROM vectors WHERE workspace_id = ? AND variant = ? AND list_contains(?, chunk_id)",
                        [workspace, variant, [cid for cid, _ in items]])

    def contexts(
        self, variant: str, workspace: str = DEFAULT_WORKSPACE, chunk_ids: Sequence[str] | None = None
    ) -> dict[str, str]:
        sql = "SELECT chunk_id, context FROM chunk_contexts WHERE workspace_id = ? AND variant = ?"
        params: list[Any] = [workspace, variant]
        if chunk_ids is not None:
            if not chunk_ids:
                return {}
            sql += " AND list_contains(?, chunk_id)"
            params.append(list(chunk_ids))
        return dict(self._cur().execute(sql, params).fetchall())

    def context_models(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> dict[str, int]:
        rows = self._cur().execute(
            "SELECT model, count(*) FROM chunk_contexts WHERE workspace_id = ? AND variant = ? GROUP BY 1",
            [workspace, variant],
        ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def context_state(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> str:
        """A fingerprint that moves whenever contexts of a variant are written or removed (index cache key)."""
        n, last = self._cur().execute(
            "SELECT count(*), max(created_at) FROM chunk_contexts WHERE workspace_id = ? AND variant = ?",
            [workspace, variant],
        ).fetchone()
        return f"{n}:{last}"

    def delete_contexts(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> int:
        with self.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM chunk_contexts WHERE workspace_id = ? AND variant = ?",
                            [workspace, variant]).fetchone()[0]
            cur.execute("DELETE FROM chunk_contexts WHERE workspace_id = ? AND variant = ?", [workspace, variant])
            cur.execute("DELETE FROM vectors WHERE workspace_id = ? AND variant = ?", [workspace, variant])
        return int(n)

    def record_usage(self, entry: Any) -> None:
        """One LLM call (a core.costs.LedgerEntry). Holds tokens, dollars and ids only: never a key or a prompt."""
        with self._write_lock:
            self._cur().execute(
                "INSERT INTO usage_ledger VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [entry.workspace, uuid.uuid4().hex, entry.purpose, entry.model, entry.input_tokens,
                 entry.output_tokens, entry.cache_write_tokens, entry.cache_read_tokens, entry.usd, entry.usd_uncached,
                 entry.latency_ms, entry.ref_id, entry.run_id, entry.batch, entry.cache_ttl, entry.note, _now()],
            )

    def usage_ledger(
        self, workspace: str = DEFAULT_WORKSPACE, *, purpose: str | None = None, run_id: str | None = None,
        limit: int | None = None,
    ) -> list[Any]:
        """Ledger rows as core.costs.LedgerEntry, oldest first."""
        from core.costs import LedgerEntry

        sql = ("SELECT purpose, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, usd, "
               "usd_uncached, latency_ms, ref_id, run_id, batch, cache_ttl, note, workspace_id, created_at "
               "FROM usage_ledger WHERE workspace_id = ?")
        params: list[Any] = [workspace]
        for col, value in (("purpose", purpose), ("run_id", run_id)):
            if value is not None:
                sql += f" AND {col} = ?"
                params.append(value)
        sql += " ORDER BY created_at, call_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [LedgerEntry(*r) for r in self._cur().execute(sql, params).fetchall()]

    def put_batch(
        self, batch_id: str, *, purpose: str, variant: str, model: str, run_id: str, chunk_ids: Sequence[str],
        status: str = "in_progress", workspace: str = DEFAULT_WORKSPACE,
    ) -> None:
        """Remember a submitted batch and the chunks in it (custom id r<i> is chunk_ids[i])."""
        with self._write_lock:
            self._cur().execute(
                "INSERT OR REPLACE INTO llm_batches VALUES (?,?,?,?,?,?,?,?,?,?)",
                [workspace, batch_id, purpose, variant, model, run_id, len(chunk_ids), status, list(chunk_ids),
                 _now()],
            )

    def set_batch_status(self, batch_id: str, status: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        with self._write_lock:
            self._cur().execute("UPDATE llm_batches SET status = ? WHERE workspace_id = ? AND batch_id = ?",
                                [status, workspace, batch_id])

    def open_batches(self, purpose: str, variant: str, workspace: str = DEFAULT_WORKSPACE) -> list[dict[str, Any]]:
        """Submitted batches whose results have not been collected yet, oldest first."""
        rows = self._cur().execute(
            "SELECT batch_id, model, run_id, n_requests, status, chunk_ids, created_at FROM llm_batches "
            "WHERE workspace_id = ? AND purpose = ? AND variant = ? AND status <> 'collected' ORDER BY created_at",
            [workspace, purpose, variant],
        ).fetchall()
        keys = ("batch_id", "model", "run_id", "n_requests", "status", "chunk_ids", "created_at")
        return [dict(zip(keys, r)) for r in rows]

    # -- GraphRAG (owned by core/graph/: extraction provenance, aggregates, resolution, communities) -------------------
    @staticmethod
    def _graph_frame(cur: duckdb.DuckDBPyConnection, name: str, columns: Sequence[str],
                     rows: Sequence[Sequence[Any]]) -> None:
        """Register rows as a scan-able relation: bulk inserts and hash joins instead of per-row statements."""
        import pandas as pd

        data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
        frame = pd.DataFrame({c: pd.Series(v, dtype="object" if not v or isinstance(v[0], (list, tuple)) else None)
                              for c, v in data.items()})
        cur.register(name, frame)

    def _graph_insert(self, cur: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str],
                      rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        self._graph_frame(cur, "_graph_rows", columns, rows)
        try:
            cols = ", ".join(columns)
            cur.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _graph_rows")
        finally:
            cur.unregister("_graph_rows")

    def graph_state(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any] | None:
        row = self._cur().execute(
            "SELECT version, corpus_version, builder, settings_json, stats_json, built_at FROM graph_state "
            "WHERE workspace_id = ?", [workspace]).fetchone()
        if row is None:
            return None
        return {"version": int(row[0]), "corpus_version": int(row[1]), "builder": row[2],
                "settings": json.loads(row[3] or "{}"), "stats": json.loads(row[4] or "{}"), "built_at": row[5]}

    def graph_set_state(self, *, corpus_version: int, builder: str, settings: dict[str, Any], stats: dict[str, Any],
                        workspace: str = DEFAULT_WORKSPACE) -> int:
        """Record a finished build or update; the version moves so in-memory graph caches reload."""
        with self.transaction() as cur:
            old = cur.execute("SELECT version FROM graph_state WHERE workspace_id = ?", [workspace]).fetchone()
            version = (int(old[0]) if old else 0) + 1
            cur.execute("DELETE FROM graph_state WHERE workspace_id = ?", [workspace])
            cur.execute("INSERT INTO graph_state VALUES (?,?,?,?,?,?,?)",
                        [workspace, version, corpus_version, builder, json.dumps(settings, sort_keys=True),
                         json.dumps(stats, sort_keys=True), _now()])
        return version

    def graph_seen_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        """chunk_id -> doc_id of every chunk the graph holds extractions for."""
        return dict(self._cur().execute(
            "SELECT chunk_id, doc_id FROM graph_chunks WHERE workspace_id = ?", [workspace]).fetchall())

    def graph_add_extractions(
        self, chunk_rows: Sequence[tuple[str, str, str]], mention_rows: Sequence[tuple[str, str, str, str, str, int, str]],
        relation_rows: Sequence[tuple[str, str, str, str, float, str]], workspace: str = DEFAULT_WORKSPACE,
    ) -> None:
        """Add the extractions of new chunks: (chunk_id, doc_id, builder), (chunk_id, doc_id, norm, surface, type,
        count, description), (chunk_id, doc_id, src_norm, dst_norm, weight, description). Node ids are set later
        by graph_apply_resolution."""
        now = _now()
        with self.transaction() as cur:
            self._graph_insert(cur, "graph_chunks", ("workspace_id", "chunk_id", "doc_id", "builder", "extracted_at"),
                               [(workspace, *r, now) for r in chunk_rows])
            self._graph_insert(cur, "graph_mentions", ("workspace_id", "chunk_id", "doc_id", "norm", "surface", "type",
                                                       "count", "description"),
                               [(workspace, *r) for r in mention_rows])
            self._graph_insert(cur, "graph_relations", ("workspace_id", "chunk_id", "doc_id", "src_norm", "dst_norm",
                                                        "weight", "description"),
                               [(workspace, *r) for r in relation_rows])

    def graph_unresolved_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> list[str]:
        """Chunks with stored extractions that were never resolved (an update stopped part-way)."""
        return [r[0] for r in self._cur().execute(
            "SELECT DISTINCT chunk_id FROM graph_mentions WHERE workspace_id = ? AND node_id IS NULL ORDER BY 1",
            [workspace]).fetchall()]

    def graph_node_ids_for_chunks(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> set[str]:
        """Nodes whose aggregates depend on these chunks: every mention, and both ends of every relation."""
        if not chunk_ids:
            return set()
        cur = self._cur()
        self._graph_frame(cur, "_graph_ids", ("chunk_id",), [(c,) for c in chunk_ids])
        rows = cur.execute(
            "SELECT node_id FROM graph_mentions WHERE workspace_id = ? AND chunk_id IN (SELECT chunk_id FROM _graph_ids) "
            "UNION SELECT src_id FROM graph_relations WHERE workspace_id = ? AND chunk_id IN "
            "(SELECT chunk_id FROM _graph_ids) UNION SELECT dst_id FROM graph_relations WHERE workspace_id = ? AND "
            "chunk_id IN (SELECT chunk_id FROM _graph_ids)", [workspace] * 3).fetchall()
        cur.unregister("_graph_ids")
        return {r[0] for r in rows if r[0] is not None}

    def graph_remove_chunks(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> set[str]:
        """Drop the extractions of chunks that left the corpus; returns the node ids that need re-aggregating."""
        affected = self.graph_node_ids_for_chunks(chunk_ids, workspace)
        if not chunk_ids:
            return affected
        with self.transaction() as cur:
            self._graph_frame(cur, "_graph_ids", ("chunk_id",), [(c,) for c in chunk_ids])
            for table in ("graph_chunks", "graph_mentions", "graph_relations"):
                cur.execute(f"DELETE FROM {table} WHERE workspace_id = ? AND chunk_id IN "
                            "(SELECT chunk_id FROM _graph_ids)", [workspace])
            cur.unregister("_graph_ids")
        return affected

    def graph_elements(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, str]]:
        """Distinct (norm, type) pairs: the atoms entity resolution maps to nodes."""
        return self._cur().execute(
            "SELECT DISTINCT norm, type FROM graph_mentions WHERE workspace_id = ? ORDER BY 1, 2", [workspace]
        ).fetchall()

    def graph_apply_resolution(self, mapping: dict[str, str], *, split_by_type: bool,
                               chunk_ids: Sequence[str] | None = None, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Set node ids from element ids (norm, or norm|type): identity unless `mapping` says otherwise. Relation
        ends take the node id of the same chunk's mention with that norm. `chunk_ids` limits it to new rows."""
        elem = "norm || '|' || type" if split_by_type else "norm"
        with self.transaction() as cur:
            scope, params = "", [workspace]
            if chunk_ids is not None:
                self._graph_frame(cur, "_graph_ids", ("chunk_id",), [(c,) for c in chunk_ids])
                scope = " AND chunk_id IN (SELECT chunk_id FROM _graph_ids)"
            cur.execute(f"UPDATE graph_mentions SET node_id = {elem} WHERE workspace_id = ?{scope}", params)
            if mapping:
                self._graph_frame(cur, "_graph_map", ("element", "node_id"), sorted(mapping.items()))
                cur.execute(f"UPDATE graph_mentions SET node_id = _graph_map.node_id FROM _graph_map "
                            f"WHERE _graph_map.element = {elem} AND workspace_id = ?{scope}", params)
                cur.unregister("_graph_map")
            r_scope = scope.replace("chunk_id", "r.chunk_id", 1) if scope else ""
            for end in ("src", "dst"):
                cur.execute(f"UPDATE graph_relations AS r SET {end}_id = m.node_id FROM graph_mentions AS m "
                            f"WHERE m.workspace_id = r.workspace_id AND m.chunk_id = r.chunk_id "
                            f"AND m.norm = r.{end}_norm AND r.workspace_id = ?{r_scope}", params)
            if chunk_ids is not None:
                cur.unregister("_graph_ids")

    def graph_refresh(self, node_ids: set[str] | None, display: dict[str, str] | None = None,
                      workspace: str = DEFAULT_WORKSPACE) -> None:
        """Re-aggregate nodes and edges from their provenance: all of them (None) or only those touching
        `node_ids`. Names are the most frequent surface form unless the synonym list fixes one (`display`).
        Ties break alphabetically so an incremental update and a full rebuild write the same rows."""
        display = display or {}
        with self.transaction() as cur:
            self._graph_frame(cur, "_graph_disp", ("node_id", "name"), sorted(display.items()) or [("", "")])
            if node_ids is None:
                cur.execute("DELETE FROM graph_nodes WHERE workspace_id = ?", [workspace])
                cur.execute("DELETE FROM graph_edges WHERE workspace_id = ?", [workspace])
                m_scope = r_scope = ""
            else:
                self._graph_frame(cur, "_graph_aff", ("node_id",), [(n,) for n in sorted(node_ids)] or [("",)])
                cur.execute("DELETE FROM graph_nodes WHERE workspace_id = ? AND node_id IN "
                            "(SELECT node_id FROM _graph_aff)", [workspace])
                cur.execute("DELETE FROM graph_edges WHERE workspace_id = ? AND (src IN (SELECT node_id FROM _graph_aff) "
                            "OR dst IN (SELECT node_id FROM _graph_aff))", [workspace])
                m_scope = " AND node_id IN (SELECT node_id FROM _graph_aff)"
                r_scope = (" AND (src_id IN (SELECT node_id FROM _graph_aff) OR "
                           "dst_id IN (SELECT node_id FROM _graph_aff))")
            cur.execute(f"""
                INSERT INTO graph_nodes
                WITH m AS (SELECT * FROM graph_mentions WHERE workspace_id = ? AND node_id IS NOT NULL{m_scope}),
                s AS (SELECT node_id, surface, sum(count) AS c FROM m GROUP BY node_id, surface),
                nm AS (SELECT node_id, first(surface ORDER BY c DESC, surface) AS name FROM s GROUP BY node_id),
                t AS (SELECT node_id, type, sum(count) AS c FROM m GROUP BY node_id, type),
                tp AS (SELECT node_id, first(type ORDER BY c DESC, type) AS type FROM t GROUP BY node_id),
                ag AS (SELECT node_id, count(DISTINCT chunk_id) AS n_chunks, sum(count) AS n_mentions,
                              count(DISTINCT doc_id) AS n_docs, list_sort(list_distinct(list(norm))) AS aliases,
                              list_sort(list_distinct(list(description) FILTER (WHERE description <> ''))) AS descs
                       FROM m GROUP BY node_id)
                SELECT ?, ag.node_id, coalesce(d.name, nm.name), tp.type,
                       coalesce(array_to_string(list_slice(ag.descs, 1, 3), ' | '), ''),
                       ag.n_chunks, ag.n_mentions, ag.n_docs, ag.aliases
                FROM ag JOIN nm USING (node_id) JOIN tp USING (node_id) LEFT JOIN _graph_disp AS d USING (node_id)
            """, [workspace, workspace])
            cur.execute(f"""
                INSERT INTO graph_edges
                WITH r AS (SELECT chunk_id, least(src_id, dst_id) AS a, greatest(src_id, dst_id) AS b, weight,
                                  description FROM graph_relations
                           WHERE workspace_id = ? AND src_id <> dst_id{r_scope}),
                pc AS (SELECT a, b, chunk_id, max(weight) AS w,
                              first(description ORDER BY weight DESC, description) AS d FROM r GROUP BY a, b, chunk_id)
                SELECT ?, a, b, sum(w), count(*),
                       coalesce(array_to_string(list_slice(list_sort(list_distinct(list(d) FILTER (WHERE d <> ''))),
                                                           1, 3), ' | '), '')
                FROM pc GROUP BY a, b
            """, [workspace, workspace])
            cur.unregister("_graph_disp")
            if node_ids is not None:
                cur.unregister("_graph_aff")

    def graph_nodes(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[Any, ...]]:
        """(node_id, name, type, description, n_chunks, n_mentions, n_docs, aliases), ordered by node id."""
        return self._cur().execute(
            "SELECT node_id, name, type, description, n_chunks, n_mentions, n_docs, aliases FROM graph_nodes "
            "WHERE workspace_id = ? ORDER BY node_id", [workspace]).fetchall()

    def graph_edges(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, str, float, int, str]]:
        """(src, dst, weight, n_chunks, description) with src < dst, ordered."""
        return self._cur().execute(
            "SELECT src, dst, weight, n_chunks, description FROM graph_edges WHERE workspace_id = ? ORDER BY src, dst",
            [workspace]).fetchall()

    def graph_edge_arrays(self, workspace: str = DEFAULT_WORKSPACE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All edges as column arrays (src ids, dst ids, weights), ordered: the bulk read for graph snapshots."""
        got = self._cur().execute(
            "SELECT src, dst, weight FROM graph_edges WHERE workspace_id = ? ORDER BY src, dst", [workspace]
        ).fetchnumpy()
        return (np.asarray(got["src"], dtype=object), np.asarray(got["dst"], dtype=object),
                np.asarray(got["weight"], dtype=np.float64))

    def graph_all_node_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, np.ndarray]:
        """Provenance of every node as columns (node_id, chunk_id, doc_id, mentions): the bulk read for snapshots."""
        return self._cur().execute(
            "SELECT node_id, chunk_id, doc_id, sum(count)::INTEGER AS mentions FROM graph_mentions "
            "WHERE workspace_id = ? AND node_id IS NOT NULL GROUP BY ALL ORDER BY node_id, chunk_id", [workspace]
        ).fetchnumpy()

    def graph_node_chunks(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                          ) -> list[tuple[str, str, str, int]]:
        """Provenance of nodes: (node_id, chunk_id, doc_id, mentions)."""
        if not node_ids:
            return []
        return self._cur().execute(
            "SELECT node_id, chunk_id, doc_id, sum(count)::INTEGER FROM graph_mentions WHERE workspace_id = ? AND "
            "node_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL ORDER BY node_id, chunk_id",
            [workspace, list(node_ids)]).fetchall()

    def graph_edge_chunks(self, pairs: Sequence[tuple[str, str]], workspace: str = DEFAULT_WORKSPACE
                          ) -> list[tuple[str, str, str, str, float, str]]:
        """Provenance of edges: (a, b, chunk_id, doc_id, weight, description) for the given pairs (a < b)."""
        if not pairs:
            return []
        ends = sorted({n for p in pairs for n in p})
        keys = sorted({f"{min(p)}\x1f{max(p)}" for p in pairs})
        return self._cur().execute(
            "SELECT a, b, chunk_id, first(doc_id), max(weight), first(description ORDER BY weight DESC, description) "
            "FROM (SELECT least(src_id, dst_id) AS a, greatest(src_id, dst_id) AS b, chunk_id, doc_id, weight, "
            "description FROM graph_relations WHERE workspace_id = ? AND src_id IN (SELECT unnest(?::VARCHAR[])) "
            "AND dst_id IN (SELECT unnest(?::VARCHAR[]))) WHERE a || chr(31) || b IN (SELECT unnest(?::VARCHAR[])) "
            "GROUP BY a, b, chunk_id ORDER BY a, b, chunk_id", [workspace, ends, ends, keys]).fetchall()

    def graph_chunk_nodes(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, str]]:
        """(chunk_id, node_id) for every node a chunk mentions."""
        if not chunk_ids:
            return []
        return self._cur().execute(
            "SELECT DISTINCT chunk_id, node_id FROM graph_mentions WHERE workspace_id = ? AND chunk_id IN "
            "(SELECT unnest(?::VARCHAR[])) ORDER BY 1, 2", [workspace, list(chunk_ids)]).fetchall()

    def graph_synonyms(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, ...]]:
        return [tuple(r[0]) for r in self._cur().execute(
            "SELECT names FROM graph_synonyms WHERE workspace_id = ? ORDER BY line_no", [workspace]).fetchall()]

    def graph_set_synonyms(self, groups: Sequence[Sequence[str]], workspace: str = DEFAULT_WORKSPACE) -> None:
        now = _now()
        with self.transaction() as cur:
            cur.execute("DELETE FROM graph_synonyms WHERE workspace_id = ?", [workspace])
            for i, names in enumerate(groups):
                cur.execute("INSERT INTO graph_synonyms VALUES (?,?,?,?)", [workspace, i, list(names), now])

    _QUEUE_COLS = ("item_id", "keep_id", "other_id", "keep_name", "other_name", "score", "status", "created_at",
                   "decided_at")

    def graph_queue(self, status: str | None = None, workspace: str = DEFAULT_WORKSPACE) -> list[dict[str, Any]]:
        """Merge suggestions, best score first (decisions in the order they were taken)."""
        sql = f"SELECT {', '.join(self._QUEUE_COLS)} FROM graph_merge_queue WHERE workspace_id = ?"
        params: list[Any] = [workspace]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        sql += " ORDER BY decided_at NULLS FIRST, score DESC, item_id"
        return [dict(zip(self._QUEUE_COLS, r)) for r in self._cur().execute(sql, params).fetchall()]

    def graph_add_suggestions(self, rows: Sequence[tuple[str, str, str, str, float]],
                              workspace: str = DEFAULT_WORKSPACE) -> int:
        """Queue (keep_id, other_id, keep_name, other_name, score) as pending unless the pair is already queued or
        decided; returns how many were new."""
        import hashlib

        now = _now()
        added = 0
        with self.transaction() as cur:
            known = {r[0] for r in cur.execute("SELECT item_id FROM graph_merge_queue WHERE workspace_id = ?",
                                                [workspace]).fetchall()}
            new = []
            for keep, other, kname, oname, score in rows:
                item = hashlib.sha256("\x1f".join(sorted((keep, other))).encode()).hexdigest()[:12]
                if item in known:
                    continue
                known.add(item)
                new.append((workspace, item, keep, other, kname, oname, float(score), "pending", now, None))
            if new:
                cur.executemany("INSERT INTO graph_merge_queue VALUES (?,?,?,?,?,?,?,?,?,?)", new)
            added = len(new)
        return added

    def graph_set_queue_status(self, item_id: str, status: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        if status not in ("pending", "approved", "rejected"):
            raise StoreError(f"unknown review status {status!r}")
        with self.transaction() as cur:
            found = cur.execute("SELECT count(*) FROM graph_merge_queue WHERE workspace_id = ? AND item_id = ?",
                                [workspace, item_id]).fetchone()[0]
            cur.execute("UPDATE graph_merge_queue SET status = ?, decided_at = ? WHERE workspace_id = ? AND item_id = ?",
                        [status, None if status == "pending" else _now(), workspace, item_id])
        return bool(found)

    def graph_delete_queue_items(self, item_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> None:
        if not item_ids:
            return
        with self.transaction() as cur:
            cur.executemany("DELETE FROM graph_merge_queue WHERE workspace_id = ? AND item_id = ?",
                            [[workspace, i] for i in item_ids])

    def graph_put_communities(self, rows: Sequence[tuple[int, str, str | None, str, str]],
                              workspace: str = DEFAULT_WORKSPACE) -> int:
        """Replace the community membership (level, community_id, parent_id, node_id, members_hash) and drop the
        cached summaries of memberships that no longer exist; returns how many summaries were invalidated."""
        with self.transaction() as cur:
            cur.execute("DELETE FROM graph_communities WHERE workspace_id = ?", [workspace])
            self._graph_insert(cur, "graph_communities", ("workspace_id", "level", "community_id", "parent_id",
                                                          "node_id", "members_hash"),
                               [(workspace, *r) for r in rows])
            gone = cur.execute(
                "SELECT count(*) FROM graph_community_summaries WHERE workspace_id = ? AND members_hash NOT IN "
                "(SELECT DISTINCT members_hash FROM graph_communities WHERE workspace_id = ?)",
                [workspace, workspace]).fetchone()[0]
            cur.execute("DELETE FROM graph_community_summaries WHERE workspace_id = ? AND members_hash NOT IN "
                        "(SELECT DISTINCT members_hash FROM graph_communities WHERE workspace_id = ?)",
                        [workspace, workspace])
        return int(gone)

    def graph_communities(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[int, str, str | None, str, str]]:
        """(level, community_id, parent_id, node_id, members_hash), ordered."""
        return self._cur().execute(
            "SELECT level, community_id, parent_id, node_id, members_hash FROM graph_communities "
            "WHERE workspace_id = ? ORDER BY level, community_id, node_id", [workspace]).fetchall()

    _SUMMARY_COLS = ("members_hash", "level", "community_id", "title", "summary", "mode", "usage_json", "created_at")

    def graph_summaries(self, members_hashes: Sequence[str] | None = None,
                        workspace: str = DEFAULT_WORKSPACE) -> dict[str, dict[str, Any]]:
        """Cached community summaries by membership hash."""
        rows = self._cur().execute(
            f"SELECT {', '.join(self._SUMMARY_COLS)} FROM graph_community_summaries WHERE workspace_id = ?",
            [workspace]).fetchall()
        want = None if members_hashes is None else set(members_hashes)
        out = {}
        for r in rows:
            if want is None or r[0] in want:
                d = dict(zip(self._SUMMARY_COLS, r))
                d["usage"] = json.loads(d.pop("usage_json") or "{}")
                out[r[0]] = d
        return out

    def graph_put_summary(self, members_hash: str, *, level: int, community_id: str, title: str, summary: str,
                          mode: str, usage: dict[str, Any], workspace: str = DEFAULT_WORKSPACE) -> None:
        with self._write_lock:
            self._cur().execute(
                "INSERT OR REPLACE INTO graph_community_summaries VALUES (?,?,?,?,?,?,?,?,?)",
                [workspace, members_hash, level, community_id, title, summary, mode, json.dumps(usage), _now()])

    def graph_name_vectors(self, model_id: str, hashes: Sequence[str],
                           workspace: str = DEFAULT_WORKSPACE) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        cur = self._cur()
        self._graph_frame(cur, "_graph_h", ("h",), [(h,) for h in set(hashes)])
        got = cur.execute(
            "SELECT name_sha256, vec FROM graph_name_vectors WHERE workspace_id = ? AND model_id = ? AND "
            "name_sha256 IN (SELECT h FROM _graph_h)", [workspace, model_id]).fetchnumpy()
        cur.unregister("_graph_h")
        return {h: np.asarray(v, dtype=np.float32) for h, v in zip(got["name_sha256"], got["vec"])}

    def graph_put_name_vectors(self, model_id: str, items: dict[str, np.ndarray],
                               workspace: str = DEFAULT_WORKSPACE) -> None:
        if not items:
            return
        with self.transaction() as cur:
            known = set(self.graph_name_vectors(model_id, list(items), workspace))
            rows = [(workspace, model_id, h, np.asarray(v, dtype=np.float32)) for h, v in items.items() if h not in known]
            if rows:
                self._graph_frame(cur, "_graph_vecs", ("workspace_id", "model_id", "name_sha256", "vec"), rows)
                cur.execute("INSERT INTO graph_name_vectors SELECT workspace_id, model_id, name_sha256, vec::FLOAT[] "
                            "FROM _graph_vecs")
                cur.unregister("_graph_vecs")

    def graph_clear(self, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Forget extractions, aggregates and communities (a full rebuild follows). Synonyms, review decisions
        and summaries stay: summaries of memberships that reappear are still valid."""
        with self.transaction() as cur:
            for table in ("graph_chunks", "graph_mentions", "graph_relations", "graph_nodes", "graph_edges",
                          "graph_communities", "graph_state"):
                cur.execute(f"DELETE FROM {table} WHERE workspace_id = ?", [workspace])

    def graph_counts(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, int]:
        cur = self._cur()
        out = {}
        for table in ("graph_chunks", "graph_mentions", "graph_relations", "graph_nodes", "graph_edges",
                      "graph_community_summaries"):
            out[table.removeprefix("graph_")] = int(cur.execute(
                f"SELECT count(*) FROM {table} WHERE workspace_id = ?", [workspace]).fetchone()[0])
        out["communities"] = int(cur.execute(
            "SELECT count(DISTINCT (level, community_id)) FROM graph_communities WHERE workspace_id = ?",
            [workspace]).fetchone()[0])
        out["pending_merges"] = int(cur.execute(
            "SELECT count(*) FROM graph_merge_queue WHERE workspace_id = ? AND status = 'pending'",
            [workspace]).fetchone()[0])
        return out

    # -- late-interaction token vectors (owned by core/rerank.py) ---------------------------------------------------
    def cached_token_vectors(
        self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """sha256 -> (token ids int32, unit vectors float16 (n, dim), char spans int32 (n, 2)) for the hashes held."""
        if not hashes:
            return {}
        rows = self._cur().execute(
            "SELECT text_sha256, n_tokens, dim, ids, vecs, spans FROM token_vectors WHERE workspace_id = ? "
            "AND model_id = ? AND list_contains(?, text_sha256)",
            [workspace, model_id, list(set(hashes))],
        ).fetchall()
        return {
            h: (np.frombuffer(ids, dtype=np.int32).copy(),
                np.frombuffer(vecs, dtype=np.float16).reshape(n, dim).copy(),
                np.frombuffer(spans, dtype=np.int32).reshape(n, 2).copy())
            for h, n, dim, ids, vecs, spans in rows
        }

    def cache_token_vectors(
        self, model_id: str, items: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
        workspace: str = DEFAULT_WORKSPACE,
    ) -> None:
        if not items:
            return
        now = _now()
        rows = []
        for h, (ids, vecs, spans) in items.items():
            n, dim = (int(vecs.shape[0]), int(vecs.shape[1])) if vecs.ndim == 2 else (0, 0)
            rows.append([workspace, model_id, h, n, dim, np.asarray(ids, dtype=np.int32).tobytes(),
                         np.asarray(vecs, dtype=np.float16).tobytes(), np.asarray(spans, dtype=np.int32).tobytes(), now])
        with self.transaction() as cur:
            cur.executemany("INSERT OR IGNORE INTO token_vectors VALUES (?,?,?,?,?,?,?,?,?)", rows)

    def clear_token_vectors(self, workspace: str = DEFAULT_WORKSPACE, model_id: str | None = None) -> int:
        with self.transaction() as cur:
            sql, params = "FROM token_vectors WHERE workspace_id = ?", [workspace]
            if model_id is not None:
                sql += " AND model_id = ?"
                params.append(model_id)
            n = int(cur.execute(f"SELECT count(*) {sql}", params).fetchone()[0])
            cur.execute(f"DELETE {sql}", params)
        return n
