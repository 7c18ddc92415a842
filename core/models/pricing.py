"""Dollars from tokens: the price table (data in core/models/data/prices.toml) and cost estimates of model calls."""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal, Mapping, Sequence

from core.models import DATA_DIR
from core.types import Usage

PRICES_FILE = DATA_DIR / "prices.toml"
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
