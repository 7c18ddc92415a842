"""Counters read off a trace: per-stage ms and $, token and cache figures, session totals; the CLI JSON shape."""
from __future__ import annotations

import pytest

from core.answer.cache import CacheInfo
from core.app.counters import Counters, counters
from core.types import StageResult, Trace, Usage


def _trace(answer_verdict: str | None = None) -> Trace:
    stages = []
    if answer_verdict is not None:
        stages.append(StageResult("answer_cache", (), 2.0, info=CacheInfo(answer_verdict, None, None, "", 0, None,
                                                                           0.0, 0.0, embed_cache_misses=1)))
    stages += [
        StageResult("bm25", (), 3.0, info={"indexed": 10}),
        StageResult("dense", (), 11.0, info={"embed_cache_misses": 0}),
        StageResult("graph_local", skipped="graph.enabled = false"),
        StageResult("rerank", (), 40.0, Usage(1200, 30, 0, 800, 0.0021, 1), info={"cache_hits": 25, "computed": 5}),
        StageResult("mmr", (), 4.0, info={"embed_cache_hits": 9, "embed_cache_misses": 1}),
        StageResult("answer", (), 6.0, Usage(500, 80, 300, 0, 0.0009, 1)),
    ]
    return Trace("q", "h", 1, tuple(stages))


def test_one_query_adds_up_by_hand() -> None:
    c = counters(_trace())
    assert c.queries == 1 and c.ms == pytest.approx(3 + 11 + 40 + 4 + 6)
    assert c.usd == pytest.approx(0.0021 + 0.0009)
    assert (c.tokens_in, c.tokens_out) == (1700, 110)
    assert (c.cache_read_tokens, c.cache_write_tokens) == (800, 300)
    assert (c.embed_hits, c.embed_misses) == (9, 1)
    assert (c.token_hits, c.token_computed) == (25, 5)
    assert not c.answer_cache_seen and c.to_dict()["answer_cache"] is None
    by = {s.stage: s for s in c.stages}
    assert by["graph_local"].ran is False and by["graph_local"].ms == 0.0
    assert by["rerank"].usd == pytest.approx(0.0021) and by["rerank"].calls == 1


def test_answer_cache_counts_and_session_totals() -> None:
    hit, miss = counters(_trace("hit")), counters(_trace("miss"))
    assert (hit.answer_hits, hit.answer_misses, hit.answer_cache_seen) == (1, 0, True)
    assert hit.embed_misses == 2  # the query encode in the answer-cache stage, plus MMR's one miss
    total = Counters() + hit + miss + counters(_trace())
    assert total.queries == 3 and (total.answer_hits, total.answer_misses) == (1, 1)
    assert total.usd == pytest.approx(3 * 0.0030) and total.token_hits == 75
    rerank = next(s for s in total.stages if s.stage == "rerank")
    assert rerank.ms == pytest.approx(120.0) and rerank.calls == 3


def test_json_shape_is_stable() -> None:
    d = counters(_trace("hit")).to_dict()
    assert set(d) == {"queries", "ms", "usd", "tokens_in", "tokens_out", "prompt_cache", "embedding_cache",
                      "token_vector_cache", "answer_cache", "stages"}
    assert d["answer_cache"] == {"hits": 1, "misses": 0, "guarded_misses": 0, "saved_ms": 0.0, "saved_usd": 0.0}
    assert d["prompt_cache"] == {"read_tokens": 800, "write_tokens": 300}
    assert [s["stage"] for s in d["stages"]][:2] == ["answer_cache", "bm25"]
    assert d["stages"][4] == {"stage": "rerank", "ran": True, "ms": 40.0, "usd": 0.0021, "tokens_in": 1200,
                              "tokens_out": 30, "calls": 1, "cache_read_tokens": 800, "cache_write_tokens": 0}
