"""The sql route (core/route/sql.py): text / table / mixed, the offline template translator on the forms it claims
(matched against the tables' own columns and values), its declines, Claude's SQL through the loopback stub, and the
sql stage in the pipeline's trace."""
from __future__ import annotations

import json
from typing import Any

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM
from core.pipeline import run_query
from core.route.sql import classify, format_rows, sql_route, template_sql
from core.store import Store
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture
from tests.fakes import HashEmbedder

ORDERS = (b"customer,region,quarter,amount_usd\nAcme Corp,north,Q1,100\nAcme Corp,north,Q2,150\nBolt Ltd,south,Q1,80\n"
          b"Bolt Ltd,south,Q2,70\nCrane Inc,north,Q1,5\n")
FAULTS = b"fault_code,system,level,reports\nF-1,pump,high,12\nF-2,pump,low,30\nF-3,valve,high,7\nF-4,valve,low,1\n"
OWNERS = b"customer,owner,parent\nAcme Corp,Ann,\nBolt Ltd,Bob,Acme Corp\nCrane Inc,Ann,Acme Corp\n"


@pytest.fixture(scope="module")
def store() -> Store:  # read by every test, written by none (the pipeline's run log aside)
    s = Store()
    rep = ingest_files([("orders.csv", ORDERS), ("faults.csv", FAULTS), ("owners.csv", OWNERS),
                        ("notes.md", b"# Notes\n\nFault F-2 means the pump impeller is worn; replace it.\n")],
                       store=s, embedder=HashEmbedder(), config=PipelineConfig())
    assert not rep.errors
    return s


def _run(store: Store, question: str) -> tuple[str, Any]:
    tables = store.tables.list()
    values = lambda t, c: store.tables.values("default", t, c)  # noqa: E731
    plan = template_sql(question, tables, values)
    if not plan.sql:
        return "declined: " + plan.reason, None
    r = store.tables.sandbox().run(plan.sql)
    return plan.sql, r.rows


@pytest.mark.parametrize("question, rows", [
    ("How many faults are there?", ((4,),)),
    ("How many high level fault codes on the pump system?", ((1,),)),
    ("What is the total amount for Acme Corp?", ((250,),)),
    ("Total amount in Q1 for the north region?", ((105,),)),
    ("How many reports in total?", ((50,),)),
    ("What is the average amount for Bolt Ltd?", ((75.0,),)),
    ("What is the highest number of reports?", ((30,),)),
    ("What is the lowest amount in Q2?", ((70,),)),
    ("Total amount per region?", (("north", 255), ("south", 150))),
    ("How many fault codes per system?", (("pump", 2), ("valve", 2))),
    ("Which 2 fault codes have the most reports?", (("F-2",), ("F-1",))),
    ("Which customer has the highest total amount?", (("Acme Corp",),)),
    ("Which fault codes are high?", (("F-1",), ("F-3",))),
    # a follow-up condensed from a conversation: the asked column (system) of the top row, not the top number
    ("and which system has the fault code with the most reports?", (("F-2", "pump"),)),
    # the column the question names is the grouping (issue #47: it ranked the row key, one customer)
    ("Which region has the highest average amount?", (("north",),)),
    ("Which system has the lowest total reports?", (("valve",),)),
])
def test_template_translator_forms(store: Store, question: str, rows: tuple) -> None:
    sql, got = _run(store, question)
    assert got is not None, sql
    assert sorted(got) == sorted(rows) if "Which fault codes are" in question else got == rows, sql


@pytest.mark.parametrize("question, why", [
    ("Total amount of customers owned by Ann?", "needs a join"),
    ("What is the total amount of Acme Corp's subsidiaries?", "'s subsidiaries"),
    ("Tell me a joke about the weather", "no table, column or value"),
])
def test_template_translator_declines_what_it_cannot_write(store: Store, question: str, why: str) -> None:
    sql, got = _run(store, question)
    assert got is None and why in sql


def test_route_text_table_mixed(store: Store) -> None:
    tables = store.tables.list()
    values = lambda t, c: store.tables.values("default", t, c)  # noqa: E731
    assert classify("How many fault codes per system?", tables, values).kind == "table"
    assert classify("What does fault F-2 mean?", tables, values).kind == "text"
    assert classify("Explain the fault code with the most reports and how to fix it", tables, values).kind == "mixed"
    assert classify("Where is the office?", tables, values).kind == "text"
    assert classify("How many fault codes?", [], values).kind == "text"
    assert format_rows(("a",), [(1.5,), (2.0,)]) == "1.5, 2" and format_rows(("k", "v"), [("x", 1)]) == "x: 1"


def test_claude_writes_the_sql_through_the_stub_malformed_and_hostile_replies_fall_back(
        store: Store, anthropic_stub: Stub) -> None:
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None, max_retries=0)
    tables = store.tables.list()
    values = lambda t, c: store.tables.values("default", t, c)  # noqa: E731
    box = store.tables.sandbox()
    join = ("SELECT sum(o.amount_usd) FROM orders o JOIN owners w ON w.customer = o.customer WHERE w.owner = 'Ann'")
    replies = iter([json.dumps({"sql": join, "reason": "join orders to owners"}),
                    "not json", json.dumps({"sql": "COPY orders TO '/tmp/x.csv'", "reason": "evil"}),
                    json.dumps({"sql": "", "reason": "the tables do not say"})])
    anthropic_stub.state.responder = lambda body: next(replies)
    out = sql_route("Total amount of customers owned by Ann?", tables, values, box, llm=llm, model="claude-haiku-4-5")
    assert out.plan.translator == "llm" and out.result is not None and out.result.rows == ((255,),)
    sent = anthropic_stub.state.requests[-1].json()
    assert "orders(customer VARCHAR" in json.dumps(sent) and sent["output_config"]["format"]["type"] == "json_schema"
    # Malformed JSON: the template translator answers what it can, saying the LLM's reply was unusable.
    out = sql_route("How many faults are there?", tables, values, box, llm=llm, model="claude-haiku-4-5")
    assert out.plan.translator == "template" and out.result.rows == ((4,),)
    assert any("llm:" in n for n in out.notes)
    # A hostile query from the LLM is refused by the sandbox, never run.
    out = sql_route("How many faults are there?", tables, values, box, llm=llm, model="claude-haiku-4-5")
    assert out.plan.translator == "template" and any("refused by the sandbox" in n and "COPY" in n for n in out.notes)
    out = sql_route("Total amount of customers owned by Ann?", tables, values, box, llm=llm, model="m")
    assert out.result is None and "SQL box" in " ".join(out.notes)


def test_pipeline_records_the_sql_stage_and_answers_table_questions_from_rows(store: Store) -> None:
    deps = Deps(store=store, embedder=HashEmbedder())
    trace = run_query("How many fault codes per system?", PipelineConfig(), deps)
    d = trace.to_dict()
    sql = next(s for s in d["stages"] if s["stage"] == "sql")
    assert sql["info"]["translator"] == "template" and sql["info"]["rows"] == [["pump", 2], ["valve", 2]]
    assert "GROUP BY system" in sql["info"]["sql"]
    assert trace.answer is not None and trace.answer.mode == "sql" and trace.answer.text.startswith("pump: 2; valve: 2")
    assert trace.answer.citations == tuple(c.chunk_id for c in trace.stage("sql").candidates) != ()  # the rows
    assert next(s for s in d["stages"] if s["stage"] == "bm25")["skip_reason"].startswith("route table")
    quick = PipelineConfig().with_overrides({"answer.enabled": False})  # the retrieval path is what is checked
    text = run_query("What does fault F-2 mean?", quick, deps)
    assert text.stage("sql").skipped.startswith("a text question") and text.stage("bm25").skipped is None
    mixed = run_query("Explain the fault code with the most reports and how to fix it", quick, deps)
    assert mixed.stage("sql").info["rows"] == [["F-2"]] and mixed.stage("bm25").skipped is None
    empty = Deps(store=Store(), embedder=HashEmbedder())
    ingest_files([("a.md", b"# A\n\nPlain text.\n")], store=empty.store, embedder=empty.embedder,
                 config=PipelineConfig())
    assert run_query("How many things?", quick, empty).stage("sql") is None  # no tables: no stage


def test_cli_sql_runs_a_select_and_refuses_the_rest(tmp_path, capsys) -> None:
    from core import cli

    db = str(tmp_path / "w.duckdb")
    s = Store(db)
    ingest_files([("faults.csv", FAULTS)], store=s, embedder=HashEmbedder(), config=PipelineConfig())
    s.close()
    assert cli.main(["sql", "SELECT system, sum(reports) FROM faults GROUP BY 1 ORDER BY 1", "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == [["pump", 42], ["valve", 8]] and out["columns"][0] == "system"
    assert cli.main(["sql", "DROP TABLE faults", "--db", db]) == 2
    assert "only a read-only SELECT" in capsys.readouterr().err


def test_a_mixed_question_is_asked_again_with_what_sql_found() -> None:
    from core.route.sql import with_values

    assert with_values("What is the first action for the fault code with the most reports in 2024?", ["F-2"]) == \
        "What is the first action for fault code F-2?"
    assert with_values("Which parts does the customer with the highest total amount use, and why?", ["Acme"]) == \
        "Which parts does customer Acme use, and why?"
    assert with_values("Describe the owner of the customer that had the highest Q1 amount.", ["Acme"]) == \
        "Describe the owner of customer Acme."
    assert with_values("Explain the busiest fault", ["F-2"]) == "Explain the busiest fault F-2"


def test_a_failing_sandbox_costs_the_sql_stage_only(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(workspace: str = "default") -> Any:
        raise MemoryError("no room for the tables")

    monkeypatch.setattr(store.tables, "sandbox", broken)
    trace = run_query("How many fault codes per system?", PipelineConfig().with_overrides({"answer.enabled": False}),
                      Deps(store=store, embedder=HashEmbedder()))
    assert "SQL sandbox failed (MemoryError" in trace.stage("sql").skipped and trace.stage("bm25").skipped is None


def test_a_table_question_with_no_query_says_so_and_lists_the_columns(store: Store) -> None:
    """Issue #47: a question the sql stage routes to a table but cannot translate is answered with that, and the
    table's columns, not with 'the corpus does not say' alone."""
    deps = Deps(store=store, embedder=HashEmbedder())
    trace = run_query("Which region has the highest average life expectancy?", PipelineConfig(), deps)
    sql = trace.stage("sql")
    assert sql is not None and sql.info["route"] == "table" and not sql.info["rows"]
    assert any(n.startswith("table orders's columns: customer (varchar), region (varchar)") for n in sql.notes)
    assert trace.answer is not None and trace.answer.refused
    assert "looks like a question about table orders" in trace.answer.text
    assert "amount_usd (bigint)" in trace.answer.text
