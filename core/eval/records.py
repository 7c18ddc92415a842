"""Typed per-question evaluation records: what one question scored, and where its gold sat in every stage's list.

Frozen dataclasses in, JSON out (`to_dict` / `from_dict`), the way ragas types its samples. They also answer
`record["field"]` and `record.get("field")`, so a view written against the older dict rows keeps working while it
moves to attributes; writing to them is not possible (frozen)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping


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
