"""Late-interaction token vectors at corpus scale (issue #14 part 2): float16 storage scores like float32, the memory
cache never exceeds its byte budget, and a corpus far bigger than the cache is read from the store, one query per
candidate list, never recomputed and never held whole."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from core.cascade.rerank import LateInteractionReranker
from core.models.tokens import TokenCache, TokenMatrix, maxsim
from core.store import Store
from tests.cascade_fakes import ConceptWindowEncoder


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _matrix(n: int, dim: int = 8) -> TokenMatrix:
    return TokenMatrix(np.zeros(n, np.int32), np.zeros((n, dim), np.float16), np.zeros((n, 2), np.int32))


def test_token_cache_never_exceeds_its_byte_budget() -> None:
    budget = 10_000
    cache = TokenCache(max_bytes=budget)
    rng = np.random.default_rng(1)
    held: dict[str, TokenMatrix] = {}
    for i in range(400):
        tm = _matrix(int(rng.integers(0, 120)))
        cache.put("m", f"k{i}", tm)
        held[f"k{i}"] = tm
        assert cache.nbytes <= budget
        # the counter is the truth: it equals the bytes of what the cache still returns
        assert cache.nbytes == sum(t.nbytes for k, t in held.items() if cache.get("m", k) is not None)
    assert cache.get("m", "k399") is held["k399"]  # the newest fits, so it is kept
    big = _matrix(budget)  # 20 bytes a row: far over the budget alone
    before = len(cache)
    cache.put("m", "big", big)
    assert cache.get("m", "big") is None and len(cache) == before and cache.nbytes <= budget
    # replacing a key with a bigger matrix evicts older ones first, never the budget
    cache.put("m", "k399", _matrix(300))  # 8,400 bytes of 10,000
    assert cache.nbytes <= budget and cache.get("m", "k399") is not None


def test_float16_token_vectors_score_like_float32() -> None:
    rng = np.random.default_rng(7)
    dim = 384  # MiniLM's width: the float16 rounding error grows with it
    q = _unit(rng, 12, dim)
    w = rng.uniform(0.0, 6.0, size=12).astype(np.float32)
    docs32 = [_unit(rng, int(n), dim) for n in rng.integers(1, 300, size=50)]
    # half the docs contain a near-copy of a query token, so the best similarities are high, as in real reranking
    for d in docs32[::2]:
        d[0] = q[int(rng.integers(0, 12))] + 0.05 * _unit(rng, 1, dim)[0]
        d[0] /= np.linalg.norm(d[0])
    docs16 = [d.astype(np.float16) for d in docs32]
    s32, s16 = maxsim(q, w, docs32), maxsim(q, w, docs16)
    assert s16.dtype == np.float32 and s32.shape == (50,)
    assert float(np.abs(s16 - s32).max()) < 1e-3
    assert float(s32.max() - s32.min()) > 0.1  # the scores really differ, so the check means something


class CountingStore:
    """Wraps store.caches to count the token-vector reads (one per candidate list) and how many rows they ask for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: list[int] = []

    def cached_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = "default") -> dict:
        self.reads.append(len(hashes))
        return self.inner.cached_token_vectors(model_id, hashes, workspace)

    def cache_token_vectors(self, model_id: str, items: Mapping[str, Any], workspace: str = "default") -> None:
        self.inner.cache_token_vectors(model_id, items, workspace)


def test_a_corpus_bigger_than_the_cache_is_read_from_the_store_per_query(store: Store) -> None:
    words = [f"w{i}" for i in range(300)]
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(20, 60)))) for _ in range(120)]
    enc = ConceptWindowEncoder()
    sizes = [m.nbytes for m in LateInteractionReranker(enc).token_matrices(texts)[0]]
    budget = 5 * max(sizes)  # a few matrices, while the corpus is ~100 of them
    assert sum(sizes) > 15 * budget
    persist = CountingStore(store.caches)
    small = LateInteractionReranker(enc, cache=TokenCache(max_bytes=budget), persist=persist)
    small.warm(texts)
    big = LateInteractionReranker(ConceptWindowEncoder(), cache=TokenCache())  # everything in memory: the oracle
    query = "w1 w2 w3 w200"
    for start in (0, 50, 70):
        cands = texts[start:start + 50]
        windows_before, reads_before = enc.windows_encoded, len(persist.reads)
        got = small.score(query, cands)
        want = big.score(query, cands)
        np.testing.assert_allclose(got.scores, want.scores, atol=1e-6)
        assert small.cache.nbytes <= budget
        # the query itself may be encoded (it is never persisted); the 50 candidates are not
        assert enc.windows_encoded - windows_before <= 1 and got.computed == 0 and got.cache_hits == len(cands)
        assert len(persist.reads) - reads_before == 1  # one store read for the whole candidate list
