"""Caches repository: text embeddings, late-interaction token vectors, graph name vectors, and cache hit events."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from core.store import tokvec_file as tvf
from core.store.db import Cursor, Database, id_relation, now, register_rows, vector_frame
from core.types import DEFAULT_WORKSPACE, CacheEvent

TokenRows = tuple[np.ndarray, np.ndarray, np.ndarray]  # token ids int32, unit vectors float16 (n, dim), spans (n, 2)

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS embedding_cache (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, dim INTEGER, vec FLOAT[], created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
    """CREATE TABLE IF NOT EXISTS cache_events (
        workspace_id VARCHAR, cache VARCHAR, hits INTEGER, misses INTEGER, purpose VARCHAR, created_at TIMESTAMP)""",
    # Late-interaction rerank (core/cascade/rerank.py): token vectors of a text (float16), their token ids and character
    # spans, keyed by model and sha256 of the exact text, so a restart does not re-read every candidate. The bytes
    # live in an append-only file beside the database (core/store/tokvec_file.py); a row says where.
    """CREATE TABLE IF NOT EXISTS token_vector_slots (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, n_tokens INTEGER, dim INTEGER,
        file_offset BIGINT, nbytes BIGINT, created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
    # Before the file: the same data as blobs inside DuckDB. Still read (a database written by older code keeps
    # working) and never written; `compact_token_vectors` moves its rows into the file.
    """CREATE TABLE IF NOT EXISTS token_vectors (
        workspace_id VARCHAR, model_id VARCHAR, text_sha256 VARCHAR, n_tokens INTEGER, dim INTEGER,
        ids BLOB, vecs BLOB, spans BLOB, created_at TIMESTAMP,
        PRIMARY KEY (workspace_id, model_id, text_sha256))""",
    # Node-name vectors (merge suggestions, seeding local search), bulk-written: there are many short names.
    """CREATE TABLE IF NOT EXISTS graph_name_vectors (
        workspace_id VARCHAR, model_id VARCHAR, name_sha256 VARCHAR, vec FLOAT[])""",
)


class Caches:
    """Implements core.cascade.rerank.TokenStore and the embedders' cache-first helpers' EmbeddingCache."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._tv: tvf.TokenVectorFile | None = None  # opened on first use (most Stores never read token vectors)
        self._tv_gen = -1
        self._legacy: bool | None = None  # whether old blob rows exist (then reads fall back to them)
        self._notices: list[str] = []  # what opening the token-vector file found wrong, for take_notices()

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

    def embedding_hashes(self, model_id: str, workspace: str = DEFAULT_WORKSPACE) -> frozenset[str]:
        """Every text hash the embedding cache holds for this model: the Ray engine ships it to its workers (they
        cannot read DuckDB), so they embed only what is not cached, as the local engine does."""
        rows = self._db.cursor().execute("SELECT text_sha256 FROM embedding_cache WHERE workspace_id = ? AND "
                                         "model_id = ?", [workspace, model_id]).fetchall()
        return frozenset(r[0] for r in rows)

    def count_embeddings(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        return int(self._db.cursor().execute(
            "SELECT count(*) FROM embedding_cache WHERE workspace_id = ?", [workspace]).fetchone()[0])

    # -- measured build speeds (core/app/readiness.py reads them for its estimates) ------------------------------
    def put_rate(self, what: str, model_id: str, seconds_per_item: float) -> None:
        """The seconds per item a build or probe on this machine measured, kept in a meta row per (what, model)."""
        with self._db.writer() as cur:
            cur.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [f"rate:{what}:{model_id}",
                                                                     repr(float(seconds_per_item))])

    def rate(self, what: str, model_id: str) -> float | None:
        row = self._db.cursor().execute("SELECT value FROM meta WHERE key = ?", [f"rate:{what}:{model_id}"]).fetchone()
        return float(row[0]) if row else None

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

    # -- late-interaction token vectors (owned by core/cascade/rerank.py) ---------------------------------------------
    # Bytes in core/store/tokvec_file.py's file, rows in token_vector_slots; legacy blob rows (token_vectors) are
    # read too. Every append + commit holds the path lock, so an open elsewhere in this process never cuts bytes
    # whose rows are about to be committed.
    def _tokvec(self) -> tvf.TokenVectorFile:
        """The current generation's file, opened (and, read-write, recovered) on first use and reopened when a
        compaction through another Store of this process moved to a new generation."""
        gen = self._generation()
        if self._tv is not None and self._tv_gen == gen:
            return self._tv
        with tvf.path_lock(self._lock_key):
            if self._tv is not None and self._tv_gen == gen:  # another thread opened it while we waited
                return self._tv
            if self._tv is not None:
                self._tv.close()
            memory = self._db.path == ":memory:"
            self._tv = tvf.TokenVectorFile(None if memory else tvf.file_path(self._db.path, gen),
                                           read_only=self._db.read_only)
            self._tv_gen = gen
            if not memory and not self._db.read_only:
                self._recover(self._tv, gen)
            return self._tv

    @property
    def _lock_key(self) -> str:
        return self._db.path if self._db.path != ":memory:" else f":memory:{id(self._db)}"

    def _generation(self) -> int:
        row = self._db.cursor().execute("SELECT value FROM meta WHERE key = 'tokvec_generation'").fetchone()
        return int(row[0]) if row else 0

    def _recover(self, f: tvf.TokenVectorFile, gen: int) -> None:
        """After a crash: rows pointing past the end of the file are deleted (their texts get recomputed), bytes
        after the last row are cut, and other generations' files (a compaction interrupted) are removed."""
        size = f.size()
        with self._db.transaction() as cur:
            lost = int(cur.execute("SELECT count(*) FROM token_vector_slots WHERE file_offset + nbytes > ?",
                                   [size]).fetchone()[0])
            cur.execute("DELETE FROM token_vector_slots WHERE file_offset + nbytes > ?", [size])
            end = int(cur.execute("SELECT coalesce(max(file_offset + nbytes), 0) FROM token_vector_slots"
                                  ).fetchone()[0])
        if lost:  # said, not done silently: the recompute costs seconds per query until every text is met again
            where = tvf.file_path(self._db.path, gen)
            self._notices.append(
                f"the token-vector file {where.name} {'is missing' if size == 0 else f'holds {size:,} bytes'} but "
                f"the database lists {lost:,} token-vector records beyond that (a database copied without its "
                f"{where.name} file, or a crash): they were dropped, and late-interaction rerank computes them again "
                "as queries meet their chunks (seconds per query at first). Copy the file beside the database to "
                "keep them (the Search Lab offers to encode them all at once: Encode now)")
        if size > end:
            f.truncate(end)
        for p in tvf.stray_files(self._db.path, gen):
            p.unlink(missing_ok=True)

    def take_notices(self) -> list[str]:
        """What opening the token-vector file found wrong since the last call (then forgotten)."""
        out, self._notices = self._notices, []
        return out

    def _has_legacy(self) -> bool:
        if self._legacy is None:
            self._legacy = bool(self._db.cursor().execute("SELECT count(*) FROM token_vectors").fetchone()[0])
        return self._legacy

    def _slots(self, cur: Cursor, model_id: str, hashes: Sequence[str], workspace: str, cols: str) -> list[tuple]:
        # the hashes as one list parameter: a query's read needs no registered frame (no pandas on its path)
        return cur.execute(
            f"SELECT {cols} FROM token_vector_slots WHERE workspace_id = ? AND model_id = ? AND "
            "text_sha256 IN (SELECT unnest(?))", [workspace, model_id, list(set(hashes))]).fetchall()

    def cached_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                             ) -> dict[str, TokenRows]:
        """sha256 -> (token ids int32, unit vectors float16 (n, dim), char spans int32 (n, 2)) for the hashes held.
        One query for the rows, one pass over the file in offset order (a rerank's <= 50 candidates)."""
        if not hashes:
            return {}
        f = self._tokvec()
        slots = self._slots(self._db.cursor(), model_id, hashes, workspace,
                            "text_sha256, file_offset, nbytes, n_tokens, dim")
        out: dict[str, TokenRows] = dict(f.read(slots))  # type: ignore[arg-type]
        rest = [h for h in set(hashes) if h not in out]
        if rest and self._has_legacy():
            rows = self._db.cursor().execute(
                "SELECT text_sha256, n_tokens, dim, ids, vecs, spans FROM token_vectors WHERE workspace_id = ? "
                "AND model_id = ? AND list_contains(?, text_sha256)", [workspace, model_id, rest]).fetchall()
            for h, n, dim, ids, vecs, spans in rows:
                out[h] = (np.frombuffer(ids, dtype=np.int32).copy(),
                          np.frombuffer(vecs, dtype=np.float16).reshape(n, dim).copy(),
                          np.frombuffer(spans, dtype=np.int32).reshape(n, 2).copy())
        return out

    def cache_token_vectors(self, model_id: str, items: Mapping[str, TokenRows],
                            workspace: str = DEFAULT_WORKSPACE) -> None:
        """Append the texts not yet held to the file (fsynced), then commit their rows in one transaction."""
        if not items:
            return
        with tvf.path_lock(self._lock_key):
            f = self._tokvec()
            held = self.held_token_vectors(model_id, list(items), workspace)
            keys = [h for h in items if h not in held]
            if not keys:
                return
            records = [tvf.encode_record(*items[h]) for h in keys]
            offsets = f.append([r for r, _, _ in records])
            rows = [(h, n, dim, off, len(r)) for h, (r, n, dim), off in zip(keys, records, offsets)]
            del records
            with self._db.transaction() as cur:
                self._insert_slots(cur, model_id, workspace, rows)

    @staticmethod
    def _insert_slots(cur: Cursor, model_id: str, workspace: str, rows: Sequence[tuple]) -> None:
        register_rows(cur, "_tv_new", ("h", "n", "dim", "off", "nb"), rows)
        try:
            cur.execute("INSERT OR IGNORE INTO token_vector_slots SELECT ?, ?, h, n::INTEGER, dim::INTEGER, "
                        "off::BIGINT, nb::BIGINT, ? FROM _tv_new", [workspace, model_id, now()])
        finally:
            cur.unregister("_tv_new")

    def held_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                           ) -> set[str]:
        """The hashes among `hashes` whose token vectors are stored, without reading the vectors: the Search Lab
        asks on every new query whether a warm-up is still worth offering, and the vectors are megabytes."""
        if not hashes:
            return set()
        size = self._tokvec().size()
        cur = self._db.cursor()
        got = {h for h, end in self._slots(cur, model_id, hashes, workspace, "text_sha256, file_offset + nbytes")
               if end <= size}
        rest = [h for h in set(hashes) if h not in got]
        if rest and self._has_legacy():
            register_rows(cur, "_tv_h", ("h",), [(h,) for h in rest])
            try:
                got |= {r[0] for r in cur.execute(
                    "SELECT text_sha256 FROM token_vectors WHERE workspace_id = ? AND model_id = ? AND "
                    "text_sha256 IN (SELECT h FROM _tv_h)", [workspace, model_id]).fetchall()}
            finally:
                cur.unregister("_tv_h")
        return got

    def clear_token_vectors(self, workspace: str = DEFAULT_WORKSPACE, model_id: str | None = None) -> int:
        """Delete the rows; their bytes stay in the file as dead space until compact_token_vectors."""
        n = 0
        with self._db.transaction() as cur:
            for table in ("token_vector_slots", "token_vectors"):
                sql, params = f"FROM {table} WHERE workspace_id = ?", [workspace]
                if model_id is not None:
                    sql += " AND model_id = ?"
                    params.append(model_id)
                n += int(cur.execute(f"SELECT count(*) {sql}", params).fetchone()[0])
                cur.execute(f"DELETE {sql}", params)
        self._legacy = None
        return n

    def drop_token_vectors_except(self, keep: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> int:
        """Delete this workspace's token-vector rows whose text hash is not in `keep` (the caller knows which texts
        its chunks and contexts still make: deleted documents' texts are the rest). Rows only: the bytes are dead
        space until compact_token_vectors."""
        n = 0
        with self._db.transaction() as cur:
            register_rows(cur, "_tv_keep", ("h",), [(h,) for h in set(keep)] or [("",)])
            try:
                for table in ("token_vector_slots", "token_vectors"):
                    where = (f"FROM {table} WHERE workspace_id = ? AND text_sha256 NOT IN (SELECT h FROM _tv_keep)")
                    n += int(cur.execute(f"SELECT count(*) {where}", [workspace]).fetchone()[0])
                    cur.execute(f"DELETE {where}", [workspace])
            finally:
                cur.unregister("_tv_keep")
        self._legacy = None
        return n

    def token_vector_space(self) -> dict[str, int]:
        """Bytes of the file, of it that rows still point at, and the legacy blob rows (every workspace)."""
        f = self._tokvec()
        cur = self._db.cursor()
        rows, live = cur.execute("SELECT count(*), coalesce(sum(nbytes), 0) FROM token_vector_slots").fetchone()
        lrows, lbytes = cur.execute("SELECT count(*), coalesce(sum(octet_length(ids) + octet_length(vecs) + "
                                    "octet_length(spans)), 0) FROM token_vectors").fetchone()
        size = f.size()
        return {"file_bytes": size, "rows": int(rows), "live_bytes": int(live), "dead_bytes": size - int(live),
                "legacy_rows": int(lrows), "legacy_bytes": int(lbytes)}

    def compact_token_vectors(self, batch_bytes: int = 64 * 1024 * 1024) -> dict[str, int]:
        """Rewrite the live records (and the legacy blob rows) into a new generation of the file, batch_bytes at a
        time (never all in memory), commit the new offsets and the generation in one transaction, then remove the old
        file. A crash before the commit leaves the old generation in force; after it, the new one."""
        self._refuse_memory()
        self._db._refuse_if_read_only()  # noqa: SLF001 - the store package's own plumbing
        with tvf.path_lock(self._lock_key):
            old = self._tokvec()
            gen = self._tv_gen + 1
            before = self.token_vector_space()
            new = tvf.TokenVectorFile(tvf.file_path(self._db.path, gen))
            new.truncate(0)  # a stray file of that generation from an earlier crash
            moved: list[tuple] = []  # (workspace, model, sha, new offset)
            try:
                slots = self._db.cursor().execute(
                    "SELECT workspace_id, model_id, text_sha256, file_offset, nbytes, n_tokens, dim "
                    "FROM token_vector_slots ORDER BY file_offset").fetchall()
                batch: list[tuple] = []
                size = 0

                def flush() -> None:
                    nonlocal size
                    if not batch:
                        return
                    got = dict(old.read([(str(i), o, b, n, d) for i, (_, _, _, o, b, n, d) in enumerate(batch)]))
                    recs = [(batch[int(i)], tvf.encode_record(*tm)[0]) for i, tm in sorted(got.items(),
                                                                                          key=lambda x: int(x[0]))]
                    offs = new.append([r for _, r in recs])
                    moved.extend((s[0], s[1], s[2], off) for (s, _), off in zip(recs, offs))
                    batch.clear()
                    size = 0

                for s in slots:
                    batch.append(s)
                    size += int(s[4])
                    if size >= batch_bytes:
                        flush()
                flush()
                migrated = self._migrate_legacy(new, batch_bytes)
                with self._db.transaction() as cur:
                    if moved:
                        register_rows(cur, "_tv_moved", ("w", "m", "h", "off"), moved)
                        try:
                            cur.execute("UPDATE token_vector_slots SET file_offset = _tv_moved.off::BIGINT FROM "
                                        "_tv_moved WHERE workspace_id = _tv_moved.w AND model_id = _tv_moved.m AND "
                                        "text_sha256 = _tv_moved.h")
                            # rows whose bytes were unreadable (file cut short) are not carried over
                            cur.execute("DELETE FROM token_vector_slots t WHERE NOT EXISTS (SELECT 1 FROM _tv_moved "
                                        "v WHERE v.w = t.workspace_id AND v.m = t.model_id AND v.h = t.text_sha256)")
                        finally:
                            cur.unregister("_tv_moved")
                    else:
                        cur.execute("DELETE FROM token_vector_slots")
                    for ws, model, rows in migrated:
                        self._insert_slots(cur, model, ws, rows)
                    if migrated:
                        cur.execute("DELETE FROM token_vectors")
                    cur.execute("INSERT OR REPLACE INTO meta VALUES ('tokvec_generation', ?)", [str(gen)])
            except BaseException:
                new.close()
                tvf.file_path(self._db.path, gen).unlink(missing_ok=True)
                raise
            old.close()
            tvf.file_path(self._db.path, gen - 1).unlink(missing_ok=True)
            self._tv, self._tv_gen, self._legacy = new, gen, None
            after = self.token_vector_space()
        return {"generation": gen, "rows": after["rows"], "migrated_legacy_rows": sum(len(r) for *_, r in migrated),
                "bytes_before": before["file_bytes"] + before["legacy_bytes"], "bytes_after": after["file_bytes"]}

    def _migrate_legacy(self, new: tvf.TokenVectorFile, batch_bytes: int) -> list[tuple[str, str, list[tuple]]]:
        """Append the legacy blob rows' data to `new`, a batch at a time; the rows to insert come back."""
        out: dict[tuple[str, str], list[tuple]] = {}
        keys = self._db.cursor().execute("SELECT workspace_id, model_id, text_sha256, octet_length(vecs) FROM "
                                         "token_vectors ORDER BY 1, 2, 3").fetchall()
        i = 0
        while i < len(keys):
            j, size = i, 0
            while j < len(keys) and (j == i or size < batch_bytes):
                size += int(keys[j][3] or 0)
                j += 1
            part = keys[i:j]
            i = j
            recs = []
            for ws, model, h, _ in part:
                row = self._db.cursor().execute(
                    "SELECT n_tokens, dim, ids, vecs, spans FROM token_vectors WHERE workspace_id = ? AND "
                    "model_id = ? AND text_sha256 = ?", [ws, model, h]).fetchone()
                n, dim, ids, vecs, spans = row
                rec, n2, d2 = tvf.encode_record(np.frombuffer(ids, dtype=np.int32),
                                                np.frombuffer(vecs, dtype=np.float16).reshape(n, dim),
                                                np.frombuffer(spans, dtype=np.int32).reshape(n, 2))
                recs.append(((ws, model, h, n2, d2), rec))
            offs = new.append([r for _, r in recs])
            for ((ws, model, h, n, d), rec), off in zip(recs, offs):
                out.setdefault((ws, model), []).append((h, n, d, off, len(rec)))
        return [(ws, model, rows) for (ws, model), rows in out.items()]

    def _refuse_memory(self) -> None:
        if self._db.path == ":memory:":
            raise RuntimeError("an in-memory database has no token vector file to compact")

    def close(self) -> None:
        if self._tv is not None:
            self._tv.close()
            self._tv = None

    # -- graph node-name vectors (core/graph/snapshot.py) -----------------------------------------------------
    def name_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                     ) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        cur = self._db.cursor()
        with id_relation(cur, "_name_h", "h", sorted(set(hashes))) as (hs, p):
            got = cur.execute("SELECT name_sha256, vec FROM graph_name_vectors WHERE workspace_id = ? AND model_id = ? "
                              f"AND name_sha256 IN {hs}", [workspace, model_id, *p]).to_arrow_table()
        # One flat read of the list column, cut into rows (per-row arrays were most of an update's suggestion time).
        keys = got.column("name_sha256").to_pylist()
        vec = got.column("vec").combine_chunks()
        flat = np.asarray(vec.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
        offsets = np.asarray(vec.offsets.to_numpy(), dtype=np.int64)
        offsets -= offsets[0] if len(offsets) else 0
        return {h: flat[offsets[i]:offsets[i + 1]] for i, h in enumerate(keys)}

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
