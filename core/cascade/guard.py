"""The cascade's stage guard: a stage steps aside in a workspace whose own evaluation shows it losing recall.

A reranker, a sentence pruner or MMR each help on some corpora and cost recall on others (a multi-hop corpus where the
late-interaction rerank pushes the second hop below the cut, say). Nothing in the shipped defaults can know which
corpus it is on; the workspace's golden set can. Every evaluation run stores, per question, each stage's recall@k of
its own list, so a stage can be compared with the list it read, question by question (a paired difference). Where the
newest run in which the stage ran shows it losing recall@k by more than its noise (the mean paired difference below
zero by more than `z` standard errors, and by at least `min_loss` points), the stage steps aside: the pipeline hands
its input on unchanged and the trace says why, naming the run. A run in which the stage stepped aside has no record
of it, so the verdict stands until an evaluation with the guard off measures the stage again."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from core.types import EvalRunRecord, Stage

# The stages the guard may step aside, and the lists each can read (the nearest earlier one that ran).
GUARDED: tuple[str, ...] = (Stage.RERANK, Stage.PRUNE, Stage.MMR)
_CHAIN: tuple[str, ...] = (Stage.BM25, Stage.DENSE, Stage.FUSED, Stage.RERANK, Stage.PRUNE, Stage.MMR)


@dataclass(frozen=True)
class StageEvidence:
    """One stage against the list it read, over the questions of one evaluation run (recall@k in points, 0-100)."""

    stage: str
    input_stage: str
    k: int
    questions: int
    delta: float  # mean of (stage recall@k - input recall@k), points
    se: float  # its standard error, points
    dataset: str
    eval_id: str

    def losing(self, *, z: float, min_loss: float, min_questions: int) -> bool:
        return (self.questions >= min_questions and self.delta <= -min_loss
                and self.delta + z * self.se < 0)

    def reason(self) -> str:
        return (f"steps aside: on golden set '{self.dataset}' (eval {self.eval_id[:8]}, {self.questions} questions) "
                f"it lost {-self.delta:.1f} points of recall@{self.k} against {self.input_stage} "
                f"(± {self.se:.1f} se); cascade_guard.enabled = false runs it anyway")


def _recall(stage: Mapping[str, Any], k: int) -> float | None:
    v = (stage.get("recall_at") or {}).get(f"recall@{k}")
    return None if v is None else float(v)


def paired_deltas(questions: Iterable[Mapping[str, Any]], k: int) -> dict[tuple[str, str], list[float]]:
    """Per (guarded stage, the list it read): each question's recall@k difference, in points. A question counts for a
    stage when both the stage and its input ran and have a recall (the question has gold)."""
    out: dict[tuple[str, str], list[float]] = {}
    for q in questions:
        ran = {str(s["stage"]): s for s in q.get("stages", ()) if not s.get("skipped")}
        for stage in GUARDED:
            if stage not in ran:
                continue
            before = _CHAIN[: _CHAIN.index(stage)]
            source = next((s for s in reversed(before) if s in ran), None)
            if source is None:
                continue
            a, b = _recall(ran[stage], k), _recall(ran[source], k)
            if a is None or b is None:
                continue
            out.setdefault((stage, source), []).append(100.0 * (a - b))
    return out


def mean_se(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (infinite below two values): the noise bar the guard and the doctor share."""
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, math.inf
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(var / n)


@dataclass(frozen=True)
class EvalEvidence:
    """What the guard reads of one stored evaluation run: its id, data set and per-question stage records."""

    eval_id: str
    dataset: str
    questions: Sequence[Mapping[str, Any]]


def stage_evidence(runs: Sequence[EvalEvidence], *, k: int) -> dict[str, StageEvidence]:
    """For each guarded stage, its comparison in the newest run (runs come newest first) in which it ran."""
    found: dict[str, StageEvidence] = {}
    for run in runs:
        for (stage, source), deltas in paired_deltas(run.questions, k).items():
            if stage in found or not deltas:
                continue
            mean, se = mean_se(deltas)
            found[stage] = StageEvidence(stage, source, k, len(deltas), mean, se, run.dataset, run.eval_id)
        if len(found) == len(GUARDED):
            break
    return found


def steps_aside(evidence: Mapping[str, StageEvidence], *, z: float, min_loss: float,
                min_questions: int) -> dict[str, str]:
    """{stage: the reason it steps aside} for the guarded stages whose evidence shows a loss beyond noise."""
    return {stage: ev.reason() for stage, ev in evidence.items()
            if ev.losing(z=z, min_loss=min_loss, min_questions=min_questions)}


class EvalRunSource(Protocol):
    """Where stored evaluation runs come from (core.store's runs repository implements it)."""

    def eval_runs(self, workspace: str = ..., dataset: str | None = None, limit: int = ..., *,
                  eval_id: str | None = None) -> list[EvalRunRecord]: ...

    def eval_run(self, eval_id: str, workspace: str = ...) -> EvalRunRecord | None: ...

    def eval_run_ids(self, workspace: str = ..., limit: int = ...) -> tuple[str, ...]: ...


# How many of a workspace's newest runs the guard reads at most (a run with the stage stepped aside has no record).
RUNS_READ = 20


@dataclass
class GuardCache:
    """Each workspace's stage evidence, re-read only when its list of evaluation runs changes (one small query per
    search otherwise). Thread-safe enough for Streamlit: a race computes the same value twice."""

    _seen: dict[tuple[str, int, str], tuple[tuple[str, ...], dict[str, StageEvidence]]] = field(
        default_factory=dict)

    def evidence(self, runs: EvalRunSource, workspace: str, *, k: int, config_key: str,
                 key_of: Callable[[Mapping[str, Any]], str]) -> dict[str, StageEvidence]:
        """The evidence of the runs made with this configuration (`key_of(run.config) == config_key`: the caller
        leaves the guard's own settings out of the key). A stage's loss measured under one configuration says
        nothing of another: bench/results/guard.json measured a verdict from the routed default costing the
        cascade alone 6.5 points of recall@5."""
        ids = runs.eval_run_ids(workspace, limit=RUNS_READ)  # one small query per search while nothing changed
        cached = self._seen.get((workspace, k, config_key))
        if cached is not None and cached[0] == ids:
            return cached[1]
        heads = runs.eval_runs(workspace, limit=RUNS_READ)
        found: dict[str, StageEvidence] = {}
        for head in (h for h in heads if key_of(h.config) == config_key):  # newest first, until every stage has one
            full = runs.eval_run(head.eval_id, workspace)
            if full is None:
                continue
            for stage, ev in stage_evidence([EvalEvidence(full.eval_id, full.dataset, full.results)], k=k).items():
                found.setdefault(stage, ev)
            if len(found) == len(GUARDED):
                break
        self._seen[(workspace, k, config_key)] = (ids, found)
        return found
