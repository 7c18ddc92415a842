"""Runs pipeline configurations over a golden set: per-question scores, repeats for variance, stored runs, A/B."""
from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from core.app import readiness
from core.config import PipelineConfig
from core.deps import Deps
from core.eval.answer import answer_relevancy, faithfulness
from core.eval.datasets import GoldenQuery, GoldenSet, ensure_corpus, resolve_gold
from core.eval.metrics import (
    LOWER_IS_BETTER,
    AnswerJudge,
    Comparison,
    Gold,
    QueryScore,
    answer_metrics,
    by_group,
    compare_runs,
    judge,
    latency_summary,
    mean_metrics,
    per_query_status,
    score_trace,
    spread,
    stage_summary,
)
from core.models.llm import LLM
from core.models.protocols import Embedder
from core.pipeline import QueryError, StageMemo, run_query
from core.retrieve.index import backfill_vectors
from core.text import snippet
from core.types import DEFAULT_WORKSPACE, AnswerRow, CandidateRow, GoldRow, QuestionResult, StageRecord, Trace

Progress = Callable[[int, int, str], None]
# What a stored question keeps, so hundreds of runs stay small: every stage's top KEEP_DEPTH candidates (the first
# TEXT_DEPTH with a snippet; full text comes from the store by chunk id), the final list whole (recall curves), and
# for every stage the rank at which each gold item first appears (gold status), computed over the whole list.
KEEP_DEPTH = 20
TEXT_DEPTH = 10
NOT_COMPARED = frozenset({"depth", "first_rank"})  # descriptive only: first_rank is averaged over hits alone


@dataclass(frozen=True)
class NamedConfig:
    name: str
    config: PipelineConfig


@dataclass
class EvalRun:
    """One configuration over one golden set: means over repeats, their spread, and every question's record."""

    eval_id: str
    dataset: str
    config_name: str
    config_hash: str
    config: dict[str, Any]
    corpus_version: int
    workspace: str
    repeats: int
    metrics: dict[str, float | None]
    spread: dict[str, float]
    per_repeat: list[dict[str, float | None]]
    stage_recall: dict[str, dict[str, float | None]]
    latency: dict[str, dict[str, float]]
    by_type: dict[str, dict[str, float | None]]
    results: list[QuestionResult]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    created_at: Any = None
    unit: str = "chunk"
    ks: tuple[int, ...] = (5, 10, 20)
    # Per stage: how many of its results this configuration reused from an earlier configuration of the same run
    # (same inputs: core.pipeline.StageMemo) and how many it computed; empty when nothing was shared.
    reuse: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Everything but the per-question results: what the store keeps in eval_runs and the CLI prints."""
        return {"eval_id": self.eval_id, "dataset": self.dataset, "config_name": self.config_name,
                "config_hash": self.config_hash, "config": self.config, "corpus_version": self.corpus_version,
                "workspace": self.workspace, "repeats": self.repeats, "metrics": self.metrics, "spread": self.spread,
                "per_repeat": self.per_repeat, "stage_recall": self.stage_recall, "latency": self.latency,
                "by_type": self.by_type, "n_queries": len(self.results), "problems": self.problems,
                "notes": self.notes, "seconds": round(self.seconds, 3), "unit": self.unit, "ks": list(self.ks),
                "stage_recall_at": self.stage_recall_at(), "round_recall": self.round_recall(), "reuse": self.reuse}

    def round_recall(self) -> list[dict[str, Any]]:
        """Per-round recall of the agentic loop's evidence pool (empty when the loop never ran): see round_recall."""
        return round_recall([{n: st.recall_at for st in r.stages if not st.skipped
                              and (n := loop_round(st.stage)) is not None} for r in self.results if r.stages])

    def stage_recall_at(self) -> dict[str, dict[str, float | None]]:
        """Mean recall@k of every stage's own list over the questions with gold (from each stage's gold ranks), so
        a stage can be compared with the ones before it at the same k."""
        sums: dict[str, dict[str, list[float]]] = {}
        for r in self.results:
            for st in r.stages:
                for key, v in st.recall_at.items():
                    if v is not None:
                        sums.setdefault(st.stage, {}).setdefault(key, []).append(float(v))
        return {stage: {k: sum(v) / len(v) for k, v in by_k.items()} for stage, by_k in sums.items()}

    def question_ranks(self) -> list[dict[str, Any]]:
        """Per question: its metrics and, per stage, the rank of each gold item (None: not in the list)."""
        return [{"qid": r.qid, "query": r.query, "qtype": r.qtype, "metrics": dict(r.metrics),
                 "final_stage": r.final_stage, "error": r.error,
                 "stages": [{"stage": st.stage, "skipped": st.skipped, "gold_ranks": list(st.gold_ranks),
                             "recall_at": dict(st.recall_at)} for st in r.stages]}
                for r in self.results]

    def per_query(self, metric: str) -> dict[str, float | None]:
        return {r.qid: r.metrics.get(metric) for r in self.results}

    @classmethod
    def from_stored(cls, d: dict[str, Any]) -> "EvalRun":
        return cls(d["eval_id"], d["dataset"], d["config_name"], d["config_hash"], d["config"], d["corpus_version"],
                   d.get("workspace", DEFAULT_WORKSPACE), d["repeats"], d["metrics"], d.get("spread", {}),
                   d.get("per_repeat", []), d.get("stage_recall", {}), d.get("latency", {}), d.get("by_type", {}),
                   [QuestionResult.coerce(r) for r in d.get("results", [])], d.get("problems", []), d.get("notes", []), d.get("seconds", 0.0),
                   d.get("created_at"), d.get("unit", "chunk"), tuple(d.get("ks", (5, 10, 20))), d.get("reuse", {}))


_DECIDE = re.compile(r"(?:r(\d+)\.)?decide")


def loop_round(stage: str) -> int | None:
    """The agentic round whose evidence pool a stage holds: the loop's `decide` record of round 1 is 'decide', of
    round r 'r<r>.decide' (core/route/agent.py); None for every other stage."""
    m = _DECIDE.fullmatch(stage)
    return None if m is None else int(m.group(1) or 1)


def round_recall(per_question: Sequence[Mapping[int, Mapping[str, float | None]]]) -> list[dict[str, Any]]:
    """How much each round of the agentic loop added, over the questions where it ran (gold only).

    `per_question`: for each question, round -> recall@k of the evidence pool after that round. Row r: how many
    questions ran round r, the mean recall@k of the pool after round r over every loop question (one that stopped
    earlier keeps its last pool, so the means are over one fixed set of questions and never fall because a
    question stopped), and `added@k`, the gain over round r-1 (round 1: over nothing)."""
    rows_in = [q for q in per_question if q and any(v is not None for rec in q.values() for v in rec.values())]
    if not rows_in:
        return []
    last = max(max(q) for q in rows_in)
    keys = sorted({k for q in rows_in for rec in q.values() for k in rec}, key=lambda k: int(k.split("@")[1]))
    out: list[dict[str, Any]] = []
    prev: dict[str, float] = {}
    for rnd in range(1, last + 1):
        row: dict[str, Any] = {"round": rnd, "questions": sum(1 for q in rows_in if rnd in q)}
        for key in keys:
            vals = []
            for q in rows_in:
                upto = [r for r in q if r <= rnd and q[r].get(key) is not None]
                if upto:
                    vals.append(float(q[max(upto)][key]))  # type: ignore[arg-type]
            mean = sum(vals) / len(vals) if vals else None
            row[key] = mean
            row[f"added@{key.split('@')[1]}"] = None if mean is None else mean - prev.get(key, 0.0)
            if mean is not None:
                prev[key] = mean
        out.append(row)
    return out


def recall_at(gold_ranks: Sequence[int | None], ks: Sequence[int]) -> dict[str, float | None]:
    """{'recall@k': share of gold items ranked at k or better} for each k (None without gold)."""
    n = len(gold_ranks)
    return {f"recall@{k}": (sum(1 for r in gold_ranks if r is not None and r <= k) / n if n else None) for k in ks}


def _stage_record(score: QueryScore, trace: Trace, gold: Sequence[Gold],
                  originals: dict[str, str] | None = None, ks: Sequence[int] = (5, 10, 20)) -> list[StageRecord]:
    by_name = {s.stage: s for s in trace.stages}
    out = []
    for s in score.stages:
        res = by_name[s.stage]
        cands = []
        # Judged per chunk, even for document-level sets, so the view can mark every chunk that holds gold.
        hits = list(s.hits) if len(s.hits) == len(res.candidates) else judge(res.candidates, gold,
                                                                             originals=originals)
        # Ranks in the list as it was scored: chunks, or documents (best chunk each) for a document-level set.
        gold_ranks: list[int | None] = [None] * len(gold)
        for pos, h in enumerate(s.hits, start=1):
            for g in h:
                if gold_ranks[g] is None:
                    gold_ranks[g] = pos
        keep = len(res.candidates) if s.stage == score.final_stage else KEEP_DEPTH
        for i, c in enumerate(res.candidates[:keep]):
            cands.append(CandidateRow(c.chunk_id, c.doc_id, c.rank, round(float(c.score), 6), tuple(sorted(hits[i])),
                                      snippet(c.text, 240) if i < TEXT_DEPTH else None))
        out.append(StageRecord(s.stage, s.skipped, res.skipped, round(s.ms, 3), s.depth, s.recall, s.first_rank,
                               s.tokens, s.token_share, tuple(gold_ranks),
                               recall_at(gold_ranks, ks) if not s.skipped else {}, tuple(cands)))
    return out


def _query_row(q: GoldenQuery, score: QueryScore | None, trace: Trace | None, error: str | None,
               answer: dict[str, float | None], ks: Sequence[int] = (5, 10, 20),
               metrics: dict[str, float | None] | None = None) -> QuestionResult:
    return QuestionResult(
        q.qid, q.query, q.qtype, q.answerable, q.line,
        tuple(GoldRow(g.doc, g.text, g.grade, g.match) for g in q.gold),
        metrics if metrics is not None else {**(score.metrics if score else {}), **answer},
        score.final_stage if score else None,
        tuple(_stage_record(score, trace, q.gold, ks=ks)) if score and trace else (),
        None if trace is None or trace.answer is None else AnswerRow(
            trace.answer.text, trace.answer.refused, tuple(trace.answer.citations)),
        error,
    )


class ProductAnswerJudge:
    """The answer generator's own metrics (core.eval.answer) behind the AnswerJudge protocol: faithfulness by
    lexical claim support (or an LLM judge when `llm` is given: it costs money, so it is opt-in) and relevancy by
    embedding cosine with the workbench's embedder."""

    def __init__(self, embedder: Embedder | None = None, llm: LLM | None = None) -> None:
        self.embedder, self.llm = embedder, llm
        # Scores by their inputs: an evaluation run's configurations share one judge, and the same answer to the
        # same question (from the same contexts) is judged once (its embedding was most of a shared config's time).
        self._faithful: dict[tuple[Any, tuple[str, ...]], float | None] = {}
        self._relevant: dict[tuple[str, Any], float | None] = {}

    def faithfulness(self, answer: Any, contexts: Sequence[str]) -> float | None:
        key = (answer, tuple(contexts))
        if key not in self._faithful:
            self._faithful[key] = faithfulness(answer, contexts, llm=self.llm).value
        return self._faithful[key]

    def relevancy(self, question: str, answer: Any) -> float | None:
        if (question, answer) not in self._relevant:
            self._relevant[(question, answer)] = answer_relevancy(question, answer, embedder=self.embedder).value
        return self._relevant[(question, answer)]


def prepare(gs: GoldenSet, deps: Deps, *, workspace: str, config: PipelineConfig | None = None,
            progress: Progress | None = None) -> tuple[GoldenSet, list[str]]:
    """Put the set's corpus in the workspace if needed, then map its gold to store ids. Returns notes to show."""
    notes: list[str] = []
    rep = ensure_corpus(gs, store=deps.store, embedder=deps.embedder, workspace=workspace, config=config,
                        progress=progress)
    if rep is not None:
        notes.append(f"corpus: {rep.documents} documents, {rep.added} added, {rep.present} already stored; "
                     f"{rep.embedded} embeddings computed, {rep.cache_hits} from the cache")
        notes += [f"corpus error: {e}" for e in rep.errors]
        if rep.added:
            deps.indexes.invalidate(workspace)
    cfg = config or PipelineConfig()
    if "multilingual" in gs.builds and cfg.embedding.multilingual != "off" and not deps.store.read_only:
        notes.append(build_set_multilingual(deps, cfg.embedding.multilingual_model, workspace))
    return resolve_gold(gs, deps.store, workspace), notes


def build_set_multilingual(deps: Deps, model_id: str, workspace: str) -> str:
    """A cross-lingual set's corpus with its multilingual vectors (cache first), so its questions meet the list."""
    emb, notice = deps.multilingual_for(model_id)
    if emb is None:
        return f"multilingual vectors not built: {notice}"
    stats = backfill_vectors(deps.store.corpus, deps.store.ledger, deps.store.caches, deps.store.corpus, emb,
                             workspace, "raw", purpose="eval corpus (multilingual)")
    if stats.texts:
        deps.indexes.invalidate(workspace)
    return f"multilingual vectors: {stats.computed} computed, {stats.cache_hits} from the cache"


# One question's outcome: (question, score, trace, error, answer metrics); score and trace are None on an error.
Row = tuple[GoldenQuery, QueryScore | None, Trace | None, str | None, dict]


class EvalEngine(Protocol):
    """Scores every (configuration, repeat, question) somewhere other than this loop (core/eval/ray_eval.py: Ray workers).
    Returns rows[config][repeat][question], questions in set order, each scored by score_question."""

    def score(self, gs: GoldenSet, configs: Sequence[NamedConfig], deps: Deps, *, workspace: str, repeats: int,
              limit: int | None, progress: Progress | None, answer_judge: AnswerJudge | None,
              ) -> list[list[list[Row]]]: ...

    def describe(self) -> str:
        """One note for the stored run: where and how it was scored (seconds are the whole fan-out's)."""
        ...


def score_question(q: GoldenQuery, gs: GoldenSet, cfg: PipelineConfig, deps: Deps, *, workspace: str,
                   answer_judge: AnswerJudge, memo: StageMemo | None = None) -> Row:
    """Run one question through the pipeline and score it: the unit of work of every engine (local or Ray), so the
    two score a question with the same code. `memo`: the run's stage results, shared between its configurations."""
    try:
        trace = run_query(q.query, cfg, deps, workspace=workspace, log=False, memo=memo)
    except QueryError as exc:
        return (q, None, None, str(exc), answer_metrics(q.query, q.answerable, None, []))
    originals = _originals(trace, deps, workspace) if any(g.match == "exact" for g in q.gold) else None
    score = score_trace(trace, q.gold, ks=gs.ks, ndcg_ks=gs.ndcg_ks, unit=gs.unit, pass_k=gs.pass_k,
                        originals=originals)
    final = trace.final()
    contexts = [c.text for c in final.candidates] if final else []
    ans = answer_metrics(q.query, q.answerable, trace.answer, contexts, answer_judge,
                         gold_texts=[g.text for g in q.gold])
    return (q, score, trace, None, ans)


def run_config(
    gs: GoldenSet, nc: NamedConfig, deps: Deps, *, workspace: str, repeats: int = 1, progress: Progress | None = None,
    offset: int = 0, total: int | None = None, answer_judge: AnswerJudge | None = None, limit: int | None = None,
    memos: Sequence[StageMemo] | None = None,
) -> EvalRun:
    """Run one configuration `repeats` times over the (resolved) set and aggregate. The corpus must be in place.
    `memos` (one per repeat, shared by the run's configurations): a stage whose inputs an earlier configuration read
    in the same repeat reuses its result; repeats never share (they measure the spread)."""
    t0 = time.perf_counter()
    cfg = nc.config
    if answer_judge is None:
        answer_judge = ProductAnswerJudge(deps.embedder)
    queries = gs.queries[:limit] if limit else list(gs.queries)
    total = total if total is not None else len(queries) * repeats
    runs_scores: list[list[Row]] = []
    done = offset
    before = [(Counter(m.reused), Counter(m.computed)) for m in memos or ()]
    for r in range(max(1, repeats)):
        rows = []
        memo = memos[r] if memos and r < len(memos) else None
        for q in queries:
            rows.append(score_question(q, gs, cfg, deps, workspace=workspace, answer_judge=answer_judge, memo=memo))
            done += 1
            if progress:
                progress(done, total, f"{nc.name}: {q.qid}")
        runs_scores.append(rows)
    run = aggregate(gs, nc, runs_scores, corpus_version=deps.store.corpus.corpus_version(workspace),
                    workspace=workspace, seconds=time.perf_counter() - t0)
    if memos:
        reused = sum((m.reused - b[0] for m, b in zip(memos, before)), Counter())
        computed = sum((m.computed - b[1] for m, b in zip(memos, before)), Counter())
        run.reuse = {st: {"reused": reused[st], "computed": computed[st]} for st in dict.fromkeys([*computed, *reused])}
        run.notes.append(reuse_note(run.reuse))
    return run


def reuse_note(reuse: Mapping[str, Mapping[str, int]]) -> str:
    """The run's line on shared stage results: how many it reused from an earlier configuration, per stage."""
    n_re = sum(v["reused"] for v in reuse.values())
    n_all = n_re + sum(v["computed"] for v in reuse.values())
    per = ", ".join(f"{st} {v['reused']}/{v['reused'] + v['computed']}" for st, v in reuse.items() if v["reused"])
    return (f"stage results reused from an earlier configuration of this run (same question, same inputs): {n_re} "
            f"of {n_all}" + (f" ({per})" if per else "") + f"; {n_all - n_re} computed")


def aggregate(gs: GoldenSet, nc: NamedConfig, runs_scores: Sequence[Sequence[Row]], *, corpus_version: int,
              workspace: str, seconds: float) -> EvalRun:
    """One configuration's EvalRun from its rows (one list per repeat, questions in set order), whichever engine
    produced them: means, spread, per-stage recall, latency, notes."""
    cfg = nc.config
    runs_scores = [list(rows) for rows in runs_scores]
    per_repeat = [mean_metrics({**(s.metrics if s else {}), **a} for _, s, _, _, a in rows) for rows in runs_scores]
    first = runs_scores[0]
    results = []
    for i, (q, score, trace, err, ans) in enumerate(first):
        # Per-question means over repeats; the stage record stays the first repeat's.
        means = mean_metrics({**(r[i][1].metrics if r[i][1] else {}), **r[i][4]} for r in runs_scores) \
            if len(runs_scores) > 1 else None
        results.append(_query_row(q, score, trace, err, ans, gs.ks, means))
    keys = list(per_repeat[0]) if per_repeat else []
    metrics = {k: _mean_or_none([p.get(k) for p in per_repeat]) for k in keys}
    spreads = {k: spread([p.get(k) for p in per_repeat]) for k in keys}
    all_scores = [s for rows in runs_scores for _, s, _, _, _ in rows if s is not None]
    scored = [s for s in all_scores if s.n_gold]
    notes = _notes(gs, cfg, runs_scores, metrics)
    errors = sorted({f"{q.qid}: {e}" for rows in runs_scores for q, _, _, e, _ in rows if e})
    return EvalRun(
        eval_id=uuid.uuid4().hex, dataset=gs.name, config_name=nc.name, config_hash=cfg.stable_hash(),
        config=cfg.model_dump(mode="json"), corpus_version=corpus_version, workspace=workspace,
        repeats=len(runs_scores), metrics=metrics, spread=spreads, per_repeat=per_repeat,
        stage_recall=stage_summary(scored) if scored else {}, latency=latency_summary(all_scores),
        by_type=by_group([r.metrics for r in results], [r.qtype for r in results]), results=results,
        problems=[str(p) for p in gs.problems] + errors, notes=notes, seconds=seconds,
        unit=gs.unit, ks=gs.ks,
    )


def _originals(trace: Trace, deps: Deps, workspace: str) -> dict[str, str]:
    """Stored text of every chunk in the trace: exact-match gold asks which chunks were retrieved, not how a later
    stage trimmed them."""
    ids = list({c.chunk_id for s in trace.stages for c in s.candidates})
    return {cid: ch.text for cid, ch in deps.store.corpus.chunks_by_id(ids, workspace).items()}


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


MISSING_BUILD = "skipped for a missing build"
_BUILD_MARKS = ("not built", "built yet", "rebuild it")


def missing_build_notes(traces: Sequence[Trace | None]) -> list[str]:
    """Run-level notices: stages the configuration asks for that questions skipped because something was never
    built (multilingual vectors, the entity graph, a RAPTOR tree), with how many questions and the command that
    builds it. Without them the reason lived only in each question's trace and a run read as the stage's failure."""
    n = sum(t is not None for t in traces)
    groups: dict[str, tuple[list[str], set[int]]] = {}  # what builds it -> (stages, questions)
    for i, t in enumerate(traces):
        for s in t.stages if t is not None else ():
            if s.skipped and any(m in s.skipped for m in _BUILD_MARKS):
                cmd = re.search(r"`([^`]+)`", s.skipped)
                what = f"`{cmd.group(1)}` builds it" if cmd else f"why: {s.skipped}"
                stages, seen = groups.setdefault(what, ([], set()))
                if s.stage not in stages:
                    stages.append(s.stage)
                seen.add(i)
    return [f"{MISSING_BUILD}: {', '.join(stages)} on {len(seen)} of {n} questions; {what}"
            for what, (stages, seen) in groups.items()]


def _notes(gs: GoldenSet, cfg: PipelineConfig, runs: list[list[tuple]], metrics: dict[str, float | None]) -> list[str]:
    notes = missing_build_notes([t for _, _, t, _, _ in runs[0]])
    depth = metrics.get("depth")
    if depth is not None and gs.ks and depth < 0.95 * max(gs.ks):
        notes.append(f"the final list holds {depth:.1f} candidates on average, fewer than k={max(gs.ks)}: "
                     f"recall@{max(gs.ks)} counts only what was returned (raise the stage depths)")
    if len(runs) > 1:
        def finals(rows: list[tuple]) -> list[tuple[str, ...]]:
            return [tuple(c.chunk_id for c in (t.final().candidates if t and t.final() else ()))
                    for _, _, t, _, _ in rows]
        if any(finals(r) != finals(runs[0]) for r in runs[1:]):
            notes.append("final lists differ between repeats: some stage is non-deterministic (see the spread)")
        else:
            notes.append(f"all {len(runs)} repeats returned identical lists: the pipeline is deterministic here")
    n_unans = sum(1 for q, *_ in runs[0] if not q.gold)
    if n_unans:
        notes.append(f"{n_unans} question(s) without gold (unanswerable) are left out of the retrieval means"
                     + ("" if metrics.get("refusal_accuracy") is not None else "; refusal accuracy needs answers"))
    return notes


def run_eval(
    gs: GoldenSet, configs: Sequence[NamedConfig], deps: Deps, *, workspace: str | None = None, repeats: int = 1,
    progress: Progress | None = None, save: bool = True, answer_judge: AnswerJudge | None = None,
    limit: int | None = None, engine: "EvalEngine | None" = None, reuse: bool = True,
    memos: Sequence[StageMemo] | None = None,
) -> list[EvalRun]:
    """Prepare the corpus once, run every configuration (all questions of one config before the next, so indexes
    are built once per config), store each run, and return them in order. `engine` (e.g. core.eval.ray_eval's) scores
    the questions elsewhere; this process still prepares, aggregates with the same code and alone writes.
    `reuse` (the local engine): the configurations share one StageMemo per repeat, so a later configuration reuses
    every stage result whose inputs (question, the settings the stage and those before it read) an earlier one had;
    each run reports what it reused (EvalRun.reuse and a note). `memos` (one per repeat): shared with other calls
    too (a sweep's configurations, each run alone)."""
    ws = gs.workspace or workspace or DEFAULT_WORKSPACE
    if getattr(deps.store, "read_only", False):  # scoring beside a running app: read what is there, write nothing
        resolved = resolve_gold(gs, deps.store, ws)
        notes = ["read-only database: the corpus was not checked or added, and this run is not stored"]
        save = False
    else:
        resolved, notes = prepare(gs, deps, workspace=ws, config=configs[0].config if configs else None,
                                  progress=progress)
        notes = notes + build_missing_variants(configs, deps, ws, progress)
    n = len(resolved.queries[:limit] if limit else resolved.queries)
    total = n * max(1, repeats) * len(configs)
    out = []
    if answer_judge is None and engine is None and reuse:  # one judge for every configuration: it keeps its scores
        answer_judge = ProductAnswerJudge(deps.embedder)
    if not reuse or engine is not None:
        memos = None
    elif memos is None and len(configs) > 1:
        memos = [StageMemo() for _ in range(max(1, repeats))]
    if engine is not None:
        t0 = time.perf_counter()
        rows = engine.score(resolved, configs, deps, workspace=ws, repeats=max(1, repeats), limit=limit,
                            progress=progress, answer_judge=answer_judge)
        seconds = time.perf_counter() - t0
        version = deps.store.corpus.corpus_version(ws)
        runs = [aggregate(resolved, nc, per_repeat, corpus_version=version, workspace=ws, seconds=seconds)
                for nc, per_repeat in zip(configs, rows)]
        notes = notes + [engine.describe()]
    for i, nc in enumerate(configs):
        if engine is not None:
            run = runs[i]
        else:
            run = run_config(resolved, nc, deps, workspace=ws, repeats=repeats, progress=progress,
                             offset=i * n * max(1, repeats), total=total, answer_judge=answer_judge, limit=limit,
                             memos=memos)
        run.notes = notes + run.notes
        if save:
            deps.store.runs.save_eval_run(ws, run.summary(), run.results)
        out.append(run)
    return out


def build_missing_variants(configs: Sequence[NamedConfig], deps: Deps, workspace: str,
                           progress: Progress | None = None) -> list[str]:
    """A configuration's context variant (heuristic / late) whose vectors are missing is built and kept before any
    question is scored, with progress, and said in the run's notes. Without it the dense index embedded every missing
    chunk in memory inside the first question's timed query, once per configuration and run, and threw the work
    away. LLM contexts cost money and are never built here (the Costs page builds them; readiness.needs leaves them
    out). On a read-only database run_eval does not call this: the variant is embedded in memory as before."""
    notes: list[str] = []
    done: set[str] = set()
    for nc in configs:
        for need in readiness.needs(deps.store, nc.config, workspace, deps.embedder.model_id,
                                    indexes=deps.indexes):
            if need.kind != "context" or need.variant in done:
                continue
            done.add(need.variant)

            def show(d: int, t: int, what: str = need.label) -> None:
                if progress is not None:
                    progress(d, t, f"building {what}")
            show(0, need.todo)  # said before it starts: a step may report no progress of its own (vectors only)
            msg = readiness.build(need, nc.config, deps, workspace, progress=show)
            tokens = readiness.token_need(deps, nc.config, workspace)
            if tokens is not None:
                msg += "; " + readiness.build(tokens, nc.config, deps, workspace,
                                              progress=lambda d, t: show(d, t, tokens.label))
            notes.append(f"built before scoring (for {nc.name}): {msg}")
    return notes


def load_run(store: Any, eval_id: str, workspace: str = DEFAULT_WORKSPACE) -> EvalRun | None:
    d = store.runs.eval_run(eval_id, workspace)
    return EvalRun.from_stored({**d.as_dict(), "results": list(d.results), "workspace": workspace}) if d else None


def compare(a: EvalRun, b: EvalRun, metrics: Sequence[str] | None = None) -> Comparison:
    """A vs B per metric with the delta and a verdict that never calls a difference inside the spread a win."""
    names = list(metrics) if metrics is not None else [
        m for m in a.metrics if m in b.metrics and m not in NOT_COMPARED]
    common = [qid for qid in a.per_query(names[0]) if qid in b.per_query(names[0])] if names else []
    pa = {m: [a.per_query(m).get(q) for q in common] for m in names}
    pb = {m: [b.per_query(m).get(q) for q in common] for m in names}
    return compare_runs(a.metrics, b.metrics, a_spread=a.spread, b_spread=b.spread, a_per_query=pa, b_per_query=pb,
                        metrics=names)


def per_query_diff(a: EvalRun, b: EvalRun, metric: str = "ndcg@10") -> list[dict[str, Any]]:
    """Every question with its score under A and B and whether B improved, regressed or kept it."""
    bq = {r.qid: r for r in b.results}
    rows = []
    for ra in a.results:
        rb = bq.get(ra.qid)
        if rb is None:
            continue
        va, vb = ra.metrics.get(metric), rb.metrics.get(metric)
        rows.append({"qid": ra.qid, "type": ra.qtype, "query": ra.query, "A": va, "B": vb,
                     "delta": None if va is None or vb is None else vb - va,
                     "A first rank": ra.metrics.get("first_rank"), "B first rank": rb.metrics.get("first_rank"),
                     "status": per_query_status(va, vb, higher_is_better=metric not in LOWER_IS_BETTER)})
    return rows

