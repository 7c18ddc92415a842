"""The answerability scorer's inputs (train/answer_scorer.py): what it reads and how a long pair is cut; a missing
model file is a clear error. Training lives in bench/answer_scorer.py, never in tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from train.answer_scorer import MAX_TOKENS, encode_bottom, pair_text, score


def test_pair_text_puts_title_and_heading_before_the_sentence() -> None:
    assert pair_text("Staffing Plan 2024 / Project Bluefin", "Wen Li is the data engineer at 50%.") == (
        "Staffing Plan 2024 / Project Bluefin: Wen Li is the data engineer at 50%.")
    assert pair_text("", "The default is 5.") == "The default is 5."


def test_a_long_pair_loses_the_end_of_its_sentence_never_the_question() -> None:
    from core.answer.cache_pair import PairModelBits

    bits = PairModelBits.load(2)
    question = "Who is the data engineer for Project Heron?"
    long_text = "Staffing Plan / Project Bluefin: " + "Wen Li works on the pipeline and the dashboards. " * 30
    h, mask = encode_bottom(bits, question, [long_text, "Short sentence."])
    assert h.shape[0] == 2 and h.shape[1] == MAX_TOKENS and h.shape[2] == 384
    assert int(mask[0].sum()) == MAX_TOKENS and int(mask[1].sum()) < 30  # the short pair is padded, not cut
    ids = bits.tokenizer(question, long_text, truncation="only_second", max_length=MAX_TOKENS)["input_ids"]
    q_ids = bits.tokenizer(question)["input_ids"]
    assert ids[: len(q_ids)] == q_ids  # [CLS] question [SEP] whole


def test_a_missing_model_file_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="bench/answer_scorer.py --save"):
        score("What is the default?", ["The default is 5."], tmp_path / "none.npz")
    assert score("What is the default?", [], tmp_path / "none.npz").shape == (0,)
