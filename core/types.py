"""Frozen data records that flow between stages: documents, chunks, candidates, usage and the trace."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, NamedTuple, Sequence

if TYPE_CHECKING:
    import numpy as np

DEFAULT_WORKSPACE = "default"
# Candidate.meta key of a chunk's context prefix (contextual retrieval): rerankers read it, generation does not.
CONTEXT_KEY = "context"

# A character span [start, end) of a text: a sentence, a token, a window.
Span = tuple[int, int]
# (query, [(text, its sentence spans)]) -> one array of scores per text, one score per span: how sentence pruning and
# the offline answer score sentences read in their passage (core.cascade.prune, core.answer.support).
SpanScorer = Callable[[str, Sequence[tuple[str, Sequence[Span]]]], list["np.ndarray"]]


class Stage(StrEnum):
    """Stage names as the trace records them, in pipeline order; shared by the pipeline, the views and evaluation.
    A StrEnum, so a name compares equal to its plain string (old traces and JSON stay valid)."""

    CONDENSE = "condense"  # a conversation's follow-up rewritten as a standalone question (only with history)
    ANSWER_CACHE = "answer_cache"
    ROUTE = "route"
    SQL = "sql"  # the workspace's tables: a query over them (issue #29), when the question is about them
    CAG = "cag"  # cache-augmented generation: Claude reads the whole corpus (the cag route)
    COLLECTIONS = "collections"  # which of the workspace's collections are searched (issue #29), when it has several
    HYDE = "hyde"
    MULTI_QUERY = "multi_query"
    DECOMPOSE = "decompose"
    BM25 = "bm25"
    DENSE = "dense"
    DENSE_ML = "dense_ml"  # the multilingual embedder's list (embedding.multilingual)
    GRAPH_LOCAL = "graph_local"
    GRAPH_GLOBAL = "graph_global"
    RAPTOR = "raptor"  # RAPTOR: the tree of cluster summaries, searched at every level
    FUSED = "fused"
    RERANK = "rerank"
    PRUNE = "prune"
    MMR = "mmr"
    EXPAND = "expand"
    GRADE = "grade"  # agentic loop: per round, as are "decide" and (later rounds) "r2.bm25" ...
    DECIDE = "decide"
    EVIDENCE = "evidence"  # agentic loop: the pool fused across rounds, what the answer reads
    ANSWER = "answer"
    VERIFY = "verify"  # the answer checked against the question's constraints (core/answer/verify.py)


@dataclass(frozen=True)
class RaptorNode:
    """One summary node of a RAPTOR tree: the cluster of `children` (chunks at level 1, nodes above) it summarises."""

    node_id: str
    level: int  # 1 = clusters of chunks, 2 = clusters of level-1 nodes, ...
    text: str
    children: tuple[str, ...]
    chunk_ids: tuple[str, ...]  # every chunk under it (provenance)
    mode: str  # extractive | llm
    model_id: str  # the embedder of its vector
    corpus_version: int


# The opening words of the workbench's own refusal, in each language it words refusals in (core.answer.wording): what
# tells a stored turn's refusal from an answer (core.route.condense reads no name out of a refusal's nearest fact).
REFUSAL_LEADS = {"en": "The corpus does not say.", "de": "Das steht nicht im Korpus.", "ru": "В корпусе этого нет."}


def is_refusal_text(text: str) -> bool:
    """Whether an answer text opens with the workbench's refusal, in any of its languages."""
    return any(text.startswith(s) for s in REFUSAL_LEADS.values())


@dataclass(frozen=True)
class Turn:
    """One earlier turn of a conversation: what was asked, the standalone question it ran as, what was answered."""

    question: str
    answer: str = ""
    condensed: str = ""  # "" = the question stood alone

    @property
    def standalone(self) -> str:
        return self.condensed or self.question


@dataclass(frozen=True)
class Section:
    """A span of a parsed document that sits under one heading path."""

    heading_path: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class ParsedDocument:
    """Plain text of an uploaded file plus the heading structure the parser could see."""

    name: str
    kind: str  # md, html, txt, pdf, docx
    text: str
    sections: tuple[Section, ...] = ()
    title: str = ""
    encoding: str = ""  # how the bytes were decoded (text formats), e.g. "utf-8", "cp1251", "utf-16-le"


@dataclass(frozen=True)
class Document:
    doc_id: str
    name: str
    kind: str
    size_bytes: int
    content_hash: str
    lang: str
    text: str
    chunker: str
    workspace: str = DEFAULT_WORKSPACE
    title: str = ""
    n_chunks: int = 0
    ingested_at: str = ""


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    ordinal: int
    text: str
    start: int
    end: int
    heading_path: tuple[str, ...] = ()
    n_tokens: int = 0
    lang: str = "en"


@dataclass(frozen=True)
class Candidate:
    """One chunk as a stage ranks it. `rank` is 1-based within the stage."""

    chunk_id: str
    doc_id: str
    text: str
    score: float
    rank: int
    meta: Mapping[str, Any] = field(default_factory=dict)

    def with_rank(self, rank: int, score: float | None = None, **meta: Any) -> "Candidate":
        merged = {**self.meta, **meta}
        return replace(self, rank=rank, score=self.score if score is None else score, meta=merged)


@dataclass(frozen=True)
class Usage:
    """Tokens and dollars of LLM calls; usages add up so a stage, a query or an ingest can be totalled."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    # Who answered: "provider:model" of each call counted, in first-seen order (e.g. "anthropic:claude-haiku-4-5",
    # "gguf:SmolLM2-135M-Instruct.Q4_1"); empty when no model was called.
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.models, tuple):  # read back from a trace's JSON (a list)
            object.__setattr__(self, "models", tuple(self.models))

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.usd + other.usd,
            self.calls + other.calls,
            self.models + tuple(m for m in other.models if m not in self.models) if other.models else self.models,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a trace's usage (models as a list, as it reads back)."""
        return {**self.__dict__, "models": list(self.models)}


class StageInfo(Mapping[str, Any]):
    """A stage's info as a typed record. Code that knows the stage reads the record's attributes; views that read
    any stage's info (headers, details, the JSON trace, the run log) see the mapping `to_dict()` gives, with the
    keys and values the trace has always shown."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Each field under its own name (a record whose trace keys or values differ says so in its own to_dict)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


# eq=False: a record compares as the mapping it shows (equal to the dict with the same keys and values).
@dataclass(frozen=True, eq=False)
class RouteInfo(StageInfo):
    """What the route stage records: the router's decision and the named configuration the query runs with."""

    cls: str  # the class decided (its key is "class"): a route name, or "abstain" (the default pipeline)
    confidence: float
    reason: str
    config: str  # the named route (routes.toml) the query runs with: "cag" when Claude reads the whole corpus
    method: str  # offline | llm | override | disabled
    predicted: str = ""  # the classifier's best class, kept when it abstains
    description: str = ""
    transforms: tuple[str, ...] = ()  # the query transforms this route asks for
    overrides: Mapping[str, Any] = field(default_factory=dict)  # the route's settings, section.key -> value
    probabilities: Mapping[str, float] = field(default_factory=dict)
    retrieve: bool = True
    cag: Mapping[str, Any] | None = None  # the CAG estimate, when CAG was asked for (shown even when unavailable)

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "confidence": self.confidence, "reason": self.reason, "config": self.config,
                "method": self.method, "predicted": self.predicted, "description": self.description,
                "transforms": list(self.transforms), "overrides": dict(self.overrides),
                "probabilities": dict(self.probabilities), "retrieve": self.retrieve,
                **({"cag": dict(self.cag)} if self.cag is not None else {})}


@dataclass(frozen=True, eq=False)
class AnswerInfo(StageInfo):
    """What the answer stage records beside the Answer: how it answered, and from what."""

    mode: str  # extractive | llm | route (the route's reply) | cag
    refused: bool
    citations: tuple[str, ...] = ()
    support: float | None = None  # extractive: the support model's probability that the best sentence answers
    source: str | None = None  # the stage whose candidates it read, or the one that answered instead (route, cag,
    # answer_cache); None when no stage handed on candidates
    cached: bool = False  # served from the semantic answer cache
    threshold: float | None = None  # extractive: the refusal cut the support was held against
    threshold_from: str | None = None  # where that cut came from: config, calibration (set, corpus version), prior

    @classmethod
    def of(cls, answer: Answer, source: str | None, *, support: float | None = None, cached: bool = False,
           threshold: float | None = None, threshold_from: str | None = None) -> "AnswerInfo":
        return cls(answer.mode, answer.refused, tuple(answer.citations), support, source, cached, threshold,
                   threshold_from)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "refused": self.refused, "citations": list(self.citations), "support": self.support,
                "source": self.source, **({"cached": True} if self.cached else {}),
                **({"threshold": self.threshold, "threshold_from": self.threshold_from}
                   if self.threshold is not None else {})}


@dataclass(frozen=True, eq=False)
class AgentRecord(StageInfo):
    """Trace.agent: what the agentic loop, or the agent's tools, did for the query: rounds, the stop reason and the
    spend; the tools add their planner, the question's form, the calls and the SQL that ran (and why a planner
    declined)."""

    rounds: int
    stop_reason: str
    spent: Mapping[str, Any] = field(default_factory=dict)
    planner: str | None = None  # the tools: offline | llm; None for the agentic loop
    form: str = ""
    tool_calls: int = 0
    sql: tuple[str, ...] = ()
    declined: str = ""

    def to_dict(self) -> dict[str, Any]:
        tools = {"planner": self.planner, "form": self.form, "tool_calls": self.tool_calls, "sql": list(self.sql),
                 **({"declined": self.declined} if self.declined else {})} if self.planner is not None else {}
        return {"rounds": self.rounds, "stop_reason": self.stop_reason, "spent": dict(self.spent), **tools}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AgentRecord":
        return cls(int(d.get("rounds", 0)), str(d.get("stop_reason", "")), dict(d.get("spent") or {}),
                   d.get("planner"), str(d.get("form", "")), int(d.get("tool_calls", 0)), tuple(d.get("sql") or ()),
                   str(d.get("declined", "")))


@dataclass(frozen=True, eq=False)
class InRound(StageInfo):
    """A record the agentic loop wrote in one of its rounds: the round, the stage's own record (`info`), and, for a
    retrieval stage the round re-ran ('r2.bm25'), the query it ran with. The round's grade and decide records carry
    no query."""

    round: int
    info: Mapping[str, Any]
    query: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.info), "round": self.round, **({"round_query": self.query} if self.query is not None
                                                           else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "InRound":
        """A round's record read back from a stored trace (the stage's own keys stay a plain mapping)."""
        rest = {k: v for k, v in d.items() if k not in ("round", "round_query")}
        return cls(int(d["round"]), rest, None if d.get("round_query") is None else str(d["round_query"]))


@dataclass(frozen=True)
class StageResult:
    """What one stage did for one query. `skipped` holds the reason when the stage did not run."""

    stage: str
    candidates: tuple[Candidate, ...] = ()
    ms: float = 0.0
    usage: Usage = Usage()
    skipped: str | None = None
    notes: tuple[str, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def own_info(self) -> Mapping[str, Any]:
        """The stage's own record: `info`, or inside an agentic round (InRound) the record the round wrapped."""
        return self.info.info if isinstance(self.info, InRound) else self.info


@dataclass(frozen=True)
class Answer:
    text: str
    citations: tuple[str, ...] = ()
    refused: bool = False
    mode: str = "extractive"


@dataclass(frozen=True)
class Trace:
    """The record of one query through the pipeline; the Search Lab, Evaluate and Costs views all read it."""

    query: str
    config_hash: str
    corpus_version: int
    stages: tuple[StageResult, ...]
    workspace: str = DEFAULT_WORKSPACE
    query_lang: str = "en"
    notes: tuple[str, ...] = ()
    answer: Answer | None = None
    agent: AgentRecord | None = None  # the agentic loop's (or the tools') rounds, stop reason and spend, when it ran
    stored: "Trace | None" = None  # an answer served from the answer cache: the stored trace that produced it

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.stage == name), None)

    def final(self) -> StageResult | None:
        """The last stage that ran: what would go to the model."""
        ran = [s for s in self.stages if s.skipped is None and s.candidates]
        return ran[-1] if ran else None

    @property
    def usage(self) -> Usage:
        total = Usage()
        for s in self.stages:
            total = total + s.usage
        return total

    def route_info(self) -> RouteInfo | None:
        """The route stage's record, or None when the router did not run."""
        s = self.stage(Stage.ROUTE)
        return s.info if s is not None and s.skipped is None and isinstance(s.info, RouteInfo) else None

    def answer_info(self) -> AnswerInfo | None:
        """The answer stage's record, or None when no answer stage ran."""
        s = self.stage(Stage.ANSWER)
        return s.info if s is not None and s.skipped is None and isinstance(s.info, AnswerInfo) else None

    def route(self) -> dict[str, Any] | None:
        """The router's decision {class, confidence, reason, config, method}, or None when the router did not run."""
        r = self.route_info()
        if r is not None:
            return {"class": r.cls, "confidence": r.confidence, "reason": r.reason, "config": r.config,
                    "method": r.method}
        s = self.stage(Stage.ROUTE)
        if s is None or s.skipped is not None:
            return None
        # a stored trace read back from JSON (core.answer.cache.trace_from_json) holds the record as its mapping
        return {k: s.info.get(k) for k in ("class", "confidence", "reason", "config", "method")}

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape the CLI prints (`python -m core query --json`)."""
        return {
            "query": self.query,
            "config_hash": self.config_hash,
            "corpus_version": self.corpus_version,
            "workspace": self.workspace,
            "query_lang": self.query_lang,
            "route": self.route(),
            "notes": list(self.notes),
            "stages": [
                {
                    "stage": s.stage,
                    "ms": round(s.ms, 3),
                    "skipped": s.skipped is not None,
                    "skip_reason": s.skipped,
                    "notes": list(s.notes),
                    "info": dict(s.info),
                    "usage": s.usage.to_dict(),
                    "candidates": [
                        {
                            "chunk_id": c.chunk_id,
                            "doc_id": c.doc_id,
                            "rank": c.rank,
                            "score": float(c.score),
                            "text": c.text,
                            **{k: v for k, v in c.meta.items() if isinstance(v, (str, int, float, bool, type(None)))},
                        }
                        for c in s.candidates
                    ],
                }
                for s in self.stages
            ],
            "answer": None
            if self.answer is None
            else {
                "text": self.answer.text,
                "citations": list(self.answer.citations),
                "refused": self.answer.refused,
                "mode": self.answer.mode,
            },
            "usage": self.usage.to_dict(),
            **({"agent": dict(self.agent)} if self.agent is not None else {}),
            **({"stored_trace": self.stored.to_dict()} if self.stored is not None else {}),
        }


# -- typed rows the store hands out (no duckdb here) ------------------------------------------------------------
# Records read as a whole are frozen dataclasses; narrow rows read in bulk (vectors per model, graph nodes, edges,
# provenance) are NamedTuples: typed, immutable, and cheap to unpack in hot loops.

@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    name: str
    kind: str
    size_bytes: int
    content_hash: str
    lang: str
    title: str
    chunker: str
    n_chunks: int
    ingested_at: datetime


@dataclass(frozen=True)
class Replacement:
    """How a new version of a document replaces the stored one (core/store/corpus.py): the chunk ids it keeps (their
    vectors, and their contexts when `keep_contexts`, stay), context variants whose kept rows are marked possibly
    stale, and vector variants made from the whole document (dropped for every chunk, kept or not)."""

    doc_id: str
    keep: frozenset[str] = frozenset()
    keep_contexts: bool = True
    stale_variants: tuple[str, ...] = ()
    whole_doc_variants: tuple[str, ...] = ("late",)


class VectorSet(NamedTuple):
    """(model, variant) and how many chunk vectors the workspace holds for it."""

    model_id: str
    variant: str
    count: int


class CacheEvent(NamedTuple):
    cache: str
    hits: int
    misses: int
    purpose: str
    created_at: datetime


@dataclass(frozen=True)
class RunRecord:
    """One logged query: its trace as the JSON dict Trace.to_dict() wrote."""

    run_id: str
    kind: str
    query: str
    config_hash: str
    corpus_version: int
    trace: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class EvalRunRecord:
    """One configuration's run over a golden set. `summary` holds metrics, spread, stage recall and the rest;
    `results` (one QuestionResult per question, as core.eval.run wrote them) is filled only by Runs.eval_run()."""

    eval_id: str
    dataset: str
    config_name: str
    config_hash: str
    config: dict[str, Any]
    corpus_version: int
    repeats: int
    n_queries: int
    summary: dict[str, Any]
    created_at: datetime
    results: tuple["QuestionResult", ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The flat dict the evaluation lab stored (summary keys at top level), for code that rebuilds a run."""
        return {"eval_id": self.eval_id, "dataset": self.dataset, "config_name": self.config_name,
                "config_hash": self.config_hash, "config": self.config, "corpus_version": self.corpus_version,
                "repeats": self.repeats, "n_queries": self.n_queries, **self.summary, "created_at": self.created_at}


@dataclass(frozen=True)
class OpenBatch:
    """A submitted Message Batch whose results were not collected yet; custom id r<i> is chunk_ids[i]."""

    batch_id: str
    model: str
    run_id: str
    n_requests: int
    status: str
    chunk_ids: tuple[str, ...]
    created_at: datetime | None


@dataclass(frozen=True)
class GraphState:
    version: int
    corpus_version: int
    builder: str
    settings: dict[str, Any]
    stats: dict[str, Any]
    built_at: datetime


class GraphNode(NamedTuple):
    node_id: str
    name: str
    type: str
    description: str
    n_chunks: int
    n_mentions: int
    n_docs: int
    aliases: tuple[str, ...]


class GraphEdge(NamedTuple):
    """An undirected edge, src < dst."""

    src: str
    dst: str
    weight: float
    n_chunks: int
    description: str


class CommunityMember(NamedTuple):
    level: int
    community_id: str
    parent_id: str | None
    node_id: str
    members_hash: str


@dataclass(frozen=True)
class CommunitySummary:
    members_hash: str
    level: int
    community_id: str
    title: str
    summary: str
    mode: str
    usage: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class MergeItem:
    """A merge suggestion in the review queue (status pending, approved or rejected)."""

    item_id: str
    keep_id: str
    other_id: str
    keep_name: str
    other_name: str
    score: float
    status: str
    created_at: datetime
    decided_at: datetime | None


class NodeChunk(NamedTuple):
    """Provenance of a node: a chunk that mentions it and how often."""

    node_id: str
    chunk_id: str
    doc_id: str
    mentions: int


class EdgeChunk(NamedTuple):
    """Provenance of an edge (a < b): a chunk that relates the two, its strongest weight and description."""

    a: str
    b: str
    chunk_id: str
    doc_id: str
    weight: float
    description: str


class NodeFacts(NamedTuple):
    """What a node's mentions say, before any choice: counts per surface form and per type, sizes, sorted aliases
    and sorted distinct descriptions. core/graph/aggregate.py turns it into a GraphNode."""

    node_id: str
    surfaces: dict[str, int]
    types: dict[str, int]
    n_chunks: int
    n_mentions: int
    n_docs: int
    aliases: tuple[str, ...]
    descriptions: tuple[str, ...]


# -- the usage ledger -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LedgerEntry:
    """One LLM call as the usage_ledger table stores it."""

    purpose: str  # "context", "answer", "judge", ...
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    usd: float = 0.0
    usd_uncached: float = 0.0
    latency_ms: float = 0.0
    ref_id: str = ""  # document or query id
    run_id: str = ""  # groups the calls of one context build or one query
    batch: bool = False
    cache_ttl: str = "5m"
    note: str = ""
    workspace: str = "default"
    usage_flag: str = ""  # why the provider's usage was replaced by our own bound; "" when it was plausible
    created_at: datetime | None = field(default=None, compare=False)
    # Which client answered: anthropic | openai-compatible | gguf ("" in rows written before the column existed).
    # For the local ones cache_read_tokens are the prompt tokens whose state was reused (the document prefix).
    provider: str = ""

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cache_write_tokens, self.cache_read_tokens,
                     self.usd, 1, (f"{self.provider}:{self.model}",) if self.provider else ())


# -- the semantic answer cache's rows ------------------------------------------------------------------------------
@dataclass(frozen=True)
class CacheKey:
    """An answer is only ever served under the key it was stored with."""

    workspace: str
    corpus_version: int
    config_hash: str


@dataclass(frozen=True)
class CachedAnswer:
    key: CacheKey
    question: str
    vector: np.ndarray = field(repr=False, compare=False)
    answer: str
    citations: tuple[str, ...] = ()
    refused: bool = False
    mode: str = "extractive"
    stored_at: datetime = datetime(1970, 1, 1)
    cost_usd: float = 0.0  # what producing the answer cost: a hit saves this
    ms: float = 0.0        # how long producing it took: a hit saves this


@dataclass(frozen=True)
class Calibration:
    """A workspace's refusal threshold for the offline answer, fitted on its golden set by k-fold cross-validation:
    the cut, the set and corpus version it was fitted on, the support model it belongs to, and its CV figures
    (answered correctly among answerable, refused among unanswerable; the shipped prior's beside them)."""

    workspace: str
    threshold: float
    dataset: str
    corpus_version: int
    model: str  # fingerprint of the support model the supports came from (a refit model makes it stale)
    config_hash: str
    folds: int
    figures: Mapping[str, Any] = field(default_factory=dict)
    created_at: Any = None

    def describe(self) -> str:
        why = self.figures.get("kept_prior_why") or "its cross-validated cut did no better than the shipped prior"
        kept = f"; {why}, so the prior is kept" if self.figures.get("kept_prior") else ""
        return f"calibration on '{self.dataset}' (corpus v{self.corpus_version}, {self.folds}-fold CV{kept})"


@dataclass(frozen=True)
class TableInfo:
    """A table in a workspace (issue #29): a table file's rows as typed columns, named after the file's stem."""

    name: str
    doc_id: str  # the document its text form is (deleting the document drops the table)
    source: str  # the document key it came from
    columns: tuple[tuple[str, str], ...]  # (column, DuckDB type)
    n_rows: int
    created_at: Any = None

    def schema_line(self) -> str:
        return f"{self.name}({', '.join(f'{c} {t}' for c, t in self.columns)})  -- {self.n_rows:,} rows"


@dataclass(frozen=True)
class SqlResult:
    """One read-only query's result from the SQL sandbox: the checked SQL, column names, rows (at most the row cap;
    `truncated` when there were more) and its wall time."""

    sql: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool = False
    ms: float = 0.0
    notes: tuple[str, ...] = ()  # a cap that was hit, named (cells cut, rows dropped for the byte cap)


DEFAULT_COLLECTION = "default"  # the collection of a document nobody assigned to one


@dataclass(frozen=True)
class CollectionProfile:
    """What the product computes about a collection (issue #29): sizes, languages, its vocabulary with each term's
    chunk frequency (the offline collection router's lexical evidence), its most telling terms, the centroid of its
    chunks' vectors under one embedder, and its tables' schemas; stamped with the corpus version it describes."""

    n_docs: int
    n_chunks: int
    n_terms: int  # index tokens in all its chunks (CORI's collection word count)
    languages: Mapping[str, int]  # chunks per language
    top_terms: tuple[str, ...]
    df: Mapping[str, int]  # chunks holding each index term
    centroid: tuple[float, ...]  # mean of the chunks' unit vectors; () when none were stored
    model_id: str
    tables: Mapping[str, tuple[str, ...]]  # table -> ("column TYPE", ...)
    corpus_version: int

    def to_dict(self) -> dict[str, Any]:
        return {"n_docs": self.n_docs, "n_chunks": self.n_chunks, "n_terms": self.n_terms,
                "languages": dict(self.languages), "top_terms": list(self.top_terms), "df": dict(self.df),
                "centroid": list(self.centroid), "model_id": self.model_id,
                "tables": {k: list(v) for k, v in self.tables.items()}, "corpus_version": self.corpus_version}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CollectionProfile":
        return cls(int(d["n_docs"]), int(d["n_chunks"]), int(d["n_terms"]), dict(d["languages"]),
                   tuple(d["top_terms"]), dict(d["df"]), tuple(float(x) for x in d["centroid"]), str(d["model_id"]),
                   {k: tuple(v) for k, v in d["tables"].items()}, int(d["corpus_version"]))


@dataclass(frozen=True)
class Collection:
    """A knowledge base inside one workspace: its documents (by assignment; unassigned ones are the default
    collection's), the description a person wrote and the profile the product computed (None until computed)."""

    workspace: str
    name: str
    description: str
    n_docs: int
    profile: CollectionProfile | None = None


# -- evaluation records: what one question of an evaluation run scored, and where its gold sat in every stage's list.
# Frozen dataclasses in, JSON out (to_dict / from_dict), as ragas types its samples; the store hands them out
# (Runs.eval_run). They also answer record["field"] and record.get("field") for readers written against the older
# dict rows (writing is not possible: frozen).
class _Readable:
    """Read access by key as well as by attribute (no writes: the records are frozen)."""

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self._names() else default

    def __contains__(self, key: object) -> bool:
        return key in self._names()

    @classmethod
    def _names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CandidateRow(_Readable):
    """One candidate of a stage as stored: `gold` lists the indices of the gold items it matches."""

    chunk_id: str
    doc_id: str
    rank: int
    score: float
    gold: tuple[int, ...] = ()
    text: str | None = None  # a snippet, for the first few of each stage only

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"chunk_id": self.chunk_id, "doc_id": self.doc_id, "rank": self.rank,
                             "score": self.score, "gold": list(self.gold)}
        if self.text is not None:
            d["text"] = self.text
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CandidateRow":
        return cls(str(d["chunk_id"]), str(d.get("doc_id", "")), int(d.get("rank", 0)), float(d.get("score", 0.0)),
                   tuple(int(g) for g in d.get("gold", ())), d.get("text"))


@dataclass(frozen=True)
class StageRecord(_Readable):
    """One stage for one question: recall of its whole list, the rank of each gold item in it (None: absent;
    ranks are documents for a document-level set), recall@k per cutoff, and its top candidates."""

    stage: str
    skipped: bool
    skip_reason: str | None = None
    ms: float = 0.0
    depth: int = 0
    recall: float | None = None
    first_rank: int | None = None
    tokens: int = 0
    token_share: float | None = None
    gold_ranks: tuple[int | None, ...] = ()
    recall_at: Mapping[str, float | None] = field(default_factory=dict)
    candidates: tuple[CandidateRow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "skipped": self.skipped, "skip_reason": self.skip_reason, "ms": self.ms,
                "depth": self.depth, "recall": self.recall, "first_rank": self.first_rank, "tokens": self.tokens,
                "token_share": self.token_share, "gold_ranks": list(self.gold_ranks),
                "recall_at": dict(self.recall_at), "candidates": [c.to_dict() for c in self.candidates]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StageRecord":
        return cls(str(d["stage"]), bool(d.get("skipped")), d.get("skip_reason"), float(d.get("ms", 0.0)),
                   int(d.get("depth", 0)), d.get("recall"), d.get("first_rank"), int(d.get("tokens", 0)),
                   d.get("token_share"), tuple(d.get("gold_ranks", ())), dict(d.get("recall_at", {})),
                   tuple(CandidateRow.from_dict(c) for c in d.get("candidates", ())))


@dataclass(frozen=True)
class GoldRow(_Readable):
    doc: str = ""
    text: str = ""
    grade: int = 1
    match: str = "span"

    def to_dict(self) -> dict[str, Any]:
        return {"doc": self.doc, "text": self.text, "grade": self.grade, "match": self.match}


@dataclass(frozen=True)
class AnswerRow(_Readable):
    text: str
    refused: bool = False
    citations: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "refused": self.refused, "citations": list(self.citations)}


@dataclass(frozen=True)
class QuestionResult(_Readable):
    """One question of one run: its gold, metrics (means over repeats), and every stage's record."""

    qid: str
    query: str
    qtype: str = "factoid"
    answerable: bool = True
    line: int = 0
    gold: tuple[GoldRow, ...] = ()
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    final_stage: str | None = None
    stages: tuple[StageRecord, ...] = ()
    answer: AnswerRow | None = None
    error: str | None = None

    def stage(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.stage == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "query": self.query, "qtype": self.qtype, "answerable": self.answerable,
                "line": self.line, "gold": [g.to_dict() for g in self.gold], "metrics": dict(self.metrics),
                "final_stage": self.final_stage, "stages": [s.to_dict() for s in self.stages],
                "answer": self.answer.to_dict() if self.answer else None, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuestionResult":
        a = d.get("answer")
        return cls(str(d["qid"]), str(d.get("query", "")), str(d.get("qtype", "factoid")),
                   bool(d.get("answerable", True)), int(d.get("line", 0)),
                   tuple(GoldRow(str(g.get("doc", "")), str(g.get("text", "")), int(g.get("grade", 1)),
                                 str(g.get("match", "span"))) for g in d.get("gold", ())),
                   dict(d.get("metrics", {})), d.get("final_stage"),
                   tuple(StageRecord.from_dict(s) for s in d.get("stages", ())),
                   AnswerRow(str(a.get("text", "")), bool(a.get("refused")), tuple(a.get("citations", ())))
                   if isinstance(a, Mapping) else None, d.get("error"))

    @classmethod
    def coerce(cls, row: "QuestionResult | Mapping[str, Any]") -> "QuestionResult":
        return row if isinstance(row, QuestionResult) else cls.from_dict(row)
