"""RAPTOR repository: each workspace's tree of cluster summaries, with their vectors and provenance."""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from core.store.db import Database, now
from core.types import RaptorNode

TABLES: tuple[str, ...] = (
    # One tree per workspace (a build replaces it): every node says which nodes it summarises (children), which chunks
    # lie under it, how its text was written, with which embedder its vector was made and at which corpus version.
    """CREATE TABLE IF NOT EXISTS raptor_nodes (
        workspace_id VARCHAR, node_id VARCHAR, level INTEGER, text VARCHAR, children_json VARCHAR, chunks_json VARCHAR,
        mode VARCHAR, model_id VARCHAR, corpus_version BIGINT, vec FLOAT[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, node_id))""",
    # Every summary a build paid for, committed the moment it is written (issue #46 item 5): a build killed halfway
    # keeps what it bought, and a re-run (same clusters, same members) reads it instead of paying again. Keyed by a
    # hash of the model and the exact request; removed with the workspace.
    """CREATE TABLE IF NOT EXISTS raptor_summaries (
        workspace_id VARCHAR, key VARCHAR, text VARCHAR, created_at TIMESTAMP, PRIMARY KEY (workspace_id, key))""",
)


class Raptor:
    """Written by core/graph/raptor.py's build, read by the `raptor` stage."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def replace(self, workspace: str, nodes: Sequence[RaptorNode], vecs: np.ndarray) -> None:
        with self._db.writer() as cur:
            cur.execute("DELETE FROM raptor_nodes WHERE workspace_id = ?", [workspace])
            if nodes:
                t = now()
                cur.executemany("INSERT INTO raptor_nodes VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
                    [workspace, n.node_id, n.level, n.text, json.dumps(list(n.children)), json.dumps(list(n.chunk_ids)),
                     n.mode, n.model_id, n.corpus_version, [float(x) for x in v], t] for n, v in zip(nodes, vecs)])
            # A finished build: the kept summaries are the tree's own (an update reuses them), nothing older.
            cur.execute("DELETE FROM raptor_summaries WHERE workspace_id = ? AND text NOT IN (SELECT text FROM "
                        "raptor_nodes WHERE workspace_id = ?)", [workspace, workspace])

    def nodes(self, workspace: str) -> tuple[list[RaptorNode], np.ndarray]:
        rows = self._db.cursor().execute(
            "SELECT node_id, level, text, children_json, chunks_json, mode, model_id, corpus_version, vec "
            "FROM raptor_nodes WHERE workspace_id = ? ORDER BY level, node_id", [workspace]).fetchall()
        nodes = [RaptorNode(r[0], int(r[1]), r[2], tuple(json.loads(r[3])), tuple(json.loads(r[4])), r[5], r[6],
                            int(r[7])) for r in rows]
        return nodes, (np.asarray([r[8] for r in rows], dtype=np.float32) if rows else np.zeros((0, 0), np.float32))

    def summary(self, workspace: str, key: str) -> str | None:
        """A summary an earlier build paid for, by its request key (core/graph/raptor.py summary_key)."""
        row = self._db.cursor().execute("SELECT text FROM raptor_summaries WHERE workspace_id = ? AND key = ?",
                                        [workspace, key]).fetchone()
        return str(row[0]) if row else None

    def keep_summary(self, workspace: str, key: str, text: str) -> None:
        """Commit one paid summary now (its own statement): a kill after this loses nothing of it."""
        with self._db.writer() as cur:
            cur.execute("INSERT OR REPLACE INTO raptor_summaries VALUES (?, ?, ?, ?)", [workspace, key, text, now()])

    def state(self, workspace: str) -> tuple[int, str, int] | None:
        """(corpus version, embedder, nodes) of the stored tree, or None when there is none."""
        row = self._db.cursor().execute(
            "SELECT max(corpus_version), max(model_id), count(*) FROM raptor_nodes WHERE workspace_id = ?",
            [workspace]).fetchone()
        return None if row is None or not row[2] else (int(row[0]), str(row[1]), int(row[2]))
