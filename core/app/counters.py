"""Per-query counters read off a Trace: ms and $ per stage, tokens, cache hits and misses, and session totals."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from core.answer.cache import CacheInfo
from core.types import StageResult, Trace

# Trace info keys the stages use for their caches (see core/pipeline.py): the counters only read them, so a stage
# that reports nothing counts as zero rather than being guessed at.
EMBED_HITS, EMBED_MISSES = "embed_cache_hits", "embed_cache_misses"
TOKEN_HITS, TOKEN_COMPUTED = "cache_hits", "computed"  # the late-interaction reranker's token-vector cache
ANSWER_CACHE_STAGE = "answer_cache"


@dataclass(frozen=True)
class StageCounters:
    """One stage's cost line. `ran` is False for a skipped stage (its numbers are all zero)."""

    stage: str
    ran: bool
    ms: float = 0.0
    usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    calls: int = 0


@dataclass(frozen=True)
class Counters:
    """What one query (or a session of them, via `+`) cost and how often the caches answered."""

    stages: tuple[StageCounters, ...] = ()
    queries: int = 0
    ms: float = 0.0
    usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0  # prompt cache (LLM calls)
    cache_write_tokens: int = 0
    embed_hits: int = 0  # embedding cache (chunk vectors read at query time, e.g. by MMR)
    embed_misses: int = 0  # texts the embedder had to encode (the query itself: queries are never cached)
    token_hits: int = 0  # late-interaction token-vector cache
    token_computed: int = 0
    answer_hits: int = 0  # semantic answer cache (zeros, and answer_cache_seen False, when the stage did not run)
    answer_misses: int = 0
    answer_cache_seen: bool = False  # True when some trace had an answer_cache stage that ran
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Of answer_misses, those the guard refused although the cosine passed (verdict guarded_miss); and what the hits
    # saved: the ms and $ the stored answer cost when it was first made (the answer_cache stage's info).
    answer_guarded: int = 0
    answer_saved_ms: float = 0.0
    answer_saved_usd: float = 0.0

    def __add__(self, other: "Counters") -> "Counters":
        """Session totals: per-stage lines are merged by name (ms and $ add up), everything else adds."""
        merged: dict[str, StageCounters] = {s.stage: s for s in self.stages}
        for s in other.stages:
            m = merged.get(s.stage)
            merged[s.stage] = s if m is None else StageCounters(
                s.stage, m.ran or s.ran, m.ms + s.ms, m.usd + s.usd, m.tokens_in + s.tokens_in,
                m.tokens_out + s.tokens_out, m.cache_read_tokens + s.cache_read_tokens,
                m.cache_write_tokens + s.cache_write_tokens, m.calls + s.calls)
        return Counters(
            tuple(merged.values()), self.queries + other.queries, self.ms + other.ms, self.usd + other.usd,
            self.tokens_in + other.tokens_in, self.tokens_out + other.tokens_out,
            self.cache_read_tokens + other.cache_read_tokens, self.cache_write_tokens + other.cache_write_tokens,
            self.embed_hits + other.embed_hits, self.embed_misses + other.embed_misses,
            self.token_hits + other.token_hits, self.token_computed + other.token_computed,
            self.answer_hits + other.answer_hits, self.answer_misses + other.answer_misses,
            self.answer_cache_seen or other.answer_cache_seen, {},
            self.answer_guarded + other.answer_guarded, self.answer_saved_ms + other.answer_saved_ms,
            self.answer_saved_usd + other.answer_saved_usd)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `query --json`'s "counters" (stable keys; per-stage lines in trace order)."""
        out: dict[str, Any] = {
            "queries": self.queries, "ms": round(self.ms, 3), "usd": round(self.usd, 6),
            "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
            "prompt_cache": {"read_tokens": self.cache_read_tokens, "write_tokens": self.cache_write_tokens},
            "embedding_cache": {"hits": self.embed_hits, "misses": self.embed_misses},
            "token_vector_cache": {"hits": self.token_hits, "computed": self.token_computed},
            "answer_cache": ({"hits": self.answer_hits, "misses": self.answer_misses,
                              "guarded_misses": self.answer_guarded, "saved_ms": round(self.answer_saved_ms, 3),
                              "saved_usd": round(self.answer_saved_usd, 6)}
                             if self.answer_cache_seen else None),
            "stages": [{"stage": s.stage, "ran": s.ran, "ms": round(s.ms, 3), "usd": round(s.usd, 6),
                        "tokens_in": s.tokens_in, "tokens_out": s.tokens_out, "calls": s.calls,
                        "cache_read_tokens": s.cache_read_tokens, "cache_write_tokens": s.cache_write_tokens}
                       for s in self.stages],
        }
        return out


def _int(info: Mapping[str, Any], key: str) -> int:
    v = info.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _answer_cache(stage: StageResult | None) -> tuple[int, int, bool]:
    """(hits, misses, seen) of the semantic answer cache stage. A stage that ran reports its `verdict` in its info;
    a skipped one (cache off) counts as not seen, so the view shows no answer-cache counter."""
    if stage is None or stage.skipped is not None:
        return 0, 0, False
    hit = isinstance(stage.info, CacheInfo) and stage.info.verdict == "hit"
    return (1, 0, True) if hit else (0, 1, True)


def _answer_cache_savings(stage: StageResult | None) -> tuple[int, float, float]:
    """(guarded misses, saved ms, saved $) from the answer_cache stage's info (core/answer_cache.CacheLookup.info)."""
    if stage is None or stage.skipped is not None or not isinstance(stage.info, CacheInfo):
        return 0, 0.0, 0.0
    info = stage.info
    return int(info.verdict == "guarded_miss"), float(info.saved_ms), float(info.saved_usd)


def served_from_cache(trace: Trace) -> CacheInfo | None:
    """The answer_cache stage's record when it served this trace's answer, else None."""
    s = trace.stage(ANSWER_CACHE_STAGE)
    return s.info if s is not None and isinstance(s.info, CacheInfo) and s.info.verdict == "hit" else None


def stage_counters(s: StageResult) -> StageCounters:
    u = s.usage
    return StageCounters(s.stage, s.skipped is None, s.ms, u.usd, u.input_tokens, u.output_tokens,
                         u.cache_read_tokens, u.cache_write_tokens, u.calls)


def counters(trace: Trace) -> Counters:
    """Counters of one query. Stage ms and $ come from the trace as recorded; cache counts from the info keys the
    stages write (EMBED_HITS/EMBED_MISSES, the reranker's cache_hits/computed, the answer_cache stage)."""
    lines = tuple(stage_counters(s) for s in trace.stages)
    ran = [s for s in trace.stages if s.skipped is None]
    token_hits = sum(_int(s.info, TOKEN_HITS) for s in ran)
    token_computed = sum(_int(s.info, TOKEN_COMPUTED) for s in ran)
    a_hits, a_misses, a_seen = _answer_cache(trace.stage(ANSWER_CACHE_STAGE))
    return Counters(
        lines, 1, sum(c.ms for c in lines), sum(c.usd for c in lines), sum(c.tokens_in for c in lines),
        sum(c.tokens_out for c in lines), sum(c.cache_read_tokens for c in lines),
        sum(c.cache_write_tokens for c in lines), sum(_int(s.info, EMBED_HITS) for s in ran),
        sum(_int(s.info, EMBED_MISSES) for s in ran), token_hits, token_computed, a_hits, a_misses, a_seen, {},
        *_answer_cache_savings(trace.stage(ANSWER_CACHE_STAGE)))
