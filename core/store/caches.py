"""Caches repository: text embeddings, late-interaction token vectors, graph name vectors, and cache hit events."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from core.records import CacheEvent
from core.store.db import Database, now, register_rows, vector_frame
from core.types import DEFAULT_WORKSPACE

TokenRows = tuple[np.ndarray, np.ndarray, np.ndarray]  # token ids int32, unit vectors float16 (n, dim), spans (n, 2)

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS embedding_cache (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, dim INTEGER, vec FLOAT[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
    """CREATE TABLE IF NOT EXISTS cache_events (
        workspace_id VARCHAR, cache VARCHAR, hits INTEGER, misses INTEGER, purpose VARCHAR, created_at TIMESTAMP)""",
    # Late-interaction rerank (core/rerank.py): token vectors of a text (float16), their token ids and character
    # spans, keyed by model and sha256 of the exact text, so a restart does not re-read every candidate.
    """CREATE TABLE IF NOT EXISTS token_vectors (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, n_tokens INTEGER, dim INTEGER,
        ids BLOB, vecs BLOB, spans BLOB, created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
    # Node-name vectors (merge suggestions, seeding local search), bulk-written: there are many short names.
    """CREATE TABLE IF NOT EXISTS graph_name_vectors (
        workspace_id VARCHAR, model_id VARCHAR, name_sha256 VARCHAR, vec FLOAT[])""",
)


class Caches:
    """Implements core.rerank.TokenStore and the embedders' cache-first helpers' EmbeddingCache."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- text embeddings --------------------------------------------------------------------------------------
    def cached_embeddings(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                          ) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        rows = self._db.cursor().execute(
            "SELECT text_sha256, vec FROM embedding_cache WHERE workspace_id = ? AND model_id = ? "
            "AND list_contains(?, text_sha256)", [workspace, model_id, list(set(hashes))]).fetchall()
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    def cache_embeddings(self, model_id: str, items: Mapping[str, np.ndarray], workspace: str = DEFAULT_WORKSPACE
                         ) -> None:
        if not items:
            return
        hashes = list(items)
        matrix = np.stack([np.asarray(items[h], dtype=np.float32).ravel() for h in hashes])
        with self._db.transaction() as cur:
            cur.register("_new_cache", vector_frame(hashes, matrix))
            try:
                cur.execute("INSERT OR IGNORE INTO embedding_cache SELECT ?, ?, key, ?, vec, ? FROM _new_cache",
                            [workspace, model_id, int(matrix.shape[1]), now()])
            finally:
                cur.unregister("_new_cache")

    def count_embeddings(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        return int(self._db.cursor().execute(
            "SELECT count(*) FROM embedding_cache WHERE workspace_id = ?", [workspace]).fetchone()[0])

    # -- hit/miss events (the Costs page's cache hit rate) ----------------------------------------------------
    def record_cache_event(self, cache: str, hits: int, misses: int, purpose: str,
                           workspace: str = DEFAULT_WORKSPACE) -> None:
        with self._db.writer() as cur:
            cur.execute("INSERT INTO cache_events VALUES (?,?,?,?,?,?)",
                        [workspace, cache, hits, misses, purpose, now()])

    def cache_events(self, workspace: str = DEFAULT_WORKSPACE) -> list[CacheEvent]:
        return [CacheEvent(*r) for r in self._db.cursor().execute(
            "SELECT cache, hits, misses, purpose, created_at FROM cache_events WHERE workspace_id = ? "
            "ORDER BY created_at", [workspace]).fetchall()]

    # -- late-interaction token vectors (owned by core/rerank.py) ---------------------------------------------
    def cached_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                             ) -> dict[str, TokenRows]:
        """sha256 -> (token ids int32, unit vectors float16 (n, dim), char spans int32 (n, 2)) for the hashes held."""
        if not hashes:
            return {}
        rows = self._db.cursor().execute(
            "SELECT text_sha256, n_tokens, dim, ids, vecs, spans FROM token_vectors WHERE workspace_id = ? "
            "AND model_id = ? AND list_contains(?, text_sha256)", [workspace, model_id, list(set(hashes))]).fetchall()
        return {
            h: (np.frombuffer(ids, dtype=np.int32).copy(),
                np.frombuffer(vecs, dtype=np.float16).reshape(n, dim).copy(),
                np.frombuffer(spans, dtype=np.int32).reshape(n, 2).copy())
            for h, n, dim, ids, vecs, spans in rows
        }

    def cache_token_vectors(self, model_id: str, items: Mapping[str, TokenRows],
                            workspace: str = DEFAULT_WORKSPACE) -> None:
        if not items:
            return
        at = now()
        rows = []
        for h, (ids, vecs, spans) in items.items():
            n, dim = (int(vecs.shape[0]), int(vecs.shape[1])) if vecs.ndim == 2 else (0, 0)
            rows.append([workspace, model_id, h, n, dim, np.asarray(ids, dtype=np.int32).tobytes(),
                         np.asarray(vecs, dtype=np.float16).tobytes(), np.asarray(spans, dtype=np.int32).tobytes(),
                         at])
        with self._db.transaction() as cur:
            cur.executemany("INSERT OR IGNORE INTO token_vectors VALUES (?,?,?,?,?,?,?,?,?)", rows)

    def held_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                           ) -> set[str]:
        """The hashes among `hashes` whose token vectors are stored, without reading the vectors: the Search Lab
        asks on every new query whether a warm-up is still worth offering, and the blobs are megabytes."""
        if not hashes:
            return set()
        cur = self._db.cursor()
        register_rows(cur, "_tv_h", ("h",), [(h,) for h in set(hashes)])
        try:
            rows = cur.execute(
                "SELECT text_sha256 FROM token_vectors WHERE workspace_id = ? AND model_id = ? AND "
                "text_sha256 IN (SELECT h FROM _tv_h)", [workspace, model_id]).fetchall()
        finally:
            cur.unregister("_tv_h")
        return {r[0] for r in rows}

    def clear_token_vectors(self, workspace: str = DEFAULT_WORKSPACE, model_id: str | None = None) -> int:
        with self._db.transaction() as cur:
            sql, params = "FROM token_vectors WHERE workspace_id = ?", [workspace]
            if model_id is not None:
                sql += " AND model_id = ?"
                params.append(model_id)
            n = int(cur.execute(f"SELECT count(*) {sql}", params).fetchone()[0])
            cur.execute(f"DELETE {sql}", params)
        return n

    # -- graph node-name vectors (core/graph/snapshot.py) -----------------------------------------------------
    def name_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                     ) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        cur = self._db.cursor()
        register_rows(cur, "_name_h", ("h",), [(h,) for h in set(hashes)])
        try:
            got = cur.execute(
                "SELECT name_sha256, vec FROM graph_name_vectors WHERE workspace_id = ? AND model_id = ? AND "
                "name_sha256 IN (SELECT h FROM _name_h)", [workspace, model_id]).fetchnumpy()
        finally:
            cur.unregister("_name_h")
        return {h: np.asarray(v, dtype=np.float32) for h, v in zip(got["name_sha256"], got["vec"])}

    def put_name_vectors(self, model_id: str, items: Mapping[str, np.ndarray],
                         workspace: str = DEFAULT_WORKSPACE) -> None:
        if not items:
            return
        with self._db.transaction() as cur:
            known = set(self.name_vectors(model_id, list(items), workspace))
            rows = [(workspace, model_id, h, np.asarray(v, dtype=np.float32)) for h, v in items.items()
                    if h not in known]
            if rows:
                register_rows(cur, "_name_vecs", ("workspace_id", "model_id", "name_sha256", "vec"), rows)
                try:
                    cur.execute("INSERT INTO graph_name_vectors SELECT workspace_id, model_id, name_sha256, "
                                "vec::FLOAT[] FROM _name_vecs")
                finally:
                    cur.unregister("_name_vecs")
