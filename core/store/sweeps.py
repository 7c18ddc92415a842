"""Sweeps repository: each finished configuration of a sweep, keyed by workspace, golden set and config hash, so a
rerun skips what is done."""
from __future__ import annotations

import json
from typing import Any

from core.store.db import Database, now

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS sweep_results (
        workspace_id VARCHAR, dataset VARCHAR, config_hash VARCHAR, corpus_version BIGINT, config_name VARCHAR,
        result_json VARCHAR, created_at TIMESTAMP, PRIMARY KEY (workspace_id, dataset, config_hash, corpus_version))""",
)


class Sweeps:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(self, workspace: str, dataset: str, config_hash: str, corpus_version: int, name: str,
             result: dict[str, Any]) -> None:
        with self._db.writer() as cur:
            cur.execute("INSERT OR REPLACE INTO sweep_results VALUES (?,?,?,?,?,?,?)",
                        [workspace, dataset, config_hash, int(corpus_version), name,
                         json.dumps(result, default=str), now()])

    def done(self, workspace: str, dataset: str, corpus_version: int) -> dict[str, dict[str, Any]]:
        """config hash -> stored result, for this set on this corpus version."""
        rows = self._db.cursor().execute(
            "SELECT config_hash, result_json FROM sweep_results WHERE workspace_id = ? AND dataset = ? AND "
            "corpus_version = ?", [workspace, dataset, int(corpus_version)]).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def clear(self, workspace: str, dataset: str) -> int:
        with self._db.writer() as cur:
            n = cur.execute("DELETE FROM sweep_results WHERE workspace_id = ? AND dataset = ? RETURNING 1",
                            [workspace, dataset]).fetchall()
        return len(n)
