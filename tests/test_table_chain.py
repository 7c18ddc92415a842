"""Issue #47 item 5: a ranked row's other column ('the population of the country with the highest income'), one
query when one table holds both, two tool steps (the first step's value feeding the second) when the planner runs
it or the column is in another table; a column no table has is named, with the table's columns; the planner says
when it stopped early."""
from __future__ import annotations

from typing import Any

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.route.agent import Budget
from core.route.sql import find_chain, sql_route, template_sql
from core.route.tools import Toolbox, plan_question, run_offline
from core.store import Store
from tests.fakes import HashEmbedder

NATIONS = (b"nation,zone,vitality,headcount,earnings\nNorland,north,81.5,5,61000\nSudia,south,62.0,40,3000\n"
           b"Estoria,north,77.0,12,30000\nWestmark,west,70.5,90,12000\nOstrava,west,74.0,20,18000\n")
# Several rows per trader: the ranking sums them; the asked column lives in the second table.
SALES = b"trader,quarter,sales_eur\nAlba,Q1,10\nAlba,Q2,50\nBrio,Q1,40\nBrio,Q2,15\nCoda,Q1,30\n"
TRADERS = b"trader,manager,city\nAlba,Ines Vale,Porto\nBrio,Tomas Reed,Leeds\nCoda,Ines Vale,Ghent\n"


@pytest.fixture(scope="module")
def store() -> Store:
    s = Store()
    rep = ingest_files([("nations.csv", NATIONS), ("sales.csv", SALES), ("traders.csv", TRADERS)], store=s,
                       embedder=HashEmbedder(), config=PipelineConfig())
    assert not rep.errors
    return s


def _values(store: Store) -> Any:
    return lambda t, c: store.tables.values("default", t, c)


def _box(store: Store) -> Toolbox:
    def search(query: str, collection: str) -> Any:
        raise AssertionError("a table chain never searches")

    sandbox = store.tables.sandbox("default")
    return Toolbox(search=search, sql_run=lambda sql: sandbox.run(sql), tables=store.tables.list("default"),
                   values=_values(store))


@pytest.mark.parametrize("question, sql, rows", [
    ("What is the headcount of the nation with the highest earnings?",
     "SELECT nation, headcount FROM nations ORDER BY earnings DESC LIMIT 1", [("Norland", 5)]),
    ("What is the zone of the nation with the lowest vitality?",
     "SELECT nation, zone FROM nations ORDER BY vitality ASC LIMIT 1", [("Sudia", "south")]),
    ("How many earnings does the nation with the largest headcount have?",
     "SELECT nation, earnings FROM nations ORDER BY headcount DESC LIMIT 1", [("Westmark", 12000)]),
])
def test_a_ranked_rows_column_is_one_query(store: Store, question: str, sql: str, rows: list[tuple]) -> None:
    plan = template_sql(question, store.tables.list("default"), _values(store))
    assert plan.sql == sql
    assert [tuple(r) for r in store.tables.sandbox("default").run(plan.sql).rows] == rows


def test_grouping_by_the_named_column_is_kept(store: Store) -> None:
    plan = template_sql("Which zone has the highest average vitality?", store.tables.list("default"), _values(store))
    assert plan.sql == "SELECT zone FROM nations GROUP BY zone ORDER BY avg(vitality) DESC LIMIT 1"
    assert store.tables.sandbox("default").run(plan.sql).rows[0][0] == "north"


def test_a_column_no_table_has_is_named_with_the_tables_columns(store: Store) -> None:
    tables, values = store.tables.list("default"), _values(store)
    q = "Which zone has the highest average life expectancy?"
    plan = template_sql(q, tables, values)
    assert plan.sql == "" and plan.reason.startswith("'life expectancy' names no column of table nations")
    out = sql_route(q, tables, values, store.tables.sandbox("default"), llm=None, model="m")
    said = out.untranslated()
    assert "'life expectancy' names no column" in said
    assert all(c in said for c in ("nation (varchar)", "zone (varchar)", "vitality (double)", "earnings (bigint)"))
    # "total" over a column that is not there counts no rows
    assert template_sql("What is the total battery capacity of the north nations?", tables, values).sql == ""


def test_the_planner_feeds_the_first_steps_value_to_the_second(store: Store) -> None:
    box = _box(store)
    q = "What is the city of the trader with the highest sales?"
    plan = plan_question(q, box)
    assert plan.form == "chain" and plan.chain is not None and plan.chain.grouped and plan.chain.steps == 2
    assert template_sql(q, box.tables, box.values).sql == ""  # a join: one query is not the template's
    out = run_offline(q, box, budget=Budget(max_rounds=2))
    assert out.sql == ("SELECT trader FROM sales GROUP BY trader ORDER BY sum(sales_eur) DESC LIMIT 1",
                       "SELECT trader, city FROM traders WHERE trader = 'Alba'")
    assert out.table_answer == "Alba: Porto" and out.stopped_early() == ""
    one_round = run_offline(q, box, budget=Budget(max_rounds=1))
    assert one_round.sql == out.sql[:1] and one_round.stopped_early() == "stopped early, after step 1 of 2: " \
                                                                         "budget_rounds"


def test_chain_parts_need_a_named_measure(store: Store) -> None:
    tables = store.tables.list("default")
    assert find_chain("What is the zone of the nation with the highest mood?", tables, _values(store)) is None


def test_tools_on_answer_the_chain_and_say_when_they_stopped(store: Store) -> None:
    deps = Deps(store=store, embedder=HashEmbedder())
    q = "What is the headcount of the nation with the highest earnings?"
    trace = run_query(q, PipelineConfig().with_overrides({"agent.tools": "on"}), deps)
    assert trace.agent is not None and trace.agent.form == "chain" and len(trace.agent.sql) == 2
    assert trace.answer is not None and trace.answer.text.startswith("Norland: 5 (SQL")
    cut = run_query(q, PipelineConfig().with_overrides({"agent.tools": "on", "agent.max_rounds": 1}), deps)
    assert cut.answer is not None and "stopped early, after step 1 of 2: budget_rounds" in cut.answer.text


def test_a_ranking_cue_inside_the_columns_name_does_not_set_the_direction() -> None:
    s = Store()
    rep = ingest_files([("kit.csv", b"item,kind,max_load_kg\nA,crane,10\nB,crane,30\nC,hoist,25\nD,hoist,22\n")],
                       store=s, embedder=HashEmbedder(), config=PipelineConfig())
    assert not rep.errors
    plan = template_sql("Which kind has the lowest average maximum load?", s.tables.list("default"), _values(s))
    assert plan.sql == "SELECT kind FROM kit GROUP BY kind ORDER BY avg(max_load_kg) ASC LIMIT 1"
    assert s.tables.sandbox("default").run(plan.sql).rows[0][0] == "crane"
