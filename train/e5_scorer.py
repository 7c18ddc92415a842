"""An experimental answerability signal for the support model's fit (bench/answer.py, bench/answer_public.py
`--scorer e5`): the cosine of a question and a candidate sentence (with its title and heading) under
multilingual-e5-small. The engine and its vectors are core's (core.answer.e5_scorer, which the cross-lingual answer
reads); no shipped support model reads this signal (core/models/data/support_model.npz has no scorer): a fit that
finds it worth its cost would bring it into the model that reads it."""
from __future__ import annotations

from core.answer.e5_scorer import NAME, available, pair_text, row_scorer, score

__all__ = ["NAME", "available", "pair_text", "row_scorer", "score"]
