"""Dollars from tokens: the price table (data in core/prices.toml), cost estimates, and ledger/cost frames for the views."""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

import pandas as pd

from core.records import RunRecord
from core.types import Usage

PRICES_FILE = Path(__file__).with_name("prices.toml")
Ttl = Literal["5m", "1h"]


@dataclass(frozen=True)
class ModelPrice:
    """One model's list prices (USD per million tokens) and cache rules. `known` is False for a model that is not
    in the table: it is then priced like the most expensive listed model, so an estimate never comes out low."""

    model: str
    input: float
    output: float
    min_cacheable_tokens: int
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    batch: float
    known: bool = True

    def write_multiplier(self, ttl: Ttl) -> float:
        return self.cache_write_1h if ttl == "1h" else self.cache_write_5m


@lru_cache(maxsize=4)
def load_prices(path: str | None = None) -> dict[str, ModelPrice]:
    raw = tomllib.loads(Path(path or PRICES_FILE).read_text())
    mult = raw["multipliers"]
    table: dict[str, ModelPrice] = {}
    for name, m in raw["models"].items():
        table[name] = ModelPrice(
            name, float(m["input"]), float(m["output"]), int(m["min_cacheable_tokens"]),
            float(m.get("cache_write_5m", mult["cache_write_5m"])), float(m.get("cache_write_1h", mult["cache_write_1h"])),
            float(m.get("cache_read", mult["cache_read"])), float(m.get("batch", mult["batch"])),
        )
    return table


def price_for(model: str, table: Mapping[str, ModelPrice] | None = None) -> ModelPrice:
    """Price of a model id; dated ids ("claude-haiku-4-5-20251001") resolve to their alias."""
    table = load_prices() if table is None else table
    if model in table:
        return table[model]
    for name in sorted(table, key=len, reverse=True):
        if model.startswith(name + "-"):
            return table[name]
    worst = max(table.values(), key=lambda p: (p.input, p.output))
    return ModelPrice(model, worst.input, worst.output, max(p.min_cacheable_tokens for p in table.values()),
                      worst.cache_write_5m, worst.cache_write_1h, worst.cache_read, worst.batch, known=False)


def tokens_usd(
    model: str | ModelPrice, *, input_tokens: int = 0, output_tokens: int = 0, cache_write_tokens: int = 0,
    cache_read_tokens: int = 0, ttl: Ttl = "5m", batch: bool = False,
) -> float:
    """Dollars for one call's token counts. `input_tokens` are the uncached input tokens (the API's own meaning)."""
    p = model if isinstance(model, ModelPrice) else price_for(model)
    per_in = p.input / 1e6
    usd = (input_tokens * per_in + cache_write_tokens * per_in * p.write_multiplier(ttl)
           + cache_read_tokens * per_in * p.cache_read + output_tokens * p.output / 1e6)
    return usd * (p.batch if batch else 1.0)


def usage_usd(usage: Usage, model: str, *, ttl: Ttl = "5m", batch: bool = False) -> float:
    return tokens_usd(model, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      cache_write_tokens=usage.cache_write_tokens, cache_read_tokens=usage.cache_read_tokens,
                      ttl=ttl, batch=batch)


def uncached_usd(usage: Usage, model: str, *, batch: bool = False) -> float:
    """What the same call would have cost with no prompt caching: every input token at the base input price."""
    all_in = usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens
    return tokens_usd(model, input_tokens=all_in, output_tokens=usage.output_tokens, batch=batch)


# -- estimates ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DocEstimate:
    """Cost of contextualising one document: one call per chunk with the document as the cached prefix."""

    doc_id: str
    prefix_tokens: int  # instructions + document: the part behind the cache breakpoint
    calls: int
    input_with_cache_usd: float
    input_without_cache_usd: float
    output_usd: float
    cache_forms: bool  # False when the prefix is below the model's minimum cacheable length

    @property
    def with_cache_usd(self) -> float:
        return self.input_with_cache_usd + self.output_usd

    @property
    def without_cache_usd(self) -> float:
        return self.input_without_cache_usd + self.output_usd


def estimate_document(
    prefix_tokens: int, n_chunks: int, *, model: str, per_call_tokens: int | Sequence[int] = 0,
    output_tokens: int = 80, ttl: Ttl = "5m", batch: bool = False, doc_id: str = "",
) -> DocEstimate:
    """First call writes the prefix to the cache (1.25x at 5 min, 2x at 1 h), the other n-1 read it (0.1x);
    `per_call_tokens` (the chunk and the question around it) is never cached. Below the model's minimum
    cacheable length the cache does not form and every call pays the full prefix."""
    p = price_for(model)
    per_call = list(per_call_tokens) if not isinstance(per_call_tokens, int) else [per_call_tokens] * n_chunks
    fresh = sum(per_call)
    forms = prefix_tokens >= p.min_cacheable_tokens
    without = tokens_usd(p, input_tokens=n_chunks * prefix_tokens + fresh, batch=batch)
    if forms and n_chunks:
        with_cache = tokens_usd(p, input_tokens=fresh, cache_write_tokens=prefix_tokens,
                                cache_read_tokens=(n_chunks - 1) * prefix_tokens, ttl=ttl, batch=batch)
    else:
        with_cache = without
    out = tokens_usd(p, output_tokens=n_chunks * output_tokens, batch=batch)
    return DocEstimate(doc_id, prefix_tokens, n_chunks, with_cache, without, out, forms)


@dataclass(frozen=True)
class RunEstimate:
    model: str
    docs: tuple[DocEstimate, ...]
    batch: bool = False
    priced: bool = True  # False when the model is not in the price table (priced at the most expensive one)

    @property
    def calls(self) -> int:
        return sum(d.calls for d in self.docs)

    @property
    def with_cache_usd(self) -> float:
        return sum(d.with_cache_usd for d in self.docs)

    @property
    def without_cache_usd(self) -> float:
        return sum(d.without_cache_usd for d in self.docs)

    @property
    def short_docs(self) -> list[DocEstimate]:
        return [d for d in self.docs if not d.cache_forms and d.calls]


def fmt_usd(usd: float) -> str:
    """Dollars with enough digits to tell budgets apart: "$0.0030", "$0.00012", "$1.25" (never "$0.00" for 0.003)."""
    if usd == 0:
        return "$0"
    if abs(usd) >= 1:
        return f"${usd:,.2f}"
    decimals = max(4, 1 - math.floor(math.log10(abs(usd))))
    return f"${usd:.{decimals}f}"


def worst_call_usd(model: str, prefix_tokens: int, call_tokens: int, max_output_tokens: int, *,
                   ttl: Ttl = "5m", batch: bool = False) -> float:
    """Upper bound of one call: the whole prompt at the cache-write price (never cheaper than a miss or a read)
    plus the full output allowance. A budget checked against this bound can never be overshot."""
    p = price_for(model)
    mult = max(1.0, p.write_multiplier(ttl))
    return tokens_usd(p, input_tokens=math.ceil((prefix_tokens + call_tokens) * mult),
                      output_tokens=max_output_tokens, batch=batch)


# -- the usage ledger -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LedgerEntry:
    """One LLM call as the usage_ledger table stores it."""

    purpose: str  # "context", "answer", "judge", ...
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    usd: float = 0.0
    usd_uncached: float = 0.0
    latency_ms: float = 0.0
    ref_id: str = ""  # document or query id
    run_id: str = ""  # groups the calls of one context build or one query
    batch: bool = False
    cache_ttl: str = "5m"
    note: str = ""
    workspace: str = "default"
    created_at: datetime | None = field(default=None, compare=False)

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cache_write_tokens, self.cache_read_tokens,
                     self.usd, 1)


LEDGER_COLUMNS = ["created_at", "purpose", "model", "ref_id", "run_id", "input_tokens", "cache_write_tokens",
                  "cache_read_tokens", "output_tokens", "usd", "usd_uncached", "latency_ms", "batch", "cache_ttl",
                  "note"]


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
    """Embedding-cache hit rate per time bucket from cache events (cache, hits, misses, purpose, created_at)."""
    rows = [(at, h, m) for cache, h, m, _, at in events if cache == "embedding"]
    if not rows:
        return pd.DataFrame(columns=["time", "cache", "hit_rate", "volume"])
    df = pd.DataFrame(rows, columns=["at", "hits", "misses"])
    df["time"] = pd.to_datetime(df["at"]).dt.floor(freq)
    g = df.groupby("time").agg(hits=("hits", "sum"), misses=("misses", "sum")).reset_index()
    g["volume"] = g.hits + g.misses
    g["hit_rate"] = [h / v if v else 0.0 for h, v in zip(g.hits, g.volume)]
    g["cache"] = "embedding cache (texts)"
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
