"""BM25 over chunk texts with bm25s (fast sparse scoring); tokenisation splits code identifiers and stems en/ru."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import bm25s
import numpy as np

from core.text import tokenize


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.2
    b: float = 0.75
    method: str = "lucene"
    split_identifiers: bool = True
    stem: bool = True


@dataclass(frozen=True)
class PassageTerms:
    """A query against the corpus: its distinct index terms that the best-scoring chunk holds (query order), the
    idf ln(1 + (N - df + 0.5) / (df + 0.5)) of every distinct query term, and the terms the corpus never uses
    (df 0, so the largest idf a corpus of N chunks gives)."""

    matched: tuple[str, ...]
    idf: dict[str, float]
    unknown: frozenset[str]


class BM25Index:
    """An immutable BM25 index over (chunk_id, text) pairs. Rebuilt when the corpus version changes: bm25s has
    no incremental update, and a rebuild of 100k chunks takes seconds, only on the first query after a change."""

    def __init__(self, chunk_ids: Sequence[str], texts: Sequence[str], params: BM25Params = BM25Params()) -> None:
        self.params = params
        self.chunk_ids = list(chunk_ids)
        self._retriever: bm25s.BM25 | None = None
        self._vocab: frozenset[str] | None = None
        if self.chunk_ids:
            corpus = [self.tokens(t) for t in texts]
            self._retriever = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
            self._retriever.index(corpus, show_progress=False)

    def tokens(self, text: str) -> list[str]:
        return tokenize(text, split_identifiers=self.params.split_identifiers, stem=self.params.stem)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def vocabulary(self) -> frozenset[str]:
        """Every index term of the corpus (as `tokens` makes them): the router asks how much of a question it knows."""
        if self._retriever is None:
            return frozenset()
        if self._vocab is None:  # the index never changes, so the set is built once
            self._vocab = frozenset(t for t in self._retriever.vocab_dict if t)
        return self._vocab

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for the query (zeros when no query token is in the vocabulary)."""
        if self._retriever is None:
            return np.zeros(0, dtype=np.float32)
        toks = self.tokens(query)
        if not toks:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        return np.asarray(self._retriever.get_scores(toks), dtype=np.float32)

    def best_passage_terms(self, query: str) -> PassageTerms:
        """What the query's best-scoring chunk holds of it (PassageTerms). The router asks this before it refuses a
        question as out of scope: one passage holding several of the question's rarer terms says the corpus is
        about it. One sparse score vector per query term: meant for that rare check, not for every query."""
        terms = list(dict.fromkeys(self.tokens(query)))
        n = len(self.chunk_ids)
        if not terms or self._retriever is None or n == 0:
            return PassageTerms((), {}, frozenset())
        vocab = self.vocabulary()
        # One dense score vector at a time, kept as the running total and the term's chunk positions: a long query
        # (up to limits.max_query_chars) on a large corpus never holds a vector per term.
        total = np.zeros(n, dtype=np.float32)
        holds: dict[str, np.ndarray] = {}
        for t in terms:
            if t in vocab:
                scores = np.asarray(self._retriever.get_scores([t]), dtype=np.float32)
                holds[t] = np.flatnonzero(scores)
                total += scores
        df = {t: len(holds[t]) if t in holds else 0 for t in terms}
        idf = {t: float(np.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5))) for t in terms}
        unknown = frozenset(t for t in terms if t not in holds)
        if not holds:
            return PassageTerms((), idf, unknown)
        best = int(np.argmax(total))
        return PassageTerms(tuple(t for t in terms if t in holds and _sorted_has(holds[t], best)), idf, unknown)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-k (chunk_id, score), best first; chunks with score 0 (no shared term) are not returned."""
        s = self.scores(query)
        return [(self.chunk_ids[i], float(s[i])) for i in top_k_indices(s, k) if s[i] > 0]


def _sorted_has(positions: np.ndarray, i: int) -> bool:
    """Whether a sorted index array (np.flatnonzero's) holds i."""
    at = int(np.searchsorted(positions, i))
    return at < len(positions) and int(positions[at]) == i


def top_k_indices(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k largest scores, best first, ties broken by index for determinism."""
    n = len(scores)
    if n == 0 or k <= 0:
        return []
    k = min(k, n)
    part = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    return sorted(part.tolist(), key=lambda i: (-float(scores[i]), i))
