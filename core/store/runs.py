"""Runs repository: the query run log (one trace per query) and evaluation runs with their per-question results."""
from __future__ import annotations

import json
import uuid
from typing import Any, Sequence

from core.store.db import Database, now
from core.text import redact
from core.types import DEFAULT_WORKSPACE, EvalRunRecord, QuestionResult, RunRecord, Trace

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS runs (
        workspace_id VARCHAR, run_id VARCHAR, kind VARCHAR, query VARCHAR, config_hash VARCHAR,
        corpus_version BIGINT, trace_json VARCHAR, created_at TIMESTAMP, PRIMARY KEY (workspace_id, run_id))""",
    # Evaluation: one row per configuration run over a golden set (metrics are means over repeats), and one row
    # per question with its scores and a compact per-stage record (ids, ranks, gold hits) to reopen it later.
    """CREATE TABLE IF NOT EXISTS eval_runs (
        workspace_id VARCHAR, eval_id VARCHAR, dataset VARCHAR, config_name VARCHAR, config_hash VARCHAR,
        config_json VARCHAR, corpus_version BIGINT, repeats INTEGER, n_queries INTEGER, summary_json VARCHAR,
        created_at TIMESTAMP, PRIMARY KEY (workspace_id, eval_id))""",
    """CREATE TABLE IF NOT EXISTS eval_results (
        workspace_id VARCHAR, eval_id VARCHAR, query_id VARCHAR, query VARCHAR, qtype VARCHAR, answerable BOOLEAN,
        result_json VARCHAR, PRIMARY KEY (workspace_id, eval_id, query_id))""",
)

_FIXED = frozenset({"eval_id", "dataset", "config_name", "config_hash", "config", "corpus_version", "repeats"})


class Runs:
    """Implements core.pipeline's RunLog (log_trace) and the evaluation lab's EvalStore."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- query run log ----------------------------------------------------------------------------------------
    def log_trace(self, trace: Trace, kind: str = "query") -> str:
        run_id = uuid.uuid4().hex
        with self._db.writer() as cur:
            cur.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                        [trace.workspace, run_id, kind, trace.query, trace.config_hash, trace.corpus_version,
                         redact(json.dumps(trace.to_dict())), now()])  # no key reaches the file, whatever a note says
        return run_id

    def recent_runs(self, workspace: str = DEFAULT_WORKSPACE, limit: int = 50) -> list[RunRecord]:
        """Newest first."""
        rows = self._db.cursor().execute(
            "SELECT run_id, kind, query, config_hash, corpus_version, trace_json, created_at FROM runs "
            "WHERE workspace_id = ? ORDER BY created_at DESC LIMIT ?", [workspace, limit]).fetchall()
        return [RunRecord(r[0], r[1], r[2], r[3], int(r[4]), json.loads(r[5]), r[6]) for r in rows]

    def count_runs(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        return int(self._db.cursor().execute(
            "SELECT count(*) FROM runs WHERE workspace_id = ?", [workspace]).fetchone()[0])

    # -- evaluation runs (written by core/eval/run.py) --------------------------------------------------------
    def save_eval_run(self, workspace: str, run: dict[str, Any], results: Sequence[QuestionResult]) -> str:
        """Store one configuration's run over a golden set and its per-question results in one transaction.
        `run` holds eval_id, dataset, config_name, config_hash, config (dict), corpus_version, repeats and the rest
        of its summary (metrics, spread, stage recall, ...), which is kept as JSON."""
        eval_id = run.get("eval_id") or uuid.uuid4().hex
        summary = {k: v for k, v in run.items() if k not in _FIXED}
        self._db.ensure_workspace(workspace)
        with self._db.transaction() as cur:
            cur.execute(
                "INSERT INTO eval_runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [workspace, eval_id, run["dataset"], run["config_name"], run["config_hash"],
                 json.dumps(run["config"], sort_keys=True), int(run["corpus_version"]), int(run["repeats"]),
                 len(results), json.dumps(summary), now()],
            )
            if results:
                cur.executemany(
                    "INSERT INTO eval_results VALUES (?,?,?,?,?,?,?)",
                    [[workspace, eval_id, r.qid, r.query, r.qtype, r.answerable, json.dumps(r.to_dict())]
                     for r in results],
                )
        return eval_id

    def eval_runs(self, workspace: str = DEFAULT_WORKSPACE, dataset: str | None = None, limit: int = 200, *,
                  eval_id: str | None = None) -> list[EvalRunRecord]:
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
        return [EvalRunRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), int(r[5]), int(r[6]), int(r[7]),
                              json.loads(r[8]), r[9]) for r in self._db.cursor().execute(sql, params).fetchall()]

    def eval_run_ids(self, workspace: str = DEFAULT_WORKSPACE, limit: int = 200) -> tuple[str, ...]:
        """The ids of the newest runs, newest first: a cheap check of whether the runs changed (read per query)."""
        rows = self._db.cursor().execute(
            "SELECT eval_id FROM eval_runs WHERE workspace_id = ? ORDER BY created_at DESC LIMIT ?",
            [workspace, limit]).fetchall()
        return tuple(r[0] for r in rows)

    def eval_run(self, eval_id: str, workspace: str = DEFAULT_WORKSPACE) -> EvalRunRecord | None:
        """One run with its per-question results (typed records), or None."""
        found = self.eval_runs(workspace, eval_id=eval_id)
        if not found:
            return None
        rows = self._db.cursor().execute(
            "SELECT result_json FROM eval_results WHERE workspace_id = ? AND eval_id = ? ORDER BY query_id",
            [workspace, eval_id]).fetchall()
        head = found[0]
        return EvalRunRecord(head.eval_id, head.dataset, head.config_name, head.config_hash, head.config,
                             head.corpus_version, head.repeats, head.n_queries, head.summary, head.created_at,
                             tuple(QuestionResult.from_dict(json.loads(r[0])) for r in rows))

    def delete_eval_run(self, eval_id: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        with self._db.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM eval_runs WHERE workspace_id = ? AND eval_id = ?",
                            [workspace, eval_id]).fetchone()[0]
            cur.execute("DELETE FROM eval_results WHERE workspace_id = ? AND eval_id = ?", [workspace, eval_id])
            cur.execute("DELETE FROM eval_runs WHERE workspace_id = ? AND eval_id = ?", [workspace, eval_id])
        return bool(n)
