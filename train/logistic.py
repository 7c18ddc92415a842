"""Fitting routines for the linear models shipped as fitted-linear records: L2-regularised logistic regression
(plain, and with sign-constrained weights) and the conditional logit the support model's sentence ranker uses. The
product only reads what they fit (core/models/fitted.py); the recipes call them."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from core.models.fitted import sigmoid


def fit_logistic(x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, iters: int = 50,
                 weights: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Newton's method for L2-regularised logistic regression on standardised x (the intercept is not penalised)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    sw = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = sigmoid(xb @ w)
        grad = xb.T @ (sw * (p - y)) + reg * w
        h = (xb * (sw * p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(h, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w[:-1], float(w[-1])


def fit_logistic_signed(x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, weights: np.ndarray | None = None,
                        signs: Sequence[int] | None = None) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression on standardised x whose weights keep given signs (1: >= 0, -1: <= 0, 0:
    free; the intercept is free and not penalised): a few dozen questions with correlated features otherwise give a
    coverage feature a negative weight by chance."""
    from scipy.optimize import minimize

    n, d = x.shape
    sw = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)

    def objective(wb: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = wb[:-1], wb[-1]
        z = x @ w + b
        p = sigmoid(z)
        f = float(sw @ (np.logaddexp(0.0, z) - y * z)) + 0.5 * l2 * float(w @ w)
        r = sw * (p - y)
        return f, np.append(x.T @ r + l2 * w, r.sum())

    signs = list(signs) if signs is not None else [0] * d
    bounds = [(0.0, None) if sg > 0 else (None, 0.0) if sg < 0 else (None, None) for sg in signs] + [(None, None)]
    res = minimize(objective, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=bounds)
    return res.x[:-1], float(res.x[-1])


def fit_conditional_logit(groups: Sequence[tuple[np.ndarray, np.ndarray]], *, l2: float = 1.0,
                          nonnegative: Sequence[bool] | None = None, signs: Sequence[int] | None = None
                          ) -> np.ndarray:
    """Weights of a softmax over each question's sentences (x: sentences x features, standardised; y: 1 for gold
    sentences), L2-regularised: trained to put the gold sentence first among its own question's sentences, which a
    per-sentence logistic loss does not aim at. `nonnegative` marks evidence features whose weight may not turn
    negative (more coverage never counts against a sentence), a prior that a few dozen questions cannot overrule by
    chance; `signs` generalises it (1: >= 0, -1: <= 0, 0: free)."""
    from scipy.optimize import minimize

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = 0.5 * l2 * float(w @ w), l2 * w
        for x, y in groups:
            z = x @ w
            z = z - z.max()
            p = np.exp(z) / np.exp(z).sum()
            t = y / y.sum()
            f -= float(t @ np.log(p + 1e-12))
            g = g - x.T @ (t - p)
        return f, g

    d = groups[0][0].shape[1] if groups else 0
    if signs is None:
        signs = [1 if nn else 0 for nn in (nonnegative or [False] * d)]
    bounds = [(0.0, None) if sg > 0 else (None, 0.0) if sg < 0 else (None, None) for sg in signs]
    return minimize(objective, np.zeros(d), jac=True, method="L-BFGS-B", bounds=bounds).x
