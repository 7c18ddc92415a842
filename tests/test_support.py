"""The support model of the offline answer: question terms keep the user's words, features against hand-computed
values, probabilities against a hand-set model, imputation for languages the embedder does not read, the Newton fit
against scikit-learn, and the shipped model file."""
from __future__ import annotations

import math

import numpy as np
import pytest

from core.support import (FEATURES, MODEL_FEATURES, SupportModel, claim_spans, fit_logistic, load_support_model,
                          question_terms, sentence_table)
from core.types import Candidate


def test_question_terms_keep_words_and_drop_the_possessive_s() -> None:
    qt = question_terms("What was the revenue of Corvane's Industrial Hardware division in Q2 2024?")
    assert "s" not in qt.terms
    assert qt.words["q2"] == "Q2" and qt.words["revenu"] == "revenue"  # stems map back to what the user typed
    assert {"q2", "2024", "industri", "hardwar"} <= qt.codes  # period words, numbers and names are specific
    assert "revenu" not in qt.codes
    ru = question_terms("На сколько выросла выручка офиса в третьем квартале 2024 года?")
    assert "2024" in ru.codes and ru.words["2024"] == "2024"


def _f(row_features: tuple[float, ...], name: str) -> float:
    return row_features[FEATURES.index(name)]


def test_features_read_the_title_as_context() -> None:
    c = Candidate("k1", "d1", "Revenue grew 2.8% over the previous quarter, to 18.1 million. Gross margin fell to 36%.",
                  0.9, 1, {"rerank_score": 0.8, "rank_bm25": 1, "rank_dense": 2})
    other = Candidate("k2", "d2", "The travel policy sets a daily meal allowance of 65 euros for trips abroad.",
                      0.5, 2, {"rerank_score": 0.6})
    t = sentence_table("What was revenue in Q2 2024?", [c, other], titles={"d1": "Quarterly report, Q2 2024"})
    first = t.rows[0]
    assert first.text.startswith("Revenue grew") and first.chunk_id == "k1"
    # terms revenu, q2, 2024; n = 2 passages; df: revenu 1 (k1 only), q2 1 and 2024 1 (via k1's title)
    assert _f(first.features, "sent_cov") == pytest.approx(1 / 3)  # equal idf: only 'revenue' is in the sentence
    assert _f(first.features, "ctx_cov") == 1.0 and _f(first.features, "missing") == 0.0
    assert _f(first.features, "spec_ctx") == 1.0 and _f(first.features, "spec_sent") == 0.0
    assert _f(first.features, "rerank") == pytest.approx(0.8) and _f(first.features, "rerank_gap") == pytest.approx(0.2)
    assert _f(first.features, "agree") == pytest.approx(0.5 / 1 + 0.5 / 2)
    assert math.isnan(_f(first.features, "li"))  # no scorer: imputed later
    meal = [r for r in t.rows if r.chunk_id == "k2"][0]
    assert _f(meal.features, "spec_ctx") == 0.0 and _f(meal.features, "rerank_rel") == pytest.approx(-0.2)


def test_question_level_missing_terms_and_claims() -> None:
    c = Candidate("k1", "d1", "# Heading\n\nThe FB-340 runs from -40 to +70 degrees in the field.\n\n| a | b |", 1.0, 1)
    assert [c.text[s:e] for s, e in claim_spans(c.text)] == ["The FB-340 runs from -40 to +70 degrees in the field."]
    t = sentence_table("What is the price of the FB-360?", [c])
    assert t.unseen and {question_terms("What is the price of the FB-360?").words[u] for u in t.unseen} == {
        "price", "FB-360"}
    assert _f(t.rows[0].features, "spec_missing") == pytest.approx(2 / 3)  # fb-360 and 360 unseen, fb seen


def _hand_model(**kw: float) -> SupportModel:
    coef = tuple(kw.get(f, 0.0) for f in FEATURES)
    return SupportModel(FEATURES, coef, -1.0, tuple(0.0 for _ in FEATURES), tuple(1.0 for _ in FEATURES),
                        {"li": 0.5, "li_rel": 0.0, "rerank": 0.5, "rerank_rel": 0.0, "rerank_gap": 0.0}, 0.5)


def test_probability_and_imputation_by_hand() -> None:
    m = _hand_model(ctx_cov=2.0, li=4.0)
    x = np.zeros((1, len(FEATURES)))
    x[0, FEATURES.index("ctx_cov")] = 1.0
    x[0, FEATURES.index("li")] = 0.9
    assert m.probability(x)[0] == pytest.approx(1 / (1 + math.exp(-(2.0 + 3.6 - 1.0))))
    # blind: li is replaced by its imputed 0.5 whatever the (meaningless) value was
    assert m.probability(x, blind=True)[0] == pytest.approx(1 / (1 + math.exp(-(2.0 + 2.0 - 1.0))))
    x[0, FEATURES.index("li")] = float("nan")
    assert m.probability(x)[0] == pytest.approx(1 / (1 + math.exp(-(2.0 + 2.0 - 1.0))))
    assert set(m.impute) == MODEL_FEATURES


def test_newton_fit_matches_scikit_learn() -> None:
    sklearn = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4))
    y = (x @ np.array([1.5, -2.0, 0.0, 0.5]) + 0.3 + rng.normal(scale=1.0, size=300) > 0).astype(float)
    coef, b = fit_logistic(x, y, l2=2.0)
    ref = sklearn.LogisticRegression(C=0.5, tol=1e-10, max_iter=1000).fit(x, y)  # C = 1 / l2
    assert np.allclose(coef, ref.coef_[0], atol=1e-4) and b == pytest.approx(ref.intercept_[0], abs=1e-4)


def test_model_file_round_trips_and_rejects_other_features() -> None:
    m = _hand_model(sent_cov=1.0)
    assert SupportModel.from_json(m.to_json()) == m
    bad = m.to_json() | {"features": list(FEATURES[:-1])}
    with pytest.raises(ValueError, match="bench/answer.py"):
        SupportModel.from_json(bad)


def test_shipped_model_is_fitted_data() -> None:
    m = load_support_model()
    assert m.features == FEATURES and 0.0 < m.threshold < 1.0
    assert "odd ids" in m.meta.get("fitted_on", "")  # fitted by bench/answer.py on one half, not by hand
