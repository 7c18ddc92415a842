"""Oracle tests for the retrieval stages: BM25 vs rank_bm25, dense top-k vs brute force, RRF on hand-made lists."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from rank_bm25 import BM25L, BM25Okapi, BM25Plus

from core.retrieve.bm25 import BM25Index, BM25Params, top_k_indices
from core.retrieve.dense import DenseIndex
from core.retrieve.fusion import rrf
from core.types import Candidate

DOCS = [
    "The gateway rejects TLS 1.0 handshakes since the March release.",
    "Set TLS_VERSION_MIN in gateway.toml to require a minimum protocol version.",
    "Quarterly revenue grew three percent while costs stayed flat.",
    "The retryBackoffMs setting controls how long the client waits between retries.",
    "Выручка компании выросла на пять процентов во втором квартале.",
    "Отчёт о выручке за квартал подготовлен финансовым отделом.",
]


def _pairs(index: BM25Index, query: str) -> np.ndarray:
    return index.scores(query)


@pytest.mark.parametrize(
    ("method", "oracle_cls", "kwargs"),
    [("robertson", BM25Okapi, {}), ("bm25l", BM25L, {"delta": 0.5}), ("bm25+", BM25Plus, {"delta": 1.0})],
)
def test_bm25_scores_match_rank_bm25(method: str, oracle_cls: type, kwargs: dict) -> None:
    params = BM25Params(k1=1.5, b=0.75, method=method)
    index = BM25Index([f"c{i}" for i in range(len(DOCS))], DOCS, params)
    tokenised = [index.tokens(d) for d in DOCS]
    # Robertson idf goes negative for terms in more than half the documents; rank_bm25 floors those with an epsilon
    # and bm25s with zero, so the oracle uses query terms that occur in at most two of the six documents.
    queries = ["gateway tls version", "retry backoff", "выручка квартал", "revenue grew"]
    oracle = oracle_cls(tokenised, k1=1.5, b=0.75, **kwargs)
    for q in queries:
        qt = index.tokens(q)
        ours = _pairs(index, q)
        theirs = np.asarray(oracle.get_scores(qt), dtype=np.float32)
        if method == "robertson":
            # bm25s leaves out the constant (k1 + 1) numerator factor of Okapi BM25: same ranking, scaled scores.
            np.testing.assert_allclose(ours * (1.5 + 1), theirs, rtol=1e-4, atol=1e-5, err_msg=q)
        else:
            # bm25s and rank_bm25 differ in the idf of BM25L/BM25+ by a constant per term; rankings must agree.
            assert list(np.argsort(-ours, kind="stable")[:2]) == list(np.argsort(-theirs, kind="stable")[:2]), q


def reference_bm25(docs: list[list[str]], query: list[str], method: str, k1: float, b: float,
                   delta: float = 0.5) -> np.ndarray:
    """BM25 written out term by term from the formulas bm25s implements (Kamphuis et al., ECIR 2020), independent of
    the product code: lucene idf ln(1 + (N - df + .5)/(df + .5)) with tf / (tf + k1 * norm) (no (k1 + 1) factor);
    BM25L idf ln((N + 1)/(df + .5)) with c = tf / norm, (k1 + 1)(c + delta)/(k1 + c + delta); BM25+ idf ln((N + 1)/df)
    with (k1 + 1) tf / (k1 * norm + tf) + delta; norm = 1 - b + b * |d| / avg|d|. BM25L and BM25+ also score a query
    term a document lacks (tf = 0); bm25s evaluates that term at the average length, and so does this reference.
    A query token outside the vocabulary adds nothing; a repeated query token counts each time."""
    n = len(docs)
    lavg = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    idf = {
        "lucene": lambda f: math.log(1 + (n - f + 0.5) / (f + 0.5)),
        "bm25l": lambda f: math.log((n + 1) / (f + 0.5)),
        "bm25+": lambda f: math.log((n + 1) / f),
    }[method]

    def tfc(tf: float, length: float) -> float:
        norm = 1 - b + b * length / lavg
        if method == "lucene":
            return tf / (k1 * norm + tf)
        if method == "bm25l":
            c = tf / norm
            return (k1 + 1) * (c + delta) / (k1 + c + delta)
        return (k1 + 1) * tf / (k1 * norm + tf) + delta

    out = []
    for d in docs:
        tf = Counter(d)
        total = 0.0
        for t in query:
            if t not in df:
                continue
            if tf[t]:
                total += idf(df[t]) * tfc(tf[t], len(d))
            elif method != "lucene":
                total += idf(df[t]) * tfc(0, lavg)
        out.append(total)
    return np.asarray(out)


def test_bm25_lucene_hand_computed() -> None:
    # N = 3, lengths 3, 1, 1 (avg 5/3). "zebra": df = 1, idf = ln(1 + 2.5/1.5) = ln(8/3) = 0.980829;
    # doc 0 has tf = 2: norm = 0.25 + 0.75 * 3/(5/3) = 1.6, tfc = 2 / (1.2 * 1.6 + 2) = 2/3.92 = 0.510204.
    index = BM25Index(["a", "b", "c"], ["zebra zebra yak", "yak", "lynx"], BM25Params())
    np.testing.assert_allclose(index.scores("zebra"), [0.500423, 0.0, 0.0], atol=1e-6)
    assert index.search("zebra", 3) == [("a", pytest.approx(0.500423, abs=1e-6))]


LONG_DOCS = DOCS + [
    "Gateway gateway gateway: the gateway proxies every request, logs the request, retries the request, and reports "
    "the gateway latency, the gateway errors and the gateway version in one long status line.",
]


@pytest.mark.parametrize("method", ["lucene", "bm25l", "bm25+"])
@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (1.5, 0.3)])
def test_bm25_variants_match_reference_formula(method: str, k1: float, b: float) -> None:
    index = BM25Index([f"c{i}" for i in range(len(LONG_DOCS))], LONG_DOCS, BM25Params(k1=k1, b=b, method=method))
    tokenised = [index.tokens(d) for d in LONG_DOCS]
    for q in ["gateway version", "gateway", "TLS gateway", "request request", "выручка квартал", "retry backoff",
              "unknownword gateway"]:
        expected = reference_bm25(tokenised, index.tokens(q), method, k1, b)
        np.testing.assert_allclose(index.scores(q), expected, rtol=1e-5, atol=1e-6, err_msg=f"{method} {q!r}")


def test_bm25l_and_bm25plus_differ_from_lucene_where_the_formulas_do() -> None:
    ids = [f"c{i}" for i in range(len(LONG_DOCS))]
    scores = {m: BM25Index(ids, LONG_DOCS, BM25Params(method=m)).scores("gateway") for m in ("lucene", "bm25l", "bm25+")}
    # Documents without the term: 0 under lucene, the same positive floor under BM25L/BM25+ (their lower bound).
    assert scores["lucene"][2] == 0.0
    assert scores["bm25l"][2] > 0 and scores["bm25l"][2] == pytest.approx(scores["bm25l"][3])
    assert scores["bm25+"][2] > 0 and scores["bm25+"][2] == pytest.approx(scores["bm25+"][3])
    # The long document that repeats the term gains more over the short one under BM25L than under lucene.
    gain = {m: scores[m][6] - scores[m][0] for m in scores}
    assert gain["bm25l"] > gain["lucene"] > 0


def test_bm25_finds_identifiers_and_parts() -> None:
    index = BM25Index([f"c{i}" for i in range(len(DOCS))], DOCS, BM25Params())
    assert index.search("TLS_VERSION_MIN", 1)[0][0] == "c1"
    assert index.search("retry backoff ms", 1)[0][0] == "c3"  # camelCase parts are indexed
    assert index.search("выручки", 2)[0][0] in {"c4", "c5"}  # Russian stems match inflections
    assert index.search("zzzz unknown", 3) == []
    plain = BM25Index([f"c{i}" for i in range(len(DOCS))], DOCS, BM25Params(split_identifiers=False))
    assert plain.search("backoff", 3) == []


def test_bm25_empty_index_and_query() -> None:
    assert BM25Index([], [], BM25Params()).search("anything", 5) == []
    index = BM25Index(["a"], ["some text"], BM25Params())
    assert index.search("the of", 5) == []  # only stop words


def test_top_k_is_stable_on_ties() -> None:
    s = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert top_k_indices(s, 3) == [1, 2, 4]
    assert top_k_indices(s, 10) == [1, 2, 4, 3, 0]
    assert top_k_indices(np.array([]), 3) == []


def test_dense_top_k_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    m = rng.normal(size=(500, 32)).astype(np.float32)
    ids = [f"c{i}" for i in range(500)]
    index = DenseIndex("m", ids, m)
    for _ in range(5):
        q = rng.normal(size=32).astype(np.float32)
        cos = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
        expected = [ids[i] for i in np.argsort(-cos)[:10]]
        got = index.search(q, 10)
        assert [cid for cid, _ in got] == expected
        np.testing.assert_allclose([s for _, s in got], np.sort(cos)[::-1][:10], rtol=1e-4)


def _cands(ids: list[str]) -> list[Candidate]:
    return [Candidate(cid, "d", cid, 0.0, r) for r, cid in enumerate(ids, start=1)]


def test_rrf_hand_computed() -> None:
    a = _cands(["x", "y", "z"])
    b = _cands(["y", "w"])
    fused = rrf([a, b], k=60, names=["bm25", "dense"])
    scores = {c.chunk_id: c.score for c in fused}
    assert scores["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["x"] == pytest.approx(1 / 61)
    assert scores["w"] == pytest.approx(1 / 62)
    assert [c.chunk_id for c in fused] == ["y", "x", "w", "z"]  # x/w tie at 1/61 vs 1/62: x first by score
    assert fused[0].meta["rank_bm25"] == 2 and fused[0].meta["rank_dense"] == 1
    assert fused[2].meta["rank_bm25"] is None
    assert [c.rank for c in fused] == [1, 2, 3, 4]


def test_weighted_rrf_and_dropped_list() -> None:
    a = _cands(["x", "y"])
    b = _cands(["y", "x"])
    assert rrf([a, b], k=1, weights=[3.0, 1.0])[0].chunk_id == "x"
    assert rrf([a, b], k=1, weights=[1.0, 3.0])[0].chunk_id == "y"
    only_a = rrf([a, _cands(["q"])], k=60, weights=[1.0, 0.0])
    assert [c.chunk_id for c in only_a] == ["x", "y"]  # a weight-0 list adds no members
    assert len(rrf([a, b], k=60, top=1)) == 1
    with pytest.raises(ValueError):
        rrf([a, b], weights=[1.0])


def test_best_passage_terms_by_hand() -> None:
    """The best chunk's share of the query terms, and every query term's idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
    with df = 0 for a term the corpus never uses."""
    import math

    from core.retrieve.bm25 import BM25Index

    index = BM25Index(["a", "b", "c"], ["pump station alarm", "pump station", "gateway alarm"])
    ev = index.best_passage_terms("pump alarm zebra")
    matched, idf = ev.matched, ev.idf
    assert matched == ("pump", "alarm") and ev.unknown == {"zebra"}  # chunk a holds both; b and c one each
    assert idf["pump"] == pytest.approx(math.log(1 + (3 - 2 + 0.5) / (2 + 0.5)))
    assert idf["alarm"] == pytest.approx(math.log(1 + 1.5 / 2.5))
    assert idf["zebra"] == pytest.approx(math.log(1 + 3.5 / 0.5))
    assert BM25Index([], []).best_passage_terms("pump").matched == ()
    zebra = index.best_passage_terms("zebra")
    assert zebra.matched == () and zebra.idf == {"zebra": pytest.approx(math.log(8.0))}
