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

    def nodes(self, workspace: str) -> tuple[list[RaptorNode], np.ndarray]:
        rows = self._db.cursor().execute(
            "SELECT node_id, level, text, children_json, chunks_json, mode, model_id, corpus_version, vec "
            "FROM raptor_nodes WHERE workspace_id = ? ORDER BY level, node_id", [workspace]).fetchall()
        nodes = [RaptorNode(r[0], int(r[1]), r[2], tuple(json.loads(r[3])), tuple(json.loads(r[4])), r[5], r[6],
                            int(r[7])) for r in rows]
        return nodes, (np.asarray([r[8] for r in rows], dtype=np.float32) if rows else np.zeros((0, 0), np.float32))

    def state(self, workspace: str) -> tuple[int, str, int] | None:
        """(corpus version, embedder, nodes) of the stored tree, or None when there is none."""
        row = self._db.cursor().execute(
            "SELECT max(corpus_version), max(model_id), count(*) FROM raptor_nodes WHERE workspace_id = ?",
            [workspace]).fetchone()
        return None if row is None or not row[2] else (int(row[0]), str(row[1]), int(row[2]))
