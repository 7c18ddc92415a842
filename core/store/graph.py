"""Graph repository: GraphRAG extractions (the chunk provenance of every node and edge), node and edge
aggregates, and the build state. Which name or type a node shows is decided in core/graph/aggregate.py; this
module only reads and writes rows."""
from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any, Sequence

import numpy as np

from core.store.db import SMALL_ROWS, Database, id_match, id_relation, insert_rows, now, register_rows
from core.store.graph_review import write_community_rows, write_summaries
from core.types import (
    DEFAULT_WORKSPACE,
    EdgeChunk,
    GraphEdge,
    GraphNode,
    GraphState,
    NodeChunk,
    NodeFacts,
)

TABLES: tuple[str, ...] = (
    # Per-chunk extractions (graph_mentions, graph_relations) are the chunk provenance of every node and edge;
    # node_id / src_id / dst_id hold the current resolution. graph_nodes and graph_edges are aggregates over them,
    # rewritten in bulk for the affected keys (no primary key: an index would only slow the rewrites).
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
    # Nodes an update has touched and not yet finished (aggregates, communities): written in the transaction that
    # changes their rows, cleared with the state row, so an update killed half-way is finished by the next one.
    # A new table, no migration: created on the first read-write open.
    """CREATE TABLE IF NOT EXISTS graph_dirty (workspace_id VARCHAR, node_id VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS graph_state (
        workspace_id VARCHAR PRIMARY KEY, version BIGINT, corpus_version BIGINT, builder VARCHAR,
        settings_json VARCHAR, stats_json VARCHAR, built_at TIMESTAMP)""",
)


RAW_FACTS = 5000  # node_facts: up to this many mention rows are counted in Python, more are grouped in SQL


def _facts_of(rows: Sequence[tuple[Any, ...]]) -> list[NodeFacts]:
    """node_facts() from mention rows (node_id, chunk_id, doc_id, surface, type, norm, description, count), as the
    grouped statements count them: NULLs skipped, empty descriptions left out, values in sorted order."""
    acc: dict[str, tuple[set[str], set[str], list[int], dict[str, int], dict[str, int], dict[str, int],
                         dict[str, int]]] = {}
    for nid, chunk, doc, surface, type_, norm, desc, count in rows:
        chunks, docs, total, sf, tp, al, ds = acc.setdefault(nid, (set(), set(), [0], {}, {}, {}, {}))
        c = int(count or 0)
        chunks.add(chunk)
        if doc is not None:
            docs.add(doc)
        total[0] += c
        for d, v in ((sf, surface), (tp, type_), (al, norm), (ds, desc)):
            if v is not None and (d is not ds or v != ""):
                d[v] = d.get(v, 0) + c
    return [NodeFacts(nid, {k: sf[k] for k in sorted(sf)}, {k: tp[k] for k in sorted(tp)},
                      len(chunks - {None}), total[0], len(docs), tuple(sorted(al)), tuple(sorted(ds)))
            for nid, (chunks, docs, total, sf, tp, al, ds) in sorted(acc.items())]


def _delete_chunk_rows(cur: Any, chunk_ids: Sequence[str], workspace: str) -> set[str]:
    """Delete these chunks' graph rows (chunk marks, mentions, relations) in the caller's transaction; returns the
    node ids their mentions and relation ends named (the deleted rows say which, so nothing is read first)."""
    with id_match(cur, "_graph_ids", "chunk_id", chunk_ids) as (match, p):
        scope = f"WHERE workspace_id = ? AND {match('chunk_id')}"
        cur.execute(f"DELETE FROM graph_chunks {scope}", [workspace, *p])
        ends = cur.execute(f"DELETE FROM graph_mentions {scope} RETURNING node_id", [workspace, *p]).fetchall()
        ends += cur.execute(f"DELETE FROM graph_relations {scope} RETURNING src_id, dst_id", [workspace, *p]).fetchall()
    return {n for row in ends for n in row if n is not None}


class Graph:
    """Implements core.graph.search's GraphSource and the build workflow's graph tables."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def state(self, workspace: str = DEFAULT_WORKSPACE) -> GraphState | None:
        row = self._db.cursor().execute(
            "SELECT version, corpus_version, builder, settings_json, stats_json, built_at FROM graph_state "
            "WHERE workspace_id = ?", [workspace]).fetchone()
        if row is None:
            return None
        return GraphState(int(row[0]), int(row[1]), row[2], json.loads(row[3] or "{}"), json.loads(row[4] or "{}"),
                          row[5])

    def set_state(self, *, corpus_version: int, builder: str, settings: dict[str, Any], stats: dict[str, Any],
                  workspace: str = DEFAULT_WORKSPACE) -> int:
        """Record a finished build or update; the version moves so in-memory graph caches reload."""
        with self._db.transaction() as cur:
            # Four plain statements: one INSERT OR REPLACE ... RETURNING cost more CPU than all four (its key check).
            old = cur.execute("SELECT version FROM graph_state WHERE workspace_id = ?", [workspace]).fetchone()
            version = (int(old[0]) if old else 0) + 1
            cur.execute("DELETE FROM graph_state WHERE workspace_id = ?", [workspace])
            cur.execute("DELETE FROM graph_dirty WHERE workspace_id = ?", [workspace])
            cur.execute("INSERT INTO graph_state VALUES (?,?,?,?,?,?,?)",
                        [workspace, version, corpus_version, builder, json.dumps(settings, sort_keys=True),
                         json.dumps(stats, sort_keys=True), now()])
        return version

    def finish_state(self, *, builder: str, settings: dict[str, Any], stats: dict[str, Any],
                     workspace: str = DEFAULT_WORKSPACE, community_delete: Sequence[tuple[int, str, str]] = (),
                     community_rows: Sequence[tuple[int, str, str | None, str, str]] = (),
                     summaries: Sequence[tuple[str, int, str, str, str, str, dict[str, Any]]] = ()
                     ) -> tuple[GraphState, dict[str, int], int]:
        """set_state() with the totals() and the corpus version it records read in the same transaction (one
        statement where an update sent three): `stats` gets the node, edge and chunk counts. An update's last
        writes go in the same transaction first: its community rows (graph_review.write_community_rows:
        `community_delete`, `community_rows`) and the summaries of its new memberships (Communities.put_summaries).
        Returns the state written (what state() reads next), the counts and how many summaries the community rows
        invalidated."""
        invalidated = 0
        with self._db.transaction() as cur:
            if community_delete or community_rows:
                invalidated = write_community_rows(cur, community_delete, community_rows, workspace)
            write_summaries(cur, summaries, workspace)
            row = cur.execute(
                "SELECT (SELECT count(*) FROM graph_nodes WHERE workspace_id = $ws), (SELECT count(*) FROM graph_edges "
                "WHERE workspace_id = $ws), (SELECT count(*) FROM graph_chunks WHERE workspace_id = $ws), "
                "(SELECT corpus_version FROM workspaces WHERE workspace_id = $ws), "
                "(SELECT version FROM graph_state WHERE workspace_id = $ws)", {"ws": workspace}).fetchone()
            counts = {"nodes": int(row[0]), "edges": int(row[1]), "chunks": int(row[2])}
            corpus_version, version = int(row[3] or 0), (int(row[4]) if row[4] is not None else 0) + 1
            stats_json, settings_json, at = (json.dumps({**stats, **counts}, sort_keys=True),
                                             json.dumps(settings, sort_keys=True), now())
            cur.execute("DELETE FROM graph_state WHERE workspace_id = ?", [workspace])
            cur.execute("DELETE FROM graph_dirty WHERE workspace_id = ?", [workspace])
            cur.execute("INSERT INTO graph_state VALUES (?,?,?,?,?,?,?)",
                        [workspace, version, corpus_version, builder, settings_json, stats_json, at])
        return GraphState(version, corpus_version, builder, json.loads(settings_json), json.loads(stats_json),
                          at), counts, invalidated

    def first_notice(self, key: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        """True the first time `key` is claimed for the workspace (a meta row remembers it): a notice said once."""
        with self._db.writer() as cur:
            return bool(cur.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING key",
                                    [f"notice:{workspace}:{key}", str(now())]).fetchall())

    def seen_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        """chunk_id -> doc_id of every chunk the graph holds extractions for."""
        return dict(self._db.cursor().execute(
            "SELECT chunk_id, doc_id FROM graph_chunks WHERE workspace_id = ?", [workspace]).fetchall())

    def add_extractions(
        self, chunk_rows: Sequence[tuple[str, str, str]], mention_rows: Sequence[tuple[str, str, str, str, str, int, str]],
        relation_rows: Sequence[tuple[str, str, str, str, float, str]], workspace: str = DEFAULT_WORKSPACE,
    ) -> None:
        """Add the extractions of new chunks: (chunk_id, doc_id, builder), (chunk_id, doc_id, norm, surface, type,
        count, description), (chunk_id, doc_id, src_norm, dst_norm, weight, description). Node ids are set later
        by apply_resolution."""
        at = now()
        with self._db.transaction() as cur:
            insert_rows(cur, "graph_chunks", ("workspace_id", "chunk_id", "doc_id", "builder", "extracted_at"),
                        [(workspace, *r, at) for r in chunk_rows])
            insert_rows(cur, "graph_mentions", ("workspace_id", "chunk_id", "doc_id", "norm", "surface", "type",
                                                "count", "description"),
                        [(workspace, *r) for r in mention_rows])
            insert_rows(cur, "graph_relations", ("workspace_id", "chunk_id", "doc_id", "src_norm", "dst_norm",
                                                 "weight", "description"),
                        [(workspace, *r) for r in relation_rows])

    def replace_extractions(
        self, removed: Sequence[str], chunk_rows: Sequence[tuple[str, str, str]],
        mention_rows: Sequence[tuple[str, str, str, str, str, int, str, str | None]],
        relation_rows: Sequence[tuple[str, str, str, str, float, str, str | None, str | None]],
        workspace: str = DEFAULT_WORKSPACE,
    ) -> tuple[set[str], set[str]]:
        """remove_chunks(removed), add_extractions() of rows already resolved (mention rows end with their node id,
        relation rows with their src and dst node ids) and the dirty marks of both, in one transaction: what an
        update's removal, extraction storage and scoped apply_resolution write, without the UPDATEs that
        re-read the rows just inserted. Returns (the removed chunks' node ids, the new mentions' node ids)."""
        if not removed and not chunk_rows and not mention_rows and not relation_rows:
            return set(), set()  # nothing to write: no transaction (a no-op update writes only its state)
        at = now()
        with self._db.transaction() as cur:
            affected = _delete_chunk_rows(cur, removed, workspace) if removed else set()
            insert_rows(cur, "graph_chunks", ("workspace_id", "chunk_id", "doc_id", "builder", "extracted_at"),
                        [(workspace, *r, at) for r in chunk_rows])
            insert_rows(cur, "graph_mentions", ("workspace_id", "chunk_id", "doc_id", "norm", "surface", "type",
                                                "count", "description", "node_id"),
                        [(workspace, *r) for r in mention_rows])
            insert_rows(cur, "graph_relations", ("workspace_id", "chunk_id", "doc_id", "src_norm", "dst_norm",
                                                 "weight", "description", "src_id", "dst_id"),
                        [(workspace, *r) for r in relation_rows])
            touched = {r[7] for r in mention_rows if r[7] is not None}
            insert_rows(cur, "graph_dirty", ("workspace_id", "node_id"),
                        [(workspace, n) for n in sorted(affected | touched)])
        return affected, touched

    def unresolved_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> list[str]:
        """Chunks with stored extractions that were never resolved (an update stopped part-way)."""
        return [r[0] for r in self._db.cursor().execute(
            "SELECT DISTINCT chunk_id FROM graph_mentions WHERE workspace_id = ? AND node_id IS NULL ORDER BY 1",
            [workspace]).fetchall()]

    def dirty_nodes(self, workspace: str = DEFAULT_WORKSPACE) -> set[str]:
        """Nodes an unfinished update touched (see graph_dirty)."""
        return {r[0] for r in self._db.cursor().execute(
            "SELECT DISTINCT node_id FROM graph_dirty WHERE workspace_id = ?", [workspace]).fetchall()}

    def remove_chunks(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> set[str]:
        """Drop the extractions of chunks that left the corpus; returns the node ids that need re-aggregating
        (marked dirty in the same transaction)."""
        if not chunk_ids:
            return set()
        with self._db.transaction() as cur:
            affected = _delete_chunk_rows(cur, chunk_ids, workspace)
            insert_rows(cur, "graph_dirty", ("workspace_id", "node_id"), [(workspace, n) for n in sorted(affected)])
        return affected

    def elements(self, workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, str]]:
        """Distinct (norm, type) pairs: the atoms entity resolution maps to nodes."""
        return self._db.cursor().execute(
            "SELECT DISTINCT norm, type FROM graph_mentions WHERE workspace_id = ? ORDER BY 1, 2", [workspace]
        ).fetchall()

    def apply_resolution(self, mapping: dict[str, str], *, split_by_type: bool,
                         chunk_ids: Sequence[str] | None = None, workspace: str = DEFAULT_WORKSPACE) -> set[str]:
        """Set node ids from element ids (norm, or norm|type): identity unless `mapping` says otherwise. Relation
        ends take the node id of the same chunk's mention with that norm. `chunk_ids` limits it to new rows and
        returns the node ids of their mentions (marked dirty), which are every node those chunks name: a relation
        end is the node of a mention of its own chunk. Without `chunk_ids` it returns an empty set."""
        elem = "norm || '|' || type" if split_by_type else "norm"
        if chunk_ids is not None and not chunk_ids:
            return set()  # no row in scope: every statement below would change nothing
        touched: set[str] = set()
        with self._db.transaction() as cur, ExitStack() as stack:
            scope, params = "", [workspace]
            if chunk_ids is not None:
                ids, p = stack.enter_context(id_relation(cur, "_graph_ids", "chunk_id", chunk_ids))
                scope, params = f" AND chunk_id IN {ids}", [workspace, *p]
            cur.execute(f"UPDATE graph_mentions SET node_id = {elem} WHERE workspace_id = ?{scope}", params)
            if mapping:
                register_rows(cur, "_graph_map", ("element", "node_id"), sorted(mapping.items()))
                cur.execute(f"UPDATE graph_mentions SET node_id = _graph_map.node_id FROM _graph_map "
                            f"WHERE _graph_map.element = {elem} AND workspace_id = ?{scope}", params)
                cur.unregister("_graph_map")
            r_scope = scope.replace("chunk_id", "r.chunk_id", 1) if scope else ""
            # Scoped, the mentions joined are those of the same chunks only (a relation end is a mention of its own
            # chunk): the join then reads the new rows, not the whole mention table.
            m = (f"(SELECT workspace_id, chunk_id, norm, node_id FROM graph_mentions WHERE workspace_id = ?{scope})"
                 if scope else "graph_mentions")
            m_params = params if scope else []
            for end in ("src", "dst"):
                cur.execute(f"UPDATE graph_relations AS r SET {end}_id = m.node_id FROM {m} AS m "
                            f"WHERE m.workspace_id = r.workspace_id AND m.chunk_id = r.chunk_id "
                            f"AND m.norm = r.{end}_norm AND r.workspace_id = ?{r_scope}", [*m_params, *params])
            if chunk_ids is not None:
                # The resolved chunks' nodes still need their aggregates and communities: dirty until the update ends.
                touched = {r[0] for r in cur.execute(
                    "INSERT INTO graph_dirty SELECT DISTINCT workspace_id, node_id FROM graph_mentions WHERE "
                    f"workspace_id = ? AND node_id IS NOT NULL{scope} RETURNING node_id", params).fetchall()}
        return touched

    def node_facts(self, node_ids: set[str] | None, workspace: str = DEFAULT_WORKSPACE) -> list[NodeFacts]:
        """Plain aggregates of every node (None) or of `node_ids`, from their mentions: surface and type counts,
        chunk/mention/doc counts, sorted aliases and sorted distinct descriptions. Choosing among them is
        core/graph/rules.py's job. Read as flat grouped columns (fetchnumpy) and regrouped here: SQL list
        aggregates fetched row by row were measured ~10x slower on 2,000 SciFact abstracts."""
        if node_ids is not None and not node_ids:
            return []
        cur = self._db.cursor()
        with ExitStack() as stack:
            scope, params = "", [workspace]
            if node_ids is not None:
                match, p = stack.enter_context(id_match(cur, "_graph_aff", "node_id", sorted(node_ids)))
                scope, params = f" AND {match('node_id')}", [workspace, *p]
                # An update's few nodes: their mention rows read once and counted here (the grouped statements
                # below cost several times the read); many rows (hubs) are grouped in SQL.
                rows = cur.execute("SELECT node_id, chunk_id, doc_id, surface, type, norm, description, count FROM "
                                   f"graph_mentions WHERE workspace_id = ? AND node_id IS NOT NULL{scope} "
                                   f"LIMIT {RAW_FACTS + 1}", params).fetchall()
                if len(rows) <= RAW_FACTS:
                    return _facts_of(rows)
            m = f"(SELECT * FROM graph_mentions WHERE workspace_id = ? AND node_id IS NOT NULL{scope})"
            # (name, column, extra filter): descriptions skip empty text, as the node rows always did. The four
            # value counts are one statement (a part per kind), not four: statements were an update's fixed cost.
            kinds = (("surfaces", "surface", ""), ("types", "type", ""), ("aliases", "norm", ""),
                     ("descriptions", "description", " AND description <> ''"))
            union = " UNION ALL ".join(f"SELECT {k} AS k, node_id, {col} AS v, sum(count)::BIGINT AS c FROM {m} "
                                       f"WHERE {col} IS NOT NULL{extra} GROUP BY node_id, {col}"
                                       for k, (_, col, extra) in enumerate(kinds))
            ag = cur.execute(f"SELECT node_id, count(DISTINCT chunk_id), sum(count), count(DISTINCT doc_id) "
                             f"FROM {m} GROUP BY node_id ORDER BY node_id", params).fetchall()
            got = cur.execute(f"{union} ORDER BY k, node_id, v", params * len(kinds)).fetchnumpy()
        parts: dict[str, dict[str, dict[str, int]]] = {key: {} for key, _, _ in kinds}
        names = [key for key, _, _ in kinds]
        for k, nid, val, c in zip(got["k"].tolist(), got["node_id"].tolist(), got["v"].tolist(), got["c"].tolist()):
            parts[names[k]].setdefault(nid, {})[val] = int(c)
        sf, tp, al, ds = parts["surfaces"], parts["types"], parts["aliases"], parts["descriptions"]
        return [NodeFacts(nid, sf.get(nid, {}), tp.get(nid, {}), int(nc), int(nm), int(nd), tuple(al.get(nid, ())),
                          tuple(ds.get(nid, ())))
                for nid, nc, nm, nd in ag]

    def write_aggregates(self, node_ids: set[str] | None, nodes: Sequence[GraphNode],
                         workspace: str = DEFAULT_WORKSPACE) -> None:
        """Replace the aggregate rows of every node (None) or of `node_ids` with `nodes`, and re-aggregate the
        edges touching them from their relations, in one transaction. An edge's weight sums each chunk's
        strongest relation; its description lists up to three distinct ones (strongest per chunk, ties by text).
        Edges stay in SQL: SciFact holds ~1M relation rows, too many to pull into Python per update."""
        if node_ids is not None and not node_ids and not nodes:
            return  # no node to rewrite: no row and no edge would change
        with self._db.transaction() as cur, ExitStack() as stack:
            if node_ids is None:
                cur.execute("DELETE FROM graph_nodes WHERE workspace_id = ?", [workspace])
                cur.execute("DELETE FROM graph_edges WHERE workspace_id = ?", [workspace])
                r_scope, rp = "", []
            else:
                match, p = stack.enter_context(id_match(cur, "_graph_aff", "node_id", sorted(node_ids)))
                cur.execute(f"DELETE FROM graph_nodes WHERE workspace_id = ? AND {match('node_id')}", [workspace, *p])
                cur.execute(f"DELETE FROM graph_edges WHERE workspace_id = ? AND ({match('src')} OR {match('dst')})",
                            [workspace, *p, *p])
                r_scope, rp = f" AND ({match('src_id')} OR {match('dst_id')})", [*p, *p]
            if nodes and len(nodes) <= SMALL_ROWS:  # a few nodes: one bound list per column (no frame to register)
                cols = [list(c) for c in zip(*nodes)]
                cols[7] = [list(a) for a in cols[7]]
                cur.execute("INSERT INTO graph_nodes SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                            "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]), "
                            "unnest(?::BIGINT[]), unnest(?::VARCHAR[][])", [workspace, *cols])
            elif nodes:
                import pandas as pd

                # One frame straight from the rows (measured faster than the generic row-to-column helper here).
                frame = pd.DataFrame.from_records(nodes, columns=GraphNode._fields)
                frame["aliases"] = pd.Series([list(x) for x in frame["aliases"]], dtype="object")
                cur.register("_graph_nodes", frame)
                try:
                    cur.execute("INSERT INTO graph_nodes SELECT ?, node_id, name, type, description, n_chunks, "
                                "n_mentions, n_docs, aliases::VARCHAR[] FROM _graph_nodes", [workspace])
                finally:
                    cur.unregister("_graph_nodes")
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
            """, [workspace, *rp, workspace])

    def nodes(self, workspace: str = DEFAULT_WORKSPACE) -> list[GraphNode]:
        """Ordered by node id."""
        return [GraphNode(*r[:7], tuple(r[7] or ())) for r in self._db.cursor().execute(
            "SELECT node_id, name, type, description, n_chunks, n_mentions, n_docs, aliases FROM graph_nodes "
            "WHERE workspace_id = ? ORDER BY node_id", [workspace]).fetchall()]

    def nodes_by_id(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> list[GraphNode]:
        """nodes() of these ids only (those that exist), ordered by node id: the narrow read of an update."""
        if not node_ids:
            return []
        cur = self._db.cursor()
        with id_relation(cur, "_graph_sel", "node_id", sorted(set(node_ids))) as (ids, p):
            rows = cur.execute(
                "SELECT node_id, name, type, description, n_chunks, n_mentions, n_docs, aliases FROM graph_nodes "
                f"WHERE workspace_id = ? AND node_id IN {ids} ORDER BY node_id", [workspace, *p]).fetchall()
        return [GraphNode(*r[:7], tuple(r[7] or ())) for r in rows]

    def edge_arrays_among(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """edge_arrays() restricted to edges with both ends in `node_ids` (same order): an update's region."""
        if not node_ids:
            return np.zeros(0, dtype=object), np.zeros(0, dtype=object), np.zeros(0, dtype=np.float64)
        cur = self._db.cursor()
        with id_relation(cur, "_graph_sel", "node_id", sorted(set(node_ids))) as (ids, p):
            got = cur.execute(f"SELECT src, dst, weight FROM graph_edges WHERE workspace_id = ? AND src IN {ids} AND "
                              f"dst IN {ids} ORDER BY src, dst", [workspace, *p, *p]).fetchnumpy()
        return (np.asarray(got["src"], dtype=object), np.asarray(got["dst"], dtype=object),
                np.asarray(got["weight"], dtype=np.float64))

    def node_names(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, np.ndarray]:
        """(node_id, name, type, n_chunks) columns of every node, ordered by id: what merge suggestions need of
        the whole graph, without descriptions and aliases."""
        return self._db.cursor().execute(
            "SELECT node_id, name, type, n_chunks FROM graph_nodes WHERE workspace_id = ? ORDER BY node_id",
            [workspace]).fetchnumpy()

    def update_delta(self, workspace: str = DEFAULT_WORKSPACE
                     ) -> tuple[list[str], list[str], set[str], set[str]]:
        """What an update must do, in one statement (each part was a fixed cost of every update): (corpus chunks the
        graph has no extractions for, in corpus order; chunks with extractions that left the corpus, sorted; dirty
        node ids; chunks with extractions never resolved)."""
        rows = self._db.cursor().execute(
            "SELECT 0 AS k, c.chunk_id AS id, c.doc_id AS d, c.ordinal AS o FROM chunks AS c ANTI JOIN (SELECT "
            "chunk_id FROM graph_chunks WHERE workspace_id = $ws) AS g ON g.chunk_id = c.chunk_id "
            "WHERE c.workspace_id = $ws "
            "UNION ALL SELECT 1, g.chunk_id, NULL, NULL FROM graph_chunks AS g ANTI JOIN (SELECT chunk_id FROM chunks "
            "WHERE workspace_id = $ws) AS c ON c.chunk_id = g.chunk_id WHERE g.workspace_id = $ws "
            "UNION ALL SELECT DISTINCT 2, node_id, NULL, NULL FROM graph_dirty WHERE workspace_id = $ws "
            "UNION ALL SELECT DISTINCT 3, chunk_id, NULL, NULL FROM graph_mentions WHERE workspace_id = $ws AND "
            "node_id IS NULL ORDER BY k, d, o, id", {"ws": workspace}).fetchall()
        out: tuple[list[str], list[str], list[str], list[str]] = ([], [], [], [])
        for k, ident, _, _ in rows:
            out[k].append(ident)
        return out[0], out[1], set(out[2]), set(out[3])

    def elements_of_chunks(self, chunk_ids: Sequence[str], norms: Sequence[str] = (),
                           workspace: str = DEFAULT_WORKSPACE, *, skip: Sequence[str] = ()) -> list[tuple[str, str]]:
        """elements() of these chunks' mentions, plus every (norm, type) stored for `norms` (the synonym list's
        keys): the atoms an update's resolution needs. `skip`: chunks whose mentions are left out (ones about to
        be removed)."""
        if not chunk_ids and not norms:
            return []
        cur = self._db.cursor()
        with (id_relation(cur, "_graph_ids", "chunk_id", list(chunk_ids)) as (ids, p),
              id_relation(cur, "_graph_norms", "norm", sorted(set(norms))) as (nrm, q),
              ExitStack() as stack):
            skip_sql, r = "", []
            if skip:
                sk, r = stack.enter_context(id_relation(cur, "_graph_skip", "chunk_id", list(skip)))
                skip_sql = f" AND chunk_id NOT IN {sk}"
            return cur.execute(
                f"SELECT DISTINCT norm, type FROM graph_mentions WHERE workspace_id = ? AND (chunk_id IN {ids} OR "
                f"norm IN {nrm}){skip_sql} ORDER BY 1, 2", [workspace, *p, *q, *r]).fetchall()

    def edges(self, workspace: str = DEFAULT_WORKSPACE) -> list[GraphEdge]:
        """src < dst, ordered."""
        return [GraphEdge(*r) for r in self._db.cursor().execute(
            "SELECT src, dst, weight, n_chunks, description FROM graph_edges WHERE workspace_id = ? ORDER BY src, dst",
            [workspace]).fetchall()]

    def edge_arrays(self, workspace: str = DEFAULT_WORKSPACE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All edges as column arrays (src ids, dst ids, weights), ordered: the bulk read for graph snapshots."""
        got = self._db.cursor().execute(
            "SELECT src, dst, weight FROM graph_edges WHERE workspace_id = ? ORDER BY src, dst", [workspace]
        ).fetchnumpy()
        return (np.asarray(got["src"], dtype=object), np.asarray(got["dst"], dtype=object),
                np.asarray(got["weight"], dtype=np.float64))

    def all_node_chunks(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, np.ndarray]:
        """Provenance of every node as columns (node_id, chunk_id, doc_id, mentions): the bulk read for snapshots."""
        return self._db.cursor().execute(
            "SELECT node_id, chunk_id, doc_id, sum(count)::INTEGER AS mentions FROM graph_mentions "
            "WHERE workspace_id = ? AND node_id IS NOT NULL GROUP BY ALL ORDER BY node_id, chunk_id", [workspace]
        ).fetchnumpy()

    def node_chunks(self, node_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> list[NodeChunk]:
        """Provenance of nodes, ordered by node and chunk."""
        if not node_ids:
            return []
        return [NodeChunk(*r) for r in self._db.cursor().execute(
            "SELECT node_id, chunk_id, doc_id, sum(count)::INTEGER FROM graph_mentions WHERE workspace_id = ? AND "
            "node_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL ORDER BY node_id, chunk_id",
            [workspace, list(node_ids)]).fetchall()]

    def edge_chunks(self, pairs: Sequence[tuple[str, str]], workspace: str = DEFAULT_WORKSPACE) -> list[EdgeChunk]:
        """Provenance of edges for the given pairs (a < b): per chunk, its strongest relation."""
        if not pairs:
            return []
        ends = sorted({n for p in pairs for n in p})
        keys = sorted({f"{min(p)}\x1f{max(p)}" for p in pairs})
        return [EdgeChunk(*r) for r in self._db.cursor().execute(
            "SELECT a, b, chunk_id, first(doc_id), max(weight), first(description ORDER BY weight DESC, description) "
            "FROM (SELECT least(src_id, dst_id) AS a, greatest(src_id, dst_id) AS b, chunk_id, doc_id, weight, "
            "description FROM graph_relations WHERE workspace_id = ? AND src_id IN (SELECT unnest(?::VARCHAR[])) "
            "AND dst_id IN (SELECT unnest(?::VARCHAR[]))) WHERE a || chr(31) || b IN (SELECT unnest(?::VARCHAR[])) "
            "GROUP BY a, b, chunk_id ORDER BY a, b, chunk_id", [workspace, ends, ends, keys]).fetchall()]

    def chunk_nodes(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> list[tuple[str, str]]:
        """(chunk_id, node_id) for every node a chunk mentions."""
        if not chunk_ids:
            return []
        return self._db.cursor().execute(
            "SELECT DISTINCT chunk_id, node_id FROM graph_mentions WHERE workspace_id = ? AND chunk_id IN "
            "(SELECT unnest(?::VARCHAR[])) ORDER BY 1, 2", [workspace, list(chunk_ids)]).fetchall()

    def clear(self, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Forget extractions, aggregates and communities (a full rebuild follows). Synonyms, review decisions
        and summaries stay: summaries of memberships that reappear are still valid."""
        with self._db.transaction() as cur:
            for table in ("graph_chunks", "graph_mentions", "graph_relations", "graph_nodes", "graph_edges",
                          "graph_communities", "graph_state", "graph_dirty"):
                cur.execute(f"DELETE FROM {table} WHERE workspace_id = ?", [workspace])

    def totals(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, int]:
        """counts() of nodes, edges and chunks only: what a build records, without scanning the mention and
        relation tables (the biggest) on every small update."""
        row = self._db.cursor().execute(
            "SELECT (SELECT count(*) FROM graph_nodes WHERE workspace_id = $ws), (SELECT count(*) FROM graph_edges "
            "WHERE workspace_id = $ws), (SELECT count(*) FROM graph_chunks WHERE workspace_id = $ws)",
            {"ws": workspace}).fetchone()
        return {"nodes": int(row[0]), "edges": int(row[1]), "chunks": int(row[2])}

    def counts(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, int]:
        # One statement (eight were a fixed cost of every small update).
        tables = ("graph_chunks", "graph_mentions", "graph_relations", "graph_nodes", "graph_edges",
                  "graph_community_summaries")
        parts = [f"(SELECT count(*) FROM {t} WHERE workspace_id = $ws)" for t in tables]
        parts.append("(SELECT count(DISTINCT (level, community_id)) FROM graph_communities WHERE workspace_id = $ws)")
        parts.append("(SELECT count(*) FROM graph_merge_queue WHERE workspace_id = $ws AND status = 'pending')")
        row = self._db.cursor().execute(f"SELECT {', '.join(parts)}", {"ws": workspace}).fetchone()
        keys = [t.removeprefix("graph_") for t in tables] + ["communities", "pending_merges"]
        return {k: int(v) for k, v in zip(keys, row)}


