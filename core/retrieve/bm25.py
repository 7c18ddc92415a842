"""BM25 over chunk texts: built with bm25s (fast sparse scoring), scored here over its per-term posting arrays, which
a fresh process loads from the index file of the corpus version (core/store/index_files.py) instead of rebuilding
them; tokenisation splits code identifiers and stems en/ru."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from core.store.index_files import decode_strings, encode_strings
from core.text import tokenize

FORMAT = 1  # the layout of to_arrays(); a file of another layout is not loaded


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


@dataclass(frozen=True)
class _Postings:
    """bm25s's eager index: per term (column) the chunks holding it (`indices`, `indptr` as in a CSC matrix) and
    their precomputed BM25 term scores (`data`); `nonoccurrence` only for BM25L / BM25+ (a score every chunk gets)."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    nonoccurrence: np.ndarray | None
    vocab: dict[str, int]


def _build(texts_tokens: list[list[str]], params: BM25Params) -> _Postings:
    import bm25s  # only a build needs it (and scipy behind it): a loaded index scores without

    retriever = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
    retriever.index(texts_tokens, show_progress=False)
    s = retriever.scores
    nnoc = retriever.nonoccurrence_array
    return _Postings(np.asarray(s["data"]), np.asarray(s["indices"]), np.asarray(s["indptr"]),
                     None if nnoc is None else np.asarray(nnoc), dict(retriever.vocab_dict))


class BM25Index:
    """An immutable BM25 index over (chunk_id, text) pairs. Rebuilt when the corpus version changes (bm25s has no
    incremental update); `to_arrays` / `from_arrays` carry it to the next process for the same version."""

    def __init__(self, chunk_ids: Sequence[str], texts: Sequence[str], params: BM25Params = BM25Params(), *,
                 _postings: _Postings | None = None) -> None:
        self.params = params
        self.chunk_ids = list(chunk_ids)
        self._vocab: frozenset[str] | None = None
        self._post = _postings
        if self._post is None and self.chunk_ids:
            self._post = _build([self.tokens(t) for t in texts], params)

    def to_arrays(self) -> dict[str, np.ndarray] | None:
        """The index as named arrays (core/store/index_files.py writes them); None for an empty index or ids or
        terms that cannot be written as lines."""
        if self._post is None:
            return None
        p = self._post
        terms = sorted(p.vocab, key=p.vocab.__getitem__)
        ids, words = encode_strings(self.chunk_ids), encode_strings(terms)
        if ids is None or words is None or [p.vocab[t] for t in terms] != list(range(len(terms))):
            return None
        out = {"format": np.array([FORMAT]), "params": np.frombuffer(repr(self.params).encode(), dtype=np.uint8),
               "counts": np.array([len(self.chunk_ids), len(terms)]), "chunk_ids": ids, "terms": words,
               "data": p.data, "indices": p.indices, "indptr": p.indptr}
        if p.nonoccurrence is not None:
            out["nonoccurrence"] = p.nonoccurrence
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], params: BM25Params) -> BM25Index | None:
        """The index `to_arrays` wrote, or None when the arrays are of another layout or other parameters."""
        try:
            if int(arrays["format"][0]) != FORMAT or arrays["params"].tobytes().decode() != repr(params):
                return None
            n_chunks, n_terms = (int(x) for x in arrays["counts"])
            chunk_ids = decode_strings(arrays["chunk_ids"], n_chunks)
            terms = decode_strings(arrays["terms"], n_terms)
            indptr = arrays["indptr"]
            if len(chunk_ids) != n_chunks or len(terms) != n_terms or not 0 < len(indptr) <= n_terms + 1:
                return None
            post = _Postings(arrays["data"], arrays["indices"], indptr, arrays.get("nonoccurrence"),
                             {t: i for i, t in enumerate(terms)})
        except (KeyError, ValueError, UnicodeDecodeError, IndexError):
            return None
        return cls(chunk_ids, (), params, _postings=post)

    def _scores_of(self, terms: Sequence[str]) -> np.ndarray:
        """bm25s's get_scores: the summed term scores of every chunk (a repeated term counts again)."""
        assert self._post is not None
        p = self._post
        columns = len(p.indptr) - 1  # bm25s's empty token has an id but no column
        ids = np.asarray([i for t in terms if (i := p.vocab.get(t, columns)) < columns], dtype=np.int64)
        scores = np.zeros(len(self.chunk_ids), dtype=np.float32)
        for start, end in zip(p.indptr[ids], p.indptr[ids + 1]):
            np.add.at(scores, p.indices[start:end], p.data[start:end])
        if p.nonoccurrence is not None and len(ids):
            scores += p.nonoccurrence[ids].sum()
        return scores

    def tokens(self, text: str) -> list[str]:
        return tokenize(text, split_identifiers=self.params.split_identifiers, stem=self.params.stem)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def vocabulary(self) -> frozenset[str]:
        """Every index term of the corpus (as `tokens` makes them): the router asks how much of a question it knows."""
        if self._post is None:
            return frozenset()
        if self._vocab is None:  # the index never changes, so the set is built once
            self._vocab = frozenset(t for t in self._post.vocab if t)
        return self._vocab

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for the query (zeros when no query token is in the vocabulary)."""
        if self._post is None:
            return np.zeros(0, dtype=np.float32)
        return self._scores_of(self.tokens(query))

    def best_passage_terms(self, query: str) -> PassageTerms:
        """What the query's best-scoring chunk holds of it (PassageTerms). The router asks this before it refuses a
        question as out of scope: one passage holding several of the question's rarer terms says the corpus is
        about it. One sparse score vector per query term: meant for that rare check, not for every query."""
        terms = list(dict.fromkeys(self.tokens(query)))
        n = len(self.chunk_ids)
        if not terms or self._post is None or n == 0:
            return PassageTerms((), {}, frozenset())
        vocab = self.vocabulary()
        # One dense score vector at a time, kept as the running total and the term's chunk positions: a long query
        # (up to limits.max_query_chars) on a large corpus never holds a vector per term.
        total = np.zeros(n, dtype=np.float32)
        holds: dict[str, np.ndarray] = {}
        for t in terms:
            if t in vocab:
                scores = self._scores_of([t])
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
