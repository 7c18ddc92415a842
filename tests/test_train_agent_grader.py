"""train/agent_grader.py: the grader's fitting routine and its held-out score, on numbers worked by hand."""
from __future__ import annotations

import numpy as np
import pytest

from core.route.agent import GraderModel
from train.agent_grader import auroc, fit_gd


def test_auroc_counts_the_pairs_ranked_right() -> None:
    assert auroc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert auroc([0.1, 0.9], [1, 0]) == 0.0
    assert auroc([0.2, 0.6, 0.4, 0.8], [1, 0, 1, 0]) == 0.0
    assert auroc([0.5, 0.7, 0.6], [1, 0, 1]) == pytest.approx(0.0)  # both positives below the one negative
    assert auroc([0.3, 0.6, 0.9], [0, 1, 0]) == pytest.approx(0.5)
    assert auroc([0.1, 0.2], [1, 1]) is None


def test_fit_gd_learns_the_feature_that_separates_and_round_trips_as_a_grader(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 4))
    y = (x[:, 1] > 0).astype(np.float64)  # only the second feature says which candidates are gold
    w, b = fit_gd(x, y)
    assert w[1] > 1.0 and max(abs(w[0]), abs(w[2]), abs(w[3])) < 0.3 * w[1] and abs(b) < 0.5
    from core.models.fitted import save_fitted

    model = GraderModel(tuple(float(v) for v in w), b, 0.5, 0.15, "test")
    path = tmp_path / "agent_grader.npz"
    save_fitted(path, model.record({"recipe": "test"}))
    back = GraderModel.load(path)
    assert back.weights == pytest.approx(model.weights) and (back.upper, back.lower) == (0.5, 0.15)
    assert back.prob([0.0, 3.0, 0.0, 0.0]) > 0.9 > 0.1 > back.prob([0.0, -3.0, 0.0, 0.0])
