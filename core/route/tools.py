"""The agent's tools (issue #29): search, sql and graph as typed tools, Claude choosing them through the Messages
API's tool use, and an offline planner that chains them from the question's form; every call is its own trace stage,
counted against the agentic loop's five budgets (core/route/agent.py) and ended by its stop reasons.

The tools themselves are injected (`Toolbox`): the pipeline hands in its retrieval pass, the workspace's SQL sandbox
and translator, and the GraphRAG neighbours, so this module never reaches into another stage package.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock, ToolCall
from core.route.agent import Budget, Spend, StopReason, content_terms, guarded_call
from core.route.sql import (
    _AVG,
    _COUNT,
    _MAX,
    _MIN,
    NUMERIC,
    Chain,
    SqlOutcome,
    _ident,
    _lit,
    _mentions,
    _norm,
    _q_stems,
    _words,
    classify,
    find_chain,
    format_rows,
    json_safe,
    with_values,
)
from core.types import AgentRecord, Candidate, SqlResult, StageInfo, StageResult, TableInfo, Trace, Usage

TOOL_NAMES: tuple[str, ...] = ("search", "sql", "graph")
MAX_QUERY_CHARS = 1_000  # a search query or a question handed to the sql tool
MAX_SQL_CHARS = 10_000  # the sandbox's own limit (core/store/sql.py)
MAX_ENTITY_CHARS = 200
MAX_CALLS_PER_TURN = 4  # tool_use blocks answered per model turn; the rest get an error result
RESULT_CHARS = 4_000  # what a tool_result hands back to the model at most
ROWS_SHOWN = 20
PASSAGES_SHOWN = 5
IN_LIST_MAX = 200  # values a lookup hands to the aggregate's IN list at most

TOOL_SPECS: tuple[Mapping[str, Any], ...] = (
    {"name": "search", "description": "Search the workspace's documents (hybrid retrieval) and return the best "
                                      "passages with their ids. Use it for facts written in prose.",
     "input_schema": {"type": "object", "additionalProperties": False, "required": ["query"], "properties": {
         "query": {"type": "string", "maxLength": MAX_QUERY_CHARS, "description": "what to search for"},
         "collection": {"type": "string", "maxLength": 100,
                        "description": "optional: the collection to search (\"\" = the whole workspace)"}}}},
    {"name": "sql", "description": "Run one read-only SQL SELECT over the workspace's tables (DuckDB dialect), or "
                                   "ask a plain question that the offline translator turns into SQL. Returns the "
                                   "rows with their ids. Use it for counts, sums, averages, rankings, filters.",
     "input_schema": {"type": "object", "additionalProperties": False, "required": ["query"], "properties": {
         "query": {"type": "string", "maxLength": MAX_SQL_CHARS,
                   "description": "a SELECT statement, or a question about the tables"}}}},
    {"name": "graph", "description": "The entities most strongly connected to one entity in the workspace's "
                                     "knowledge graph (GraphRAG), with the passages that name them.",
     "input_schema": {"type": "object", "additionalProperties": False, "required": ["entity"], "properties": {
         "entity": {"type": "string", "maxLength": MAX_ENTITY_CHARS, "description": "an entity's name"}}}},
)
_SPEC = {t["name"]: t for t in TOOL_SPECS}


# -- what the pipeline injects -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Neighbours:
    """graph(entity): the node the name resolved to and its neighbours by edge weight, as candidates (one per
    neighbour, its best passage's text) and as (name, type, weight) rows."""

    entity: str
    found: bool
    neighbours: tuple[tuple[str, str, float], ...] = ()
    candidates: tuple[Candidate, ...] = ()
    notes: tuple[str, ...] = ()


Values = Callable[[str, str], Sequence[Any]]


@dataclass(frozen=True)
class Toolbox:
    """The tools as the pipeline wires them. `search(query, collection)` runs one retrieval pass (answer off) and
    returns its trace; `sql_question(question)` the offline translator plus the sandbox; `sql_run(sql)` the sandbox
    alone (ValueError with the reason when it refuses); `graph(entity)` the neighbours, None when no graph is built
    (`graph_missing` says why)."""

    search: Callable[[str, str], Trace]
    sql_question: Callable[[str], SqlOutcome] | None = None
    sql_run: Callable[[str], SqlResult] | None = None
    graph: Callable[[str], Neighbours | None] | None = None
    tables: Sequence[TableInfo] = ()
    values: Values = lambda t, c: ()
    # The tables' own text form is left out of search results: their rows are the sql tool's, and as passages they
    # crowd out the prose the search tool is asked for.
    exclude_docs: frozenset[str] = frozenset()
    graph_missing: str = "no graph built yet: run `python -m core graph build` or use the Graph page"


# -- one tool call -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolResult:
    """One call as the trace and the model see it: its candidates (passages, rows or entities), the text handed
    back as the tool_result, and whether it failed (is_error) or was skipped (graph with no graph built)."""

    tool: str
    args: Mapping[str, Any]
    candidates: tuple[Candidate, ...] = ()
    text: str = ""
    error: str = ""
    skipped: str | None = None
    usage: Usage = Usage()
    info: "SearchCallInfo | SqlCallInfo | GraphCallInfo | None" = None  # what the call's trace stage shows
    result: SqlResult | None = None  # the sql tool's rows

    @property
    def ok(self) -> bool:
        return not self.error and self.skipped is None


def validate(name: Any, raw: Any) -> tuple[str, dict[str, str], str]:
    """(tool, arguments, error): a tool call checked against the tool's JSON schema by hand (required string
    fields, their length, no other fields). error is "" when the call may run."""
    tool = str(name)[:60] if isinstance(name, str) else repr(name)[:60]
    if tool not in _SPEC:
        return tool, {}, f"unknown tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}"
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return tool, {}, "the input is not valid JSON: send an object such as {\"query\": \"...\"}"
    if not isinstance(raw, Mapping):
        return tool, {}, f"the input must be a JSON object, not {type(raw).__name__}"
    schema = _SPEC[tool]["input_schema"]
    props = schema["properties"]
    extra = sorted(str(k)[:40] for k in raw if k not in props)
    if extra:
        return tool, {}, f"unexpected field(s) {extra}; {tool} takes {sorted(props)}"
    args: dict[str, str] = {}
    for key, prop in props.items():
        if key not in raw:
            if key in schema["required"]:
                return tool, {}, f"missing required field '{key}'"
            continue
        val = raw[key]
        if not isinstance(val, str):
            return tool, {}, f"field '{key}' must be a string, not {type(val).__name__}"
        if len(val) > prop["maxLength"]:
            return tool, {}, f"field '{key}' is {len(val):,} characters long (at most {prop['maxLength']:,})"
        args[key] = val
    if not args.get("query", args.get("entity", "")).strip():
        return tool, args, "the query is empty"
    return tool, args, ""


_SQL_START = re.compile(r"^\s*(?:\(|--|/\*)*\s*(select|with|from|values|table|show|describe|summarize|pivot|unpivot|"
                        r"explain|insert|update|delete|drop|create|alter|copy|attach|detach|install|load|pragma|set|"
                        r"call|export|import|checkpoint|vacuum|begin|commit|rollback|use|reset|grant|truncate)\b",
                        re.I)


def looks_like_sql(text: str) -> bool:
    """A statement (any SQL keyword first, a hostile one included: the sandbox refuses it with the reason), not a
    plain question for the translator."""
    return bool(_SQL_START.match(text)) or ";" in text


def _rows_as_candidates(res: SqlResult, n: int, table: str, doc: str) -> tuple[Candidate, ...]:
    return tuple(Candidate(f"tool{n}:sql:{table or 'result'}:{i}", doc,
                           "; ".join(f"{c}: {v}" for c, v in zip(res.columns, row)), 1.0, i, {"stage": f"tool{n}.sql"})
                 for i, row in enumerate(res.rows[:50], start=1))


def _table_of(sql: str, tables: Sequence[TableInfo]) -> TableInfo | None:
    low = sql.lower()
    return next((t for t in tables if re.search(rf"\bfrom\s+\"?{re.escape(t.name.lower())}\b", low)), None)


def run_tool(box: Toolbox, tool: str, args: Mapping[str, str], n: int) -> ToolResult:
    """Run one validated call. A tool that fails (the sandbox refuses, the search raises a ValueError) comes back
    as an error result, never an exception: the model reads the reason and may try again."""
    if tool == "search":
        query, coll = args["query"], args.get("collection", "")
        try:
            trace = box.search(query, coll)
        except (ValueError, LLMError) as exc:  # a query the pipeline refuses, a transform's failed call
            return ToolResult("search", dict(args), error=f"search failed: {str(exc)[:300]}")
        final = trace.final()
        found = tuple(final.candidates) if final is not None else ()
        cands = tuple(c.with_rank(i, None) for i, c in enumerate(
            (c for c in found if c.doc_id not in box.exclude_docs), start=1))
        text = "\n".join(f"[{c.chunk_id}] {' '.join(c.text.split())[:600]}" for c in cands[:PASSAGES_SHOWN])
        notes = [f"collection '{coll}' asked for: collections are not wired here, the whole workspace was searched"
                 ] if coll else []
        if len(cands) < len(found):
            notes.append(f"{len(found) - len(cands)} passage(s) of the tables' text form left out: the sql tool "
                         "reads the tables")
        return ToolResult("search", dict(args), cands, text or "no passages found", usage=trace.usage,
                          info=SearchCallInfo(query, coll, final.stage if final else None,
                                              tuple(s.stage for s in trace.stages if s.skipped is None),
                                              tuple(notes)))
    if tool == "sql":
        query = args["query"]
        if box.sql_run is None or not box.tables:
            return ToolResult("sql", dict(args), skipped="this workspace has no tables")
        if looks_like_sql(query):
            try:
                res = box.sql_run(query)
            except ValueError as exc:  # SqlRefused: the sandbox's reason
                return ToolResult("sql", dict(args), error=f"refused by the SQL sandbox: {exc}",
                                  info=SqlCallInfo(query[:500], "agent"))
            translator, plan = "agent", "the query as written"
        else:
            if box.sql_question is None:
                return ToolResult("sql", dict(args), error="no translator for questions: write a SELECT")
            out = box.sql_question(query)
            if out.result is None:
                return ToolResult("sql", dict(args), error=f"the template translator has no query for this: "
                                                           f"{out.error or out.plan.reason}",
                                  info=SqlCallInfo(None, out.plan.translator, out.plan.reason))
            res, translator, plan = out.result, out.plan.translator, out.plan.reason
        t = _table_of(res.sql, box.tables)
        cands = _rows_as_candidates(res, n, t.name if t else "", t.doc_id if t else "")
        shown = "\n".join(f"[{c.chunk_id}] {c.text}" for c in cands[:ROWS_SHOWN])
        more = f"\n... {len(res.rows) - ROWS_SHOWN} more rows" if len(res.rows) > ROWS_SHOWN else ""
        return ToolResult("sql", dict(args), cands, f"SQL: {res.sql}\nrows:\n{shown or '(no rows)'}{more}",
                          info=SqlCallInfo(res.sql, translator, plan, tuple(res.columns),
                                           tuple(tuple(json_safe(v) for v in r) for r in res.rows[:50]),
                                           len(res.rows), res.truncated), result=res)
    # graph
    entity = args["entity"]
    got = box.graph(entity) if box.graph is not None else None
    if got is None:
        return ToolResult("graph", dict(args), skipped=box.graph_missing)
    if not got.found:
        return ToolResult("graph", dict(args), error=f"no entity named {entity!r} in the graph",
                          info=GraphCallInfo(entity))
    text = "\n".join(f"{name} ({typ}, weight {w:g})" for name, typ, w in got.neighbours[:ROWS_SHOWN])
    return ToolResult("graph", dict(args), got.candidates, f"neighbours of {got.entity}:\n{text or '(none)'}",
                      info=GraphCallInfo(got.entity, tuple(tuple(x) for x in got.neighbours[:50]),
                                         tuple(got.notes)))


def tool_stage(res: ToolResult, n: int, ms: float, who: str) -> StageResult:
    """The call's trace stage: 'tool<n>.<tool>' with its candidates; a failed call keeps its reason in notes and
    info.error, a skipped one (graph with no graph) its skip reason."""
    name = res.tool if res.tool in TOOL_NAMES else "invalid"
    info = ToolCallInfo(res.info, res.tool, {k: v[:300] for k, v in res.args.items()}, n, who, res.error)
    said = res.info.notes if isinstance(res.info, (SearchCallInfo, GraphCallInfo)) and res.info.notes else ()
    notes = (f"{res.tool} failed: {res.error}",) if res.error else tuple(said)
    return StageResult(f"tool{n}.{name}", res.candidates, ms, res.usage, res.skipped, notes, info)


# -- the trace's records of the tools (core/types.StageInfo: read by attribute, `to_dict()` for JSON) --------------
@dataclass(frozen=True, eq=False)
class SearchCallInfo(StageInfo):
    """A search call: the query, the collection asked for, the pipeline stage whose list it handed back, the stages
    that ran inside it, and what it said (passages left out, a collection it could not honour)."""

    query: str
    collection: str
    from_stage: str | None
    inner_stages: tuple[str, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "collection": self.collection, "from_stage": self.from_stage,
                "inner_stages": list(self.inner_stages), "notes": list(self.notes)}


@dataclass(frozen=True, eq=False)
class SqlCallInfo(StageInfo):
    """A sql call: the query, who wrote it and why, and the rows (the first 50) when it ran. A refused query keeps
    only the query and its writer; a question no template fits only the translator and its reason (None: absent)."""

    sql: str | None
    translator: str
    plan: str | None = None
    columns: tuple[str, ...] | None = None
    rows: tuple[tuple[Any, ...], ...] | None = None
    row_count: int | None = None
    truncated: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"sql": self.sql, "translator": self.translator, "plan": self.plan,
             "columns": None if self.columns is None else list(self.columns),
             "rows": None if self.rows is None else [list(r) for r in self.rows], "row_count": self.row_count,
             "truncated": self.truncated}
        return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True, eq=False)
class GraphCallInfo(StageInfo):
    """A graph call: the entity, and when it was found its neighbours (name, type, weight; the first 50) and notes."""

    entity: str
    neighbours: tuple[tuple[Any, ...], ...] | None = None
    notes: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.neighbours is None:
            return {"entity": self.entity}
        return {"entity": self.entity, "neighbours": [list(x) for x in self.neighbours], "notes": list(self.notes or ())}


@dataclass(frozen=True, eq=False)
class ToolCallInfo(StageInfo):
    """A tool call's stage ('tool<n>.<tool>'): the tool's own record (`call`), the tool, its arguments, the call's
    number, who chose it, and the error when it failed."""

    call: "SearchCallInfo | SqlCallInfo | GraphCallInfo | None"
    tool: str
    args: Mapping[str, str]
    n: int
    chosen_by: str
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**(self.call.to_dict() if self.call is not None else {}), "tool": self.tool, "args": dict(self.args),
                "call": self.n, "chosen_by": self.chosen_by, **({"error": self.error} if self.error else {})}


@dataclass(frozen=True, eq=False)
class PlanInfo(StageInfo):
    """The offline planner's record ('tools.plan'): the question's form and the route it took."""

    planner: str
    form: str
    route: str


@dataclass(frozen=True, eq=False)
class BridgeInfo(StageInfo):
    """A text_then_sql bridge ('tools.bridge'): the column whose value a passage named, the value, the sentence."""

    column: str
    value: str
    sentence: str


@dataclass(frozen=True, eq=False)
class TurnInfo(StageInfo):
    """One turn of the model with the tools ('tools.turn<n>'): the calls it asked for, whether the answer was forced,
    what it wrote; a turn that failed or was not called records only the stop reason."""

    stop_reason: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, id)
    forced_answer: bool = False
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.stop_reason is not None:
            return {"stop_reason": self.stop_reason}
        return {"tool_calls": [{"name": n, "id": i} for n, i in self.tool_calls], "forced_answer": self.forced_answer,
                "text": self.text}


# -- the run -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolOutcome:
    """What the tool loop hands the pipeline: its stages, the passages and rows it found, the table answer (the
    last SQL result, formatted), the question as the answer stage should read it (with what SQL found in place of
    the phrase that asked for it), Claude's own answer when it wrote one, and the stop reason."""

    stages: tuple[StageResult, ...]
    passages: tuple[Candidate, ...]
    rows: tuple[Candidate, ...]
    table_answer: str
    asked: str
    final_text: str
    stop_reason: StopReason
    spent: Mapping[str, Any]
    planner: str  # offline | llm
    form: str
    rounds: int
    calls: int
    sql: tuple[str, ...] = ()  # the queries that ran, in order
    declined: str = ""  # why the planner had no plan (the pipeline then answers as usual)
    bridge: Mapping[str, str] = field(default_factory=dict)  # text_then_sql: the value, its passage and sentence
    planned: int = 0  # the offline plan's tool steps (0: not known in advance, Claude's loop)

    def stopped_early(self) -> str:
        """'' when the plan ran to its end; else what stopped it and after which step, for the answer to say."""
        if self.stop_reason == "answered" and (not self.planned or self.rounds >= self.planned):
            return ""
        why = self.stop_reason if self.stop_reason != "answered" else (self.declined or "a step found nothing")
        of = f" of {self.planned}" if self.planned else ""
        return f"stopped early, after step {self.rounds}{of}: {why}"

    @property
    def found(self) -> bool:
        return bool(self.passages or self.rows or self.final_text)

    def record(self) -> AgentRecord:
        """Trace.agent's record of the tools."""
        return AgentRecord(self.rounds, self.stop_reason, dict(self.spent), self.planner, self.form, self.calls,
                           tuple(self.sql), self.declined)

    def as_dict(self) -> dict[str, Any]:
        return self.record().to_dict()

    def evidence_info(self) -> "ToolsEvidenceInfo":
        return ToolsEvidenceInfo(len(self.rows), len(self.passages), self.stop_reason)


@dataclass(frozen=True, eq=False)
class ToolsEvidenceInfo(StageInfo):
    """The evidence stage after the agent's tools: how many rows and passages they found, and why they stopped."""

    rows: int
    passages: int
    stop_reason: str


@dataclass
class _State:
    spend: Spend
    stages: list[StageResult] = field(default_factory=list)
    passages: list[Candidate] = field(default_factory=list)
    rows: list[Candidate] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)
    last_sql: SqlResult | None = None
    calls: int = 0
    rounds: int = 0

    def record(self, res: ToolResult, ms: float, who: str) -> None:
        self.calls += 1
        self.stages.append(tool_stage(res, self.calls, ms, who))
        self.spend.charge(res.usage)
        if res.tool == "sql" and res.result is not None:
            self.rows += list(res.candidates)
            self.sql.append(res.result.sql)
            self.last_sql = res.result
        elif res.ok:  # search passages, and the passages naming the graph's neighbours
            seen = {c.chunk_id for c in self.passages}
            self.passages += [c for c in res.candidates if c.chunk_id not in seen]


def _call(state: _State, box: Toolbox, tool: str, args: Mapping[str, str], who: str,
          clock: Callable[[], float]) -> ToolResult:
    t0 = clock()
    tool, checked, err = validate(tool, dict(args))
    res = ToolResult(tool, checked, error=err) if err else run_tool(box, tool, checked, state.calls + 1)
    state.record(res, (clock() - t0) * 1000, who)
    return res


# -- the offline planner -----------------------------------------------------------------------------------------
# A child -> parent relation named by the parent's side ("X's subsidiaries"): generic English words, and the column
# name words a table records the parent under.
_CHILDREN = re.compile(r"\b(subsidiar(?:y|ies)|child(?:ren)? compan(?:y|ies)|daughter compan(?:y|ies)|divisions?|"
                       r"affiliates?|branches|member compan(?:y|ies))\b")
_PARENT_COLUMN_WORDS = ("parent", "holding", "group", "mother", "owner")  # in order of preference
# "the client whose ...", "the error code that ...": an entity the question defines by a clause, not by a value.
_CLAUSE = re.compile(r"\bthe ((?:[a-z0-9][a-z0-9_-]* ){0,2}?[a-z0-9][a-z0-9_-]*) (whose|that|which|who) "
                     r"((?:(?!, and\b)[^?.!;])+)")
_RELATED = re.compile(r"\b(?:related|connected|linked|tied) to (.+?)[?.!]*$")
_SECOND = re.compile(r",?\s+and\s+(what|why|how|which|who|where|when)\b([^?]*)\??\s*$")
_ASKED = re.compile(r"^\s*(?:which|what)\s+([a-z][a-z-]+)\b")
_SUPERLATIVE = re.compile(r"\bthe [a-z0-9 -]{1,40}? (?:with|that had|that has|having|which had|which has) the "
                          r"(?:most|highest|lowest|largest|smallest|fewest|least|biggest|greatest)\b")


@dataclass(frozen=True)
class Plan:
    """The offline planner's reading of the question: its form, the route it implies (text | table | mixed) and
    the reason; `decline` set when no form fits (the pipeline answers as usual)."""

    form: str
    route: str
    reason: str
    decline: str = ""
    lookup: "Lookup | None" = None
    clause: "Clause | None" = None
    chain: Chain | None = None  # chain: the ranking step, then the asked column of the row it named
    sql: str = ""  # sql_then_text: the query for the sql step, when the planner wrote it ("" = the translator's)
    sql_question: str = ""  # sql_then_text: the part of the question the sql step is asked ("" = all of it)


@dataclass(frozen=True)
class Lookup:
    """Lookup then aggregate: the keys table `a` holds for the filter, then the aggregate over table `b` for them."""

    a: TableInfo
    b: TableInfo
    key: str
    lookup_sql: str
    agg: str
    b_where: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Clause:
    """An entity the question defines by a relative clause: the column its values come from, the span to replace."""

    table: TableInfo
    column: str
    noun: str
    clause: str
    span: tuple[int, int]


def _hits(q: str, table: TableInfo, values: Values) -> list[tuple[str, str, int, int]]:
    """(column, value, start, end) of every text value of the table that occurs in the normalised question."""
    out = []
    for col, typ in table.columns:
        if typ != "VARCHAR":
            continue
        for v in values(table.name, col):
            s = _norm(str(v))
            if len(s) < 2:
                continue
            for m in re.finditer(r"(?<![a-z0-9])" + re.escape(s) + r"(?:s|es)?(?![a-z0-9])", q):
                out.append((col, str(v), m.start(), m.end()))
    return out


def _longest(hits: Sequence[tuple[str, str, int, int]]) -> list[tuple[str, str, int, int]]:
    """Hits not inside a longer one (a value's span may match in several columns: all are kept)."""
    return [h for h in hits if not any((o[3] - o[2]) > (h[3] - h[2]) and o[2] <= h[2] and h[3] <= o[3] for o in hits)]


def _agg(q: str, target: str) -> str | None:
    if _AVG.search(q):
        return f"avg({_ident(target)})"
    if _MAX.search(q) and not _MIN.search(q):
        return f"max({_ident(target)})"
    if _MIN.search(q) and not _MAX.search(q):
        return f"min({_ident(target)})"
    return f"sum({_ident(target)})"


def _where(filters: Sequence[tuple[str, str]]) -> list[str]:
    by: dict[str, list[str]] = {}
    for col, v in filters:
        if f"{_ident(col)} = {_lit(v)}" not in by.setdefault(col, []):
            by[col].append(f"{_ident(col)} = {_lit(v)}")
    return [w[0] if len(w) == 1 else "(" + " OR ".join(w) + ")" for w in by.values()]


def find_lookup(question: str, tables: Sequence[TableInfo], values: Values) -> Lookup | None:
    """Lookup then aggregate across two tables that share a key column: the question filters table A (a value of
    one of its other columns, or "X's subsidiaries" through a parent column) and aggregates a numeric column of
    table B that it names. None when no such pair fits."""
    q = _norm(question)
    stems = _q_stems(q)
    rel = _CHILDREN.search(q)
    if _SUPERLATIVE.search(q):
        return None  # "the client with the lowest revenue": a ranking asks for a row, not an aggregate of a lookup
    for b in tables:
        targets = [c for c, t in b.columns if t in NUMERIC and _mentions(_words(c), stems)]
        if not targets:
            continue  # "how many clients are amber" counts one table's rows: the translator's, not a lookup
        b_cols = dict(b.columns)
        for a in tables:
            if a is b:
                continue
            shared = [c for c, t in a.columns if t == "VARCHAR" and b_cols.get(c) == "VARCHAR"]
            if not shared or any(t in NUMERIC and _mentions(_words(c), stems) for c, t in a.columns):
                continue
            key = shared[0]
            a_hits = _longest(_hits(q, a, values))
            b_hits = _longest(_hits(q, b, values))
            filters: list[tuple[str, str]] = []
            used: list[tuple[int, int]] = []
            include_self = ""
            why = ""
            parent_cols = sorted((c for c, t in a.columns if t == "VARCHAR" and set(_words(c)) & set(_PARENT_COLUMN_WORDS)),
                                 key=lambda c: min(_PARENT_COLUMN_WORDS.index(w) for w in _words(c)
                                                   if w in _PARENT_COLUMN_WORDS))
            if rel and parent_cols:
                before = [h for h in a_hits if h[3] <= rel.start() and h[0] in (key, *parent_cols)]
                if before:
                    h = max(before, key=lambda h: h[3])
                    filters.append((parent_cols[0], h[1]))
                    used.append((h[2], h[3]))
                    if re.search(r"\band (?:its|their)\s*$", q[h[3]: rel.start()]):
                        include_self = h[1]
                    why = f"'{rel.group(1)}' of {h[1]}: the rows of {a.name} whose {parent_cols[0]} is {h[1]}"
            if not filters and any(c == key for c, _, _, _ in b_hits):
                continue  # the question names the key itself ("X's total ... and why"): no lookup needed
            if not filters:
                b_values = {_norm(v) for _, v, _, _ in b_hits}
                for col, v, s, e in a_hits:
                    if col != key and col not in b_cols and _norm(v) not in b_values:
                        filters.append((col, v))
                        used.append((s, e))
                if filters:
                    why = f"{' and '.join(f'{c} = {v}' for c, v in filters)} is in table {a.name}, the " \
                          f"{targets[0]} in {b.name}"
            if not filters:
                continue
            b_filters = [(c, v) for c, v, s, e in b_hits if c != key
                         and not any(s < ue and us < e for us, ue in used)]
            where = " AND ".join(_where(filters))
            lookup_sql = f"SELECT DISTINCT {_ident(key)} FROM {_ident(a.name)} WHERE {where} ORDER BY 1"
            if include_self:
                lookup_sql = (f"SELECT DISTINCT {_ident(key)} FROM {_ident(a.name)} WHERE {where} OR "
                              f"{_ident(key)} = {_lit(include_self)} ORDER BY 1")
            agg = _agg(q, targets[0])
            if agg is None:
                continue
            return Lookup(a, b, key, lookup_sql, agg, tuple(_where(b_filters)), why)
    return None


def find_clause(question: str, tables: Sequence[TableInfo], values: Values) -> Clause | None:
    """'the <noun> whose|that|which|who <clause>' where the noun names a text column of a table (client, error
    code) and the question gives no value of that column: the documents must say which one it is."""
    q = _norm(question)
    for m in _CLAUSE.finditer(q):
        noun = m.group(1)
        nstems = _q_stems(noun)
        if not nstems:
            continue
        for t in tables:
            for col, typ in t.columns:
                if typ != "VARCHAR" or not _mentions(_words(col), nstems[-2:]):
                    continue
                if any(c == col for c, _, _, _ in _hits(q, t, values)):
                    return None  # the question names the value itself
                if len(content_terms(m.group(3))) < 2 or _aggregate_cue(m.group(3)) or _MAX.search(m.group(3)):
                    return None  # "the client that had the highest revenue": a ranking SQL answers itself
                return Clause(t, col, noun, m.group(3).strip(), (m.start(), m.end()))
    return None


def _aggregate_cue(text: str) -> bool:
    return any(c.search(text) for c in (_COUNT, _AVG, _MAX, _MIN)) or bool(re.search(r"\b(total|sum)\b", text))


def _explained_by(word: str, tables: Sequence[TableInfo], values: Values) -> bool:
    """A word some table accounts for: its name, a column's, or one of its values'."""
    stems = _q_stems(word)
    if not stems:
        return True
    for t in tables:
        if _mentions(_words(t.name)[:1], stems) or any(_mentions(_words(c)[:1], stems) for c, _ in t.columns):
            return True
        if any(_hits(word, t, values)):
            return True
    return False


def _asks_unknown(question: str, tables: Sequence[TableInfo], values: Values) -> str:
    """'Which motor does the pump with the fewest faults use?': SQL picks the entity (a superlative phrase), but
    what is asked of it (motor) is no table's name, column or value: the documents say it. '' otherwise."""
    q = _norm(question)
    asked = _ASKED.match(q)
    if not asked or not _SUPERLATIVE.search(q) or _explained_by(asked.group(1), tables, values):
        return ""
    return f"asks for the {asked.group(1)} of the row SQL picks; no table has a {asked.group(1)}: the documents say it"


def find_selection(question: str, tables: Sequence[TableInfo], values: Values) -> tuple[str, str] | None:
    """'the high-level pump fault code': values of a table's columns and the noun of its key column, no key value and
    no aggregate: the rows those values select (their keys), for the documents to be searched with. (sql, why)."""
    q = _norm(question)
    stems = _q_stems(q)
    if _aggregate_cue(q):
        return None
    for t in tables:
        key, typ = t.columns[0]
        if typ != "VARCHAR" or not _mentions(_words(key), stems):
            continue
        hits = _longest(_hits(q, t, values))
        if not hits or any(c == key for c, _, _, _ in hits):
            continue
        where = _where([(c, v) for c, v, _, _ in hits])
        sql = f"SELECT {_ident(key)} FROM {_ident(t.name)} WHERE {' AND '.join(where)} ORDER BY 1"
        return sql, f"names the {key} by its {', '.join(sorted({c for c, _, _, _ in hits}))}: SQL selects it, the " \
                    "documents answer the rest"
    return None


def plan_question(question: str, box: Toolbox) -> Plan:
    """The offline planner's form for a question: lookup_aggregate (sql lookup -> sql aggregate), chain (sql ranking
    -> sql over the row it named), text_then_sql
    (search names the entity -> sql), sql_then_text / side_by_side (sql -> search), table (sql), graph (graph ->
    search), text (search)."""
    tables, values = box.tables, box.values
    if tables:
        look = find_lookup(question, tables, values)
        if look is not None:
            return Plan("lookup_aggregate", "table", f"lookup then aggregate: {look.why}", lookup=look)
        chain = find_chain(question, tables, values)
        if chain is not None:
            return Plan("chain", "table", f"two steps: {chain.describe()}", chain=chain)
        clause = find_clause(question, tables, values)
        if clause is not None:
            return Plan("text_then_sql", "mixed", f"the {clause.noun} is defined by '{clause.clause}': the documents "
                                                  f"name it, then SQL over {clause.table.name}", clause=clause)
        route = classify(question, tables, values)
        second = _SECOND.search(_norm(question))
        if route.kind != "text" and second and not _aggregate_cue(second.group(2)):
            head = _norm(question)[: second.start()]
            return Plan("sql_then_text", "mixed", f"a second question ('{second.group(0).strip(' ,')}') asks for "
                                                  "prose", sql_question=head.strip(" ,"))
        if route.kind == "mixed":
            return Plan("sql_then_text", "mixed", route.reason)
        if route.kind == "table" and (why := _asks_unknown(question, tables, values)):
            return Plan("sql_then_text", "mixed", why)
        if route.kind == "table":
            return Plan("table", "table", route.reason)
        sel = find_selection(question, tables, values)
        if sel:
            return Plan("sql_then_text", "mixed", sel[1], sql=sel[0])
    rel = _RELATED.search(_norm(question))
    if rel and box.graph is not None:
        return Plan("graph", "text", f"asks what is {rel.group(0).split(' to ')[0]} to an entity: its graph "
                                     "neighbours")
    return Plan("text", "text", "no table form: the documents answer it")


BRIDGE_PASSAGES = 10


def _value_in_passages(passages: Sequence[Candidate], clause: str, options: Sequence[Any]
                       ) -> tuple[str, str, str, str]:
    """The value of a column that the passages tie to the clause: in the best-ranked passage that names a value,
    the sentence sharing most of the clause's content words; a value named in it, else the last one named before it
    (its section's heading). (value, why, chunk id, sentence); value "" when no passage names one."""
    terms = content_terms(clause)
    vals = sorted({str(v) for v in options if len(str(v)) >= 2}, key=len, reverse=True)
    for c in passages[:BRIDGE_PASSAGES]:
        text = c.text
        low = text.lower()
        spans: list[tuple[int, int, str]] = []
        for v in vals:
            for m in re.finditer(r"(?<![\w-])" + re.escape(v.lower()) + r"(?![\w-])", low):
                if not any(s <= m.start() < e for s, e, _ in spans):
                    spans.append((m.start(), m.end(), v))
        if not spans:
            continue
        best, best_at = 0, (0, 0)
        for s in re.finditer(r"[^.!?\n]+[.!?]?", text):
            n = len(terms & content_terms(s.group(0)))
            if n > best:
                best, best_at = n, (s.start(), s.end())
        if best == 0:
            continue
        sentence = " ".join(text[best_at[0]: best_at[1]].split())
        inside = [sp for sp in spans if best_at[0] <= sp[0] < best_at[1]]
        if inside:
            return (inside[0][2], f"named in the sentence of passage {c.chunk_id} that matches the clause",
                    c.chunk_id, sentence)
        before = [sp for sp in spans if sp[0] < best_at[0]]
        if before:
            return (max(before)[2], f"the last one named before the matching sentence of passage {c.chunk_id}",
                    c.chunk_id, sentence)
    return "", "no passage among the top ones names a value of the column near the clause's words", "", ""


def _answer_of(res: SqlResult | None) -> str:
    return format_rows(res.columns, res.rows) if res is not None else ""


def run_offline(question: str, box: Toolbox, *, budget: Budget, clock: Callable[[], float] = time.monotonic,
                plan: Plan | None = None) -> ToolOutcome:
    """The offline planner's run: deterministic steps for the question's form, each a tool call and a round of the
    budget, then synthesis (the pipeline's answer stage). Stops early on a budget or a step with nothing found."""
    state = _State(Spend(budget, clock))
    plan = plan or plan_question(question, box)
    t0 = clock()
    stages_before = [StageResult("tools.plan", (), 0.0, Usage(), None, ("offline planner: " + plan.reason,),
                                 PlanInfo("offline", plan.form, plan.route))]
    asked, stop, declined = question, None, ""
    bridge: dict[str, str] = {}

    def step(tool: str, arg: str) -> ToolResult | None:
        nonlocal stop
        why = "budget_rounds" if state.rounds >= budget.max_rounds else state.spend.allows()
        if why:
            stop = why
            return None
        state.rounds += 1
        key = "entity" if tool == "graph" else "query"
        return _call(state, box, tool, {key: arg}, "offline planner", clock)

    if plan.form == "lookup_aggregate" and plan.lookup is not None:
        look = plan.lookup
        first = step("sql", look.lookup_sql)
        keys = [r[0] for r in first.result.rows][:IN_LIST_MAX] if first is not None and first.result else []
        if first is not None and not keys:
            declined = "the lookup found no rows"
        elif keys:
            where = [f"{_ident(look.key)} IN ({', '.join(_lit(k) for k in keys)})", *look.b_where]
            step("sql", f"SELECT {look.agg} FROM {_ident(look.b.name)} WHERE {' AND '.join(where)}")
    elif plan.form == "chain" and plan.chain is not None:
        first = step("sql", plan.chain.rank_sql())
        named = first.result.rows[0][0] if first is not None and first.result and first.result.rows else None
        if first is not None and named is None:
            declined = f"step 1 of 2 ({plan.chain.ident} by {plan.chain.ranked}) found no row: stopped before step 2"
        elif named is not None:
            step("sql", plan.chain.asked_sql(named))  # step 2 reads the value step 1 found
    elif plan.form == "text_then_sql" and plan.clause is not None:
        cl = plan.clause
        found = step("search", f"{cl.noun} {cl.clause}")
        if found is not None:
            value, why, cid, sentence = _value_in_passages(found.candidates, cl.clause,
                                                           box.values(cl.table.name, cl.column))
            named_in = tuple(c for c in found.candidates if c.chunk_id == cid)
            state.stages.append(StageResult("tools.bridge", named_in, 0.0, Usage(), None, (why,),
                                            BridgeInfo(f"{cl.table.name}.{cl.column}", value, sentence[:500])))
            bridge = {"value": value, "chunk_id": cid, "sentence": sentence} if value else {}
            if not value:
                declined = why
            else:
                q = _norm(question)
                asked = (q[: cl.span[0]] + value + q[cl.span[1]:]).strip()
                step("sql", asked)
    elif plan.form in ("sql_then_text", "table"):
        res = step("sql", plan.sql or plan.sql_question or question)
        if plan.form == "sql_then_text":
            entity = (res is not None and res.result is not None and res.result.rows
                      and isinstance(res.result.rows[0][0], str))
            if entity and res is not None and res.result is not None:
                asked = with_values(question, [str(r[0]) for r in res.result.rows[:5] if r and r[0] is not None])
            step("search", asked)
    elif plan.form == "graph":
        rel = _RELATED.search(_norm(question))
        res = step("graph", rel.group(1).strip() if rel else question)
        if res is None or not res.ok:
            step("search", question)
    else:
        step("search", question)
    if not declined and not state.rows and not state.passages:
        declined = "the tools found nothing"
    spent = state.spend.as_dict()
    stages_before[0] = StageResult("tools.plan", (), (clock() - t0) * 1000 - sum(s.ms for s in state.stages),
                                   Usage(), None, stages_before[0].notes, stages_before[0].info)
    return ToolOutcome(tuple(stages_before + state.stages), tuple(state.passages), tuple(state.rows),
                       _answer_of(state.last_sql), asked, "", stop or "answered", spent, "offline", plan.form,
                       state.rounds, state.calls, tuple(state.sql), declined, bridge, _planned_steps(plan))


def _planned_steps(plan: Plan) -> int:
    """Tool steps the offline plan takes when nothing stops it."""
    if plan.form == "chain" and plan.chain is not None:
        return 2
    if plan.form in ("lookup_aggregate", "text_then_sql", "sql_then_text"):
        return 2
    return 1


# -- Claude chooses the tools ------------------------------------------------------------------------------------
TOOLS_INSTRUCTIONS = (
    "Answer the user's question from the workspace. Tools: search (documents), sql (the tables below; one "
    "read-only SELECT, DuckDB), graph (an entity's neighbours). Call the tools you need, one step at a time; when "
    "you have the facts, answer briefly and cite the ids in square brackets of the rows and passages you used "
    "([tool1:sql:orders:1], [chunk id]). If the workspace does not answer, say so.")


def _tool_result_block(call_id: str, res: ToolResult) -> dict[str, Any]:
    text = res.error or (f"skipped: {res.skipped}" if res.skipped else res.text)
    return {"type": "tool_result", "tool_use_id": call_id, "content": text[:RESULT_CHARS],
            **({"is_error": True} if not res.ok else {})}


def _assistant_turn(text: str, calls: Sequence[ToolCall], rejected: set[int]) -> dict[str, Any]:
    """The assistant turn as sent back: its text and each tool_use block. A call that failed its schema check goes
    back with the empty object as input (the API takes only objects there, and a huge or hostile input would
    otherwise ride along in every later prompt); its error result says what was wrong."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
    content += [{"type": "tool_use", "id": c.id, "name": c.name,
                 "input": c.input if isinstance(c.input, Mapping) and i not in rejected else {}}
                for i, c in enumerate(calls)]
    return {"role": "assistant", "content": content}


def run_llm(question: str, box: Toolbox, llm: LLM, *, model: str, budget: Budget, workspace: str,
            clock: Callable[[], float] = time.monotonic, max_tokens: int = 600) -> ToolOutcome:
    """Claude's tool-use loop: each turn may call tools (at most MAX_CALLS_PER_TURN answered, the rest get an
    error result), every call is a stage; a turn with no tool call is the answer. Budgets: rounds = tool turns;
    once they are used, one more call with tool_choice none asks for the answer; the LLM calls, tokens, dollars
    and seconds are checked before every call with its worst case (guarded_call)."""
    state = _State(Spend(budget, clock))
    schema = "\n".join(t.schema_line() for t in box.tables) or "(no tables)"
    system = (TextBlock(TOOLS_INSTRUCTIONS + "\n\nTables:\n" + schema, cache=True),)
    user = (TextBlock(f"Question: {question}"),)
    turns: list[dict[str, Any]] = []
    stop: StopReason | None = None
    final = ""
    while stop is None:
        forced = state.rounds >= budget.max_rounds
        req = LLMRequest(model, system, user, max_tokens=max_tokens, purpose="agent", tools=TOOL_SPECS,
                         turns=tuple(turns), tool_choice={"type": "none"} if forced else None,
                         ref_id=question[:80])
        t0 = clock()
        before = state.spend.usd, state.spend.llm_calls
        try:
            resp, why = guarded_call(llm, req, state.spend, workspace)
        except LLMError as exc:
            stop = {"deadline": "budget_time", "budget": "budget_usd"}.get(exc.kind, "error")
            state.stages.append(StageResult("tools.turn", (), (clock() - t0) * 1000, Usage(), None,
                                            (f"the model call failed: {exc}",), TurnInfo(stop)))
            break
        if why:
            stop = why
            state.stages.append(StageResult("tools.turn", (), 0.0, Usage(), f"not called: {why}",
                                            (), TurnInfo(why)))
            break
        usage = Usage(resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cache_write_tokens,
                      resp.usage.cache_read_tokens, state.spend.usd - before[0], state.spend.llm_calls - before[1])
        calls = list(resp.tool_calls)
        turn_no = sum(s.stage.startswith("tools.turn") for s in state.stages) + 1
        state.stages.append(StageResult(f"tools.turn{turn_no}", (), resp.ms, usage, None, tuple(n for n in (resp.usage_flag,) if n),
                                        TurnInfo(None, tuple((c.name[:60], c.id[:60]) for c in calls), forced,
                                                 resp.text[:500])))
        if not calls:
            final = resp.text.strip()
            stop = "answered" if final else "refused_no_evidence"
            break
        if forced:  # asked for the answer, the model still called tools: the loop never ends by itself
            stop = "budget_rounds"
            final = resp.text.strip()
            break
        state.rounds += 1
        results: list[dict[str, Any]] = []
        rejected: set[int] = set()
        for i, call in enumerate(calls):
            if i >= MAX_CALLS_PER_TURN:
                res = ToolResult(str(call.name)[:60], {}, error=f"at most {MAX_CALLS_PER_TURN} tool calls per turn")
                state.record(res, 0.0, "llm")
            elif (why := state.spend.allows()) is not None:
                res = ToolResult(str(call.name)[:60], {}, error=f"not run: {why}")
                state.record(res, 0.0, "llm")
                stop = why
            else:
                res = _call_raw(state, box, call, clock)
            if not res.args and res.error:
                rejected.add(i)
            results.append(_tool_result_block(call.id or f"missing_{i}", res))
        turns += [_assistant_turn(resp.text, calls, rejected), {"role": "user", "content": results}]
    out = ToolOutcome(tuple(state.stages), tuple(state.passages), tuple(state.rows), _answer_of(state.last_sql),
                      question, final, stop or "answered", state.spend.as_dict(), "llm", "llm", state.rounds,
                      state.calls, tuple(state.sql),
                      "" if final or state.rows or state.passages else "the model gave no answer")
    cited = set(re.findall(r"\[([^\[\]\s]{1,200})\]", final)) & {c.chunk_id for c in (*state.rows, *state.passages)}
    return _with_cited(out, cited) if cited else out


def _call_raw(state: _State, box: Toolbox, call: ToolCall, clock: Callable[[], float]) -> ToolResult:
    """A call whose input is not an object (a string of bad JSON, a list, a number): validated as sent."""
    t0 = clock()
    tool, checked, err = validate(call.name, call.input)
    res = ToolResult(tool, checked, error=err) if err else run_tool(box, tool, checked, state.calls + 1)
    state.record(res, (clock() - t0) * 1000, "llm")
    return res


def _with_cited(out: ToolOutcome, cited: set[str]) -> ToolOutcome:
    """Rows and passages the model cited first (the answer's citations read them in this order)."""
    rows = tuple(sorted(out.rows, key=lambda c: c.chunk_id not in cited))
    passages = tuple(sorted(out.passages, key=lambda c: c.chunk_id not in cited))
    return replace(out, rows=rows, passages=passages)


def citations(out: ToolOutcome, answer_citations: Sequence[str] = (), limit: int = 8) -> tuple[str, ...]:
    """The answer's citations: the rows of the last SQL step (then earlier ones) and the passages the answer
    stage cited (else the top passages), without repeats."""
    last = [c.chunk_id for c in out.rows if out.sql and c.meta.get("stage") == _last_sql_stage(out)]
    rest = [c.chunk_id for c in out.rows]
    passages = [*([out.bridge["chunk_id"]] if out.bridge else []),
                *(list(answer_citations) or [c.chunk_id for c in out.passages[:3]])]
    return tuple(dict.fromkeys([*last[:5], *rest[:3], *passages]))[:limit]


def _last_sql_stage(out: ToolOutcome) -> str:
    return next((s.stage for s in reversed(out.stages) if isinstance(s.info, ToolCallInfo)
                 and isinstance(s.info.call, SqlCallInfo) and s.info.call.sql), "")
