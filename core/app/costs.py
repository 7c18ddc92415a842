"""Ledger and cost frames for the views: runs, prompt-cache and embedding-cache rates, per-stage query costs."""
from __future__ import annotations

from datetime import datetime
from typing import Iterable, Sequence

import pandas as pd

from core.types import LedgerEntry, RunRecord

LEDGER_COLUMNS = ["created_at", "purpose", "model", "ref_id", "run_id", "input_tokens", "cache_write_tokens",
                  "cache_read_tokens", "output_tokens", "usd", "usd_uncached", "latency_ms", "batch", "cache_ttl",
                  "note", "usage_flag"]


def ledger_frame(entries: Iterable[LedgerEntry]) -> pd.DataFrame:
    rows = [{c: getattr(e, c) for c in LEDGER_COLUMNS} for e in entries]
    return pd.DataFrame(rows, columns=LEDGER_COLUMNS)


def cache_read_share(input_tokens: float, cache_write_tokens: float, cache_read_tokens: float) -> float:
    """Share of all prompt tokens that were read from the prompt cache."""
    total = input_tokens + cache_write_tokens + cache_read_tokens
    return cache_read_tokens / total if total else 0.0


def run_summary(ledger: pd.DataFrame) -> pd.DataFrame:
    """Per run (one context build, one query): calls, tokens by category, cache-read share, dollars with and
    without caching."""
    cols = ["run_id", "purpose", "started", "calls", "input_tokens", "cache_write_tokens", "cache_read_tokens",
            "output_tokens", "cache_read_share", "usd", "usd_uncached", "saved_usd"]
    if ledger.empty:
        return pd.DataFrame(columns=cols)
    g = ledger.groupby(["run_id", "purpose"], sort=False).agg(
        started=("created_at", "min"), calls=("model", "size"), input_tokens=("input_tokens", "sum"),
        cache_write_tokens=("cache_write_tokens", "sum"), cache_read_tokens=("cache_read_tokens", "sum"),
        output_tokens=("output_tokens", "sum"), usd=("usd", "sum"), usd_uncached=("usd_uncached", "sum"),
    ).reset_index()
    g["cache_read_share"] = [cache_read_share(a, b, c) for a, b, c in
                             zip(g.input_tokens, g.cache_write_tokens, g.cache_read_tokens)]
    g["saved_usd"] = g.usd_uncached - g.usd
    return g.sort_values("started", ascending=False)[cols].reset_index(drop=True)


def prompt_cache_rate(ledger: pd.DataFrame, freq: str = "1h") -> pd.DataFrame:
    """Prompt-cache read share of prompt tokens per time bucket."""
    if ledger.empty:
        return pd.DataFrame(columns=["time", "cache", "hit_rate", "volume"])
    df = ledger.assign(time=pd.to_datetime(ledger.created_at).dt.floor(freq))
    g = df.groupby("time").agg(i=("input_tokens", "sum"), w=("cache_write_tokens", "sum"),
                               r=("cache_read_tokens", "sum")).reset_index()
    g["hit_rate"] = [cache_read_share(a, b, c) for a, b, c in zip(g.i, g.w, g.r)]
    g["volume"] = g.i + g.w + g.r
    g["cache"] = "prompt cache (tokens)"
    return g[["time", "cache", "hit_rate", "volume"]]


def embedding_cache_rate(events: Sequence[tuple[str, int, int, str, datetime]], freq: str = "1h") -> pd.DataFrame:
    """Embedding-cache hit rate per time bucket from cache events (cache, hits, misses, purpose, created_at), and
    beside it the share of an edited document's llm contexts its unchanged chunks kept (context.reindex)."""
    labels = {"embedding": "embedding cache (texts)", "llm_context": "llm contexts kept across edits"}
    rows = [(at, labels[cache], h, m) for cache, h, m, _, at in events if cache in labels]
    if not rows:
        return pd.DataFrame(columns=["time", "cache", "hit_rate", "volume"])
    df = pd.DataFrame(rows, columns=["at", "cache", "hits", "misses"])
    df["time"] = pd.to_datetime(df["at"]).dt.floor(freq)
    g = df.groupby(["time", "cache"]).agg(hits=("hits", "sum"), misses=("misses", "sum")).reset_index()
    g["volume"] = g.hits + g.misses
    g["hit_rate"] = [h / v if v else 0.0 for h, v in zip(g.hits, g.volume)]
    return g[["time", "cache", "hit_rate", "volume"]]


def query_stage_costs(runs: Sequence[RunRecord]) -> pd.DataFrame:
    """Dollars and milliseconds per stage per logged query, from the run log (each run's trace JSON)."""
    rows = []
    for run in runs:
        trace = run.trace or {}
        for s in trace.get("stages", []):
            usage = s.get("usage") or {}
            rows.append({"run_id": run.run_id, "created_at": run.created_at, "query": run.query,
                         "stage": s.get("stage"), "ms": float(s.get("ms") or 0.0), "usd": float(usage.get("usd") or 0.0),
                         "skipped": bool(s.get("skipped"))})
    return pd.DataFrame(rows, columns=["run_id", "created_at", "query", "stage", "ms", "usd", "skipped"])
