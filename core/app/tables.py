"""The workspace's tables as the pages see them: each table's schema and sample rows, and the user's own query in the
SQL sandbox (the Corpus page's table panel, the Search Lab's SQL box, `python -m core sql`)."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Sequence

from core.route.sql import json_safe
from core.store import SqlRefused, Store, StoreError
from core.types import DEFAULT_WORKSPACE, SqlResult, TableInfo

USER_MAX_ROWS = 1_000
USER_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class TableView:
    """One table for the Corpus page: its record and its first rows."""

    info: TableInfo
    columns: tuple[str, ...]
    sample: list[tuple[Any, ...]]


def table_views(store: Store, workspace: str = DEFAULT_WORKSPACE, *, sample_rows: int = 5) -> list[TableView]:
    out = []
    for t in store.tables.list(workspace):
        cols, rows = store.tables.sample(workspace, t.name, sample_rows)
        out.append(TableView(t, cols, rows))
    return out


@dataclass(frozen=True)
class UserQuery:
    """A user's query through the sandbox: its result, or the reason it was refused."""

    result: SqlResult | None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        if r is None:
            return {"error": self.error}
        return {"sql": r.sql, "columns": list(r.columns), "rows": [[json_safe(v) for v in row] for row in r.rows],
                "truncated": r.truncated, "ms": r.ms, **({"notes": list(r.notes)} if r.notes else {})}


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may run as a formula (OWASP CSV injection)


def spreadsheet_safe(value: Any) -> Any:
    """A value as exported: text a spreadsheet would read as a formula gets a leading apostrophe (it then shows as
    text); numbers, and text like "-5" or "+1.5" that is a number, are left alone."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def export_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows for a grid whose download a person may open in a spreadsheet: formula-like text neutralised."""
    return [{c: spreadsheet_safe(v) for c, v in zip(columns, row)} for row in rows]


def csv_bytes(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> bytes:
    """The rows as CSV (UTF-8), formula-like text neutralised (spreadsheet_safe)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([spreadsheet_safe(c) for c in columns])
    for row in rows:
        w.writerow(["" if v is None else spreadsheet_safe(v if isinstance(v, str) else str(v)) for v in row])
    return buf.getvalue().encode("utf-8")


def run_user_sql(store: Store, sql: str, workspace: str = DEFAULT_WORKSPACE, *, max_rows: int = USER_MAX_ROWS,
                 timeout_s: float = USER_TIMEOUT_S) -> UserQuery:
    """One read-only SELECT over the workspace's tables, checked and run in its sandbox (core/store/sql.py)."""
    try:
        return UserQuery(store.tables.sandbox(workspace).run(sql, max_rows=max_rows, timeout_s=timeout_s))
    except (SqlRefused, StoreError) as exc:
        return UserQuery(None, f"refused: {exc}")
