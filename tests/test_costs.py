"""Price table and cost maths against the seeds' worked example and hand-computed cases."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.app.costs import (
    embedding_cache_rate,
    ledger_frame,
    prompt_cache_rate,
    query_stage_costs,
    run_summary,
)
from core.models.pricing import (
    estimate_document,
    load_prices,
    price_for,
    tokens_usd,
    uncached_usd,
    worst_call_usd,
)
from core.types import LedgerEntry, RunRecord, Usage

HAIKU = "claude-haiku-4-5"


def test_worked_example_50k_document_60_chunks_on_haiku() -> None:
    # Seeds: without caching 60 x 50,000 x $1/M = $3.00; with caching 1 write at 1.25x + 59 reads at 0.1x
    # = $0.0625 + $0.295; output 60 x ~80 tokens x $5/M = $0.024.
    est = estimate_document(50_000, 60, model=HAIKU, per_call_tokens=0, output_tokens=80)
    assert est.input_without_cache_usd == pytest.approx(3.00)
    assert est.input_with_cache_usd == pytest.approx(0.0625 + 0.295)
    assert est.input_with_cache_usd == pytest.approx(0.36, abs=0.003)  # the seeds round 0.3575 to 0.36
    assert est.output_usd == pytest.approx(0.024)
    assert est.cache_forms
    assert tokens_usd(HAIKU, cache_write_tokens=50_000) == pytest.approx(0.0625)
    assert 59 * tokens_usd(HAIKU, cache_read_tokens=50_000) == pytest.approx(0.295)


def test_price_table_is_data_with_the_documented_multipliers() -> None:
    table = load_prices()
    p = table[HAIKU]
    assert (p.input, p.output, p.min_cacheable_tokens) == (1.0, 5.0, 4096)
    assert (p.cache_write_5m, p.cache_write_1h, p.cache_read, p.batch) == (1.25, 2.0, 0.1, 0.5)
    assert table["claude-sonnet-4-6"].min_cacheable_tokens == 2048


def test_ttl_and_batch_multipliers() -> None:
    assert tokens_usd(HAIKU, cache_write_tokens=1_000_000, ttl="1h") == pytest.approx(2.0)
    assert tokens_usd(HAIKU, cache_write_tokens=1_000_000, ttl="5m") == pytest.approx(1.25)
    full = tokens_usd(HAIKU, input_tokens=1000, output_tokens=1000, cache_write_tokens=1000, cache_read_tokens=1000)
    half = tokens_usd(HAIKU, input_tokens=1000, output_tokens=1000, cache_write_tokens=1000, cache_read_tokens=1000,
                      batch=True)
    assert half == pytest.approx(full / 2)
    # 1000 in + 1000 out + 1000 write + 1000 read = (1000 + 1250 + 100) x $1/M + 1000 x $5/M
    assert full == pytest.approx((1000 + 1250 + 100) / 1e6 + 5000 / 1e6)


def test_usage_priced_and_uncached_comparison() -> None:
    u = Usage(input_tokens=100, output_tokens=50, cache_write_tokens=0, cache_read_tokens=10_000)
    assert uncached_usd(u, HAIKU) == pytest.approx(10_100 / 1e6 + 250 / 1e6)


def test_dated_ids_and_unknown_models() -> None:
    assert price_for("claude-haiku-4-5-20251001").model == HAIKU
    unknown = price_for("claude-imaginary-9")
    assert not unknown.known
    # never cheaper than any listed model, so estimates of unknown models do not come out low
    assert unknown.input == max(p.input for p in load_prices().values())


def test_short_document_gets_no_cache_discount() -> None:
    est = estimate_document(1_000, 5, model=HAIKU)
    assert not est.cache_forms
    assert est.input_with_cache_usd == est.input_without_cache_usd == pytest.approx(5_000 / 1e6)


def test_worst_call_bound_covers_every_outcome() -> None:
    prefix, call, out = 6_000, 200, 150
    bound = worst_call_usd(HAIKU, prefix, call, out)
    for outcome in ({"input_tokens": prefix + call}, {"input_tokens": call, "cache_write_tokens": prefix},
                    {"input_tokens": call, "cache_read_tokens": prefix}):
        assert tokens_usd(HAIKU, output_tokens=out, **outcome) <= bound + 1e-12


def _entry(run: str, inp: int, w: int, r: int, out: int, at: datetime) -> LedgerEntry:
    usd = tokens_usd(HAIKU, input_tokens=inp, cache_write_tokens=w, cache_read_tokens=r, output_tokens=out)
    unc = tokens_usd(HAIKU, input_tokens=inp + w + r, output_tokens=out)
    return LedgerEntry("context", HAIKU, inp, out, w, r, usd, unc, 10.0, "d1", run, created_at=at)


def test_run_summary_and_cache_rate_frames() -> None:
    t0 = datetime(2026, 1, 1, 10, 5)
    entries = [_entry("a", 10, 5000, 0, 20, t0), _entry("a", 10, 0, 5000, 20, t0 + timedelta(minutes=1)),
               _entry("b", 100, 0, 0, 20, t0 + timedelta(hours=2))]
    df = ledger_frame(entries)
    summary = run_summary(df).set_index("run_id")
    assert summary.loc["a", "calls"] == 2
    assert summary.loc["a", "cache_read_share"] == pytest.approx(5000 / 10020)
    assert summary.loc["b", "cache_read_share"] == 0
    assert summary.loc["a", "saved_usd"] == pytest.approx(summary.loc["a", "usd_uncached"] - summary.loc["a", "usd"])
    rate = prompt_cache_rate(df, "1h")
    assert list(rate.hit_rate.round(4)) == [round(5000 / 10020, 4), 0.0]
    emb = embedding_cache_rate([("embedding", 3, 1, "ingest", t0), ("embedding", 0, 4, "ingest", t0),
                                ("prompt", 9, 9, "x", t0)], "1h")
    assert list(emb.hit_rate) == [pytest.approx(3 / 8)]


def test_query_stage_costs_reads_trace_json() -> None:
    runs = [RunRecord("r1", "query", "q", "h", 1, {"stages": [
        {"stage": "bm25", "ms": 1.5, "usage": {"usd": 0.0}, "skipped": False},
        {"stage": "answer", "ms": 900.0, "usage": {"usd": 0.0123}, "skipped": False}]}, None)]
    df = query_stage_costs(runs)
    assert list(df.stage) == ["bm25", "answer"]
    assert df.usd.sum() == pytest.approx(0.0123)
