"""Per-workspace calibration of the offline answer's refusal threshold: choose the cut on a golden set's supports by
k-fold cross-validation, and pick the cut a query uses (the config's, the workspace's calibration, or the prior)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from core.types import Calibration

MIN_PER_CLASS = 5  # answerable and unanswerable questions each, below which a cut cannot be told from chance


class CalibrationError(ValueError):
    """A set that cannot calibrate (too few answerable or unanswerable questions); the message is fit for the user."""


@dataclass(frozen=True)
class Outcome:
    """One golden question as the offline answer saw it: the support for its best sentence, and whether the answer
    it would give (at any cut it passes) quotes a gold sentence. `retrieved`: a gold passage was among the
    candidates the answer read; `sentence_retrieved`: a gold sentence was among the sentences it weighed (the
    ceiling: no cut can answer right without one)."""

    qid: str
    answerable: bool
    support: float
    correct: bool = False
    retrieved: bool = False
    sentence_retrieved: bool = False


def rates(outcomes: Sequence[Outcome], cut: float | Sequence[float]) -> dict[str, Any]:
    """Answered correctly among answerable (all, gold passage retrieved, gold sentence retrieved) and refused among
    unanswerable, at one cut for all, or one cut per outcome (cross-validation's held-out cuts)."""
    cuts = [float(cut)] * len(outcomes) if isinstance(cut, (int, float)) else [float(c) for c in cut]

    def share(rows: list[bool]) -> float | None:
        return sum(rows) / len(rows) if rows else None

    ans = [(o, c) for o, c in zip(outcomes, cuts) if o.answerable]
    una = [(o, c) for o, c in zip(outcomes, cuts) if not o.answerable]
    ok = lambda o, c: o.support >= c and o.correct  # noqa: E731
    return {"answered_correctly": share([ok(o, c) for o, c in ans]),
            "refused_answerable": share([o.support < c for o, c in ans]),
            "answered_correctly_retrieved": share([ok(o, c) for o, c in ans if o.retrieved]),
            "answered_correctly_sentence": share([ok(o, c) for o, c in ans if o.sentence_retrieved]),
            "refused_correctly": share([o.support < c for o, c in una]),
            "answerable": len(ans), "retrieved": sum(1 for o, _ in ans if o.retrieved),
            "sentence_retrieved": sum(1 for o, _ in ans if o.sentence_retrieved), "unanswerable": len(una)}


def objective(r: dict[str, Any]) -> float:
    """What a cut is chosen for: the mean of answered-correctly (where the gold passage was retrieved; all answerable
    when none was) and refused-correctly, each rate weighing the same however many questions it has."""
    a = r["answered_correctly_retrieved"] if r["answered_correctly_retrieved"] is not None else r["answered_correctly"]
    return ((a or 0.0) + (r["refused_correctly"] or 0.0)) / 2


def choose_cut(outcomes: Sequence[Outcome], prior: float) -> float:
    """The cut with the best objective over `outcomes`; among equals, the one closest to `prior` (the shipped
    threshold), so a set that cannot tell two cuts apart keeps the prior's. Candidates: midpoints between the
    supports seen, and the prior."""
    sup = sorted({round(o.support, 6) for o in outcomes})
    cands = {prior, 0.0, 1.0 + 1e-9} | {(a + b) / 2 for a, b in zip(sup, sup[1:])}
    return max(sorted(cands), key=lambda c: (round(objective(rates(outcomes, c)), 9), -abs(c - prior)))


def folds_of(outcomes: Sequence[Outcome], k: int, seed: int = 0) -> list[list[int]]:
    """k folds, stratified by answerable (each fold gets its share of both kinds), shuffled with `seed`."""
    rng = random.Random(seed)
    out: list[list[int]] = [[] for _ in range(k)]
    for kind in (True, False):
        idx = [i for i, o in enumerate(outcomes) if o.answerable is kind]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            out[j % k].append(i)
    return out


@dataclass(frozen=True)
class Fit:
    threshold: float
    folds: int
    figures: dict[str, Any]


def cross_validate(outcomes: Sequence[Outcome], *, prior: float, k: int = 5, seed: int = 0) -> Fit:
    """The cut fitted on every question, and its k-fold figures: each fold's questions judged at the cut chosen on
    the other folds (never on themselves), beside the prior's figures on the same questions."""
    n_ans = sum(1 for o in outcomes if o.answerable)
    n_una = len(outcomes) - n_ans
    if min(n_ans, n_una) < MIN_PER_CLASS:
        raise CalibrationError(
            f"calibration needs at least {MIN_PER_CLASS} answerable and {MIN_PER_CLASS} unanswerable questions with "
            f"an answer; this set has {n_ans} and {n_una} (mark near-miss questions unanswerable, or add some)")
    k = max(2, min(k, n_ans, n_una))
    held = [0.0] * len(outcomes)
    fold_cuts = []
    for fold in folds_of(outcomes, k, seed):
        inside = set(fold)
        cut = choose_cut([o for i, o in enumerate(outcomes) if i not in inside], prior)
        fold_cuts.append(round(cut, 4))
        for i in fold:
            held[i] = cut
    fitted = choose_cut(outcomes, prior)
    cv, at_prior = rates(outcomes, held), rates(outcomes, prior)
    # The CV figures say whether a cut fitted on this set does better than the prior on questions it was not fitted
    # on; where it does not, the fitted cut is noise of this set and the prior stays (the figures say so).
    # A cut that refuses more of the set's answerable questions than the prior does, on questions it was not
    # fitted on, trades answers a user had for refusals the set may not stand for: the prior stays.
    refuses_more = (cv["refused_answerable"] or 0.0) > (at_prior["refused_answerable"] or 0.0) + 1e-12
    keeps_prior = objective(cv) <= objective(at_prior) or refuses_more
    why = ("the fitted cut refused more answerable questions than the prior in cross-validation" if refuses_more
           else "the fitted cut did no better than the prior in cross-validation" if keeps_prior else "")
    figures = {"cv": cv, "prior": at_prior, "prior_threshold": prior, "fitted_threshold": fitted,
               "kept_prior": keeps_prior, "kept_prior_why": why, "fold_thresholds": fold_cuts,
               "in_sample": rates(outcomes, fitted),
               "questions": len(outcomes),
               "objective": "mean of answered-correctly (gold passage retrieved) and refused-correctly"}
    return Fit(prior if keeps_prior else fitted, k, figures)


@dataclass(frozen=True)
class Cut:
    """The refusal cut a query uses and where it came from."""

    value: float
    source: str


def refusal_cut(configured: float | None, calibration: Calibration | None, prior: float, model: str) -> Cut:
    """The config's own threshold when set (>= 0), else the workspace's calibration when it belongs to this support
    model, else the shipped model's prior."""
    if configured is not None and configured >= 0:
        return Cut(float(configured), "config (answer.refusal_threshold)")
    if calibration is not None and calibration.model == model:
        return Cut(float(calibration.threshold), calibration.describe())
    if calibration is not None:
        return Cut(prior, "shipped prior (the workspace's calibration is for another support model: recalibrate)")
    return Cut(prior, "shipped prior (no calibration in this workspace)")
