"""LLM ledger repository: chunk contexts, the usage ledger (one row per LLM call) and submitted Message Batches."""
from __future__ import annotations

import uuid
from typing import Any, Sequence

from core.store.db import Database, now
from core.types import DEFAULT_WORKSPACE, LedgerEntry, OpenBatch

TABLES: tuple[str, ...] = (
    # Chunk contexts live apart from the chunk text, one per variant ('heuristic', 'llm'); every LLM call is a
    # usage_ledger row; a submitted Message Batch is remembered so a resumed run polls it instead of paying twice.
    """CREATE TABLE IF NOT EXISTS chunk_contexts (
        workspace_id VARCHAR, chunk_id VARCHAR, variant VARCHAR, context VARCHAR, model VARCHAR,
        created_at TIMESTAMP, PRIMARY KEY (workspace_id, chunk_id, variant))""",
    # Contexts kept across an edit of their document under context.reindex = major (the document changed, the chunk
    # did not): possibly stale, listed so the estimate and a refresh can name them. A new table, no migration: it is
    # created on the first read-write open like any table this code adds.
    """CREATE TABLE IF NOT EXISTS chunk_context_stale (
        workspace_id VARCHAR, chunk_id VARCHAR, variant VARCHAR, since TIMESTAMP,
        PRIMARY KEY (workspace_id, chunk_id, variant))""",
    """CREATE TABLE IF NOT EXISTS usage_ledger (
        workspace_id VARCHAR, call_id VARCHAR, purpose VARCHAR, model VARCHAR, input_tokens BIGINT,
        output_tokens BIGINT, cache_write_tokens BIGINT, cache_read_tokens BIGINT, usd DOUBLE, usd_uncached DOUBLE,
        latency_ms DOUBLE, ref_id VARCHAR, run_id VARCHAR, batch BOOLEAN, cache_ttl VARCHAR, note VARCHAR,
        created_at TIMESTAMP, usage_flag VARCHAR DEFAULT '', provider VARCHAR DEFAULT '',
        PRIMARY KEY (workspace_id, call_id))""",
    """CREATE TABLE IF NOT EXISTS llm_batches (
        workspace_id VARCHAR, batch_id VARCHAR, purpose VARCHAR, variant VARCHAR, model VARCHAR, run_id VARCHAR,
        n_requests INTEGER, status VARCHAR, chunk_ids VARCHAR[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, batch_id))""",
)

# Schema v2: usage_flag says when a call's provider-reported usage was implausible and booked at our own bound.
# Schema v3: provider says which client answered (anthropic, openai-compatible, gguf).
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (2, "ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS usage_flag VARCHAR DEFAULT ''"),
    (3, "ALTER TABLE usage_ledger ADD COLUMN IF NOT EXISTS provider VARCHAR DEFAULT ''"),
)


class Ledger:
    """Implements core.models.llm.UsageSink (record_usage) and the context builder's ContextStore."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- chunk contexts ---------------------------------------------------------------------------------------
    def put_contexts(self, items: Sequence[tuple[str, str]], variant: str, model: str,
                     workspace: str = DEFAULT_WORKSPACE) -> None:
        """Store (chunk_id, context) pairs of one variant; written as soon as each arrives so a stopped run keeps
        everything it paid for."""
        if not items:
            return
        import pandas as pd

        at = now()
        # One registered frame, not executemany: DuckDB's executemany goes row by row, which made a file of many
        # headings take minutes and gigabytes (bench/hostile.py).
        frame = pd.DataFrame({"chunk_id": [cid for cid, _ in items], "context": [ctx for _, ctx in items]})
        with self._db.transaction() as cur:
            cur.register("_new_contexts", frame)
            try:
                cur.execute("INSERT OR REPLACE INTO chunk_contexts SELECT ?, chunk_id, ?, context, ?, ? "
                            "FROM _new_contexts", [workspace, variant, model, at])
                # A vector embedded before this context existed no longer matches the variant's text; a rewritten
                # context is no longer possibly stale.
                for table in ("vectors", "chunk_context_stale"):
                    cur.execute(f"DELETE FROM {table} WHERE workspace_id = ? AND variant = ? AND chunk_id IN "
                                "(SELECT chunk_id FROM _new_contexts)", [workspace, variant])
            finally:
                cur.unregister("_new_contexts")

    def contexts(self, variant: str, workspace: str = DEFAULT_WORKSPACE, chunk_ids: Sequence[str] | None = None
                 ) -> dict[str, str]:
        sql = "SELECT chunk_id, context FROM chunk_contexts WHERE workspace_id = ? AND variant = ?"
        params: list[Any] = [workspace, variant]
        if chunk_ids is not None:
            if not chunk_ids:
                return {}
            sql += " AND list_contains(?, chunk_id)"
            params.append(list(chunk_ids))
        return dict(self._db.cursor().execute(sql, params).fetchall())

    def context_models(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> dict[str, int]:
        rows = self._db.cursor().execute(
            "SELECT model, count(*) FROM chunk_contexts WHERE workspace_id = ? AND variant = ? GROUP BY 1",
            [workspace, variant]).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def context_state(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> str:
        """A fingerprint that moves whenever contexts of a variant are written or removed (index cache key)."""
        n, last = self._db.cursor().execute(
            "SELECT count(*), max(created_at) FROM chunk_contexts WHERE workspace_id = ? AND variant = ?",
            [workspace, variant]).fetchone()
        return f"{n}:{last}"

    def delete_contexts(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> int:
        with self._db.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM chunk_contexts WHERE workspace_id = ? AND variant = ?",
                            [workspace, variant]).fetchone()[0]
            for table in ("chunk_contexts", "chunk_context_stale", "vectors"):
                cur.execute(f"DELETE FROM {table} WHERE workspace_id = ? AND variant = ?", [workspace, variant])
        return int(n)

    def stale_contexts(self, variant: str, workspace: str = DEFAULT_WORKSPACE) -> list[str]:
        """Chunk ids whose `variant` context was kept across an edit of its document and may be stale."""
        return [r[0] for r in self._db.cursor().execute(
            "SELECT chunk_id FROM chunk_context_stale WHERE workspace_id = ? AND variant = ? ORDER BY 1",
            [workspace, variant]).fetchall()]

    def drop_contexts(self, chunk_ids: Sequence[str], variant: str, workspace: str = DEFAULT_WORKSPACE) -> int:
        """Forget these chunks' `variant` contexts (and the vectors embedded from them) so a build writes them
        again; returns how many contexts were dropped."""
        if not chunk_ids:
            return 0
        with self._db.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM chunk_contexts WHERE workspace_id = ? AND variant = ? AND "
                            "list_contains(?, chunk_id)", [workspace, variant, list(chunk_ids)]).fetchone()[0]
            for table in ("chunk_contexts", "chunk_context_stale", "vectors"):
                cur.execute(f"DELETE FROM {table} WHERE workspace_id = ? AND variant = ? AND list_contains(?, chunk_id)",
                            [workspace, variant, list(chunk_ids)])
        return int(n)

    # -- usage ledger -----------------------------------------------------------------------------------------
    def record_usage(self, entry: LedgerEntry) -> None:
        """One LLM call. Holds tokens, dollars and ids only: never a key or a prompt."""
        with self._db.writer() as cur:
            cur.execute(
                "INSERT INTO usage_ledger (workspace_id, call_id, purpose, model, input_tokens, output_tokens, "
                "cache_write_tokens, cache_read_tokens, usd, usd_uncached, latency_ms, ref_id, run_id, batch, "
                "cache_ttl, note, created_at, usage_flag, provider) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [entry.workspace, uuid.uuid4().hex, entry.purpose, entry.model, entry.input_tokens,
                 entry.output_tokens, entry.cache_write_tokens, entry.cache_read_tokens, entry.usd, entry.usd_uncached,
                 entry.latency_ms, entry.ref_id, entry.run_id, entry.batch, entry.cache_ttl, entry.note, now(),
                 entry.usage_flag, entry.provider],
            )

    def usage_ledger(self, workspace: str = DEFAULT_WORKSPACE, *, purpose: str | None = None,
                     run_id: str | None = None, limit: int | None = None) -> list[LedgerEntry]:
        """Ledger rows, oldest first."""
        sql = ("SELECT purpose, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, usd, "
               "usd_uncached, latency_ms, ref_id, run_id, batch, cache_ttl, note, workspace_id, "
               "coalesce(usage_flag, ''), created_at, coalesce(provider, '') "
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
        return [LedgerEntry(*r) for r in self._db.cursor().execute(sql, params).fetchall()]

    # -- Message Batches --------------------------------------------------------------------------------------
    def put_batch(self, batch_id: str, *, purpose: str, variant: str, model: str, run_id: str,
                  chunk_ids: Sequence[str], status: str = "in_progress", workspace: str = DEFAULT_WORKSPACE) -> None:
        """Remember a submitted batch and the chunks in it (custom id r<i> is chunk_ids[i])."""
        with self._db.writer() as cur:
            cur.execute("INSERT OR REPLACE INTO llm_batches VALUES (?,?,?,?,?,?,?,?,?,?)",
                        [workspace, batch_id, purpose, variant, model, run_id, len(chunk_ids), status,
                         list(chunk_ids), now()])

    def set_batch_status(self, batch_id: str, status: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        with self._db.writer() as cur:
            cur.execute("UPDATE llm_batches SET status = ? WHERE workspace_id = ? AND batch_id = ?",
                        [status, workspace, batch_id])

    def open_batches(self, purpose: str, variant: str, workspace: str = DEFAULT_WORKSPACE) -> list[OpenBatch]:
        """Submitted batches whose results have not been collected yet, oldest first."""
        rows = self._db.cursor().execute(
            "SELECT batch_id, model, run_id, n_requests, status, chunk_ids, created_at FROM llm_batches "
            "WHERE workspace_id = ? AND purpose = ? AND variant = ? AND status <> 'collected' ORDER BY created_at",
            [workspace, purpose, variant]).fetchall()
        return [OpenBatch(b, m, r, int(n), s, tuple(ids or ()), at) for b, m, r, n, s, ids, at in rows]
