"""Table files (csv, tsv, xlsx, parquet, jsonl) read into typed columns and rows, or a clear ParseError; and their
text form, which is chunked for search like any document."""
from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import PurePath
from typing import Any, Iterable, Protocol, Sequence

from core.ingest.parse import SUPPORTED, TABLE_KINDS, ParseError, check_zip, decode_text, human_size, kind_of, parse
from core.types import ParsedDocument, Section

# Bounds checked before and while a table is read; the upload limit (limits.max_file_mb) applies first.
MAX_COLUMNS = 500
MAX_ROWS = 1_000_000
MAX_CELLS = 5_000_000
MAX_CELL_CHARS = 10_000
MAX_NAME_CHARS = 63  # a table or column name (DuckDB allows more; a longer one is unreadable in SQL)
TEXT_ROWS = 2_000  # rows written into the searchable text form; the rest are reachable by SQL only
# DuckDB column types a table column may get (the store maps them one to one).
TYPES = ("BIGINT", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP", "VARCHAR")


@dataclass(frozen=True)
class TableData:
    """A table read from a file: its SQL name, typed columns and rows (Python values: int, float, bool, date,
    datetime, str or None)."""

    name: str
    source: str
    columns: tuple[tuple[str, str], ...]  # (column name, DuckDB type)
    rows: tuple[tuple[Any, ...], ...]
    notes: tuple[str, ...] = ()


class TableSink(Protocol):
    """Where a table file's typed rows go (core.store's Tables repository implements it)."""

    def put_table(self, workspace: str, doc_id: str, source: str, name: str, columns: Sequence[tuple[str, str]],
                  rows: Sequence[Sequence[Any]]) -> Any: ...


def put_table(sink: TableSink, key: str, data: bytes | TableData, doc_id: str, workspace: str) -> str:
    """Store the file's table (read here from `data`, or as the parse sandbox already read it); "" when stored, else
    the reason it was not (fit for the user)."""
    try:
        table = data if isinstance(data, TableData) else read_table(key, data)
        sink.put_table(workspace, doc_id, key, table.name, table.columns, table.rows)
    except ParseError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a store failure costs this file only; nothing of it is visible
        return f"{key}: the table could not be stored ({type(exc).__name__}: {str(exc)[:300]})"
    return ""


def _table_kind(name: str) -> str | None:
    """The table kind of a file name by its extension (core.ingest.parse.SUPPORTED), None for a document."""
    kind = SUPPORTED.get(PurePath(name).suffix.lower())
    return kind if kind in TABLE_KINDS else None


def is_table(name: str) -> bool:
    return _table_kind(name) is not None


def sql_name(text: str, fallback: str = "t") -> str:
    """A SQL identifier from a file stem or a header: lower-cased, every other character `_`, never starting with a
    digit, at most MAX_NAME_CHARS."""
    name = re.sub(r"[^a-z0-9_]", "_", text.strip().lower())[:MAX_NAME_CHARS]
    if not name.strip("_"):
        name = fallback
    if name[0].isdigit():
        name = ("_" + name)[:MAX_NAME_CHARS]
    return name


def table_name_for(key: str) -> str:
    """The table a file becomes: its stem (last path part, extension dropped), lower-cased, other characters `_`."""
    return sql_name(PurePath(key.rsplit("/", 1)[-1]).stem)


def parse_any(name: str, data: bytes, *, max_bytes: int | None = None) -> ParsedDocument:
    """parse() for documents and tables alike: a table's document is its text form (render_text)."""
    if not is_table(name):
        return parse(name, data, max_bytes=max_bytes)
    if max_bytes is not None and len(data) > max_bytes:
        raise ParseError(f"{name}: {human_size(len(data))} is over the upload limit of {human_size(max_bytes)}")
    return table_document(name, read_table(name, data))


def table_document(name: str, table: TableData) -> ParsedDocument:
    """A table's document: its text form (render_text) with a section for the heading and one for the rows."""
    kind = kind_of(name)
    text = render_text(table)
    rows_at = text.index("## Rows")
    sections = (Section((f"Table {table.name}",), 0, rows_at), Section((f"Table {table.name}", "Rows"), rows_at,
                                                                        len(text)))
    return ParsedDocument(name, kind, text, sections, f"Table {table.name}", "")


def table_to_json(table: TableData) -> dict[str, Any]:
    """The table as JSON the parse worker can send back (dates and timestamps as ISO text; table_from_json reverses
    it), so a table is parsed once, in the sandbox (issue #46 item 6)."""
    iso = [t in ("DATE", "TIMESTAMP") for _, t in table.columns]
    rows = [[v.isoformat() if f and v is not None else v for v, f in zip(r, iso)] for r in table.rows] \
        if any(iso) else [list(r) for r in table.rows]
    return {"name": table.name, "source": table.source, "columns": [list(c) for c in table.columns], "rows": rows,
            "notes": list(table.notes)}


def table_from_json(d: dict[str, Any]) -> TableData:
    columns = tuple((str(c), str(t)) for c, t in d["columns"])
    conv = [date.fromisoformat if t == "DATE" else datetime.fromisoformat if t == "TIMESTAMP" else None
            for _, t in columns]
    rows = tuple(tuple(f(v) if f is not None and v is not None else v for v, f in zip(r, conv)) for r in d["rows"]) \
        if any(conv) else tuple(tuple(r) for r in d["rows"])
    return TableData(str(d["name"]), str(d["source"]), columns, rows, tuple(str(n) for n in d.get("notes", ())))


def read_table(name: str, data: bytes) -> TableData:
    """The file's table, typed; ParseError names the file and the problem (ragged rows, too many columns or cells,
    formulas without saved values, an undecodable file)."""
    kind = _table_kind(name)
    if kind is None:
        raise ParseError(f"{name}: not a table file (tables: {', '.join(sorted(TABLE_KINDS))})")
    if not data.strip():
        raise ParseError(f"{name}: the file is empty")
    reader = {"csv": _read_delimited, "tsv": _read_delimited, "xlsx": _read_xlsx, "parquet": _read_parquet,
              "jsonl": _read_jsonl}[kind]
    header, rows, notes = reader(name, data, kind)
    columns = _column_names(name, header)
    if not rows:
        raise ParseError(f"{name}: the table has a header but no rows")
    found = [_column_type_wide([r[i] for r in rows]) for i in range(len(columns))]
    types = tuple(t for t, _ in found)
    typed = tuple(tuple(_convert(r[i], types[i]) for i in range(len(columns))) for r in rows)
    notes += [f"column {col}: integers wider than 64 bits, kept exact as text" for col, (_, wide) in
              zip(columns, found) if wide]
    return TableData(table_name_for(name), name, tuple(zip(columns, types)), typed, tuple(notes))


def _check_shape(name: str, n_cols: int, n_rows: int) -> None:
    if n_cols > MAX_COLUMNS:
        raise ParseError(f"{name}: {n_cols:,} columns (at most {MAX_COLUMNS:,}); split the table or drop columns")
    if n_rows > MAX_ROWS:
        raise ParseError(f"{name}: more than {MAX_ROWS:,} rows; split the table")
    if n_cols * n_rows > MAX_CELLS:
        raise ParseError(f"{name}: {n_cols:,} columns x {n_rows:,} rows is over {MAX_CELLS:,} cells; split the table")


def _column_names(name: str, header: Sequence[Any]) -> tuple[str, ...]:
    if not header:
        raise ParseError(f"{name}: no header row (the first row names the columns)")
    _check_shape(name, len(header), 0)
    out: list[str] = []
    seen: set[str] = set()
    for i, h in enumerate(header, start=1):
        base = sql_name("" if h is None else str(h), f"col_{i}")
        col, n = base, 2
        while col in seen:
            col, n = f"{base}_{n}", n + 1
        seen.add(col)
        out.append(col)
    return tuple(out)


FORMULA_STARTS = ("=", "+", "-", "@")  # a spreadsheet reads a cell starting so as a formula


def _cell(name: str, value: Any, where: str) -> Any:
    if isinstance(value, str):
        bare = value.strip()
        # A leading tab or CR is how a file defuses a formula ("\t=1+1"): kept, so the cell stays defused.
        value = value.rstrip() if (value[:1] in ("\t", "\r") and bare.startswith(FORMULA_STARTS)
                                   and not _is_float(bare)) else bare
        if len(value) > MAX_CELL_CHARS:
            raise ParseError(f"{name}: {where} holds {len(value):,} characters (at most {MAX_CELL_CHARS:,} per cell)")
        return value or None
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def _read_delimited(name: str, data: bytes, kind: str) -> tuple[list[Any], list[list[Any]], list[str]]:
    text, enc = decode_text(name, data)
    first = text.split("\n", 1)[0]
    delim = "\t" if kind == "tsv" else (";" if first.count(";") > first.count(",") else ",")
    try:
        lines = list(csv.reader(io.StringIO(text), delimiter=delim, strict=True))
    except csv.Error as exc:
        raise ParseError(f"{name}: not a well-formed {kind.upper()} file ({exc})") from exc
    lines = [ln for ln in lines if any(c.strip() for c in ln)]
    if not lines:
        raise ParseError(f"{name}: the file is empty")
    header, body = lines[0], lines[1:]
    _check_shape(name, len(header), len(body))
    for i, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ParseError(f"{name}: ragged rows: row {i} has {len(row)} fields, the header has {len(header)}; "
                             "fix the file (every row needs the same number of fields)")
    rows = [[_cell(name, v, f"row {i}") for v in row] for i, row in enumerate(body, start=2)]
    return header, rows, [f"decoded as {enc}"] if enc not in ("utf-8", "utf-8 (BOM)") else []


def _xlsx_ref(row: int, col: int) -> str:
    letters = ""
    while col:
        col, r = divmod(col - 1, 26)
        letters = chr(65 + r) + letters
    return f"{letters}{row}"


def _read_xlsx(name: str, data: bytes, kind: str) -> tuple[list[Any], list[list[Any]], list[str]]:
    check_zip(name, data)
    import openpyxl

    try:
        formulas = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=False)
        values = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many kinds for a damaged workbook
        raise ParseError(f"{name}: not a readable XLSX workbook ({type(exc).__name__}: {exc})") from exc
    ws_f, ws_v = formulas.worksheets[0], values.worksheets[0]
    notes = [f"sheet '{ws_v.title}' read; {len(values.worksheets) - 1} other sheet(s) ignored"] \
        if len(values.worksheets) > 1 else []
    max_col, max_row = ws_v.max_column or 0, ws_v.max_row or 0
    _check_shape(name, max_col, max(0, max_row - 1))
    grid: list[list[Any]] = []
    computed = 0
    for r, (frow, vrow) in enumerate(zip(ws_f.iter_rows(values_only=True), ws_v.iter_rows(values_only=True)), 1):
        out = []
        for c, (f, v) in enumerate(zip(frow, vrow), start=1):
            if isinstance(f, str) and f.startswith("="):
                if v is None:
                    raise ParseError(f"{name}: cell {_xlsx_ref(r, c)} holds a formula ({f[:40]}) with no saved value; "
                                     "open and save the workbook in Excel or LibreOffice (which store the values), "
                                     "or export the sheet as CSV")
                computed += 1
            out.append(_cell(name, v, f"cell {_xlsx_ref(r, c)}"))
        if any(x is not None for x in out):
            grid.append(out)
        if len(grid) > MAX_ROWS + 1:
            _check_shape(name, max_col, len(grid))
    formulas.close()
    values.close()
    if not grid:
        raise ParseError(f"{name}: the first sheet is empty")
    width = max(len(r) for r in grid)
    grid = [r + [None] * (width - len(r)) for r in grid]
    while width and all(r[width - 1] is None for r in grid):  # trailing empty columns
        width -= 1
        grid = [r[:width] for r in grid]
    header = grid[0]
    if computed:
        notes.append(f"{computed} formula cell(s) read as their saved values")
    return header, grid[1:], notes


def _read_parquet(name: str, data: bytes, kind: str) -> tuple[list[Any], list[list[Any]], list[str]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        meta = pf.metadata
        _check_shape(name, meta.num_columns, meta.num_rows)
        table = pf.read()
    except ParseError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a damaged file
        raise ParseError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc})") from exc
    header = list(table.column_names)
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    rows = [[_cell(name, _plain(c[j]), f"row {j + 1}") for c in cols] for j in range(table.num_rows)]
    return header, rows, []


def _plain(v: Any) -> Any:
    """A value a table column can hold: nested lists / maps become their JSON text."""
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(v, default=str, ensure_ascii=False)
    if isinstance(v, bytes):
        return v.hex()
    return v


def _read_jsonl(name: str, data: bytes, kind: str) -> tuple[list[Any], list[list[Any]], list[str]]:
    text, _ = decode_text(name, data)
    objs: list[dict[str, Any]] = []
    keys: dict[str, None] = {}
    for i, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{name}: line {i} is not JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise ParseError(f"{name}: line {i} is not a JSON object (each line must be one row: {{\"col\": value}})")
        objs.append(obj)
        keys.update(dict.fromkeys(obj))
        _check_shape(name, len(keys), len(objs))
    header = list(keys)
    rows = [[_cell(name, _plain(o.get(k)), f"line {i + 1}") for k in header] for i, o in enumerate(objs)]
    return header, rows, []


_INT = re.compile(r"[+-]?\d+")  # any length: past 64 bits the column is kept exact as text (_kind)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?")
_BOOLS = {"true": True, "false": False}


def _is_float(s: str) -> bool:
    if not s or s[0] not in "0123456789+-.":  # no exception raised for every word
        return False
    try:
        f = float(s)
    except ValueError:
        return False
    return math.isfinite(f) and not s.strip().lower().startswith(("nan", "inf", "+inf", "-inf"))


def _kind(v: Any) -> str:
    """The narrowest column type one value fits."""
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int):
        return "BIGINT" if -2**63 <= v < 2**63 else "WIDEINT"
    if isinstance(v, float):
        return "DOUBLE"
    if isinstance(v, datetime):
        return "TIMESTAMP"
    if isinstance(v, date):
        return "DATE"
    s = str(v)
    if _INT.fullmatch(s):
        return "BIGINT" if len(s.lstrip("+-")) <= 19 and -2**63 <= int(s) < 2**63 else "WIDEINT"
    if _is_float(s):
        return "DOUBLE"
    if s.lower() in _BOOLS:
        return "BOOLEAN"
    if _DATE.fullmatch(s) and _valid(s, "%Y-%m-%d"):
        return "DATE"
    if _TIMESTAMP.fullmatch(s) and _valid(s.replace("T", " ")[:19], "%Y-%m-%d %H:%M:%S" if len(s) >= 19 else
                                          "%Y-%m-%d %H:%M"):
        return "TIMESTAMP"
    return "VARCHAR"


def _valid(s: str, fmt: str) -> bool:
    try:
        if fmt == "%Y-%m-%d":  # the common case, in C (strptime is pure Python and was the parse's largest cost)
            date.fromisoformat(s)
        else:
            datetime.strptime(s, fmt)
    except ValueError:
        return False
    return True




def _column_type_wide(values: Iterable[Any]) -> tuple[str, bool]:
    """The narrowest type every non-empty value fits: integers widen to doubles, dates to timestamps, anything else
    mixed is text; and whether integers wider than 64 bits made a numeric column text. Each distinct value is
    looked at once, and the first text value ends the look (text wins any mix)."""
    kinds: set[str] = set()
    for v in set(values):
        if v is None:
            continue
        k = _kind(v)
        kinds.add(k)
        if k == "VARCHAR":
            return "VARCHAR", False
    if not kinds:
        return "VARCHAR", False
    if "WIDEINT" in kinds:  # wider than 64 bits: exact as text, never rounded to a double
        return "VARCHAR", kinds <= {"BIGINT", "DOUBLE", "WIDEINT"}
    if len(kinds) == 1:
        return kinds.pop(), False
    if kinds <= {"BIGINT", "DOUBLE"}:
        return "DOUBLE", False
    if kinds <= {"DATE", "TIMESTAMP"}:
        return "TIMESTAMP", False
    return "VARCHAR", False


def _convert(v: Any, typ: str) -> Any:
    if v is None:
        return None
    if typ == "VARCHAR":
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return v if isinstance(v, str) else (v.isoformat() if isinstance(v, (date, datetime)) else str(v))
    if typ == "BIGINT":
        return int(v)
    if typ == "DOUBLE":
        return float(v)
    if typ == "BOOLEAN":
        return v if isinstance(v, bool) else _BOOLS[str(v).lower()]
    if typ == "DATE":
        return v if isinstance(v, date) and not isinstance(v, datetime) else date.fromisoformat(str(v)[:10])
    if isinstance(v, datetime):  # TIMESTAMP
        return v
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day)
    return datetime.fromisoformat(str(v).replace(" ", "T"))


def _show(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.10g}"
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    return str(v)


def render_text(table: TableData, *, max_rows: int = TEXT_ROWS) -> str:
    """The table's searchable text: a heading with its name and columns, then one list item per row ("- col: value;
    ...") under a heading, so a row can be retrieved as a passage and the offline answer quotes one row, not the run
    of rows a lower-case "rig: ..." after a full stop would leave in one sentence."""
    cols = [c for c, _ in table.columns]
    lines = [f"# Table {table.name}", "",
             f"Table {table.name} from {table.source}: {len(table.rows):,} rows; columns "
             + ", ".join(f"{c} ({t.lower()})" for c, t in table.columns) + "."
             + ("".join(f" Note: {n}." for n in table.notes if "wider than 64 bits" in n)), "", "## Rows", ""]
    for row in table.rows[:max_rows]:
        lines.append("- " + "; ".join(f"{c}: {_show(v)}" for c, v in zip(cols, row) if v is not None) + ".")
    if len(table.rows) > max_rows:
        lines += ["", f"... {len(table.rows) - max_rows:,} more rows in table {table.name} (query it with SQL)."]
    return "\n".join(lines) + "\n"
