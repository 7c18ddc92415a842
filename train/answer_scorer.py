"""An experimental answerability scorer for the support model's fit (bench/answer.py `--scorer minilm`): does this
sentence, read under its document title and heading, answer this question? The bundled all-MiniLM-L6-v2 read as a
cross-encoder, its top layers fine-tuned by bench/answer_scorer.py (weights in answer_scorer.npz, over the bundled
base, loaded by path, never from a hub).

No shipped model reads it (core/models/data/support_model.npz has no scorer and no answer_scorer.npz ships), so it
left core/answer/ (#41): a fit that finds it worth its cost would bring it back with the model that reads it. torch
loads lazily, on the first score.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.answer.cache_pair import encode_bottom_pairs, load_top_layers
from core.models import DATA_DIR
from core.answer.e5_scorer import pair_text  # the one 'title / heading: sentence' form both scorers read

SCORER_PATH = DATA_DIR / "answer_scorer.npz"
# question + title/heading + sentence; a longer pair loses the end of its sentence, never the question
MAX_TOKENS = 96


def encode_bottom(bits: Any, question: str, texts: Sequence[str]) -> tuple[Any, Any]:
    """Hidden states below the trained layers for [CLS] question [SEP] text [SEP], one row per text, and the mask."""
    return encode_bottom_pairs(bits, [(question, t) for t in texts], truncation="only_second", max_length=MAX_TOKENS)


@lru_cache(maxsize=2)
def load_scorer(path: Path = SCORER_PATH) -> tuple[Any, Any] | None:
    """(base bits, trained top) of the shipped scorer over the bundled base, or None when the file is absent."""
    return load_top_layers(path)


def score(question: str, texts: Sequence[str], path: Path = SCORER_PATH) -> np.ndarray:
    """The scorer's logit per text (higher: more likely to answer the question). Raises when no scorer ships."""
    if not texts:
        return np.zeros(0)
    import torch

    loaded = load_scorer(path)
    if loaded is None:
        raise FileNotFoundError(f"{path.name} is missing: run bench/answer_scorer.py --save")
    bits, pm = loaded
    with torch.no_grad():
        h, mask = encode_bottom(bits, question, texts)
        return pm.logits_from_states(h, mask).numpy().astype(np.float64)


def row_scorer(question: str, rows: Sequence[Any], path: Path = SCORER_PATH) -> Any:
    """A core.answer.support.RowScorer over a sentence table's rows (each with .context and .text)."""

    def by_index(idx: Sequence[int]) -> np.ndarray:
        return score(question, [pair_text(rows[i].context, rows[i].text) for i in idx], path)

    return by_index


def scorer_meta(path: Path = SCORER_PATH) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as z:
        return {"top": int(z["top"]), "pooling": str(z["pooling"]),
                "hyper": json.loads(str(z["hyper"])) if "hyper" in z.files else None,
                "fitted_on": str(z["fitted_on"]) if "fitted_on" in z.files else None}
