"""The SQL sandbox: one read-only SELECT over a workspace's tables, checked by DuckDB's own parser before it runs,
then run on a private in-memory connection that holds only those tables (no file, URL or extension access, its
settings locked) with a row cap and a time limit."""
from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Iterator, Mapping

import duckdb

from core.types import SqlResult

MAX_SQL_CHARS = 10_000
MAX_ROWS = 1_000
TIMEOUT_S = 5.0
MEMORY_MB = 256
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


def _cte_names(tree: Any) -> set[str]:
    names: set[str] = set()
    for node in _walk(tree):
        cte = node.get("cte_map")
        if isinstance(cte, dict):
            names.update(str(e.get("key", "")).lower() for e in cte.get("map", []) if isinstance(e, dict))
    return names


class SqlSandbox:
    """A private DuckDB connection holding copies of one workspace's tables and nothing else. Built by
    core/store/tables.py (Tables.sandbox); `run` checks and runs one query."""

    def __init__(self, tables: Mapping[str, Any], *, memory_mb: int = MEMORY_MB) -> None:
        """`tables`: name -> a pyarrow Table (the workspace's rows, copied in)."""
        self.tables = tuple(sorted(tables))
        self._con = duckdb.connect(":memory:", config={"enable_external_access": False,
                                                       "autoload_known_extensions": False,
                                                       "autoinstall_known_extensions": False})
        for name, data in tables.items():
            self._con.register("_sandbox_src", data)
            self._con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _sandbox_src')
            self._con.unregister("_sandbox_src")
        self._con.execute(f"SET memory_limit = '{int(memory_mb)}MB'")
        self._con.execute("SET threads = 1")
        self._con.execute("SET python_enable_replacements = false")  # no reading Python variables by name
        self._con.execute("SET lock_configuration = true")  # no SET, no PRAGMA that changes a setting, from now on
        self._lock = threading.Lock()

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
        allowed = {t.lower() for t in self.tables} | _cte_names(tree)
        nodes = list(_walk(tree))
        for node in nodes:  # table references first: their reasons are the clearer ones
            if isinstance(node.get("type"), str) and "alias" in node and "sample" in node:
                if node["type"] not in ALLOWED_REFS:
                    raise SqlRefused(f"{self._ref_label(node)} is not allowed: only the workspace's tables may be "
                                     "read")
                if node["type"] == "BASE_TABLE":
                    self._check_table(node, allowed)
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

    def _check_table(self, node: Mapping[str, Any], allowed: set[str]) -> None:
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
        if node.get("schema") or node.get("catalog"):
            raise SqlRefused(f"function '{node.get('schema')}.{fn}' is not allowed: call functions by their plain name")
        if fn in DENIED_FUNCTIONS or fn.startswith(DENIED_PREFIXES):
            raise SqlRefused(f"function {fn}() is not allowed (it reads the machine, files, settings or the "
                             "catalogue, not the workspace's tables)")

    def run(self, sql: str, *, max_rows: int = MAX_ROWS, timeout_s: float = TIMEOUT_S) -> SqlResult:
        """Check, then run with the row cap and the time limit (the query is interrupted when it runs over)."""
        text = self.check(sql)
        start = time.perf_counter()
        with self._lock:
            cur = self._con.cursor()
            timer = threading.Timer(timeout_s, cur.interrupt)
            timer.start()
            try:
                rel = cur.execute(text)
                columns = tuple(d[0] for d in rel.description or ())
                rows = rel.fetchmany(max_rows + 1)
            except duckdb.InterruptException as exc:
                raise SqlRefused(f"the query ran over its time limit of {timeout_s:g} s and was stopped") from exc
            except duckdb.OutOfMemoryException as exc:
                raise SqlRefused(f"the query needed more than the sandbox's {MEMORY_MB} MB of memory") from exc
            except duckdb.Error as exc:
                msg = str(exc).splitlines()[0]
                if re.search(r"interrupt", msg, re.I):
                    raise SqlRefused(f"the query ran over its time limit of {timeout_s:g} s and was stopped") from exc
                raise SqlRefused(f"the query failed: {msg[:300]}") from exc
            finally:
                timer.cancel()
                cur.close()
        return SqlResult(text, columns, tuple(tuple(r) for r in rows[:max_rows]), len(rows) > max_rows,
                         round((time.perf_counter() - start) * 1000, 2))

    def close(self) -> None:
        self._con.close()
