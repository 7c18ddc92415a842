"""The router's corpus feature: how much of a question the loaded corpus even knows about."""
from __future__ import annotations

from typing import Collection, Sequence


def coverage(tokens: Sequence[str], vocabulary: Collection[str]) -> float:
    """Share of the question's index terms (tokenised as BM25 tokenises) present in the corpus vocabulary.
    A question that matches nothing in the corpus is unlikely to be a factoid about it. No terms -> 0."""
    if not tokens:
        return 0.0
    return sum(t in vocabulary for t in tokens) / len(tokens)
