"""Scores a Trace against gold: recall@k, MRR, nDCG, context precision, recall after every stage, Pass@k, A/B.

Relevance rule (gold that survives re-chunking)
-----------------------------------------------
A gold item names a document and a text span. Both sides are reduced to *normalised tokens*: NFKC, case-folded,
runs of word characters (``\\w+``), so whitespace, punctuation and markup differences do not matter. A candidate is
relevant to a span-gold item when

1. it comes from one of the gold document's store ids (when the item names a document), and
2. some contiguous run of at least ``ceil(min_share * n)`` of the span's ``n`` tokens appears, in the same order and
   without gaps, in the candidate's tokens (``min_share`` = 0.5 by default; a span that is wholly contained always
   qualifies).

Why this rule: whichever way a chunker cuts a span in two, at least one piece holds half of it contiguously, so the
span stays findable after re-chunking; a stray shared word or two never qualifies because the run must be contiguous.
It is judged on the candidate's *text*, so a compression stage that prunes the span away makes the chunk irrelevant
at that stage, as it should.

Two other match modes exist for the public sets: ``exact`` (stripped text equality, as the contextual-retrieval
cookbook scores Pass@k) and ``doc`` (any chunk of the document; BEIR qrels are document-level, optionally graded).
``chunk`` names a chunk id (a set written against one store). ``exact`` asks which *chunks* were retrieved, so it compares the chunk's stored text when the caller passes it
(``originals``): a pruning stage that trims a retrieved chunk does not un-retrieve it. ``span`` always reads the
candidate's own text.

Counting: every gold item is credited at most once, at the first position that matches it. recall@k is the share of
gold items matched in the top k; MRR is 1/rank of the first relevant candidate; nDCG@k uses linear gain (the grade)
with a log2 discount, each gold item's grade counted once, and the ideal DCG built from the gold grades. Queries with
no gold (unanswerable questions) are left out of the retrieval means and counted separately.
"""
from __future__ import annotations

import math
import re
import statistics
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Literal, Mapping, Protocol, Sequence

from core.eval.answer import answered_correctly
from core.text import count_tokens
from core.types import Answer, Candidate, InRound, Trace

MatchMode = Literal["span", "exact", "doc", "chunk"]
Unit = Literal["chunk", "doc"]

DEFAULT_KS: tuple[int, ...] = (5, 10, 20)
MIN_SHARE = 0.5
# Answer-level columns: None until an answer generator fills trace.answer; they aggregate like any other metric.
# answered_correctly: share of answerable questions answered (not refused) with a sentence from a gold passage;
# refused_unanswerable: share of unanswerable questions refused. Each is None on the other kind of question.
ANSWER_METRICS: tuple[str, ...] = ("faithfulness", "answer_relevancy", "refusal_accuracy", "answered_correctly",
                                   "refused_unanswerable")


@dataclass(frozen=True)
class Gold:
    """One relevant item for a query. `doc` is the set's own name for the document (file name, corpus id);
    `doc_ids` are the store ids it resolved to (empty: any document may match, as the cookbook's text match)."""

    doc: str = ""
    text: str = ""
    grade: int = 1
    match: MatchMode = "span"
    doc_ids: frozenset[str] = frozenset()


# -- relevance ---------------------------------------------------------------------------------------------------
_WORDS = re.compile(r"\w+", re.UNICODE)


def norm_tokens(text: str) -> tuple[str, ...]:
    return tuple(_WORDS.findall(unicodedata.normalize("NFKC", text).casefold()))


@lru_cache(maxsize=200_000)
def span_in_text(span: str, text: str, min_share: float = MIN_SHARE) -> bool:
    """True when a contiguous run of >= ceil(min_share * |span|) span tokens appears in text (the rule above)."""
    s, t = norm_tokens(span), norm_tokens(text)
    if not s:
        return False
    need = max(1, math.ceil(min_share * len(s)))
    if len(t) < need:
        return False
    grams = {s[i : i + need] for i in range(len(s) - need + 1)}
    return any(t[j : j + need] in grams for j in range(len(t) - need + 1))


def is_relevant(gold: Gold, doc_id: str, text: str, *, min_share: float = MIN_SHARE, chunk_id: str = "") -> bool:
    if gold.match == "chunk":  # gold given as a chunk id (gold.text holds it)
        return chunk_id == gold.text
    if gold.doc_ids and doc_id not in gold.doc_ids:
        return False
    if gold.match == "doc":
        return True
    if gold.match == "exact":
        return text.strip() == gold.text.strip()
    return span_in_text(gold.text, text, min_share)


def judge(cands: Sequence[Candidate], gold: Sequence[Gold], *, min_share: float = MIN_SHARE,
          originals: Mapping[str, str] | None = None) -> list[frozenset[int]]:
    """For each ranked candidate, the indices of the gold items it matches (empty set: not relevant)."""
    orig = originals or {}

    def text_for(g: Gold, c: Candidate) -> str:
        return orig.get(c.chunk_id, c.text) if g.match == "exact" else c.text

    return [frozenset(i for i, g in enumerate(gold)
                      if is_relevant(g, c.doc_id, text_for(g, c), min_share=min_share, chunk_id=c.chunk_id))
            for c in cands]


def collapse_to_docs(cands: Sequence[Candidate]) -> list[Candidate]:
    """Document-level list: a document's rank is the best rank of any of its chunks (BEIR scores documents)."""
    seen: set[str] = set()
    out: list[Candidate] = []
    for c in cands:
        if c.doc_id not in seen:
            seen.add(c.doc_id)
            out.append(c.with_rank(len(out) + 1))
    return out


# -- ranked-list metrics over judged hits --------------------------------------------------------------------------
Hits = Sequence[frozenset[int]]


def recall_at_k(hits: Hits, n_gold: int, k: int | None = None) -> float | None:
    if n_gold <= 0:
        return None
    found: set[int] = set()
    for h in hits[:k] if k is not None else hits:
        found |= h
    return len(found) / n_gold


def reciprocal_rank(hits: Hits) -> float:
    return next((1.0 / (i + 1) for i, h in enumerate(hits) if h), 0.0)


def first_relevant_rank(hits: Hits) -> int | None:
    return next((i + 1 for i, h in enumerate(hits) if h), None)


def ndcg_at_k(hits: Hits, grades: Sequence[int], k: int) -> float | None:
    """Linear-gain nDCG; each gold item's grade is earned once, at the first position that matches it."""
    ideal = sorted((g for g in grades if g > 0), reverse=True)[:k]
    if not ideal:
        return None
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    credited: set[int] = set()
    dcg = 0.0
    for i, h in enumerate(hits[:k]):
        fresh = h - credited
        if fresh:
            gain = max(grades[j] for j in fresh)
            credited |= fresh
            dcg += gain / math.log2(i + 2)
    return dcg / idcg


def precision(hits: Hits, k: int | None = None) -> float | None:
    window = hits[:k] if k is not None else hits
    return sum(1 for h in window if h) / len(window) if window else None


def pass_at_k(retrieved: Sequence[str], golden: Sequence[str], k: int) -> float:
    """The cookbook's per-query score: share of golden chunk texts whose .strip() equals the .strip() of one of the
    top-k retrieved texts. Average over queries and multiply by 100 for the published scale."""
    top = {t.strip() for t in retrieved[:k]}
    return sum(1 for g in golden if g.strip() in top) / len(golden) if golden else 0.0


# -- one query ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageScore:
    """Recall of one stage's whole candidate list, and what it kept, for the per-stage funnel."""

    stage: str
    skipped: bool
    depth: int
    recall: float | None
    first_rank: int | None
    tokens: int
    token_share: float | None  # tokens of this list / tokens of the largest list up to this stage
    ms: float
    hits: tuple[frozenset[int], ...] = ()


@dataclass(frozen=True)
class QueryScore:
    metrics: dict[str, float | None]
    stages: tuple[StageScore, ...]
    final_stage: str | None
    n_gold: int


def score_trace(
    trace: Trace, gold: Sequence[Gold], *, ks: Sequence[int] = DEFAULT_KS, ndcg_ks: Sequence[int] = (10,),
    unit: Unit = "chunk", context_k: int | None = None, min_share: float = MIN_SHARE, pass_k: bool = False,
    originals: Mapping[str, str] | None = None,
) -> QueryScore:
    """Score the final list (what would go to the model) with every metric, and every stage with its recall.
    Stages are read generically from trace.stages, so new stages are scored without changes here."""
    n_gold = len(gold)
    grades = [g.grade for g in gold]
    stages: list[StageScore] = []
    pool = 0  # the largest candidate list (in tokens) seen so far: what later stages keep a share of
    for s in trace.stages:
        if s.skipped is not None:
            stages.append(StageScore(s.stage, True, 0, None, None, 0, None, s.ms))
            continue
        cands = collapse_to_docs(s.candidates) if unit == "doc" else list(s.candidates)
        hits = judge(cands, gold, min_share=min_share, originals=originals)
        tokens = sum(count_tokens(c.text) for c in s.candidates)
        pool = max(pool, tokens)
        share = tokens / pool if pool else None
        stages.append(StageScore(s.stage, False, len(cands), recall_at_k(hits, n_gold), first_relevant_rank(hits),
                                 tokens, share, s.ms, tuple(hits)))
    final = trace.final()
    final_score = next((st for st in stages if final is not None and st.stage == final.stage), None)
    hits = list(final_score.hits) if final_score else []
    m: dict[str, float | None] = {}
    for k in ks:
        m[f"recall@{k}"] = recall_at_k(hits, n_gold, k)
    m["recall@depth"] = recall_at_k(hits, n_gold)
    m["depth"] = float(len(hits))
    m["mrr"] = reciprocal_rank(hits) if n_gold else None
    for k in ndcg_ks:
        m[f"ndcg@{k}"] = ndcg_at_k(hits, grades, k)
    m["context_precision"] = precision(hits, context_k) if n_gold else None
    rank = first_relevant_rank(hits)
    m["first_rank"] = float(rank) if rank is not None else None
    if pass_k and final is not None:
        texts = [(originals or {}).get(c.chunk_id, c.text) for c in final.candidates]
        golden = [g.text for g in gold]
        for k in ks:
            m[f"pass@{k}"] = 100.0 * pass_at_k(texts, golden, k) if golden else None
    # The agentic loop's evidence stage already timed its rounds: their own stages (InRound records) are not added
    # again.
    m["ms"] = sum(s.ms for s in trace.stages if not isinstance(s.info, InRound))
    return QueryScore(m, tuple(stages), final.stage if final else None, n_gold)


# -- answer-level metrics (filled when the pipeline produces an answer) ---------------------------------------------
class AnswerJudge(Protocol):
    """Scores an answer; core.eval.run adapts the answer generator's own metrics (core.eval.answer) to this, and
    the lexical proxies below stand in where nothing else is available."""

    def faithfulness(self, answer: Answer, contexts: Sequence[str]) -> float | None: ...
    def relevancy(self, question: str, answer: Answer) -> float | None: ...


_SENT = re.compile(r"(?<=[.!?])\s+")


class LexicalAnswerJudge:
    """Offline proxies, labelled as such: faithfulness = share of answer sentences whose content words are at least
    `support` covered by the contexts' words; relevancy = share of the question's content words the answer uses."""

    def __init__(self, support: float = 0.6) -> None:
        self.support = support

    def faithfulness(self, answer: Answer, contexts: Sequence[str]) -> float | None:
        sents = [s for s in _SENT.split(answer.text.strip()) if norm_tokens(s)]
        if not sents:
            return None
        ctx = set(norm_tokens(" ".join(contexts)))
        ok = sum(1 for s in sents if _coverage(norm_tokens(s), ctx) >= self.support)
        return ok / len(sents)

    def relevancy(self, question: str, answer: Answer) -> float | None:
        q = [t for t in norm_tokens(question) if len(t) > 3]
        return _coverage(tuple(q), set(norm_tokens(answer.text))) if q else None


def _coverage(tokens: Sequence[str], vocab: set[str]) -> float:
    return sum(1 for t in tokens if t in vocab) / len(tokens) if tokens else 0.0


def answer_metrics(
    question: str, answerable: bool, answer: Answer | None, contexts: Sequence[str], judge_: AnswerJudge | None = None,
    gold_texts: Sequence[str] = (),
) -> dict[str, float | None]:
    """faithfulness, answer_relevancy, refusal_accuracy, answered_correctly (needs `gold_texts`, the gold spans) and
    refused_unanswerable for one query; all None when there is no answer."""
    if answer is None:
        return {name: None for name in ANSWER_METRICS}
    refusal_ok = 1.0 if answer.refused == (not answerable) else 0.0
    kinds = {"answered_correctly": (float(answered_correctly(answer, gold_texts))
                                    if answerable and any(gold_texts) else None),
             "refused_unanswerable": None if answerable else float(answer.refused)}
    if answer.refused or judge_ is None:
        return {"faithfulness": None, "answer_relevancy": None, "refusal_accuracy": refusal_ok, **kinds}
    return {"faithfulness": judge_.faithfulness(answer, contexts),
            "answer_relevancy": judge_.relevancy(question, answer), "refusal_accuracy": refusal_ok, **kinds}


# -- aggregation ---------------------------------------------------------------------------------------------------
def mean_metrics(rows: Iterable[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Per-metric mean over the rows where the metric is defined (None is 'not applicable', never zero)."""
    acc: dict[str, list[float]] = {}
    keys: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in acc:
                acc[k] = []
                keys.append(k)
            if v is not None:
                acc[k].append(float(v))
    return {k: (statistics.fmean(acc[k]) if acc[k] else None) for k in keys}


def stage_summary(scores: Sequence[QueryScore]) -> dict[str, dict[str, float | None]]:
    """Mean recall, depth, tokens, token share and ms per stage, in pipeline order (queries with gold only for
    recall; every query for latency)."""
    order: list[str] = []
    rows: dict[str, list[StageScore]] = {}
    for q in scores:
        for s in q.stages:
            if s.stage not in rows:
                rows[s.stage] = []
                order.append(s.stage)
            rows[s.stage].append(s)
    out: dict[str, dict[str, float | None]] = {}
    for name in order:
        ran = [s for s in rows[name] if not s.skipped]
        # A stage that never returns candidates (an answer stage, say) has no recall to speak of.
        ranked = any(s.depth for s in ran)
        out[name] = {
            "ran": len(ran) / len(rows[name]),
            "depth": statistics.fmean(s.depth for s in ran) if ran else None,
            "recall": _mean(s.recall for s in ran) if ranked else None,
            "tokens": statistics.fmean(s.tokens for s in ran) if ran else None,
            "token_share": _mean(s.token_share for s in ran),
            "ms": statistics.fmean(s.ms for s in rows[name]),
        }
    return out


def latency_summary(scores: Sequence[QueryScore]) -> dict[str, dict[str, float]]:
    per: dict[str, list[float]] = {}
    for q in scores:
        for s in q.stages:
            if not s.skipped:
                per.setdefault(s.stage, []).append(s.ms)
    return {k: {"mean": statistics.fmean(v), "p50": _pct(v, 50), "p95": _pct(v, 95)} for k, v in per.items()}


def by_group(rows: Sequence[Mapping[str, float | None]], groups: Sequence[str]) -> dict[str, dict[str, float | None]]:
    buckets: dict[str, list[Mapping[str, float | None]]] = {}
    for r, g in zip(rows, groups):
        buckets.setdefault(g, []).append(r)
    return {g: {**mean_metrics(b), "n": float(len(b))} for g, b in sorted(buckets.items())}


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def _pct(values: Sequence[float], p: float) -> float:
    s = sorted(values)
    i = min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))
    return s[i]


def spread(values: Sequence[float | None]) -> float:
    """Sample standard deviation across repeats (0 for a single run or undefined values)."""
    vals = [v for v in values if v is not None]
    return statistics.stdev(vals) if len(vals) > 1 else 0.0


# -- A/B -----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Delta:
    metric: str
    a: float | None
    b: float | None
    delta: float | None
    spread: float
    verdict: str  # "B better", "A better", "no clear difference", "n/a"


def paired_noise(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Two standard errors of the mean per-query difference: how far the means move from which queries happen to
    be in the set, even for deterministic pipelines."""
    diffs = [y - x for x, y in zip(a, b) if x is not None and y is not None]
    if len(diffs) < 2:
        return 0.0
    return 2.0 * statistics.stdev(diffs) / math.sqrt(len(diffs))


def compare_metric(
    metric: str, a: float | None, b: float | None, *, run_spread_a: float = 0.0, run_spread_b: float = 0.0,
    per_query_a: Sequence[float | None] = (), per_query_b: Sequence[float | None] = (),
    higher_is_better: bool = True,
) -> Delta:
    """A difference is a win only when it exceeds the spread: the larger of the run-to-run spread of the two
    configurations (combined) and the paired per-query noise. Anything smaller is 'no clear difference'."""
    if a is None or b is None:
        return Delta(metric, a, b, None, 0.0, "n/a")
    noise = max(math.hypot(run_spread_a, run_spread_b), paired_noise(per_query_a, per_query_b))
    d = b - a
    if abs(d) <= noise or d == 0:
        verdict = "no clear difference"
    else:
        verdict = "B better" if (d > 0) == higher_is_better else "A better"
    return Delta(metric, a, b, d, noise, verdict)


LOWER_IS_BETTER = frozenset({"first_rank", "ms"})


def per_query_status(a: float | None, b: float | None, *, higher_is_better: bool = True, tol: float = 1e-9) -> str:
    if a is None and b is None:
        return "n/a"
    if a is None or b is None:
        return "changed"
    if abs(b - a) <= tol:
        return "same"
    return "improved" if (b > a) == higher_is_better else "regressed"


@dataclass
class Comparison:
    deltas: list[Delta] = field(default_factory=list)

    def as_rows(self) -> list[dict[str, Any]]:
        return [d.__dict__ for d in self.deltas]


def compare_runs(
    a_metrics: Mapping[str, float | None], b_metrics: Mapping[str, float | None], *,
    a_spread: Mapping[str, float] | None = None, b_spread: Mapping[str, float] | None = None,
    a_per_query: Mapping[str, Sequence[float | None]] | None = None,
    b_per_query: Mapping[str, Sequence[float | None]] | None = None,
    metrics: Sequence[str] | None = None,
) -> Comparison:
    names = list(metrics) if metrics is not None else [k for k in a_metrics if k in b_metrics]
    out = Comparison()
    for m in names:
        out.deltas.append(compare_metric(
            m, a_metrics.get(m), b_metrics.get(m), run_spread_a=(a_spread or {}).get(m, 0.0),
            run_spread_b=(b_spread or {}).get(m, 0.0), per_query_a=(a_per_query or {}).get(m, ()),
            per_query_b=(b_per_query or {}).get(m, ()), higher_is_better=m not in LOWER_IS_BETTER,
        ))
    return out

