"""The stage contract: the tracer, a stage's step output, the memo and its keys, and the ordered stage list.

Every stage of a query is an adapter (in its package's `stage.py`) that returns one StepOutput and runs through
`Tracer.run`, which times it, records it (run, or skipped with its reason) and, under an evaluation run's memo,
replays a result computed before. STAGES is the run order and the skip order: a path that stops early (an
answer-cache hit, a chitchat route, SQL, the agent's tools) calls `Tracer.skip_rest(why)`, so every stage of the
configuration appears in every trace. Imports only core.types.
"""
from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from core.types import Candidate, Stage, StageResult, Trace, Usage


@dataclass(frozen=True)
class StageSpec:
    """One entry of the stage list: the stage's name, its kind, whether it reorders the list it reads (a view compares
    its order with the list before it), and, for a stage that only some queries have, when it is part of a trace."""

    name: Stage
    kind: str  # gate | list | transform | fuse | cascade | agent | answer
    reorders: bool = False
    when: str = ""  # "" = every trace records it (run or skipped); else the condition under which it is recorded


# The run order. A trace records every stage here whose `when` is empty, and each conditional one whose condition
# holds for the query (the pipeline says which: Tracer.plan); stages a stage writes inside itself (the answer's map /
# reduce calls, the agent's rounds, the tools' calls) sit before it and are no entries of this list.
STAGES: tuple[StageSpec, ...] = (
    StageSpec(Stage.CONDENSE, "gate", when="a conversation's follow-up (the query has history)"),
    StageSpec(Stage.ANSWER_CACHE, "gate"),
    StageSpec(Stage.ROUTE, "gate"),
    StageSpec(Stage.SQL, "list", when="a workspace with tables"),
    StageSpec(Stage.CAG, "answer"),
    StageSpec(Stage.COLLECTIONS, "gate", when="a workspace with several collections"),
    StageSpec(Stage.BM25, "list"),
    StageSpec(Stage.DENSE, "list"),
    StageSpec(Stage.DENSE_ML, "list"),
    StageSpec(Stage.GRAPH_LOCAL, "list"),
    StageSpec(Stage.GRAPH_GLOBAL, "list"),
    StageSpec(Stage.RAPTOR, "list"),
    StageSpec(Stage.HYDE, "transform"),
    StageSpec(Stage.MULTI_QUERY, "transform"),
    StageSpec(Stage.DECOMPOSE, "transform"),
    StageSpec(Stage.FUSED, "fuse"),
    StageSpec(Stage.RERANK, "cascade", reorders=True),
    StageSpec(Stage.PRUNE, "cascade", reorders=True),
    StageSpec(Stage.MMR, "cascade", reorders=True),
    StageSpec(Stage.EXPAND, "cascade", reorders=True),
    StageSpec(Stage.EVIDENCE, "agent"),
    StageSpec(Stage.ANSWER, "answer"),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
REORDERING: frozenset[str] = frozenset(s.name for s in STAGES if s.reorders)
TRANSFORMS: tuple[str, ...] = tuple(s.name for s in STAGES if s.kind == "transform")
CASCADE: tuple[str, ...] = tuple(s.name for s in STAGES if s.kind == "cascade")


def listed(stages: Iterable[StageResult]) -> list[str]:
    """The names of the records that are stages of the list (not the calls, rounds or tool calls a stage wrote)."""
    return [s.stage for s in stages if s.stage in STAGE_NAMES]


@dataclass(frozen=True)
class StepOutput:
    """What a stage adapter hands back to the tracer: its candidates plus what the trace should say about them.
    `skipped`: the stage ran but found it had nothing to do (a transform that generated no query), with the reason."""

    candidates: Sequence[Candidate]
    notes: Sequence[str] = ()
    usage: Usage = Usage()
    info: Mapping[str, Any] = field(default_factory=dict)
    skipped: str | None = None


Out = TypeVar("Out", bound=StepOutput)


def off(enabled: bool, flag: str, pool: Sequence[Candidate] | None = None, empty: str = "") -> str | None:
    """The reason a stage does not run (its switch is off, or nothing reached it), or None when it runs."""
    if not enabled:
        return f"{flag} = false"
    if pool is not None and not pool:
        return empty
    return None


@dataclass(frozen=True)
class Kept:
    """One stage's result kept in a StageMemo: its output, the records its function appended before it (the answer's
    map / reduce calls) and the time it took when it was computed."""

    out: StepOutput
    extra: tuple[StageResult, ...]
    ms: float


@dataclass
class StageMemo:
    """An evaluation run's stage results by key (see stage_key): a configuration that reads a stage with the same
    inputs as an earlier configuration of the run reuses its result instead of computing it again
    (core/eval/run.py), counted per stage."""

    kept: dict[str, Kept] = field(default_factory=dict)
    reused: Counter[str] = field(default_factory=Counter)
    computed: Counter[str] = field(default_factory=Counter)


def stage_key(stage: str, *parts: Any) -> str:
    """A stage's memo key: its name and everything its output is a function of (the query's facts, the config
    sections it reads, the candidate lists it reads, as digests of their content)."""
    h = hashlib.blake2b(stage.encode(), digest_size=16)
    for p in parts:
        h.update(b"\x1f" + repr(p).encode())
    return h.hexdigest()


def cands_digest(cands: Sequence[Candidate]) -> str:
    """A candidate list's content (ids, text, scores, ranks, meta), for a memo key."""
    return stage_key("cands", *[(c.chunk_id, c.doc_id, c.text, c.score, c.rank, sorted(c.meta.items()))
                                for c in cands])


@dataclass
class Tracer:
    """Collects StageResults in order; the collected record is what every view renders. With a `memo` (an
    evaluation run's), a stage run with a key reuses the result kept under it (the same record, with the time it
    took when computed), or computes and keeps it. `plan`: the conditional stages of STAGES this trace records
    (see StageSpec.when), which skip_rest skips too."""

    stages: list[StageResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memo: StageMemo | None = None
    plan: set[str] = field(default_factory=set)

    def add(self, stage: str, candidates: Sequence[Candidate], ms: float, *, usage: Usage = Usage(),
            notes: Sequence[str] = (), info: Mapping[str, Any] | None = None,
            skipped: str | None = None) -> list[Candidate]:
        """Record one result as it is (Tracer.run records a stage; this is its writer, and the writer of a record
        computed elsewhere)."""
        self.stages.append(StageResult(stage, tuple(candidates), ms, usage, skipped, tuple(notes),
                                       {} if info is None else info))
        return list(candidates)

    def skip(self, stage: str, reason: str) -> list[Candidate]:
        self.stages.append(StageResult(stage, (), 0.0, Usage(), reason))
        return []

    def run(self, stage: str, fn: Callable[[], Out], *, skip: str | None = None,
            key: Callable[[], str] | None = None) -> Out | None:
        """Run one stage and record it: skipped with `skip` as its reason (None back), or timed around `fn`, whose
        output (candidates, notes, usage, info and whatever else the stage hands on) it returns. Under a memo,
        `key()` names the result: one kept under it is replayed (with the time it took when computed)."""
        if skip is not None:
            self.skip(stage, skip)
            return None
        memo = self.memo if key is not None else None
        k = key() if memo is not None and key is not None else ""
        kept = memo.kept.get(k) if memo is not None else None
        if memo is not None and kept is not None:
            memo.reused[stage] += 1
            self.stages.extend(kept.extra)
            self._record(stage, kept.out, kept.ms)
            return kept.out  # type: ignore[return-value]
        before = len(self.stages)
        start = time.perf_counter()
        out = fn()
        ms = (time.perf_counter() - start) * 1000
        if memo is not None:
            memo.computed[stage] += 1
            memo.kept[k] = Kept(out, tuple(self.stages[before:]), ms)
        self._record(stage, out, ms)
        return out

    def _record(self, stage: str, out: StepOutput, ms: float) -> None:
        self.add(stage, out.candidates if out.skipped is None else (), ms, usage=out.usage, notes=out.notes,
                 info=out.info if out.skipped is None else None, skipped=out.skipped)

    def step(self, stage: str, fn: Callable[[], StepOutput], *, skip: str | None = None,
             keep: Sequence[Candidate] = (), key: Callable[[], str] | None = None) -> list[Candidate]:
        """One stage of the candidate flow (see run): its candidates, or `keep` (the list the stage would have read)
        when it is skipped."""
        out = self.run(stage, fn, skip=skip, key=key)
        return list(keep) if out is None or out.skipped is not None else list(out.candidates)

    def skip_rest(self, why: str, *, before: str | None = None) -> None:
        """Skip, with `why`, every stage of this trace (STAGES, the conditional ones in `plan`) not recorded yet, in
        list order; with `before`, only those that come before that stage (the one the path records next)."""
        seen = {s.stage for s in self.stages}
        for spec in STAGES:
            if spec.name == before:
                return
            if spec.name not in seen and (not spec.when or spec.name in self.plan):
                self.skip(spec.name, why)

    def missing(self) -> list[str]:
        """Stages of this trace not recorded (none once a path has run to its end)."""
        seen = {s.stage for s in self.stages}
        return [s.name for s in STAGES if s.name not in seen and (not s.when or s.name in self.plan)]

    def final(self) -> StageResult | None:
        """The last stage so far that ran with candidates: what the answer stage reads."""
        return Trace("", "", 0, tuple(self.stages)).final()
