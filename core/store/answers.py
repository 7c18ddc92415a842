"""Answers repository: the semantic answer cache's rows and its hit / miss / guarded-miss events per workspace."""
from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb
import numpy as np

from core.store.db import Database, now
from core.types import DEFAULT_WORKSPACE, CachedAnswer, CacheKey

TABLES: tuple[str, ...] = (
    # Provenance on every row: workspace, corpus version and the answer-relevant config hash form the key, so an
    # answer can never be served across a corpus change, a config change or a workspace.
    """CREATE TABLE IF NOT EXISTS answer_cache (
        workspace_id VARCHAR, corpus_version BIGINT, config_hash VARCHAR, question VARCHAR, vec FLOAT[],
        answer VARCHAR, citations VARCHAR, refused BOOLEAN, mode VARCHAR, cost_usd DOUBLE, ms DOUBLE,
        created_at TIMESTAMP)""",
    # The trace that produced a cached answer (JSON, candidate texts cut), so a served answer can show its stages.
    # Its own table, created on open like the others: older files gain it without a schema version.
    """CREATE TABLE IF NOT EXISTS answer_cache_traces (
        workspace_id VARCHAR, corpus_version BIGINT, config_hash VARCHAR, question VARCHAR, trace VARCHAR,
        created_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS answer_cache_events (
        workspace_id VARCHAR, verdict VARCHAR, cosine DOUBLE, saved_ms DOUBLE, saved_usd DOUBLE,
        created_at TIMESTAMP)""",
)


@dataclass(frozen=True)
class AnswerCacheCounts:
    hits: int = 0
    misses: int = 0
    guarded_misses: int = 0
    saved_ms: float = 0.0
    saved_usd: float = 0.0
    entries: int = 0

    @property
    def lookups(self) -> int:
        return self.hits + self.misses + self.guarded_misses

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0


class Answers:
    """Implements core.pipeline's AnswerCacheStore Protocol."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def cached_answers(self, key: CacheKey, *, limit: int = 5000) -> list[CachedAnswer]:
        rows = self._db.cursor().execute(
            "SELECT question, vec, answer, citations, refused, mode, cost_usd, ms, created_at FROM answer_cache "
            "WHERE workspace_id = ? AND corpus_version = ? AND config_hash = ? ORDER BY created_at DESC LIMIT ?",
            [key.workspace, key.corpus_version, key.config_hash, limit]).fetchall()
        return [CachedAnswer(key, q, np.asarray(v, dtype=np.float32), a, tuple(json.loads(c or "[]")), bool(r), m,
                             t, float(cost or 0.0), float(ms or 0.0))
                for q, v, a, c, r, m, cost, ms, t in rows]

    def put_answer(self, entry: CachedAnswer) -> None:
        k = entry.key
        with self._db.writer() as cur:
            cur.execute("INSERT INTO answer_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [k.workspace, k.corpus_version, k.config_hash, entry.question,
                         np.asarray(entry.vector, dtype=np.float32).tolist(), entry.answer,
                         json.dumps(list(entry.citations)), entry.refused, entry.mode, entry.cost_usd, entry.ms,
                         entry.stored_at if entry.stored_at.year > 1970 else now()])

    def put_trace(self, key: CacheKey, question: str, trace_json: str) -> None:
        """The trace that produced the answer just stored for `question` under `key`."""
        with self._db.writer() as cur:
            cur.execute("INSERT INTO answer_cache_traces VALUES (?, ?, ?, ?, ?, ?)",
                        [key.workspace, key.corpus_version, key.config_hash, question, trace_json, now()])

    def cached_trace(self, key: CacheKey, question: str) -> str | None:
        """The newest stored trace of `question` under `key` (JSON), or None (none kept, or a file opened read-only
        from before the table existed)."""
        try:
            row = self._db.cursor().execute(
                "SELECT trace FROM answer_cache_traces WHERE workspace_id = ? AND corpus_version = ? AND "
                "config_hash = ? AND question = ? ORDER BY created_at DESC LIMIT 1",
                [key.workspace, key.corpus_version, key.config_hash, question]).fetchone()
        except duckdb.CatalogException:
            return None
        return str(row[0]) if row else None

    def record_lookup(self, workspace: str, verdict: str, cosine: float | None, saved_ms: float = 0.0,
                      saved_usd: float = 0.0) -> None:
        with self._db.writer() as cur:
            cur.execute("INSERT INTO answer_cache_events VALUES (?, ?, ?, ?, ?, ?)",
                        [workspace, verdict, cosine, saved_ms, saved_usd, now()])

    def lookup_events(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, float | None]]:
        """Every lookup of the workspace as (verdict, cosine of the nearest stored question), oldest first."""
        return [(str(v), None if c is None else float(c)) for v, c in self._db.cursor().execute(
            "SELECT verdict, cosine FROM answer_cache_events WHERE workspace_id = ? ORDER BY created_at",
            [workspace]).fetchall()]

    def cited_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[int, tuple[str, ...]]]:
        """(corpus version, citations) of every answer the workspace's cache holds."""
        return [(int(v), tuple(json.loads(c or "[]"))) for v, c in self._db.cursor().execute(
            "SELECT corpus_version, citations FROM answer_cache WHERE workspace_id = ?", [workspace]).fetchall()]

    def clear_answers(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        """Drop every cached answer of the workspace (the counters stay: they are history)."""
        with self._db.writer() as cur:
            n = cur.execute("SELECT count(*) FROM answer_cache WHERE workspace_id = ?", [workspace]).fetchone()[0]
            cur.execute("DELETE FROM answer_cache WHERE workspace_id = ?", [workspace])
            cur.execute("DELETE FROM answer_cache_traces WHERE workspace_id = ?", [workspace])
        return int(n)

    def prune_answers(self, workspace: str, below_version: int) -> int:
        """Drop rows of corpus versions older than `below_version`: versions only grow, so no lookup can serve them."""
        with self._db.writer() as cur:
            n = cur.execute("SELECT count(*) FROM answer_cache WHERE workspace_id = ? AND corpus_version < ?",
                            [workspace, below_version]).fetchone()[0]
            if n:
                cur.execute("DELETE FROM answer_cache WHERE workspace_id = ? AND corpus_version < ?",
                            [workspace, below_version])
            cur.execute("DELETE FROM answer_cache_traces WHERE workspace_id = ? AND corpus_version < ?",
                        [workspace, below_version])
        return int(n)

    def answer_cache_counts(self, workspace: str = DEFAULT_WORKSPACE) -> AnswerCacheCounts:
        cur = self._db.cursor()
        rows = dict((v, (n, ms, usd)) for v, n, ms, usd in cur.execute(
            "SELECT verdict, count(*), coalesce(sum(saved_ms), 0), coalesce(sum(saved_usd), 0) "
            "FROM answer_cache_events WHERE workspace_id = ? GROUP BY verdict", [workspace]).fetchall())
        entries = cur.execute("SELECT count(*) FROM answer_cache WHERE workspace_id = ?", [workspace]).fetchone()[0]
        hit = rows.get("hit", (0, 0.0, 0.0))
        return AnswerCacheCounts(int(hit[0]), int(rows.get("miss", (0,))[0]), int(rows.get("guarded_miss", (0,))[0]),
                                 float(hit[1]), float(hit[2]), int(entries))
