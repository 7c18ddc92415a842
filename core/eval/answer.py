"""Answer-level metrics: faithfulness (claims supported by the context), answer relevancy, refusal accuracy — each
score says which method produced it (LLM judge, embedding, lexical)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.answer.stage import strip_citations
from core.models.embed import Embedder
from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.text import sentence_spans, tokenize
from core.types import DEFAULT_WORKSPACE, Answer, Usage


@dataclass(frozen=True)
class MetricScore:
    """`value` is None when the metric does not apply (e.g. faithfulness of a refusal)."""

    value: float | None
    method: str  # "llm-judge:<model>", "lexical", "embedding:<model>", "n/a"
    detail: tuple[str, ...] = ()
    usage: Usage = Usage()


def claims(text: str) -> list[str]:
    """The answer's sentences without citation markers: the unit a claim check runs on."""
    clean = strip_citations(text)
    return [clean[s:e] for s, e in sentence_spans(clean) if len(clean[s:e].split()) >= 2]


def _coverage(terms: set[str], other: set[str]) -> float:
    return len(terms & other) / len(terms) if terms else 1.0


def lexical_support(claim: str, contexts: Sequence[str]) -> float:
    """Share of a claim's content terms found in the best single context sentence (or whole context)."""
    terms = set(tokenize(claim))
    best = 0.0
    for ctx in contexts:
        best = max(best, _coverage(terms, set(tokenize(ctx))))
        if best >= 1.0:
            break
    return best


JUDGE_INSTRUCTIONS = (
    "You check whether statements are supported by a context. Split the answer into its individual factual "
    "claims. For each, decide whether the context states it (supported) or not (unsupported: contradicted, "
    "missing, or only implied by outside knowledge). Judge support only, not truth."
)
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"claims": {"type": "array", "items": {
        "type": "object",
        "properties": {"claim": {"type": "string"}, "supported": {"type": "boolean"}},
        "required": ["claim", "supported"], "additionalProperties": False}}},
    "required": ["claims"],
    "additionalProperties": False,
}


def faithfulness(
    answer: Answer, contexts: Sequence[str], *, llm: LLM | None = None, model: str = "claude-haiku-4-5",
    support_threshold: float = 0.8, workspace: str = DEFAULT_WORKSPACE, query_id: str = "",
) -> MetricScore:
    """Share of the answer's claims supported by the context. With an available LLM: a judge (cost in the
    ledger); otherwise a lexical check (a claim counts as supported when `support_threshold` of its terms occur
    in one context passage) labelled 'lexical'. A refusal has no claims: None."""
    if answer.refused:
        return MetricScore(None, "n/a", ("refused: no claims to check",))
    found = claims(answer.text)
    if not found:
        return MetricScore(None, "n/a", ("no claims",))
    notes: tuple[str, ...] = ()
    if llm is not None and llm.available:
        body = "\n\n".join(f"<context>\n{c}\n</context>" for c in contexts)
        req = LLMRequest(model=model, system=(TextBlock(JUDGE_INSTRUCTIONS, cache=True),),
                         user=(TextBlock(body), TextBlock(f"Answer to check:\n{strip_citations(answer.text)}")),
                         max_tokens=800, json_schema=JUDGE_SCHEMA, purpose="judge", ref_id=query_id)
        try:
            resp = llm.complete(req, workspace=workspace, run_id=query_id)
            judged = [c for c in (resp.data or {}).get("claims", []) if isinstance(c, dict)]
            if judged:
                share = sum(bool(c.get("supported")) for c in judged) / len(judged)
                unsupported = tuple(str(c.get("claim")) for c in judged if not c.get("supported"))
                return MetricScore(share, f"llm-judge:{resp.model}", unsupported, resp.usage)
            notes = ("judge returned no claims; lexical check instead",)
        except LLMError as exc:
            notes = (f"judge failed ({exc}); lexical check instead",)
    ctx_sents = [c[s:e] for c in contexts for s, e in sentence_spans(c)] + list(contexts)
    supported = [lexical_support(c, ctx_sents) >= support_threshold for c in found]
    missing = tuple(c for c, ok in zip(found, supported) if not ok)
    return MetricScore(sum(supported) / len(found), "lexical", notes + missing)


def answer_relevancy(question: str, answer: Answer, *, embedder: Embedder | None = None) -> MetricScore:
    """How closely the answer addresses the question: cosine of their embeddings when an embedder is given
    ('embedding:<model>'), else the share of the question's terms the answer uses ('lexical'). None for a refusal."""
    if answer.refused:
        return MetricScore(None, "n/a", ("refused",))
    text = strip_citations(answer.text)
    if embedder is not None:
        v = embedder.encode([question, text])
        a, b = v[0], v[1]
        cos = float(np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
        return MetricScore(max(0.0, cos), f"embedding:{embedder.model_id}")
    return MetricScore(_coverage(set(tokenize(question)), set(tokenize(text))), "lexical")


def refusal_correct(answerable: bool, refused: bool) -> bool:
    """Right when an unanswerable question is refused and an answerable one is not."""
    return refused != answerable


def refusal_accuracy(items: Sequence[tuple[bool, bool]]) -> float | None:
    """Share of (answerable, refused) pairs handled right; None for an empty set."""
    if not items:
        return None
    return sum(refusal_correct(a, r) for a, r in items) / len(items)


_WORDS = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def matches_gold(sentence: str, gold_spans: Sequence[str], *, share: float = 0.7) -> bool:
    """A quoted sentence comes from a gold passage when most of its words are in one gold span or most of the span's
    words are in it (a span may be part of a sentence, or a sentence part of a span; line breaks do not matter)."""
    s = _words(strip_citations(sentence))
    if not s:
        return False
    sw = set(s)
    for g in gold_spans:
        gw = _words(g)
        if not gw:
            continue
        gs = set(gw)
        if len(sw & gs) / len(sw) >= share or len(sw & gs) / len(gs) >= share:
            return True
    return False


def answer_sentences(answer: Answer) -> list[str]:
    """The quoted sentences of an extractive answer ('sentence [chunk-id] sentence [chunk-id]'), or the claims of a
    generated one."""
    parts = [p.strip() for p in re.split(r"\s*\[[^\]]{1,80}\]\s*", answer.text) if p.strip()]
    return parts if parts else claims(answer.text)


def answered_correctly(answer: Answer, gold_spans: Sequence[str]) -> bool:
    """Not refused and at least one sentence of the answer comes from a gold passage."""
    return not answer.refused and any(matches_gold(s, gold_spans) for s in answer_sentences(answer))
