"""Top-k of a BM25 or dense index restricted to some of its rows (the collections a question is searched in)."""
from __future__ import annotations

import numpy as np

from core.retrieve.bm25 import BM25Index, top_k_indices
from core.retrieve.dense import DenseIndex


def bm25_in(index: BM25Index, query: str, k: int, mask: np.ndarray) -> list[tuple[str, float]]:
    """BM25Index.search over the rows `mask` allows; chunks with score 0 are not returned. The statistics (idf,
    average length) stay the whole index's, so a chunk scores the same whichever collections are searched."""
    s = index.scores(query)
    if not len(s):
        return []
    s = np.where(mask, s, 0.0)
    return [(index.chunk_ids[i], float(s[i])) for i in top_k_indices(s, k) if s[i] > 0]


def dense_in(index: DenseIndex, query_vec: np.ndarray, k: int, mask: np.ndarray) -> list[tuple[str, float]]:
    """Exact cosine top-k over the rows `mask` allows (an ANN graph, when attached, is not used: its candidates
    would be drawn from every collection)."""
    if not len(index.chunk_ids) or not mask.any():
        return []
    q = np.asarray(query_vec, dtype=np.float32).ravel()
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    sims = np.einsum("ij,j->i", index.matrix, q)
    sims = np.where(mask, sims, -np.inf)
    return [(index.chunk_ids[i], float(sims[i])) for i in top_k_indices(sims, min(k, int(mask.sum())))]
