"""Frozen data records that flow between stages: documents, chunks, candidates, usage and the trace."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Mapping

DEFAULT_WORKSPACE = "default"
# Candidate.meta key of a chunk's context prefix (contextual retrieval): rerankers read it, generation does not.
CONTEXT_KEY = "context"


class Stage(StrEnum):
    """Stage names as the trace records them, in pipeline order; shared by the pipeline, the views and evaluation.
    A StrEnum, so a name compares equal to its plain string (old traces and JSON stay valid)."""

    ANSWER_CACHE = "answer_cache"
    ROUTE = "route"
    HYDE = "hyde"
    MULTI_QUERY = "multi_query"
    DECOMPOSE = "decompose"
    BM25 = "bm25"
    DENSE = "dense"
    GRAPH_LOCAL = "graph_local"
    GRAPH_GLOBAL = "graph_global"
    FUSED = "fused"
    RERANK = "rerank"
    PRUNE = "prune"
    MMR = "mmr"
    EXPAND = "expand"
    GRADE = "grade"  # agentic loop: per round, as are "decide" and (later rounds) "r2.bm25" ...
    DECIDE = "decide"
    EVIDENCE = "evidence"  # agentic loop: the pool fused across rounds, what the answer reads
    ANSWER = "answer"


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

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.usd + other.usd,
            self.calls + other.calls,
        )


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
    agent: Mapping[str, Any] | None = None  # the agentic loop's rounds, stop reason and spend, when it ran

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

    def route(self) -> dict[str, Any] | None:
        """The router's decision {class, confidence, reason, config, method}, or None when the router did not run."""
        s = self.stage(Stage.ROUTE)
        if s is None or s.skipped is not None:
            return None
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
                    "usage": s.usage.__dict__,
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
            "usage": self.usage.__dict__,
            **({"agent": dict(self.agent)} if self.agent is not None else {}),
        }
