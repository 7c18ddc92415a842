"""The SQL sandbox: one read-only SELECT over a workspace's tables, checked by DuckDB's own parser before it runs,
then run in a worker process on a private in-memory connection that holds only those tables (no file, URL or
extension access, its settings locked) with a row cap, byte caps on cells and results, and hard limits.

Why a worker process (issue #46 items 2 and 9): DuckDB's memory_limit covers its buffer manager only (a
`repeat('x', 50000000)` per row peaked at 7 GB under a 256 MB limit) and an interrupt is honoured only between
vectors (one query ran 22 s against its limit). The worker runs under RLIMIT_DATA (MEMORY_MB for DuckDB plus
WORKER_OVERHEAD_MB plus the tables it holds) and the caller kills it at `timeout_s` + KILL_GRACE_S; both limits are
hard. It is started with `python -m core.store.sql` (never forked from the app), fed the tables once as Arrow IPC,
reused across queries and restarted after a kill. Results come back as Arrow IPC (nothing is unpickled).
"""
from __future__ import annotations

import atexit
import json
import re
import resource
import sys
import threading
import time
from typing import Any, Iterator, Mapping

import duckdb

from core.types import SqlResult
from core.safeio.worker import WallDeadline, Worker, read_exact, read_request, ready, write_reply

MAX_SQL_CHARS = 10_000
MAX_ROWS = 1_000
TIMEOUT_S = 5.0  # the pipeline's SQL stage and the agent's tool; a user's own query gets core.app.tables.USER_TIMEOUT_S
MEMORY_MB = 256  # DuckDB's own memory_limit inside the worker
WORKER_OVERHEAD_MB = 384  # the worker's interpreter, DuckDB and allocations outside its buffer manager
KILL_GRACE_S = 1.0  # the worker interrupts itself at timeout_s; the caller kills it this much later
STARTUP_TIMEOUT_S = 60.0  # a worker's imports on a busy 2-core machine
MAX_CELL_CHARS = 10_000  # a text (or blob) value longer than this comes back cut, and the result says so
MAX_RESULT_BYTES = 4 << 20  # a result's Arrow bytes; rows past this are dropped, and the result says so
# Table references a SELECT may hold: the workspace's tables, joins, subqueries, VALUES lists and no FROM at all.
ALLOWED_REFS = frozenset({"BASE_TABLE", "JOIN", "SUBQUERY", "EMPTY", "EXPRESSION_LIST"})
# Scalar functions refused by name: they read the machine, the settings or the catalogue, not the tables.
DENIED_FUNCTIONS = frozenset({"getenv", "current_setting", "query", "query_table", "glob", "checkpoint",
                              "force_checkpoint", "enable_profiling", "disable_profiling", "which_secret",
                              "current_database", "current_schema", "current_schemas", "version"})
DENIED_PREFIXES = ("read_", "duckdb_", "pragma_", "sqlite_", "pg_", "parquet_", "json_execute", "load_", "install_")


# A SELECT starts with one of these (after comments and parentheses); anything else is refused before parsing.
_READ_STARTS = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE", "SHOW", "DESCRIBE", "SUMMARIZE", "PIVOT",
                          "UNPIVOT", "EXPLAIN"})
_FIRST_WORD = re.compile(r"(?:\s|\(|--[^\n]*\n|/\*.*?\*/)*([A-Za-z_]+)", re.S)


class SqlRefused(ValueError):
    """A query the sandbox will not run; the message says why, fit for the user."""


def _walk(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _scoped_refs(node: Any, scope: frozenset[str], out: list[tuple[Mapping[str, Any], frozenset[str]]]) -> None:
    """Every table reference with the CTE names visible at it: a WITH's names are in scope in its own statement
    (its body and its CTEs) only, so a CTE named after a system view cannot let that view through elsewhere in the
    query (issue #46 item 9)."""
    if isinstance(node, dict):
        cte = node.get("cte_map")
        if isinstance(cte, dict):
            names = {str(e.get("key", "")).lower() for e in cte.get("map", []) if isinstance(e, dict)}
            scope = scope | names
        if isinstance(node.get("type"), str) and "alias" in node and "sample" in node:
            out.append((node, scope))
        for v in node.values():
            _scoped_refs(v, scope, out)
    elif isinstance(node, list):
        for v in node:
            _scoped_refs(v, scope, out)


# Functions the parser itself writes for literals, with schema "main": a list [1, 2] and a struct {'a': 1}.
LITERAL_FUNCTIONS = frozenset({"list_value", "struct_pack"})


class SqlSandbox:
    """A worker process holding a private DuckDB connection with copies of one workspace's tables and nothing else.
    Built by core/store/tables.py (Tables.sandbox); `run` checks (here, on a connection holding no data) and runs
    one query (there). Thread-safe: queries take turns on the one worker."""

    def __init__(self, tables: Mapping[str, Any], *, memory_mb: int = MEMORY_MB) -> None:
        """`tables`: name -> a pyarrow Table (the workspace's rows, copied in)."""
        import pyarrow as pa

        self.tables = tuple(sorted(tables))
        self.memory_mb = int(memory_mb)
        # The parser's connection: no tables, no files; check() serialises queries with it.
        self._con = duckdb.connect(":memory:", config={"enable_external_access": False,
                                                       "autoload_known_extensions": False,
                                                       "autoinstall_known_extensions": False})
        self._con.execute("SET lock_configuration = true")
        parts: list[bytes] = []
        for name in self.tables:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, tables[name].schema) as writer:
                writer.write_table(tables[name])
            parts.append(sink.getvalue().to_pybytes())
        self._load = ({"op": "load", "tables": [[n, len(b)] for n, b in zip(self.tables, parts)],
                       "memory_mb": self.memory_mb}, b"".join(parts))
        self.hard_mb = self.memory_mb + WORKER_OVERHEAD_MB + 2 * (len(self._load[1]) >> 20)
        self._worker: _SqlWorker | None = None
        self._lock = threading.Lock()
        self.started = 0  # workers started so far (tests read it)
        self.peak_worker_kb = 0

    def check(self, sql: str) -> str:
        """The query, stripped, if it is one SELECT over this workspace's tables; SqlRefused otherwise."""
        text = (sql or "").strip().rstrip(";").strip()
        if not text:
            raise SqlRefused("the query is empty")
        if len(text) > MAX_SQL_CHARS:
            raise SqlRefused(f"the query is {len(text):,} characters long (at most {MAX_SQL_CHARS:,})")
        first = _FIRST_WORD.match(text)
        if first and first.group(1).upper() not in _READ_STARTS:
            raise SqlRefused(f"only a read-only SELECT may run; this starts with {first.group(1).upper()}")
        cur = self._con.cursor()  # a cursor per call: Streamlit sessions share the sandbox from several threads
        try:
            try:
                # Parsing some statements touches files (IMPORT DATABASE reads its schema.sql): this connection has
                # no file access, so that is refused, not read.
                statements = cur.extract_statements(text)
            except duckdb.PermissionException as exc:
                raise SqlRefused("it refers to a file or URL: only the workspace's tables may be read") from exc
            except duckdb.Error as exc:
                raise SqlRefused(f"not valid SQL: {str(exc).splitlines()[0]}") from exc
            if len(statements) != 1:
                raise SqlRefused(f"one statement only: found {len(statements)} (no ';' between statements)")
            kind = statements[0].type.name
            if kind != "SELECT":
                raise SqlRefused(f"only a read-only SELECT may run; this is a {kind} statement")
            row = cur.execute("SELECT json_serialize_sql(?)", [text]).fetchone()
        finally:
            cur.close()
        tree = json.loads(row[0]) if row else {"error": True}
        if tree.get("error"):
            raise SqlRefused("only a plain SELECT may run (PIVOT, EXPLAIN and the like are not allowed): "
                             f"{tree.get('error_message', 'cannot check this query')}")
        tables = frozenset(t.lower() for t in self.tables)
        refs: list[tuple[Mapping[str, Any], frozenset[str]]] = []
        try:
            _scoped_refs(tree, frozenset(), refs)
            nodes = list(_walk(tree))
        except RecursionError:
            raise SqlRefused("the query is nested too deeply to check") from None
        for node, scope in refs:  # table references first: their reasons are the clearer ones
            if node["type"] not in ALLOWED_REFS:
                raise SqlRefused(f"{self._ref_label(node)} is not allowed: only the workspace's tables may be "
                                 "read")
            if node["type"] == "BASE_TABLE":
                self._check_table(node, tables | scope)
        for node in nodes:
            if node.get("class") == "FUNCTION":
                self._check_function(node)
        return text

    @staticmethod
    def _ref_label(node: Mapping[str, Any]) -> str:
        kind = node.get("type")
        if kind == "TABLE_FUNCTION":
            fn = node.get("function") or {}
            return f"the table function {fn.get('function_name', '?')}()"
        if kind == "SHOW_REF":
            return "SHOW / DESCRIBE / SUMMARIZE (the Corpus page lists the tables and their columns)"
        return f"a {str(kind).lower().replace('_', ' ')} reference"

    def _check_table(self, node: Mapping[str, Any], allowed: frozenset[str]) -> None:
        name = str(node.get("table_name", ""))
        schema, catalog = str(node.get("schema_name", "")), str(node.get("catalog_name", ""))
        if catalog or schema not in ("", "main"):
            raise SqlRefused(f"'{'.'.join(p for p in (catalog, schema, name) if p)}' is outside the workspace: only "
                             f"its tables may be read ({', '.join(self.tables) or 'none'})")
        if name.lower() not in allowed:
            raise SqlRefused(f"no table '{name[:80]}' in this workspace (tables: {', '.join(self.tables) or 'none'})")

    @staticmethod
    def _check_function(node: Mapping[str, Any]) -> None:
        fn = str(node.get("function_name", "")).lower()
        literal = fn in LITERAL_FUNCTIONS and node.get("schema") == "main" and not node.get("catalog")
        if (node.get("schema") or node.get("catalog")) and not literal:
            raise SqlRefused(f"function '{node.get('schema')}.{fn}' is not allowed: call functions by their plain name")
        if fn in DENIED_FUNCTIONS or fn.startswith(DENIED_PREFIXES):
            raise SqlRefused(f"function {fn}() is not allowed (it reads the machine, files, settings or the "
                             "catalogue, not the workspace's tables)")

    def run(self, sql: str, *, max_rows: int = MAX_ROWS, timeout_s: float = TIMEOUT_S) -> SqlResult:
        """Check, then run in the worker with the row cap, the cell and result byte caps, DuckDB's own interrupt at
        `timeout_s` and a kill at `timeout_s` + KILL_GRACE_S (a query that ignores the interrupt), under the worker's
        memory bound (a query that needs more ends the worker)."""
        text = self.check(sql)
        start = time.perf_counter()
        header = {"op": "run", "sql": text, "max_rows": int(max_rows), "timeout_s": float(timeout_s),
                  "max_cell": MAX_CELL_CHARS, "max_bytes": MAX_RESULT_BYTES}
        with self._lock:
            worker = self._ready()
            try:
                reply, data = worker.request(header, b"", WallDeadline(timeout_s + KILL_GRACE_S))
            except (EOFError, OSError, ValueError):
                reply, data = {"dead": True}, b""
            self.peak_worker_kb = max(self.peak_worker_kb, worker.peak_kb())
            if reply is None or reply.get("dead") or reply.get("oom"):
                worker.kill()
                self._worker = None
                if reply is None:
                    raise SqlRefused(f"the query ran over its time limit of {timeout_s:g} s and was stopped (the "
                                     "worker was ended)")
                raise SqlRefused(f"the query needed more memory than the sandbox allows ({self.memory_mb} MB for "
                                 f"DuckDB, {self.hard_mb} MB for the worker process) and was stopped")
        if "error" in reply:
            raise SqlRefused(str(reply["error"])[:400])
        table = _ipc_table(data)
        rows = _rows(table)
        return SqlResult(text, tuple(table.column_names), rows, bool(reply.get("truncated")),
                         round((time.perf_counter() - start) * 1000, 2), tuple(reply.get("notes", ())))

    def _ready(self) -> "_SqlWorker":
        if self._worker is not None and self._worker.alive():
            return self._worker
        worker = _SqlWorker(self.hard_mb)
        try:
            reply, _ = worker.request(*self._load, WallDeadline(STARTUP_TIMEOUT_S))
        except (EOFError, OSError, ValueError):
            reply = None
        if reply is None or not reply.get("ok"):
            worker.kill()
            why = (reply or {}).get("error") or ("its tables do not fit its memory bound" if reply and
                                                 reply.get("oom") else "it did not start")
            raise SqlRefused(f"the SQL sandbox could not load the workspace's tables ({why})")
        self.started += 1
        self._worker = worker
        return worker

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
        self._con.close()


def _rows(table: Any) -> tuple[tuple[Any, ...], ...]:
    """Python rows as DuckDB's own fetch gives them: a HUGEINT (sum of integers) crosses Arrow as decimal(38, 0) and
    comes back an int."""
    import pyarrow as pa

    as_int = [pa.types.is_decimal(f.type) and f.type.precision == 38 and f.type.scale == 0 for f in table.schema]
    cols = [[None if v is None else int(v) for v in c.to_pylist()] if conv else c.to_pylist()
            for c, conv in zip(table.columns, as_int)]
    return tuple(zip(*cols)) if cols else tuple(() for _ in range(table.num_rows))


def _ipc_table(data: bytes) -> Any:
    import pyarrow as pa

    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
        return reader.read_all()


_LIVE: "set[_SqlWorker]" = set()


@atexit.register
def _kill_all() -> None:
    for w in list(_LIVE):
        w.kill()


class _SqlWorker(Worker):
    """One `python -m core.store.sql HARD_MB` process (core/safeio/worker.py's frames), ended at exit."""

    def __init__(self, hard_mb: int) -> None:
        super().__init__("core.store.sql", str(hard_mb), what="SQL worker", startup_s=STARTUP_TIMEOUT_S)
        _LIVE.add(self)

    def kill(self) -> None:
        _LIVE.discard(self)
        super().kill()


# -- the worker side ---------------------------------------------------------------------------------------------
def _cap_cells(table: Any, max_cell: int) -> tuple[Any, int]:
    """Text and blob values cut at `max_cell` characters (bytes); how many were cut."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cut = 0
    cols = []
    for col in table.columns:
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            long_ = pc.greater(pc.utf8_length(col), max_cell)
            n = int(pc.sum(pc.cast(long_, pa.int64())).as_py() or 0)
            col = pc.utf8_slice_codeunits(col, 0, max_cell) if n else col
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            long_ = pc.greater(pc.binary_length(col), max_cell)
            n = int(pc.sum(pc.cast(long_, pa.int64())).as_py() or 0)
            col = pc.binary_slice(col, 0, max_cell) if n else col
        else:
            n = 0
        cut += n
        cols.append(col)
    return pa.Table.from_arrays(cols, names=table.column_names), cut


def _ipc_bytes(table: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _run_query(con: Any, header: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    max_rows, max_cell, max_bytes = int(header["max_rows"]), int(header["max_cell"]), int(header["max_bytes"])
    timeout_s = float(header["timeout_s"])
    cur = con.cursor()
    timer = threading.Timer(timeout_s, cur.interrupt)
    timer.start()
    try:
        reader = cur.execute(header["sql"]).fetch_record_batch(min(max_rows + 1, 2048))
        import pyarrow as pa

        batches, n = [], 0
        for batch in reader:
            batches.append(batch)
            n += batch.num_rows
            if n > max_rows:
                break
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.InterruptException:
        return {"error": f"the query ran over its time limit of {timeout_s:g} s and was stopped"}, b""
    except duckdb.OutOfMemoryException:
        return {"oom": True}, b""
    except duckdb.Error as exc:
        msg = str(exc).splitlines()[0]
        if re.search(r"interrupt", msg, re.I):
            return {"error": f"the query ran over its time limit of {timeout_s:g} s and was stopped"}, b""
        return {"error": f"the query failed: {msg[:300]}"}, b""
    finally:
        timer.cancel()
    truncated = table.num_rows > max_rows
    table = table.slice(0, max_rows)
    notes: list[str] = []
    table, cut = _cap_cells(table, max_cell)
    if cut:
        notes.append(f"{cut:,} value(s) cut at {max_cell:,} characters (MAX_CELL_CHARS)")
    data = _ipc_bytes(table)
    keep = table.num_rows
    while len(data) > max_bytes and keep > 0:
        keep //= 2
        data = _ipc_bytes(table.slice(0, keep))
    if keep < table.num_rows:
        notes.append(f"result cut at {max_bytes:,} bytes (MAX_RESULT_BYTES): {keep:,} of {table.num_rows:,} rows kept")
        truncated = True
    return {"truncated": truncated, "notes": notes}, data


def _serve(hard_mb: int) -> None:
    limit = hard_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    import pyarrow as pa

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    con = duckdb.connect(":memory:", config={"enable_external_access": False, "autoload_known_extensions": False,
                                             "autoinstall_known_extensions": False})
    ready(out)
    while True:
        try:
            header, dlen = read_request(inp)
            data = read_exact(inp, dlen)
        except EOFError:
            return
        fatal = False
        payload = b""
        try:
            if header["op"] == "load":
                at = 0
                for name, size in header["tables"]:
                    with pa.ipc.open_stream(pa.py_buffer(data[at:at + size])) as reader:
                        src = reader.read_all()
                    at += size
                    con.register("_sandbox_src", src)
                    con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _sandbox_src')
                    con.unregister("_sandbox_src")
                    del src
                con.execute(f"SET memory_limit = '{int(header['memory_mb'])}MB'")
                con.execute("SET threads = 1")
                con.execute("SET python_enable_replacements = false")  # no reading Python variables by name
                con.execute("SET lock_configuration = true")  # no SET, no PRAGMA that changes a setting, from now on
                reply: dict[str, Any] = {"ok": True}
            else:
                reply, payload = _run_query(con, header)
                fatal = bool(reply.get("oom"))
        except MemoryError:
            reply, payload, fatal = {"oom": True}, b"", True
        except Exception as exc:  # noqa: BLE001 - reported to the caller as the query's failure
            if "out of memory" in str(exc).lower() or isinstance(exc, duckdb.OutOfMemoryException):
                reply, payload, fatal = {"oom": True}, b"", True
            else:
                reply, payload = {"error": f"the query failed: {str(exc).splitlines()[0][:300]}"}, b""
        del data
        write_reply(out, json.dumps(reply).encode(), payload)
        if fatal:
            return


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else MEMORY_MB + WORKER_OVERHEAD_MB)
