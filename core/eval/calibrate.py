"""Calibrate a workspace's offline answer on its golden set: run every question once with no refusal, keep each
one's support and whether its answer quotes gold, choose the refusal cut by k-fold cross-validation, store it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from core.answer.calibration import MIN_PER_CLASS, CalibrationError, Fit, Outcome, cross_validate
from core.answer.support import claim_spans, load_support_model, model_fingerprint
from core.config import PipelineConfig
from core.deps import Deps
from core.eval.answer import answered_correctly, matches_gold
from core.eval.datasets import GoldenQuery, GoldenSet
from core.eval.metrics import judge
from core.eval.run import prepare
from core.eval.validity import of_set
from core.pipeline import QueryError, run_query
from core.types import DEFAULT_WORKSPACE, Calibration

Progress = Callable[[int, int, str], None]

__all__ = ["CalibrationError", "CalibrationReport", "calibrate", "collect_outcomes", "measuring_config"]


def measuring_config(config: PipelineConfig) -> PipelineConfig:
    """The workspace's configuration as calibration runs it: the offline answer, never refusing (cut 0: every
    question's support and would-be answer are seen), the answer cache off (it would replay other cuts' answers)."""
    return config.with_overrides({"answer.enabled": True, "answer.mode": "extractive",
                                  "answer.refusal_threshold": 0.0, "answer_cache.enabled": False})


def _gold_spans(q: GoldenQuery, deps: Deps, workspace: str) -> list[str]:
    """The texts an answer must quote from: gold spans, or a gold chunk's whole text."""
    chunk_ids = [g.text for g in q.gold if g.match == "chunk"]
    chunks = deps.store.corpus.chunks_by_id(chunk_ids, workspace) if chunk_ids else {}
    return [chunks[g.text].text if g.match == "chunk" and g.text in chunks else g.text
            for g in q.gold if g.match in ("span", "exact", "chunk") and g.text.strip()]


@dataclass(frozen=True)
class Collected:
    outcomes: list[Outcome]
    skipped: dict[str, int]  # why questions were left out -> how many


def collect_outcomes(gs: GoldenSet, config: PipelineConfig, deps: Deps, *, workspace: str,
                     progress: Progress | None = None, limit: int | None = None) -> Collected:
    """One pipeline run per question of the (resolved) set under measuring_config: its support, whether the answer
    quotes a gold sentence, whether a gold passage / sentence was among what the answer read."""
    cfg = measuring_config(config)
    out: list[Outcome] = []
    skipped: dict[str, int] = {}
    queries = gs.queries[:limit] if limit else gs.queries

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for i, q in enumerate(queries, 1):
        if progress:
            progress(i - 1, len(queries), q.qid)
        spans = _gold_spans(q, deps, workspace) if q.answerable else []
        if q.answerable and not spans:
            skip("answerable without a gold span or chunk (an answer cannot be judged)")
            continue
        try:
            trace = run_query(q.query, cfg, deps, workspace=workspace, log=False)
        except QueryError:
            skip("query refused by validation")
            continue
        ans = trace.answer_info()
        support = ans.support if ans is not None else None
        if trace.answer is None or trace.answer.mode != "extractive" or support is None:
            skip("not answered by the offline answer (routed elsewhere)")
            continue
        final = trace.final()
        cands = list(final.candidates)[: cfg.answer.max_chunks] if final else []
        retrieved = sentence = False
        if q.answerable:
            retrieved = any(judge(cands, q.gold))
            whole = deps.store.corpus.chunks_by_id([c.chunk_id for c in cands], workspace)
            texts = [whole[c.chunk_id].text if c.chunk_id in whole else c.text for c in cands]
            sentence = any(matches_gold(t[s:e], spans) for t in texts for s, e in claim_spans(t))
        out.append(Outcome(q.qid, q.answerable, float(support),
                           q.answerable and answered_correctly(trace.answer, spans), retrieved, sentence))
    if progress:
        progress(len(queries), len(queries), "done")
    return Collected(out, skipped)


@dataclass(frozen=True)
class CalibrationReport:
    calibration: Calibration
    skipped: dict[str, int]
    notes: list[str]


def fit_outcomes(outcomes: Sequence[Outcome], *, k: int = 5, seed: int = 0) -> Fit:
    return cross_validate(outcomes, prior=load_support_model().threshold, k=k, seed=seed)


def calibrate(gs: GoldenSet, deps: Deps, *, workspace: str | None = None, config: PipelineConfig | None = None,
              k: int = 5, seed: int = 0, progress: Progress | None = None, save: bool = True) -> CalibrationReport:
    """Fit the workspace's refusal cut on `gs` (corpus put in place and gold resolved first) and store it; a new
    calibration clears the workspace's cached answers, which were given at the old cut. Raises CalibrationError
    when the set has too few answerable or unanswerable questions."""
    ws = gs.workspace or workspace or DEFAULT_WORKSPACE
    cfg = config or PipelineConfig().with_overrides(gs.overrides)
    resolved, notes = prepare(gs, deps, workspace=ws, config=cfg, progress=progress)
    n_ans = sum(1 for q in resolved.queries if q.answerable and q.gold)
    n_una = sum(1 for q in resolved.queries if not q.answerable)
    if min(n_ans, n_una) < MIN_PER_CLASS:  # said before a single question runs
        raise CalibrationError(f"calibration needs at least {MIN_PER_CLASS} answerable questions with gold and "
                               f"{MIN_PER_CLASS} unanswerable ones; '{resolved.name}' has {n_ans} and {n_una} (mark "
                               "near-miss questions unanswerable, or add some)")
    got = collect_outcomes(resolved, cfg, deps, workspace=ws, progress=progress)
    fit = fit_outcomes(got.outcomes, k=k, seed=seed)
    found = [o.retrieved for o in got.outcomes if o.answerable]
    valid = of_set(resolved, difficulty=sum(found) / len(found) if found else None)
    if not valid.ok:  # a set that failed its validity check changes nothing: the prior stays, and it says why
        fit = Fit(fit.figures["prior_threshold"], fit.folds,
                  {**fit.figures, "kept_prior": True, "kept_prior_why": valid.blocked()})
        notes.append(f"not adopted: {valid.blocked()}")
    figures = {**fit.figures, "skipped": got.skipped, "validity": valid.to_dict(),
               "per_question": [{"qid": o.qid, "answerable": o.answerable, "support": round(o.support, 4),
                                 "correct": o.correct, "retrieved": o.retrieved} for o in got.outcomes]}
    cal = Calibration(ws, round(fit.threshold, 6), resolved.name, deps.store.corpus.corpus_version(ws),
                      model_fingerprint(), measuring_config(cfg).stable_hash(), fit.folds, figures)
    if save and not deps.store.read_only:
        deps.store.calibrations.save(cal)
        cleared = deps.store.answers.clear_answers(ws)
        if cleared:
            notes.append(f"cleared {cleared} cached answer(s) of '{ws}': they were given at the old cut")
    elif save:
        notes.append("read-only database: the calibration was not stored")
    return CalibrationReport(cal, got.skipped, notes + [str(p) for p in resolved.problems][:20])


def summary_rows(cal: Calibration) -> list[dict[str, object]]:
    """The calibration's figures as rows: the shipped prior and the cross-validated cut, side by side."""
    f = cal.figures
    rows = []
    fitted = f.get("fitted_threshold", cal.threshold)
    kept = f" (kept: {f.get('kept_prior_why') or 'the fitted cut did no better in CV'})" if f.get("kept_prior") else ""
    for label, key, cut in (("shipped prior" + kept, "prior", f.get("prior_threshold")),
                            (f"fitted on this set ({cal.folds}-fold CV)", "cv", fitted)):
        r = f.get(key) or {}
        rows.append({"threshold": cut, "figures": label,
                     "answered correctly (gold passage retrieved)": r.get("answered_correctly_retrieved"),
                     "answered correctly (all answerable)": r.get("answered_correctly"),
                     "answered correctly (gold sentence retrieved: ceiling)": r.get("answered_correctly_sentence"),
                     "refused correctly (unanswerable)": r.get("refused_correctly")})
    return rows

