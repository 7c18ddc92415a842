"""Table files as documents (core/ingest/tables.py, core/store/tables.py): typed DuckDB tables named after the file
stem, the text form chunked for search, clear errors and nothing half-written for bad tables."""
from __future__ import annotations

import io
import json
from datetime import date

import pytest

from core.config import PipelineConfig
from core.ingest.parse import ParseError
from core.ingest.pipeline import ingest_files
from core.ingest.tables import MAX_COLUMNS, parse_any, read_table, table_name_for
from core.store import Store
from tests.fakes import HashEmbedder


def _xlsx(rows: list[list[object]], *, formula: str | None = None) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    for r in rows:
        ws.append(r)
    if formula:
        ws["C3"] = formula  # openpyxl saves no computed value: what a script-made workbook looks like
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _parquet() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"sku": ["A-1", "B-2"], "units": [3, 4], "price": [1.5, 2.0]}), buf)
    return buf.getvalue()


def test_table_names_follow_the_file_stem() -> None:
    assert table_name_for("data/Q3 Revenue-2024.CSV") == "q3_revenue_2024"
    assert table_name_for("2024 sales.xlsx") == "_2024_sales"
    assert table_name_for("Выручка.csv") == "t"  # nothing of it is a SQL letter: a placeholder name


def test_each_format_becomes_typed_columns() -> None:
    csv = read_table("Sales.csv", b"Client Name,Units,Price,Paid,Day\nAcme,3,1.5,true,2024-01-02\nBeta,4,,false,"
                                  b"2024-02-03\n")
    assert csv.name == "sales" and csv.columns == (("client_name", "VARCHAR"), ("units", "BIGINT"),
                                                   ("price", "DOUBLE"), ("paid", "BOOLEAN"), ("day", "DATE"))
    assert csv.rows[1] == ("Beta", 4, None, False, date(2024, 2, 3))
    tsv = read_table("t.tsv", b"a\tb\n1\tx\n2\ty\n")
    assert tsv.columns == (("a", "BIGINT"), ("b", "VARCHAR"))
    semi = read_table("eu.csv", b"a;b\n1,5;x\n")  # semicolon-separated, decimal comma stays text
    assert semi.columns == (("a", "VARCHAR"), ("b", "VARCHAR"))
    xl = read_table("book.xlsx", _xlsx([["sku", "units"], ["A", 3], ["B", 5]]))
    assert xl.columns == (("sku", "VARCHAR"), ("units", "BIGINT")) and xl.rows == (("A", 3), ("B", 5))
    pq = read_table("p.parquet", _parquet())
    assert pq.columns == (("sku", "VARCHAR"), ("units", "BIGINT"), ("price", "DOUBLE"))
    jl = read_table("e.jsonl", b'{"id": 1, "tag": "x"}\n{"id": 2, "extra": [1, 2]}\n')
    assert jl.columns == (("id", "BIGINT"), ("tag", "VARCHAR"), ("extra", "VARCHAR"))
    assert jl.rows[1] == (2, None, "[1, 2]")
    text = parse_any("book.xlsx", _xlsx([["sku", "units"], ["A", 3]]))
    assert "Table book" in text.text and "sku: A; units: 3." in text.text


@pytest.mark.parametrize("name, data, says", [
    ("r.csv", b"a,b\n1,2\n3,4,5\n", "ragged rows: row 3 has 3 fields"),
    ("w.csv", (",".join(f"c{i}" for i in range(10_000)) + "\n" + ",".join("1" * 10_000) + "\n").encode(),
     f"10,000 columns (at most {MAX_COLUMNS:,})"),
    ("bin.csv", b"\x00\x01\x02\x03" * 100, "binary"),
    ("bad.csv", b"a,b\n" + bytes(range(0x80, 0x100)) * 3, "not valid UTF-8"),
    ("h.csv", b"a,b\n", "no rows"),
    ("q.csv", b'a,b\n"unclosed,2\n', "not a well-formed CSV"),
    ("f.xlsx", _xlsx([["a", "b", "c"], [1, 2, 3], [4, 5, 6]], formula="=A3+B3"), "formula (=A3+B3) with no saved "),
    ("z.xlsx", b"PK\x03\x04 not really a zip", "damaged zip"),
    ("p.parquet", b"PAR1 nonsense", "not a readable Parquet"),
    ("j.jsonl", b'{"a": 1}\n[1, 2]\n', "line 2 is not a JSON object"),
    ("j2.jsonl", b'{"a": 1}\n{"a": \n', "line 2 is not JSON"),
])
def test_bad_tables_get_clear_errors(name: str, data: bytes, says: str) -> None:
    with pytest.raises(ParseError) as exc:
        read_table(name, data)
    assert says in str(exc.value) and name in str(exc.value)


def test_ingest_stores_the_table_and_chunks_its_text_and_writes_nothing_for_a_bad_one() -> None:
    store = Store()
    files = [("sales/Revenue.csv", b"client,quarter,amount\nAcme,Q1,100\nAcme,Q2,150.5\nBeta,Q1,80\n"),
             ("ragged.csv", b"a,b\n1,2\n3\n"),
             ("big.xlsx", b"x" * 2_100_000)]
    rep = ingest_files(files, store=store, embedder=HashEmbedder(), config=PipelineConfig().with_overrides(
        {"limits.max_file_mb": 2.0}))
    by = {r.name: r for r in rep.results}
    assert by["sales/Revenue.csv"].status == "ingested" and by["sales/Revenue.csv"].chunks >= 1
    assert "ragged rows" in by["ragged.csv"].message and "over the upload limit" in by["big.xlsx"].message
    [t] = store.tables.list()
    assert (t.name, t.n_rows, t.columns) == ("revenue", 3, (("client", "VARCHAR"), ("quarter", "VARCHAR"),
                                                            ("amount", "DOUBLE")))
    assert store.tables.sample("default", "revenue", 2) == (("client", "quarter", "amount"),
                                                            [("Acme", "Q1", 100.0), ("Acme", "Q2", 150.5)])
    assert [d.name for d in store.corpus.documents()] == ["sales/Revenue.csv"]  # nothing of the bad files
    chunks = store.corpus.chunks_by_id([c for c, in store.db.cursor().execute("SELECT chunk_id FROM chunks")
                                        .fetchall()])
    assert any("client: Acme; quarter: Q2; amount: 150.5." in c.text for c in chunks.values())
    # A second file with the same stem in another folder is refused by name; the first table stays.
    again = ingest_files([("other/revenue.csv", b"x\n1\n")], store=store, embedder=HashEmbedder(),
                         config=PipelineConfig())
    assert "already comes from sales/Revenue.csv" in again.results[0].message
    assert [t.n_rows for t in store.tables.list()] == [3]
    # Replacing the file replaces the table, also for the sandbox and the value lists read before (an edited file
    # keeps its document id); deleting its document drops it.
    assert store.tables.sandbox().run("SELECT count(*) FROM revenue").rows == ((3,),)
    assert store.tables.values("default", "revenue", "client") == ["Acme", "Beta"]
    ingest_files([("sales/Revenue.csv", b"client,amount\nZed,1\n")], store=store, embedder=HashEmbedder(),
                 config=PipelineConfig())
    [t] = store.tables.list()
    assert t.n_rows == 1 and store.tables.sandbox().run("SELECT client FROM revenue").rows == (("Zed",),)
    assert store.tables.values("default", "revenue", "client") == ["Zed"]
    store.corpus.delete_document(t.doc_id)
    assert store.tables.list() == [] and store.tables.drop_orphans() == 0  # hidden at once; swept after an hour


def test_workspaces_keep_their_tables_apart() -> None:
    store = Store()
    ingest_files([("a.csv", b"k\n1\n")], store=store, embedder=HashEmbedder(), config=PipelineConfig())
    ingest_files([("b.csv", b"k\n2\n")], store=store, embedder=HashEmbedder(), config=PipelineConfig(),
                 workspace="hr")
    assert [t.name for t in store.tables.list("default")] == ["a"]
    assert store.tables.sandbox("hr").tables == ("b",)
    store.workspaces_repo.delete("hr")
    assert store.tables.list("hr") == [] and store.tables.drop_orphans() == 1  # its rows went with the workspace
    assert json.dumps(store.tables.list("default")[0].columns) == '[["k", "BIGINT"]]'


def test_two_files_of_one_ingest_with_the_same_stem_the_second_is_refused() -> None:
    store = Store()
    rep = ingest_files([("a/sales.csv", b"k\n1\n"), ("b/sales.tsv", b"k\n2\n")], store=store, embedder=HashEmbedder(),
                       config=PipelineConfig())
    assert [r.status for r in rep.results] == ["ingested", "error"]
    assert "already comes from a/sales.csv" in rep.results[1].message
    assert store.tables.sandbox().run("SELECT k FROM sales").rows == ((1,),)


def test_each_row_of_a_table_text_is_its_own_sentence() -> None:
    """The offline answer quotes sentences: a row ('rig: Heron; ...') after a full stop starts lower-case, so rows
    written as plain lines ran together into one sentence and an answer quoted the whole table."""
    from core.ingest.tables import render_text
    from core.text import sentence_spans

    table = read_table("rigs.csv", b"rig,operator\nPelican,Henrik Aas\nHeron,Marta Quist\n")
    text = render_text(table)
    rows = [text[a:b] for a, b in sentence_spans(text) if "rig:" in text[a:b]]
    assert rows == ["- rig: Pelican; operator: Henrik Aas.", "- rig: Heron; operator: Marta Quist."]


def test_wide_integers_stay_exact_and_formulas_stay_defused_and_neutralised_on_export() -> None:
    """Issue #46 item 6: a 20-digit value keeps its column exact (text, with a note) instead of turning it into
    floating point; a tab-defused "\\t=1+1" stays defused; the CSV export neutralises formula-like text."""
    from core.app.tables import csv_bytes, spreadsheet_safe
    from core.ingest.tables import read_table, render_text

    t = read_table("ids.csv", b'id,code,amount\n1,"\t=1+1",5\n12345678901234567890,=HYPERLINK("http://x"),-3\n'
                              b'3,@SUM(A1),+7\n')
    cols = dict(t.columns)
    assert cols["id"] == "VARCHAR" and [r[0] for r in t.rows] == ["1", "12345678901234567890", "3"]
    assert any("id: integers wider than 64 bits, kept exact as text" in n for n in t.notes)
    assert "wider than 64 bits" in render_text(t)
    assert cols["amount"] == "BIGINT" and [r[2] for r in t.rows] == [5, -3, 7]
    assert t.rows[0][1] == "\t=1+1"  # still defused
    assert [spreadsheet_safe(v) for v in ("=1+1", "@SUM(A1)", "+7", "-3", "\t=1+1", "plain", 5)] == \
        ["'=1+1", "'@SUM(A1)", "+7", "-3", "'\t=1+1", "plain", 5]
    out = csv_bytes(["id", "code"], [(r[0], r[1]) for r in t.rows]).decode()
    assert "'=HYPERLINK" in out and "'@SUM(A1)" in out and "\n=" not in out and ",=" not in out
    assert dict(read_table("w.csv", b"w\n1\n" + b"9" * 5000 + b"\n").columns)["w"] == "VARCHAR"  # no int() limit
    small = read_table("n.csv", b"n\n1\n9223372036854775807\n")
    assert dict(small.columns)["n"] == "BIGINT"  # the int64 edge still fits


def test_a_table_file_is_parsed_once_inside_the_sandbox(monkeypatch) -> None:  # noqa: ANN001
    """Issue #46 item 6: the typed table the ingest stores is the one the parse worker read; this process never
    parses the file again (a read here would raise)."""
    import datetime as dt

    import core.ingest.tables as tables_mod
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.store import Store
    from tests.fakes import HashEmbedder

    def refuse(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the table was parsed a second time, outside the sandbox")

    monkeypatch.setattr(tables_mod, "read_table", refuse)
    store = Store()
    rep = ingest_files([("sales.csv", b"day,region,amount\n2024-01-02,north,5\n2024-01-03,south,7\n")], store=store,
                       embedder=HashEmbedder(), config=PipelineConfig())
    assert not rep.errors
    box = store.tables.sandbox()
    r = box.run("SELECT day, amount FROM sales ORDER BY day")
    assert r.rows == ((dt.date(2024, 1, 2), 5), (dt.date(2024, 1, 3), 7))
