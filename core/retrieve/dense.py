"""Exact cosine top-k over the active model's vectors (numpy matrix kept in step with the store)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from core.retrieve.ann import AnnIndex, candidates
from core.retrieve.bm25 import top_k_indices


class DenseIndex:
    """Row-normalised matrix of one model's vectors; a query is one matrix-vector product."""

    def __init__(self, model_id: str, chunk_ids: Sequence[str], matrix: np.ndarray) -> None:
        self.model_id = model_id
        self.chunk_ids = list(chunk_ids)
        if len(self.chunk_ids) and matrix.shape[0] != len(self.chunk_ids):
            raise ValueError("one vector per chunk id expected")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True) if matrix.size else np.ones((0, 1))
        # asarray, not astype: the quotient is already float32 for float32 input, and a second full copy doubled
        # the build's peak memory (bench/query.py measures it).
        self.matrix = np.asarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32) if matrix.size else matrix

        self.ann: AnnIndex | None = None  # set by attach_ann above core.retrieve.ann's size threshold
        self._key_rows = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def attach_ann(self, ann: AnnIndex) -> None:
        """Search through the graph from now on: it proposes candidates, this matrix scores them exactly."""
        row = {cid: i for i, cid in enumerate(self.chunk_ids)}
        self._key_rows = np.array([row.get(cid, -1) if cid is not None else -1 for cid in ann.ids], dtype=np.int64)
        self.ann = ann

    def search(self, query_vec: np.ndarray, k: int) -> list[tuple[str, float]]:
        if not len(self.chunk_ids):
            return []
        q = query_vec.astype(np.float32).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        keys = None
        if self.ann is not None:
            try:
                keys = self.ann.search(q, candidates(k))
            except RuntimeError:  # hnswlib found fewer than asked (a graph thinned by removals): scan exactly
                keys = None
        if keys is not None:
            rows = self._key_rows[keys[keys < len(self._key_rows)]]
            rows = rows[rows >= 0]
            sims = np.einsum("ij,j->i", self.matrix[rows], q)
            return [(self.chunk_ids[rows[i]], float(sims[i])) for i in top_k_indices(sims, k)]
        # einsum runs on the calling thread; `@` hands a matrix-vector product to BLAS worker threads, which on
        # few cores right after torch embedded the query wait for a core: slower at every size measured
        # (bench/query.py "dense after embed").
        sims = np.einsum("ij,j->i", self.matrix, q)
        return [(self.chunk_ids[i], float(sims[i])) for i in top_k_indices(sims, k)]


# A corpus is mixed when a second language holds at least this share of its chunks: a design bound (one stray
# foreign chunk does not make a corpus mixed), not a fitted value.
MIXED_SHARE = 0.1


@dataclass(frozen=True)
class MultilingualPlan:
    """Whether the multilingual dense list runs for a question, and the line the trace shows either way."""

    run: bool
    note: str
    cross_lingual: bool = False  # the question's language is none of the corpus's


def corpus_languages(counts: Mapping[str, int]) -> list[str]:
    """The corpus's languages, most chunks first; those under MIXED_SHARE of the chunks are left out."""
    total = sum(counts.values())
    return [lang for lang, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            if total and n >= MIXED_SHARE * total]


def multilingual_plan(mode: str, question_lang: str, counts: Mapping[str, int],
                      main_languages: frozenset[str] | None) -> MultilingualPlan:
    """embedding.multilingual for one question: 'off' never, 'on' always; 'auto' when the question's language is
    not the corpus's (main) language, when the corpus is mixed, or when the main embedder cannot read the question."""
    langs = corpus_languages(counts)
    corpus = "+".join(langs) if langs else "empty"
    facts = f"question {question_lang}, corpus {corpus}"
    cross = bool(langs) and question_lang not in langs
    if mode == "off":
        return MultilingualPlan(False, "embedding.multilingual = off", cross)
    if mode == "on":
        return MultilingualPlan(True, f"dense·e5: {facts} (embedding.multilingual = on)", cross)
    reasons = []
    if cross:
        reasons.append("the question's language is not the corpus's")
    if len(langs) > 1:
        reasons.append("the corpus is mixed")
    if main_languages is not None and question_lang not in main_languages:
        reasons.append(f"the main embedder reads {', '.join(sorted(main_languages))} only")
    if not reasons:
        return MultilingualPlan(False, f"embedding.multilingual = auto: {facts}, one language; the main embedder "
                                       "reads it", cross)
    return MultilingualPlan(True, f"dense·e5: {facts} ({'; '.join(reasons)})", cross)
