"""Exact cosine top-k over the active model's vectors (numpy matrix kept in step with the store)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

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
        # the build's peak memory (bench/query.py: +294 MiB at 100k x 384 vs a 146 MiB matrix).
        self.matrix = np.asarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32) if matrix.size else matrix

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def search(self, query_vec: np.ndarray, k: int) -> list[tuple[str, float]]:
        if not len(self.chunk_ids):
            return []
        q = query_vec.astype(np.float32).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        # einsum runs on the calling thread; `@` hands a matrix-vector product to BLAS worker threads, which on
        # 2 cores right after torch embedded the query wait for a core: median 2.5 ms for `@` vs 0.75 ms at 10k
        # chunks (31 vs 0.6 ms on a busy machine), even at 100k (bench/query.py "dense after embed", bench/README.md).
        sims = np.einsum("ij,j->i", self.matrix, q)
        return [(self.chunk_ids[i], float(sims[i])) for i in top_k_indices(sims, k)]
