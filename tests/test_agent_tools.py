"""The agent's tools (core/route/tools.py): tool calls checked against their schemas, the offline planner's forms on
tiny tables and notes with known answers, every call a trace stage inside the budgets, and Claude's tool use through
the loopback Messages stub with the real SDK (malformed calls, hostile SQL, a loop that never ends)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.graph.build import build_graph
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM
from core.pipeline import run_query
from core.route.agent import Budget
from core.route.tools import (
    TOOL_SPECS,
    Toolbox,
    find_lookup,
    plan_question,
    run_llm,
    run_offline,
    validate,
)
from core.store import Store
from core.types import Candidate, StageResult, Trace
from tests.anthropic_stub import Stub, default_reply, start_stub
from tests.fakes import HashEmbedder

ORDERS = (b"customer,region,quarter,amount_usd\nAcme Corp,north,Q1,100\nAcme Corp,north,Q2,150\nBolt Ltd,south,Q1,80\n"
          b"Bolt Ltd,south,Q2,70\nCrane Inc,north,Q1,5\n")
FAULTS = b"fault_code,system,level,reports\nF-1,pump,high,12\nF-2,pump,low,30\nF-3,valve,high,7\nF-4,valve,low,1\n"
OWNERS = b"customer,owner,parent\nAcme Corp,Ann,\nBolt Ltd,Bob,Acme Corp\nCrane Inc,Ann,Acme Corp\n"
NOTES = (b"# Customer notes\n\nBolt Ltd is the customer whose warehouse flooded in May; its deliveries were rerouted "
         b"through the south depot.\n\n## Faults\n\nFault F-2 means the pump impeller is worn; replace the impeller "
         b"and check the seal.\n")
QUICK = {"answer.mode": "extractive", "answer_cache.enabled": False}


@pytest.fixture(scope="module")
def store() -> Store:
    s = Store()
    rep = ingest_files([("orders.csv", ORDERS), ("faults.csv", FAULTS), ("owners.csv", OWNERS),
                        ("notes.md", NOTES)], store=s, embedder=HashEmbedder(), config=PipelineConfig())
    assert not rep.errors
    return s


@pytest.fixture(scope="module")
def deps(store: Store) -> Deps:
    return Deps(store=store, embedder=HashEmbedder())


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = start_stub()
    try:
        yield s
    finally:
        s.stop()


def _values(store: Store):
    return lambda t, c: store.tables.values("default", t, c)


def _tool_stages(trace: Trace) -> list[StageResult]:
    return [s for s in trace.stages if s.stage.startswith("tool") and not s.stage.startswith("tools.")]


# -- schema checks ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, raw, error", [
    ("shell", {"cmd": "ls"}, "unknown tool 'shell'"),
    (None, {"query": "x"}, "unknown tool 'None'"),
    ("sql", "{not json", "not valid JSON"),
    ("sql", ["SELECT 1"], "must be a JSON object, not list"),
    ("search", {}, "missing required field 'query'"),
    ("search", {"query": 5}, "must be a string, not int"),
    ("search", {"query": "x", "sudo": True}, "unexpected field(s) ['sudo']"),
    ("search", {"query": "x" * 1_001}, "1,001 characters long (at most 1,000)"),
    ("sql", {"query": "S" * 10_001}, "at most 10,000"),
    ("graph", {"entity": "   "}, "the query is empty"),
])
def test_a_malformed_tool_call_gets_its_reason(name: Any, raw: Any, error: str) -> None:
    assert error in validate(name, raw)[2]


def test_a_well_formed_call_passes_and_every_schema_is_an_object_with_required_strings() -> None:
    assert validate("sql", '{"query": "SELECT 1"}') == ("sql", {"query": "SELECT 1"}, "")
    assert validate("search", {"query": "pumps", "collection": "hr"}) == (
        "search", {"query": "pumps", "collection": "hr"}, "")
    for spec in TOOL_SPECS:
        schema = spec["input_schema"]
        assert schema["type"] == "object" and not schema["additionalProperties"] and schema["required"]
        assert all(p["type"] == "string" and p["maxLength"] > 0 for p in schema["properties"].values())


# -- the offline planner ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("question, answer, steps", [
    ("What is the total amount of Acme Corp's subsidiaries?", "155",
     ["SELECT DISTINCT customer FROM owners WHERE parent = 'Acme Corp' ORDER BY 1",
      "SELECT sum(amount_usd) FROM orders WHERE customer IN ('Bolt Ltd', 'Crane Inc')"]),
    ("Total amount of customers owned by Ann?", "255",
     ["SELECT DISTINCT customer FROM owners WHERE owner = 'Ann' ORDER BY 1",
      "SELECT sum(amount_usd) FROM orders WHERE customer IN ('Acme Corp', 'Crane Inc')"]),
    ("Total Q1 amount of Acme Corp and its subsidiaries?", "185",
     ["SELECT DISTINCT customer FROM owners WHERE parent = 'Acme Corp' OR customer = 'Acme Corp' ORDER BY 1",
      "SELECT sum(amount_usd) FROM orders WHERE customer IN ('Acme Corp', 'Bolt Ltd', 'Crane Inc') AND "
      "quarter = 'Q1'"]),
])
def test_lookup_then_aggregate_runs_two_sql_steps_and_cites_both(deps: Deps, question: str, answer: str,
                                                                   steps: list[str]) -> None:
    trace = run_query(question, PipelineConfig().with_overrides(QUICK), deps)  # agent.tools = auto (default)
    tools = _tool_stages(trace)
    assert [s.stage for s in tools] == ["tool1.sql", "tool2.sql"]
    assert [s.info["sql"] for s in tools] == steps
    assert trace.agent["planner"] == "offline" and trace.agent["form"] == "lookup_aggregate"
    assert trace.agent["stop_reason"] == "answered" and trace.agent["rounds"] == 2
    assert trace.answer is not None and trace.answer.mode == "sql" and trace.answer.text.startswith(answer)
    cited = set(trace.answer.citations)
    assert any(c.startswith("tool2:sql:orders:") for c in cited) and any(c.startswith("tool1:sql:owners:") for c in cited)
    assert trace.stage("tools.plan").notes[0].startswith("offline planner")  # labelled offline in the trace
    assert trace.stage("bm25").skipped.startswith("answered by the agent's tools")


def test_an_entity_the_documents_name_is_looked_up_then_aggregated(deps: Deps) -> None:
    trace = run_query("What is the total amount of the customer whose warehouse flooded in May?",
                      PipelineConfig().with_overrides(QUICK), deps)
    assert trace.agent["form"] == "text_then_sql"
    assert [s.stage for s in _tool_stages(trace)] == ["tool1.search", "tool2.sql"]
    bridge = trace.stage("tools.bridge")
    assert bridge.info["value"] == "Bolt Ltd" and "warehouse flooded" in bridge.info["sentence"]
    assert trace.stage("tool2.sql").info["rows"] == [[150]]
    assert trace.answer.text.startswith("150") and "Bolt Ltd" in trace.answer.text
    notes_chunk = bridge.candidates[0].chunk_id
    assert notes_chunk in trace.answer.citations and "tool2:sql:orders:1" in trace.answer.citations
    # the search tool leaves out the tables' own text form (their rows are the sql tool's)
    tables = {t.doc_id for t in deps.store.tables.list()}
    assert all(c.doc_id not in tables for c in trace.stage("tool1.search").candidates)


def test_sql_then_the_documents_with_what_sql_found(deps: Deps) -> None:
    on = PipelineConfig().with_overrides({**QUICK, "agent.tools": "on"})
    trace = run_query("What should be done about the fault code with the most reports?", on, deps)
    assert trace.agent["form"] == "sql_then_text"
    assert [s.stage for s in _tool_stages(trace)] == ["tool1.sql", "tool2.search"]
    assert trace.stage("tool1.sql").info["rows"] == [["F-2"]]
    assert "F-2" in trace.stage("tool2.search").info["query"]
    assert trace.stage("evidence").candidates[0].text.startswith("## Faults\n\nFault F-2 means")
    # the rows answer their part whatever the offline answerer (a hash embedder here) makes of the passages
    assert trace.answer.text.startswith("From the tables: F-2.") and not trace.answer.refused
    assert trace.answer.citations[0].startswith("tool1:sql:faults:")


def test_auto_leaves_one_shot_questions_to_the_sql_stage_and_off_runs_no_tool(deps: Deps) -> None:
    auto = run_query("How many fault codes per system?", PipelineConfig().with_overrides(QUICK), deps)
    assert not _tool_stages(auto) and auto.answer.mode == "sql" and auto.agent is None
    off = run_query("What is the total amount of Acme Corp's subsidiaries?",
                    PipelineConfig().with_overrides({**QUICK, "agent.tools": "off"}), deps)
    assert not _tool_stages(off) and off.stage("tools.plan") is None


def test_the_rounds_budget_stops_the_plan_and_says_so(deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({**QUICK, "agent.max_rounds": 1})
    trace = run_query("What is the total amount of Acme Corp's subsidiaries?", cfg, deps)
    assert [s.stage for s in _tool_stages(trace)] == ["tool1.sql"]
    assert trace.agent["stop_reason"] == "budget_rounds" and trace.agent["rounds"] == 1
    assert "stopped early, after step 1 of 2: budget_rounds" in trace.answer.text


def test_lookup_needs_two_tables_sharing_a_key(store: Store) -> None:
    tables = store.tables.list()
    assert find_lookup("How many fault codes are high?", tables, _values(store)) is None
    assert find_lookup("What is the total amount of Acme Corp?", tables, _values(store)) is None  # names the key
    plan = plan_question("What is connected to the Harbor cluster?", Toolbox(search=lambda q, c: Trace("", "", 0, ()),
                                                                             graph=lambda e: None))
    assert plan.form == "graph"


def test_the_graph_tool_is_skipped_without_a_graph_and_lists_neighbours_with_one(tmp_path: Path) -> None:
    s = Store()
    ingest_files([("infra.md", b"# Infra\n\nThe billing service keeps invoices in PostgreSQL on the Harbor cluster.\n\n"
                               b"Operations restart PostgreSQL every night after the Harbor backup.\n")],
                 store=s, embedder=HashEmbedder(), config=PipelineConfig())
    d = Deps(store=s, embedder=HashEmbedder())
    on = PipelineConfig().with_overrides({**QUICK, "agent.tools": "on"})
    before = run_query("What is connected to Harbor?", on, d)
    g = before.stage("tool1.graph")
    assert g is not None and g.skipped.startswith("no graph built yet")
    assert before.stage("tool2.search") is not None  # the plan falls back to search
    build_graph(s, on.graph.model_copy(update={"min_phrase_chunks": 1}))
    after = run_query("What is connected to Harbor?", on, d)
    g = after.stage("tool1.graph")
    assert g.skipped is None and "PostgreSQL" in [n[0] for n in g.info["neighbours"]]
    assert g.candidates and all("Harbor" in c.text or "PostgreSQL" in c.text for c in g.candidates)


# -- Claude chooses the tools (the loopback stub, the real SDK) -------------------------------------------------------
def _search_box(store: Store, hits: list[Candidate] | None = None) -> Toolbox:
    sandbox = store.tables.sandbox()
    from core.route.sql import sql_route

    tables = store.tables.list()
    found = hits or [Candidate("c1", "d1", "Fault F-2 means the pump impeller is worn.", 1.0, 1)]
    return Toolbox(search=lambda q, c: Trace(q, "", 0, (StageResult("fused", tuple(found), 1.0),)),
                   sql_question=lambda q: sql_route(q, tables, _values(store), sandbox, llm=None, model="m"),
                   sql_run=sandbox.run, tables=tables, values=_values(store))


def _script(stub: Stub, turns: list[Any]) -> None:
    """The stub replies to each tool-use request with the next scripted turn (a list of blocks, or text)."""
    it = iter(turns)

    def reply(body: dict[str, Any]) -> Any:
        if not body.get("tools"):
            return default_reply(body)
        return next(it, "Done [none].")

    stub.state.responder = reply


def _llm(stub: Stub) -> AnthropicLLM:
    return AnthropicLLM(stub.key, base_url=stub.base_url, sleep=lambda s: None, max_retries=0)


def _use(i: int, name: str, inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": inp}


def test_claude_calls_sql_then_answers_citing_the_row(stub: Stub, store: Store) -> None:
    _script(stub, [[_use(1, "sql", {"query": "SELECT sum(amount_usd) FROM orders"})],
                   "The total is 405 [tool1:sql:orders:1]."])
    out = run_llm("What is the total amount?", _search_box(store), _llm(stub), model="claude-haiku-4-5",
                  budget=Budget(), workspace="default")
    assert out.final_text == "The total is 405 [tool1:sql:orders:1]." and out.stop_reason == "answered"
    assert out.rows[0].chunk_id == "tool1:sql:orders:1" and out.rows[0].text == "sum(amount_usd): 405"
    assert [s.stage for s in out.stages] == ["tools.turn1", "tool1.sql", "tools.turn2"]
    assert out.spent["llm_calls"] == 2 and all(not s.notes or "implausible" not in s.notes[0] for s in out.stages)
    first, second = stub.state.messages()[-2:]
    assert [t["name"] for t in first["tools"]] == ["search", "sql", "graph"]
    assert first["tools"][1]["input_schema"]["required"] == ["query"]
    result = second["messages"][-1]["content"][0]
    assert second["messages"][1]["content"][0]["type"] == "tool_use"
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1" and "405" in result["content"]
    assert "is_error" not in result


def test_malformed_calls_get_error_results_and_the_loop_goes_on(stub: Stub, store: Store) -> None:
    _script(stub, [[_use(1, "shell", {"cmd": "rm -rf /"}), _use(2, "sql", "{not json"),
                    _use(3, "search", {"query": "q" * 50_000}), _use(4, "sql", {"query": "SELECT 1"}),
                    _use(5, "search", {}), _use(6, "graph", {"entity": "x"})],
                   [_use(7, "graph", {"entity": "pump"})],
                   "No graph here; fault F-2 [c1]."])
    out = run_llm("What is F-2?", _search_box(store), _llm(stub), model="claude-haiku-4-5",
                  budget=Budget(max_rounds=3), workspace="default")
    errors = [s.info.get("error", "") for s in out.stages if s.stage.startswith("tool") and "." in s.stage
              and not s.stage.startswith("tools.")]
    assert errors[:6] == ["unknown tool 'shell'; the tools are search, sql, graph",
                          "the input is not valid JSON: send an object such as {\"query\": \"...\"}",
                          "field 'query' is 50,000 characters long (at most 1,000)", "",
                          "at most 4 tool calls per turn", "at most 4 tool calls per turn"]
    graph = next(s for s in out.stages if s.stage == "tool7.graph")
    assert graph.skipped.startswith("no graph built yet")
    results = stub.state.messages()[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == [f"toolu_{i}" for i in range(1, 7)]  # every call answered
    assert [bool(r.get("is_error")) for r in results] == [True, True, True, False, True, True]
    assert stub.state.messages()[1]["messages"][1]["content"][1]["input"] == {}  # a non-object goes back as {}
    assert out.stop_reason == "answered" and out.final_text.startswith("No graph here")
    assert out.passages == () and out.rows[0].text == "1: 1"


@pytest.mark.parametrize("sql, reason", [
    ("DROP TABLE orders", "only a read-only SELECT"),
    ("SELECT * FROM read_csv('/etc/passwd')", "read_csv"),
    ("COPY orders TO '{tmp}/leak.csv'", "COPY"),
    ("ATTACH '{tmp}/other.duckdb' AS o", "ATTACH"),
    ("SELECT 1; DROP TABLE orders", "one statement only"),
    ("SELECT getenv('HOME')", "getenv"),
    ("INSTALL httpfs", "INSTALL"),
    ("SELECT count(*) FROM orders a, orders b, orders c WHERE a.customer = ' OR 1=1 --'", ""),
])
def test_hostile_sql_through_the_tool_goes_through_the_sandbox(stub: Stub, store: Store, tmp_path: Path, sql: str,
                                                               reason: str) -> None:
    _script(stub, [[_use(1, "sql", {"query": sql.format(tmp=tmp_path)})], "Refused."])
    out = run_llm("Do it", _search_box(store), _llm(stub), model="claude-haiku-4-5", budget=Budget(),
                  workspace="default")
    stage = out.stages[1]
    if reason:
        assert stage.info["error"].startswith("refused by the SQL sandbox") and reason in stage.info["error"]
    else:  # an injected string is only a value: the query runs and finds nothing
        assert stage.info["rows"] == [[0]]
    assert list(tmp_path.iterdir()) == []  # no file written
    assert store.tables.sandbox().run("SELECT count(*) FROM orders").rows == ((5,),)  # nothing dropped


def test_a_tool_loop_that_never_ends_stops_on_the_budget(stub: Stub, store: Store) -> None:
    stub.state.responder = lambda body: [_use(len(body["messages"]), "search", {"query": f"again {len(body['messages'])}"})]
    out = run_llm("Loop", _search_box(store), _llm(stub), model="claude-haiku-4-5", budget=Budget(max_rounds=2),
                  workspace="default")
    assert out.stop_reason == "budget_rounds" and out.rounds == 2 and out.calls == 2
    assert stub.state.messages()[-1]["tool_choice"] == {"type": "none"}  # the last call asked for the answer
    stub.state.requests.clear()
    out = run_llm("Loop", _search_box(store), _llm(stub), model="claude-haiku-4-5",
                  budget=Budget(max_rounds=10, max_llm_calls=3), workspace="default")
    assert out.stop_reason == "budget_llm_calls" and out.spent["llm_calls"] == 3 == len(stub.state.messages())
    out = run_llm("Loop", _search_box(store), _llm(stub), model="claude-haiku-4-5",
                  budget=Budget(max_rounds=10, max_llm_calls=100, max_usd=0.004), workspace="default")
    assert out.stop_reason in ("budget_usd", "budget_tokens") and out.spent["usd"] <= 0.004


def test_the_pipeline_lets_claude_choose_with_a_key(stub: Stub, store: Store) -> None:
    _script(stub, [[_use(1, "sql", {"query": "SELECT customer FROM owners WHERE parent = 'Acme Corp'"})],
                   [_use(2, "sql", {"query": "SELECT sum(amount_usd) FROM orders WHERE customer IN "
                                             "('Bolt Ltd', 'Crane Inc')"})],
                   "155 [tool2:sql:orders:1], from [tool1:sql:owners:1] and [tool1:sql:owners:2]."])
    d = Deps(store=store, embedder=HashEmbedder(), llm=_llm(stub))
    trace = run_query("What is the total amount of Acme Corp's subsidiaries?",
                      PipelineConfig().with_overrides({**QUICK, "agent.max_rounds": 3}), d)
    assert trace.agent["planner"] == "llm" and trace.agent["tool_calls"] == 2
    assert trace.answer.mode == "agent" and trace.answer.text.startswith("155")
    assert trace.answer.citations[0] == "tool2:sql:orders:1" and "tool1:sql:owners:1" in trace.answer.citations
    assert json.loads(json.dumps(trace.to_dict()))["agent"]["sql"][1].startswith("SELECT sum(amount_usd)")


def test_the_search_lab_row_shows_each_tool_call_as_a_column(deps: Deps) -> None:
    from pages import _answer_box, _widgets
    from tests import lab_html

    trace = run_query("What is the total amount of Acme Corp's subsidiaries?", PipelineConfig().with_overrides(QUICK),
                      deps)
    row = lab_html.columns(_widgets.stage_row_html(trace, doc_names={}, depth=5))
    assert {"tools.plan", "tool1.sql", "tool2.sql", "evidence", "answer"} <= set(row)
    assert row["tool2.sql"].cards and "sum(amount_usd): 155" in row["tool2.sql"].cards[0]
    box = lab_html.answer_box(_answer_box.box_html(trace, cites=list(trace.answer.citations)))
    assert box.text.startswith("155") and "tool2:sql:orders:1" in box.cites


def test_the_search_lab_names_a_tool_run_by_its_planner_not_as_an_agentic_loop() -> None:
    from streamlit.testing.v1 import AppTest

    from pages import _state

    d = Deps(store=Store(), embedder=HashEmbedder())
    ingest_files([("orders.csv", ORDERS), ("owners.csv", OWNERS), ("notes.md", NOTES)], store=d.store,
                 embedder=d.embedder, config=PipelineConfig())
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "workbench.py"), default_timeout=30)
    at.session_state[_state.DEPS_KEY] = d
    at.run()
    at = at.switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("What is the total amount of Acme Corp's subsidiaries?")
    at = at.button(key="search").click().run()
    assert not at.exception
    run = [c.value for c in at.caption if "autorenew" in c.value]
    assert len(run) == 1 and "tools: " in run[0] and "2 call(s) planned by the offline planner (lookup aggregate) in 2 round(s)" in run[0]
    assert "agentic loop" not in run[0] and "stopped: **answered**" in run[0]
