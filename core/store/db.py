"""One DuckDB connection shared by the role repositories: a write lock, a cursor per call, schema + version row.

Concurrency rule (measured with duckdb 1.5.5; tests/test_store.py::test_read_only_* pin it):
- Inside one process, one `Database` object serves every thread: each call takes its own cursor, writes are
  serialised by one lock (Streamlit serves sessions from threads).
- Across processes DuckDB allows EITHER one read-write process OR any number of read-only processes. A process
  that opens the file while another holds it read-write fails (read-only or not) with a lock error, and a
  read-write open fails while any read-only process holds it. So the CLI's read commands and a second scoring
  process open with `read_only=True` and can run side by side, but only while no writer (e.g. the app) is open.
- A read-only Database never migrates; any write through it raises StoreError instead of a DuckDB error.
- The same file cannot be opened twice in one process with different modes (DuckDB refuses the second config).
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
import weakref
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import duckdb
import numpy as np

from core.types import DEFAULT_WORKSPACE

SCHEMA_VERSION = 4

Cursor = duckdb.DuckDBPyConnection

# Write generation per database file: bumped after every write this process makes through a `Database`
# (transaction or writer, committed or rolled back). Keyed by the file, not the object: DuckDB hands two
# connections to the same file in one process the same database, so a write through one must be seen by a reader
# of the other. Another process cannot write while we hold the file (see the concurrency rule above), so reads may
# be memoised per generation (Corpus.corpus_version is read ~9 times per query).
_GENERATIONS: dict[str, int] = {}
_GEN_LOCK = threading.Lock()
# Every open read-write Database per file in this process: compaction swaps the file, so each of them must let go
# of the old one first (DuckDB keeps a file open while any connection to it lives) and open the new one after.
_OPEN: dict[str, "weakref.WeakSet[Database]"] = {}
COMPACT_SUFFIX = ".compact"  # the rewritten copy while it is written; a stray one (a crash) is removed on open
# The swap lock (issue #46 item 1): compaction closes every connection of this process, swaps the file and reopens;
# a process that opens the file in that gap (a CLI writer polling for it, the documented CLI-beside-the-app setup)
# would take it and leave the app without a connection. Every open of a file takes this lock shared around its
# connect, the swap takes it exclusive from the first close to the last reopen, so nobody can slip in between.
SWAP_LOCK_SUFFIX = ".swap-lock"
SWAP_WAIT_S = 120.0  # how long an open waits for a swap in progress (a swap of a multi-GB file takes seconds)
REOPEN_WAIT_S = 30.0  # how long compaction retries its own reopen when something that ignores the lock holds the file


class StoreError(RuntimeError):
    """A store operation failed; the message is fit for the user."""


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


META_TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
    # Every table carries workspace_id so separate workspaces (isolated corpora and caches) need no migration.
    """CREATE TABLE IF NOT EXISTS workspaces (
        workspace_id VARCHAR PRIMARY KEY, name VARCHAR, corpus_version BIGINT DEFAULT 0, created_at TIMESTAMP)""",
)


def insert_workspace(cur: Cursor, workspace: str, name: str | None = None) -> None:
    """Create the workspace row if missing. A name used by a deleted workspace starts above the corpus version that
    one reached (core/store/workspaces.py), so caches keyed by (workspace, corpus version) never see old for new."""
    cur.execute("INSERT INTO workspaces SELECT ?, ?, coalesce((SELECT CAST(value AS BIGINT) FROM meta WHERE key = ?), "
                "0), ? ON CONFLICT DO NOTHING", [workspace, name or workspace, "corpus_version_floor:" + workspace, now()])


def _table_name(ddl: str) -> str:
    return ddl.split("EXISTS", 1)[1].split("(", 1)[0].strip()


@dataclass(frozen=True)
class CompactReport:
    """What a compaction did: file bytes (database + WAL) before and after, and the seconds it took."""

    bytes_before: int
    bytes_after: int
    seconds: float


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + ".wal") if os.path.exists(p))


def _remove(path: str) -> None:
    for p in (path, path + ".wal"):
        if os.path.exists(p):
            os.remove(p)


@contextmanager
def swap_lock(path: str, *, exclusive: bool, wait_s: float = SWAP_WAIT_S) -> Iterator[None]:
    """The file's swap lock (flock on `<db>.swap-lock`): shared around an open, exclusive around compaction's swap.
    Waits up to `wait_s`, then raises StoreError naming the lock."""
    fd = os.open(path + SWAP_LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(f"database {path} is being rewritten (a workspace delete); waited {wait_s:g} s "
                                     f"for {path + SWAP_LOCK_SUFFIX}") from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _connect(path: str, read_only: bool) -> Cursor:
    if path == ":memory:":
        return duckdb.connect(path)
    with swap_lock(path, exclusive=False):
        return duckdb.connect(path, read_only=read_only)


class Database:
    """A DuckDB file (or :memory:). `tables` is every repository's DDL; they are created on a read-write open."""

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False,
                 tables: Sequence[str] = (), migrations: Sequence[tuple[int, str]] = ()) -> None:
        self.path = str(path)
        self.read_only = bool(read_only)
        if self.read_only and self.path == ":memory:":
            raise StoreError("an in-memory database cannot be opened read-only (there is nothing to read)")
        if self.read_only and not Path(self.path).is_file():
            raise StoreError(f"cannot open {self.path} read-only: no such database file")
        if self.path != ":memory:" and not self.read_only:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.first_open = False  # the first read-write Database of this file in this process (finishes journals)
        try:
            self._con: Cursor | None = _connect(self.path, self.read_only)
        except duckdb.Error as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                raise StoreError(
                    f"database {self.path} is in use by another process: DuckDB allows one writing process or "
                    f"several read-only ones, not both ({msg.splitlines()[0]})") from exc
            raise StoreError(f"cannot open database {self.path}: {msg}") from exc
        self._write_lock = threading.RLock()
        self._swap_lock = threading.RLock()
        # An in-memory database is private to its connection: its own key.
        self._gen_key = f"memory:{id(self)}" if self.path == ":memory:" else str(Path(self.path).resolve())
        self._ddl = (*META_TABLES, *tables)
        # (version, statement): what turns a file of version-1 into one of `version`; idempotent statements, since
        # the tables above are created in their newest form.
        self._migrations = tuple(sorted(migrations))
        if self.read_only:
            self._check_schema()
        else:
            if self.path != ":memory:":
                with _GEN_LOCK:
                    peers = _OPEN.setdefault(self._gen_key, weakref.WeakSet())
                    first = not peers
                    peers.add(self)
                self.first_open = first
                if first:
                    _remove(self.path + COMPACT_SUFFIX)  # a compaction that did not finish: the old file is in force
            self._migrate()

    # -- plumbing -------------------------------------------------------------------------------------------------
    def cursor(self) -> Cursor:
        with self._swap_lock:  # waits only while compact() swaps the file (between close and reopen)
            if self._con is None:  # a reopen after a swap failed (another process held the file): try again now
                self._reopen(wait_s=0.0)
            assert self._con is not None
            return self._con.cursor()

    def _reopen(self, wait_s: float) -> None:
        """Connect again after a swap; retried for `wait_s` while another process holds the file. On failure the
        connection stays unset and the next cursor() tries again, so a lost race is never a lost app."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._con = duckdb.connect(self.path)
                return
            except duckdb.Error as exc:
                self._con = None
                if time.monotonic() >= deadline:
                    raise StoreError(f"database {self.path} is held by another process after a rewrite; the next "
                                     f"call retries ({str(exc).splitlines()[0]})") from None
                time.sleep(0.1)

    @property
    def generation(self) -> int:
        """Changes after every write to this file made in this process (memo key for cheap re-reads)."""
        return _GENERATIONS.get(self._gen_key, 0)

    def _bump(self) -> None:
        with _GEN_LOCK:
            _GENERATIONS[self._gen_key] = _GENERATIONS.get(self._gen_key, 0) + 1

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise StoreError(f"database {self.path} is open read-only: this operation writes")

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """One all-or-nothing write: a failure inside rolls everything back."""
        self._refuse_if_read_only()
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()
                self._bump()

    @contextmanager
    def writer(self) -> Iterator[Cursor]:
        """A single-statement write (auto-committed) under the write lock."""
        self._refuse_if_read_only()
        with self._write_lock:
            cur = self.cursor()
            try:
                yield cur
            finally:
                cur.close()
                self._bump()

    # -- schema ---------------------------------------------------------------------------------------------------
    def _up_to_date(self) -> bool:
        """Every table there, the version this code writes and the default workspace row: nothing to migrate, so the
        open reads three rows and writes nothing (a write is a commit, an fsync, on every CLI command)."""
        cur = self.cursor()
        have = {r[0] for r in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if {_table_name(d) for d in self._ddl} - have:
            return False
        row = cur.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            return False
        return cur.execute("SELECT 1 FROM workspaces WHERE workspace_id = ?", [DEFAULT_WORKSPACE]).fetchone() is not None

    def _migrate(self) -> None:
        if self.path != ":memory:" and self._up_to_date():
            return
        with self.transaction() as cur:
            for ddl in self._ddl:
                cur.execute(ddl)
            row = cur.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                cur.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"database {self.path} has schema v{row[0]}, newer than this code (v{SCHEMA_VERSION})")
            elif int(row[0]) < SCHEMA_VERSION:
                for version, sql in self._migrations:
                    if version > int(row[0]):
                        cur.execute(sql)
                cur.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        self.ensure_workspace(DEFAULT_WORKSPACE)

    def _check_schema(self) -> None:
        # Read-only cannot create tables: a file written by older code (missing tables) must be opened once
        # read-write to migrate, and we say so instead of failing later on the first query.
        have = {r[0] for r in self.cursor().execute("SELECT table_name FROM information_schema.tables").fetchall()}
        missing = sorted({_table_name(d) for d in self._ddl} - have)
        if missing:
            raise StoreError(f"database {self.path} lacks tables {', '.join(missing)}: open it once read-write "
                             "(e.g. `python -m core ingest`) to create them")
        v = self.schema_version()
        if v > SCHEMA_VERSION:
            raise StoreError(f"database {self.path} has schema v{v}, newer than this code (v{SCHEMA_VERSION})")
        if v < SCHEMA_VERSION:
            raise StoreError(f"database {self.path} has schema v{v}, older than this code (v{SCHEMA_VERSION}): open "
                             "it once read-write (e.g. `python -m core ingest`) to migrate it")

    def schema_version(self) -> int:
        row = self.cursor().execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    def ensure_workspace(self, workspace: str, name: str | None = None) -> None:
        with self.writer() as cur:
            insert_workspace(cur, workspace, name)

    def workspaces(self) -> list[str]:
        return [r[0] for r in self.cursor().execute("SELECT workspace_id FROM workspaces ORDER BY 1").fetchall()]

    def close(self) -> None:
        with _GEN_LOCK:
            _OPEN.get(self._gen_key, weakref.WeakSet()).discard(self)
        if self._con is not None:
            self._con.close()

    # -- compaction -----------------------------------------------------------------------------------------------
    def compact(self, progress: Callable[[str], None] | None = None) -> CompactReport:
        """Rewrite the file with its live rows only, so deleted rows leave no bytes behind (DuckDB reuses freed
        blocks but never clears them: a deleted document's text stays readable in the file until overwritten).

        How: checkpoint, copy every table into a new file (ATTACH + COPY FROM DATABASE), close every connection of
        this process to the file, swap the new file in (os.replace: a crash leaves the old or the new file, never
        half of one; a leftover copy is removed on the next open), reopen. Writes wait on the write lock of every
        Database on the file and new cursors wait for the reopen; a read already running in another thread at the
        moment of the swap fails (its connection is closed under it). The swap holds the file's swap lock exclusive
        (see SWAP_LOCK_SUFFIX) so no other process opens the file in the gap; a reopen that still fails is retried
        by the next cursor(). An in-memory database has no file: nothing to do."""
        say = progress or (lambda _msg: None)
        if self.path == ":memory:":
            return CompactReport(0, 0, 0.0)
        self._refuse_if_read_only()
        t0 = time.perf_counter()
        with _GEN_LOCK:
            peers = sorted(_OPEN.get(self._gen_key, weakref.WeakSet()), key=id)
        if self not in peers:
            peers.append(self)
        tmp = self.path + COMPACT_SUFFIX
        with ExitStack() as stack:
            for db in peers:
                stack.enter_context(db._write_lock)  # noqa: SLF001 - Database's own plumbing
            before = _file_bytes(self.path)
            say(f"compacting the database: copying live rows out of {before / 2**20:,.1f} MiB…")
            con = self._con
            assert con is not None
            con.execute("CHECKPOINT")
            name = con.execute("SELECT current_database()").fetchone()[0]
            _remove(tmp)
            quoted = tmp.replace("'", "''")
            con.execute(f"ATTACH '{quoted}' AS __compact")
            try:
                con.execute(f'COPY FROM DATABASE "{name}" TO __compact')
            except BaseException:
                con.execute("DETACH __compact")
                _remove(tmp)
                raise
            con.execute("DETACH __compact")
            say("compacting the database: swapping in the rewritten file…")
            for db in peers:
                stack.enter_context(db._swap_lock)  # noqa: SLF001 - new cursors wait for the reopen
            stack.enter_context(swap_lock(self.path, exclusive=True))  # other processes wait for the reopen
            for db in peers:
                if db._con is not None:  # noqa: SLF001
                    db._con.close()  # noqa: SLF001
                    db._con = None  # noqa: SLF001
            try:
                # The closes checkpointed the old file: its WAL (if any) belongs to it and must not be replayed into
                # the new one.
                if os.path.exists(self.path + ".wal"):
                    os.remove(self.path + ".wal")
                os.replace(tmp, self.path)
                _fsync_dir(self.path)
            finally:
                lost: StoreError | None = None
                for db in peers:
                    try:
                        db._reopen(REOPEN_WAIT_S)  # noqa: SLF001
                    except StoreError as exc:
                        lost = lost or exc
                if lost is not None:
                    raise lost
            self._bump()
        after = _file_bytes(self.path)
        report = CompactReport(before, after, round(time.perf_counter() - t0, 3))
        say(f"compacted the database: {before / 2**20:,.1f} MiB -> {after / 2**20:,.1f} MiB in {report.seconds:.1f} s")
        return report


def _fsync_dir(path: str) -> None:
    """Make the rename itself durable (the directory entry), where the platform allows opening a directory."""
    try:
        fd = os.open(str(Path(path).parent), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- bulk frames --------------------------------------------------------------------------------------------------
def vector_frame(keys: Sequence[str], vectors: np.ndarray) -> Any:
    """(key, vec) rows as one scan-able frame. Why: executemany binds FLOAT[] lists row by row, measured here at
    several ms per row; one INSERT ... SELECT from a frame costs about as much as one row (bench/README.md)."""
    import pandas as pd

    rows = np.asarray(vectors, dtype=np.float32)
    return pd.DataFrame({"key": pd.Series(list(keys), dtype="object"),
                         "vec": pd.Series(list(rows), dtype="object")})


_ARROW_PLAIN = ("string", "int64", "double", "bool", "timestamp[us]")


def register_rows(cur: Cursor, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Register rows as a scan-able relation: bulk inserts and hash joins instead of per-row statements. Columns
    of plain strings, numbers and naive timestamps go in as an Arrow table (pandas' string conversion was most of
    the cost of an incremental graph update's id lists); anything else (lists, vectors, all-NULL) as a frame."""
    import pandas as pd

    data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
    if rows:
        import pyarrow as pa

        try:
            arrays = {c: pa.array(v) for c, v in data.items()}
        except (pa.ArrowException, TypeError, ValueError):
            arrays = {}
        if arrays and all(str(a.type) in _ARROW_PLAIN for a in arrays.values()):
            cur.register(name, pa.table(arrays))
            return
    frame = pd.DataFrame({c: pd.Series(v, dtype="object" if not v or isinstance(v[0], (list, tuple)) else None)
                          for c, v in data.items()})
    cur.register(name, frame)


# Up to this many rows (or values), a bound list per column beats registering an Arrow table or frame: a small
# incremental graph update runs many registrations of a few dozen ids each, and a registered scan costs more CPU
# than a bound list there; past the break-even the registered table is as fast or faster.
SMALL_ROWS = 500
SMALL_IDS = 1000  # the same for a one-column id set in `IN (...)`
_PLAIN = (str, int, float, bool, datetime)


def _plain_columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]] | None:
    """The rows as column lists when each column holds one plain type (str, int within BIGINT, float, bool, naive
    datetime) or None: what a bound list converts exactly as the Arrow path would. None otherwise."""
    cols = [list(c) for c in zip(*rows)]
    for col in cols:
        kinds = {type(v) for v in col if v is not None}
        if len(kinds) > 1 or (kinds and next(iter(kinds)) not in _PLAIN):
            return None
        if int in kinds and any(not -2**63 <= v < 2**63 for v in col if v is not None):
            return None
        if datetime in kinds and any(v.tzinfo is not None for v in col if v is not None):
            return None
    return cols


@contextmanager
def id_relation(cur: Cursor, name: str, column: str, values: Sequence[str]) -> Iterator[tuple[str, list[Any]]]:
    """A one-column relation of `values` (strings) for `IN <relation>`: yields (SQL subquery, its parameters in
    order). Up to SMALL_IDS values a bound list; more a registered Arrow column `name`, unregistered on exit."""
    if len(values) <= SMALL_IDS:
        yield f"(SELECT unnest(?::VARCHAR[]) AS {column})", [list(values)]
        return
    register_rows(cur, name, (column,), [(v,) for v in values])
    try:
        yield f"(SELECT {column} FROM {name})", []
    finally:
        cur.unregister(name)


# Up to this many values, `list_contains(?, expr)` (a filter on the scan) beats `expr IN (SELECT unnest(?))` (a join
# the optimizer plans) on a small graph update's aggregate rewrite; with hundreds of values the join is faster.
SMALL_LIST = 32


@contextmanager
def id_match(cur: Cursor, name: str, column: str, values: Sequence[str]
             ) -> Iterator[tuple[Callable[[str], str], list[Any]]]:
    """A predicate on `values` (strings): yields (match, parameters), where match(expr) is SQL testing expr against
    them, to be followed by the parameters at each use: list_contains of a bound list up to SMALL_LIST values,
    else `expr IN <id_relation>`."""
    if len(values) <= SMALL_LIST:
        yield (lambda expr: f"list_contains(?::VARCHAR[], {expr})"), [list(values)]
        return
    with id_relation(cur, name, column, values) as (ids, p):
        yield (lambda expr: f"{expr} IN {ids}"), p


def insert_rows(cur: Cursor, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """INSERT the rows in bulk."""
    if not rows:
        return
    cols = ", ".join(columns)
    plain = _plain_columns(rows) if len(rows) <= SMALL_ROWS else None
    if plain is not None:  # one bound list per column, zipped by unnest
        cur.execute(f"INSERT INTO {table} ({cols}) SELECT {', '.join('unnest(?)' for _ in columns)}", plain)
        return
    register_rows(cur, "_bulk_rows", columns, rows)
    try:
        cur.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _bulk_rows")
    finally:
        cur.unregister("_bulk_rows")
