"""Graph review repository: the synonym list, the merge review queue, communities and their cached summaries.
Synonyms and review decisions are user data and survive rebuilds; summaries are keyed by the community's
membership hash, so a community whose members did not change keeps its summary."""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from core.store.db import Cursor, Database, StoreError, id_match, id_relation, insert_rows, now
from core.types import DEFAULT_WORKSPACE, CommunityMember, CommunitySummary, MergeItem

TABLES: tuple[str, ...] = (
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
)


def write_community_rows(cur: Cursor, delete: Sequence[tuple[int, str, str]],
                         rows: Sequence[tuple[int, str, str | None, str, str]], workspace: str) -> int:
    """Part of the community tree rewritten as a row difference, inside the caller's transaction (Graph.finish_state
    writes it with the state row): delete the rows keyed (level, community_id, node_id) in `delete`, insert `rows`,
    and drop the summaries of the deleted rows' memberships that no community holds any more; returns how many
    summaries were dropped. An update whose re-clustered communities mostly come back as they were writes only the
    rows that changed."""
    hashes: list[str] = []
    if delete:
        keys = [f"{level}\x1f{cid}\x1f{nid}" for level, cid, nid in delete]
        with id_match(cur, "_comm_drop", "k", keys) as (match, p):
            hashes = sorted({r[0] for r in cur.execute(
                "DELETE FROM graph_communities WHERE workspace_id = ? AND "
                f"{match('level::VARCHAR || chr(31) || community_id || chr(31) || node_id')} RETURNING members_hash",
                [workspace, *p]).fetchall()})
    insert_rows(cur, "graph_communities", ("workspace_id", "level", "community_id", "parent_id", "node_id",
                                           "members_hash"), [(workspace, *r) for r in rows])
    if not hashes:
        return 0
    with id_match(cur, "_comm_hashes", "h", hashes) as (match, p):
        gone = cur.execute(
            f"DELETE FROM graph_community_summaries WHERE workspace_id = ? AND {match('members_hash')} AND "
            "members_hash NOT IN (SELECT members_hash FROM graph_communities WHERE workspace_id = ? AND "
            f"{match('members_hash')}) RETURNING members_hash", [workspace, *p, workspace, *p]).fetchall()
    return len(gone)


def write_summaries(cur: Cursor, rows: Sequence[tuple[str, int, str, str, str, str, dict[str, Any]]],
                    workspace: str) -> None:
    """Communities.put_summaries() inside the caller's transaction."""
    if not rows:
        return
    at = now()
    cols = ("workspace_id", "members_hash", "level", "community_id", "title", "summary", "mode", "usage_json",
            "created_at")
    last = {r[0]: r for r in rows}  # one row per membership hash (INSERT OR REPLACE took one per key)
    # A delete of the hashes and a plain insert: what INSERT OR REPLACE does, at about half its cost (its key
    # check) for an update's few summaries (INSERT OR IGNORE cost as much as the replace).
    with id_match(cur, "_summ_hashes", "h", sorted(last)) as (match, p):
        cur.execute(f"DELETE FROM graph_community_summaries WHERE workspace_id = ? AND {match('members_hash')}",
                    [workspace, *p])
    insert_rows(cur, "graph_community_summaries", cols,
                [(workspace, mh, level, cid, title, summary, mode, json.dumps(usage), at)
                 for mh, level, cid, title, summary, mode, usage in last.values()])


class Review:
    """Synonyms and the merge review queue (core/graph/build.py, the Graph page)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def synonyms(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, ...]]:
        return [tuple(r[0]) for r in self._db.cursor().execute(
            "SELECT names FROM graph_synonyms WHERE workspace_id = ? ORDER BY line_no", [workspace]).fetchall()]

    def set_synonyms(self, groups: Sequence[Sequence[str]], workspace: str = DEFAULT_WORKSPACE) -> None:
        at = now()
        with self._db.transaction() as cur:
            cur.execute("DELETE FROM graph_synonyms WHERE workspace_id = ?", [workspace])
            for i, names in enumerate(groups):
                cur.execute("INSERT INTO graph_synonyms VALUES (?,?,?,?)", [workspace, i, list(names), at])

    def queue(self, status: str | None = None, workspace: str = DEFAULT_WORKSPACE) -> list[MergeItem]:
        """Merge suggestions, best score first (decisions in the order they were taken)."""
        sql = ("SELECT item_id, keep_id, other_id, keep_name, other_name, score, status, created_at, decided_at "
               "FROM graph_merge_queue WHERE workspace_id = ?")
        params: list[Any] = [workspace]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        sql += " ORDER BY decided_at NULLS FIRST, score DESC, item_id"
        return [MergeItem(*r) for r in self._db.cursor().execute(sql, params).fetchall()]

    def add_suggestions(self, rows: Sequence[tuple[str, str, str, str, str, float]],
                        workspace: str = DEFAULT_WORKSPACE) -> int:
        """Queue (item_id, keep_id, other_id, keep_name, other_name, score) as pending unless the item is already
        queued or decided; returns how many were new. The item id (core.graph.resolve.merge_item_id) names the
        unordered pair, so a decided pair is never suggested again."""
        if not rows:
            return 0
        at = now()
        with self._db.transaction() as cur:
            known = {r[0] for r in cur.execute("SELECT item_id FROM graph_merge_queue WHERE workspace_id = ?",
                                                [workspace]).fetchall()}
            new = []
            for item, keep, other, kname, oname, score in rows:
                if item in known:
                    continue
                known.add(item)
                new.append((workspace, item, keep, other, kname, oname, float(score), "pending", at, None))
            if new:
                cur.executemany("INSERT INTO graph_merge_queue VALUES (?,?,?,?,?,?,?,?,?,?)", new)
        return len(new)

    def set_queue_status(self, item_id: str, status: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        if status not in ("pending", "approved", "rejected"):
            raise StoreError(f"unknown review status {status!r}")
        with self._db.transaction() as cur:
            found = cur.execute("SELECT count(*) FROM graph_merge_queue WHERE workspace_id = ? AND item_id = ?",
                                [workspace, item_id]).fetchone()[0]
            cur.execute("UPDATE graph_merge_queue SET status = ?, decided_at = ? WHERE workspace_id = ? AND item_id = ?",
                        [status, None if status == "pending" else now(), workspace, item_id])
        return bool(found)

    def delete_queue_items(self, item_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> None:
        if not item_ids:
            return
        with self._db.transaction() as cur:
            cur.executemany("DELETE FROM graph_merge_queue WHERE workspace_id = ? AND item_id = ?",
                            [[workspace, i] for i in item_ids])


class Communities:
    """Community membership and cached summaries (core/graph/build.py, summaries.py, search.py)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def put_communities(self, rows: Sequence[tuple[int, str, str | None, str, str]],
                        workspace: str = DEFAULT_WORKSPACE) -> int:
        """Replace the community membership (level, community_id, parent_id, node_id, members_hash) and drop the
        cached summaries of memberships that no longer exist; returns how many summaries were invalidated."""
        with self._db.transaction() as cur:
            cur.execute("DELETE FROM graph_communities WHERE workspace_id = ?", [workspace])
            insert_rows(cur, "graph_communities",
                        ("workspace_id", "level", "community_id", "parent_id", "node_id", "members_hash"),
                        [(workspace, *r) for r in rows])
            stale = ("FROM graph_community_summaries WHERE workspace_id = ? AND members_hash NOT IN "
                     "(SELECT DISTINCT members_hash FROM graph_communities WHERE workspace_id = ?)")
            gone = cur.execute(f"SELECT count(*) {stale}", [workspace, workspace]).fetchone()[0]
            cur.execute(f"DELETE {stale}", [workspace, workspace])
        return int(gone)

    def communities(self, workspace: str = DEFAULT_WORKSPACE) -> list[CommunityMember]:
        """One row per (community, member node), ordered by level, community and node."""
        return [CommunityMember(*r) for r in self._db.cursor().execute(
            "SELECT level, community_id, parent_id, node_id, members_hash FROM graph_communities "
            "WHERE workspace_id = ? ORDER BY level, community_id, node_id", [workspace]).fetchall()]

    def membership_columns(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any]:
        """communities() as columns (level, community_id, parent_id, node_id), ordered: the bulk read of an update."""
        return self._db.cursor().execute(
            "SELECT level, community_id, parent_id, node_id FROM graph_communities WHERE workspace_id = ? "
            "ORDER BY level, community_id, node_id", [workspace]).fetchnumpy()

    def region_columns(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any]:
        """membership_columns() of the level-0 communities holding any of `node_ids` and of every community
        below them (levels nest: a community below holds only nodes of its level-0 community), same order."""
        cur = self._db.cursor()
        with id_relation(cur, "_comm_nodes", "node_id", sorted(set(node_ids))) as (ids, p):
            return cur.execute(
                "WITH roots AS (SELECT DISTINCT community_id FROM graph_communities WHERE workspace_id = ? AND "
                f"level = 0 AND node_id IN {ids}), "
                "region AS (SELECT node_id FROM graph_communities WHERE workspace_id = ? AND level = 0 AND "
                "community_id IN (SELECT community_id FROM roots)) "
                "SELECT level, community_id, parent_id, node_id FROM graph_communities WHERE workspace_id = ? AND "
                "node_id IN (SELECT node_id FROM region) ORDER BY level, community_id, node_id",
                [workspace, *p, workspace, workspace]).fetchnumpy()

    def region_and_keys(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                        ) -> tuple[list[tuple[int, str]], dict[str, Any]]:
        """(community_keys(), region_columns(node_ids) with the members_hash column) in one statement: an update's
        two reads of the community table (each statement is a fixed cost of a small update)."""
        cur = self._db.cursor()
        with id_match(cur, "_comm_nodes", "node_id", sorted(set(node_ids))) as (match, p):
            got = cur.execute(
                "WITH roots AS (SELECT DISTINCT community_id FROM graph_communities WHERE workspace_id = $ws AND "
                f"level = 0 AND {match('node_id').replace('?', '$ids')}), "
                "region AS (SELECT node_id FROM graph_communities WHERE workspace_id = $ws AND level = 0 AND "
                "community_id IN (SELECT community_id FROM roots)) "
                "SELECT DISTINCT 0 AS k, level, community_id, NULL::VARCHAR AS parent_id, NULL::VARCHAR AS node_id, "
                "NULL::VARCHAR AS members_hash FROM graph_communities WHERE workspace_id = $ws "
                "UNION ALL SELECT 1, level, community_id, parent_id, node_id, members_hash FROM graph_communities "
                "WHERE workspace_id = $ws AND node_id IN (SELECT node_id FROM region) "
                "ORDER BY k, level, community_id, node_id", {"ws": workspace, **({"ids": p[0]} if p else {})}
            ).fetchnumpy()
        k = np.asarray(got["k"])
        n_keys = int((k == 0).sum())
        levels, cids = got["level"].tolist(), got["community_id"].tolist()
        keys = [(int(levels[i]), cids[i]) for i in range(n_keys)]
        region = {c: got[c][n_keys:] for c in ("level", "community_id", "parent_id", "node_id", "members_hash")}
        return keys, region

    def community_keys(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[int, str]]:
        """(level, community_id) of every stored community, ordered: one row per community, not per member."""
        return [(int(r[0]), r[1]) for r in self._db.cursor().execute(
            "SELECT DISTINCT level, community_id FROM graph_communities WHERE workspace_id = ? ORDER BY 1, 2",
            [workspace]).fetchall()]

    def drop_summaries_of_nodes(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> int:
        """Drop the cached summaries of every community (any level) that holds one of `node_ids`: their evidence
        changed even where their membership did not. Returns how many were dropped."""
        if not node_ids:
            return 0
        with self._db.transaction() as cur:
            with id_relation(cur, "_sum_nodes", "node_id", sorted(set(node_ids))) as (ids, p):
                gone = cur.execute(
                    "DELETE FROM graph_community_summaries WHERE workspace_id = ? AND members_hash IN (SELECT "
                    f"members_hash FROM graph_communities WHERE workspace_id = ? AND node_id IN {ids}) "
                    "RETURNING members_hash", [workspace, workspace, *p]).fetchall()
        return len(gone)

    def summaries(self, members_hashes: Sequence[str] | None = None,
                  workspace: str = DEFAULT_WORKSPACE) -> dict[str, CommunitySummary]:
        """Cached community summaries by membership hash."""
        sql = ("SELECT members_hash, level, community_id, title, summary, mode, usage_json, created_at "
               "FROM graph_community_summaries WHERE workspace_id = ?")
        params: list[Any] = [workspace]
        if members_hashes is not None:
            if not members_hashes:
                return {}
            sql += " AND list_contains(?, members_hash)"
            params.append(list(set(members_hashes)))
        return {r[0]: CommunitySummary(r[0], int(r[1]), r[2], r[3], r[4], r[5], json.loads(r[6] or "{}"), r[7])
                for r in self._db.cursor().execute(sql, params).fetchall()}

    def summary_hashes(self, workspace: str = DEFAULT_WORKSPACE) -> set[str]:
        """Membership hashes that have a stored summary."""
        return {r[0] for r in self._db.cursor().execute(
            "SELECT members_hash FROM graph_community_summaries WHERE workspace_id = ?", [workspace]).fetchall()}

    def put_summaries(self, rows: Sequence[tuple[str, int, str, str, str, str, dict[str, Any]]],
                      workspace: str = DEFAULT_WORKSPACE) -> None:
        """Several summaries (members_hash, level, community_id, title, summary, mode, usage) in one transaction,
        each replacing the stored one of its membership hash."""
        if not rows:
            return
        with self._db.transaction() as cur:
            write_summaries(cur, rows, workspace)
