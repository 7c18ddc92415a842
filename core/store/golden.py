"""Golden repository: named golden sets stored in a workspace, their items and each item's curation status.

A set is written whole by a generator (offline or LLM) or grown one item at a time (Search Lab's "Add to golden
set"); a person then accepts, edits, rejects or marks items unanswerable. Gold is kept as JSON: a list of
{"doc": document name, "chunk": chunk id, "span": gold text}, the shape the JSONL export writes.
Schema: the tables below are created on a read-write open like every repository's (CREATE ... IF NOT EXISTS);
GOLDEN_SCHEMA is recorded in `meta` under 'golden_schema' so a later change can migrate from it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

from core.store.db import Cursor, Database, StoreError, now

GOLDEN_SCHEMA = 1
STATUSES = ("pending", "accepted", "edited", "rejected")

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS golden_sets (
        workspace_id VARCHAR, name VARCHAR, generator VARCHAR, corpus_version BIGINT, notes VARCHAR,
        created_at TIMESTAMP, PRIMARY KEY (workspace_id, name))""",
    # One row per question; `status` is the curation state, `meta_json` what the generator measured (overlap, ...).
    """CREATE TABLE IF NOT EXISTS golden_items (
        workspace_id VARCHAR, set_name VARCHAR, item_id VARCHAR, ordinal INTEGER, query VARCHAR, qtype VARCHAR,
        answerable BOOLEAN, answer VARCHAR, gold_json VARCHAR, generator VARCHAR, status VARCHAR, meta_json VARCHAR,
        updated_at TIMESTAMP, PRIMARY KEY (workspace_id, set_name, item_id))""",
)


@dataclass(frozen=True)
class GoldRef:
    """One gold passage of an item: the document's name, the chunk id it was taken from and the gold text."""

    doc: str
    chunk: str = ""
    span: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"doc": self.doc, "chunk": self.chunk, "span": self.span}


@dataclass(frozen=True)
class GoldenItem:
    item_id: str
    query: str
    qtype: str = "factoid"
    answerable: bool = True
    answer: str = ""
    gold: tuple[GoldRef, ...] = ()
    generator: str = ""
    status: str = "pending"
    meta: Mapping[str, Any] = field(default_factory=dict)
    ordinal: int = 0


@dataclass(frozen=True)
class GoldenSetRow:
    name: str
    generator: str
    corpus_version: int
    notes: str
    created_at: datetime | None
    items: int
    by_status: Mapping[str, int]
    by_type: Mapping[str, int]


def _gold_json(gold: Sequence[GoldRef]) -> str:
    return json.dumps([g.to_dict() for g in gold], ensure_ascii=False)


def _gold_from(raw: str | None) -> tuple[GoldRef, ...]:
    return tuple(GoldRef(str(g.get("doc", "")), str(g.get("chunk", "")), str(g.get("span", "")))
                 for g in json.loads(raw or "[]") if isinstance(g, dict))


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise StoreError(f"unknown status {status!r}: one of {', '.join(STATUSES)}")


class Golden:
    """Named golden sets per workspace and their items."""

    def __init__(self, db: Database) -> None:
        self._db = db
        if not db.read_only and db.cursor().execute("SELECT 1 FROM meta WHERE key = 'golden_schema'").fetchone() is None:
            with db.writer() as cur:
                cur.execute("INSERT INTO meta VALUES ('golden_schema', ?) ON CONFLICT DO NOTHING", [str(GOLDEN_SCHEMA)])

    # -- sets -------------------------------------------------------------------------------------------------
    def create_set(self, workspace: str, name: str, *, generator: str = "", corpus_version: int = 0,
                   notes: str = "", replace: bool = False) -> bool:
        """Create an empty set; False when it exists (and `replace` is off). With `replace` its items go."""
        if not name.strip():
            raise StoreError("a golden set needs a name")
        self._db.ensure_workspace(workspace)
        with self._db.transaction() as cur:
            exists = cur.execute("SELECT count(*) FROM golden_sets WHERE workspace_id = ? AND name = ?",
                                 [workspace, name]).fetchone()[0]
            if exists and not replace:
                return False
            self._new_set(cur, workspace, name, generator, corpus_version, notes)
        return True

    @staticmethod
    def _new_set(cur: Cursor, workspace: str, name: str, generator: str, corpus_version: int, notes: str) -> None:
        cur.execute("DELETE FROM golden_items WHERE workspace_id = ? AND set_name = ?", [workspace, name])
        cur.execute("DELETE FROM golden_sets WHERE workspace_id = ? AND name = ?", [workspace, name])
        cur.execute("INSERT INTO golden_sets VALUES (?, ?, ?, ?, ?, ?)",
                    [workspace, name, generator, int(corpus_version), notes, now()])

    def put_set(self, workspace: str, name: str, items: Sequence[GoldenItem], *, generator: str = "",
                corpus_version: int = 0, notes: str = "") -> int:
        """Write a whole set in one transaction, replacing a set of the same name (a bad item is refused before the
        stored set is touched); returns the item count."""
        if not name.strip():
            raise StoreError("a golden set needs a name")
        for it in items:
            _check_status(it.status)
        self._db.ensure_workspace(workspace)
        with self._db.transaction() as cur:
            self._new_set(cur, workspace, name, generator, corpus_version, notes)
            self._insert(cur, workspace, name, items)
        return len(items)

    def sets(self, workspace: str) -> list[GoldenSetRow]:
        cur = self._db.cursor()
        rows = cur.execute("SELECT name, generator, corpus_version, notes, created_at FROM golden_sets "
                           "WHERE workspace_id = ? ORDER BY created_at, name", [workspace]).fetchall()
        counts = cur.execute("SELECT set_name, status, qtype, count(*) FROM golden_items WHERE workspace_id = ? "
                             "GROUP BY ALL", [workspace]).fetchall()
        out = []
        for name, gen, cv, notes, at in rows:
            by_status: dict[str, int] = {}
            by_type: dict[str, int] = {}
            for s, st, qt, n in counts:
                if s == name:
                    by_status[st] = by_status.get(st, 0) + int(n)
                    by_type[qt] = by_type.get(qt, 0) + int(n)
            out.append(GoldenSetRow(name, gen or "", int(cv or 0), notes or "", at, sum(by_status.values()),
                                    by_status, by_type))
        return out

    def find_set(self, name: str) -> list[str]:
        """The workspaces that hold a set of this name."""
        return [r[0] for r in self._db.cursor().execute(
            "SELECT workspace_id FROM golden_sets WHERE name = ? ORDER BY 1", [name]).fetchall()]

    def delete_set(self, workspace: str, name: str) -> bool:
        with self._db.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM golden_sets WHERE workspace_id = ? AND name = ?",
                            [workspace, name]).fetchone()[0]
            cur.execute("DELETE FROM golden_items WHERE workspace_id = ? AND set_name = ?", [workspace, name])
            cur.execute("DELETE FROM golden_sets WHERE workspace_id = ? AND name = ?", [workspace, name])
        return bool(n)

    # -- items ------------------------------------------------------------------------------------------------
    def add_items(self, workspace: str, name: str, items: Sequence[GoldenItem]) -> None:
        """Append items to an existing set (created on the fly when missing); an item id already there is
        replaced."""
        for it in items:
            _check_status(it.status)
        self.create_set(workspace, name)  # no-op when it exists
        with self._db.transaction() as cur:
            self._insert(cur, workspace, name, items)

    @staticmethod
    def _insert(cur: Cursor, workspace: str, name: str, items: Sequence[GoldenItem]) -> None:
        """Append items after the set's last ordinal; an item id already there is replaced."""
        base = cur.execute("SELECT coalesce(max(ordinal), -1) + 1 FROM golden_items WHERE workspace_id = ? "
                           "AND set_name = ?", [workspace, name]).fetchone()[0]
        if items:
            cur.executemany("DELETE FROM golden_items WHERE workspace_id = ? AND set_name = ? AND item_id = ?",
                            [[workspace, name, it.item_id] for it in items])
            cur.executemany(
                "INSERT INTO golden_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[workspace, name, it.item_id, int(base) + i, it.query, it.qtype, bool(it.answerable),
                  it.answer, _gold_json(it.gold), it.generator, it.status,
                  json.dumps(dict(it.meta), ensure_ascii=False, default=str), now()]
                 for i, it in enumerate(items)])

    def items(self, workspace: str, name: str, *, statuses: Sequence[str] | None = None) -> list[GoldenItem]:
        sql = ("SELECT item_id, query, qtype, answerable, answer, gold_json, generator, status, meta_json, ordinal "
               "FROM golden_items WHERE workspace_id = ? AND set_name = ?")
        params: list[Any] = [workspace, name]
        if statuses is not None:
            sql += " AND list_contains(?, status)"
            params.append(list(statuses))
        rows = self._db.cursor().execute(sql + " ORDER BY ordinal", params).fetchall()
        return [GoldenItem(r[0], r[1], r[2], bool(r[3]), r[4] or "", _gold_from(r[5]), r[6] or "", r[7],
                           json.loads(r[8] or "{}"), int(r[9])) for r in rows]

    def update_item(self, workspace: str, name: str, item_id: str, *, query: str | None = None,
                    answer: str | None = None, answerable: bool | None = None, status: str | None = None,
                    gold: Sequence[GoldRef] | None = None, qtype: str | None = None) -> bool:
        """Change what a person curated; False when the item is not there."""
        sets: list[str] = []
        params: list[Any] = []
        for col, val in (("query", query), ("answer", answer), ("answerable", answerable), ("status", status),
                         ("qtype", qtype)):
            if val is not None:
                if col == "status":
                    _check_status(str(val))
                if col == "query" and not str(val).strip():
                    raise StoreError("a question cannot be empty")
                sets.append(f"{col} = ?")
                params.append(val)
        if gold is not None:
            sets.append("gold_json = ?")
            params.append(_gold_json(gold))
        if not sets:
            return False
        with self._db.transaction() as cur:
            n = cur.execute("SELECT count(*) FROM golden_items WHERE workspace_id = ? AND set_name = ? AND "
                            "item_id = ?", [workspace, name, item_id]).fetchone()[0]
            if n:
                cur.execute(f"UPDATE golden_items SET {', '.join(sets)}, updated_at = ? WHERE workspace_id = ? "
                            "AND set_name = ? AND item_id = ?", [*params, now(), workspace, name, item_id])
        return bool(n)
