"""The fitted-linear record: one format for every fitted model shipped in core/models/data, with its provenance, and
one sigmoid."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from core.models import DATA_DIR
from core.models.fitted import FittedLinear, FittedModelError, load_fitted, save_fitted, sigmoid


def test_sigmoid_by_hand_and_never_overflows() -> None:
    assert sigmoid(0.0) == 0.5
    assert sigmoid(2.0) == pytest.approx(1 / (1 + math.exp(-2)))
    assert sigmoid(-1000.0) == pytest.approx(1 / (1 + math.exp(40)))  # clipped at 40, no overflow warning
    out = sigmoid(np.array([[-1.0, 1.0]]))
    assert out.shape == (1, 2) and out[0, 0] + out[0, 1] == pytest.approx(1.0)
    assert isinstance(sigmoid(np.float32(1.0)), float)


def test_record_round_trips_and_scores_by_hand(tmp_path: Path) -> None:
    rec = FittedLinear(("a", "b"), np.array([2.0, -1.0]), np.asarray(0.5), np.array([1.0, 0.0]),
                       np.array([2.0, 1.0]), 0.7, provenance={"recipe": "by hand", "commit": "x"},
                       arrays={"impute": np.array([0.1, 0.2])}, meta={"lower": 0.2})
    path = tmp_path / "m.npz"
    save_fitted(path, rec)
    back = load_fitted(path, features=("a", "b"))
    x = np.array([3.0, 4.0])
    assert back.logits(x) == pytest.approx((3 - 1) / 2 * 2 + 4 * -1 + 0.5)
    assert back.probability(x) == pytest.approx(sigmoid(-1.5))
    assert back.threshold == 0.7 and back.provenance["recipe"] == "by hand" and back.meta == {"lower": 0.2}
    assert back.arrays["impute"].tolist() == [0.1, 0.2] and back.classes == ()
    with pytest.raises(FittedModelError, match="other features.*refit it with `make it`"):
        load_fitted(path, features=("a", "c"), recipe="make it")
    np.savez(tmp_path / "old.npz", coef=np.zeros(2))
    with pytest.raises(FittedModelError, match="cannot read"):
        load_fitted(tmp_path / "old.npz")


@pytest.mark.parametrize("name", ["router_model.npz", "support_model.npz", "answer_cache_verifier.npz",
                                  "agent_grader.npz"])
def test_every_shipped_fitted_model_is_a_record_with_provenance(name: str) -> None:
    rec = load_fitted(DATA_DIR / name)
    assert {"recipe", "source", "split", "commit", "date"} <= set(rec.provenance), rec.provenance
    assert len(rec.features) == rec.coef.shape[0] and rec.features
