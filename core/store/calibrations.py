"""Calibrations repository: each workspace's refusal threshold fitted on its golden set, with its CV figures."""
from __future__ import annotations

import json

from core.store.db import Database, now
from core.types import Calibration

TABLES: tuple[str, ...] = (
    # One row per workspace: the latest calibration replaces the one before (the figures say what it was fitted on).
    """CREATE TABLE IF NOT EXISTS calibrations (
        workspace_id VARCHAR PRIMARY KEY, threshold DOUBLE, dataset VARCHAR, corpus_version BIGINT, model VARCHAR,
        config_hash VARCHAR, folds INTEGER, figures_json VARCHAR, created_at TIMESTAMP)""",
)


class Calibrations:
    """Read per query by the pipeline (memoised per write generation: a query reads no row twice), written by
    core/eval/calibrate.py."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._memo: dict[str, tuple[int, Calibration | None]] = {}

    def save(self, cal: Calibration) -> None:
        with self._db.writer() as cur:
            cur.execute("INSERT OR REPLACE INTO calibrations VALUES (?,?,?,?,?,?,?,?,?)",
                        [cal.workspace, float(cal.threshold), cal.dataset, int(cal.corpus_version), cal.model,
                         cal.config_hash, int(cal.folds), json.dumps(dict(cal.figures), default=str), now()])

    def get(self, workspace: str) -> Calibration | None:
        gen = self._db.generation
        hit = self._memo.get(workspace)
        if hit is not None and hit[0] == gen:
            return hit[1]
        row = self._db.cursor().execute(
            "SELECT threshold, dataset, corpus_version, model, config_hash, folds, figures_json, created_at "
            "FROM calibrations WHERE workspace_id = ?", [workspace]).fetchone()
        cal = None if row is None else Calibration(workspace, float(row[0]), row[1], int(row[2]), row[3], row[4],
                                                   int(row[5]), json.loads(row[6] or "{}"), row[7])
        self._memo[workspace] = (gen, cal)
        return cal

    def delete(self, workspace: str) -> bool:
        with self._db.writer() as cur:
            n = cur.execute("DELETE FROM calibrations WHERE workspace_id = ? RETURNING 1", [workspace]).fetchall()
        return bool(n)
