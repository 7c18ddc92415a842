"""Cache-augmented generation (CAG): a corpus small enough to sit whole in a cached prompt prefix needs no retrieval.

The prefix is the instructions plus every document, sorted by a stable key (name, then content hash), with nothing
that changes between calls (no timestamps, run ids or counters): byte-identical prefixes are what the provider's
prompt cache matches on, so from the second question on the corpus is read from the cache at a tenth of the input
price. The question goes after the cache breakpoint. Before the first call the cost estimate and the break-even
against retrieval (RAG) are shown; without a key the route is unavailable and the estimate still shows.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.models.pricing import price_for, tokens_usd
from core.text import estimate_llm_tokens
from core.types import DEFAULT_WORKSPACE, Usage

# The reply the model gives when the documents do not answer: the router may then fall back to retrieval.
NOT_IN_CORPUS = "NOT_IN_CORPUS"
INSTRUCTIONS = (
    "You answer questions using only the documents below. Cite each fact with the document's name in square "
    f"brackets, e.g. [guide.md]. If the documents do not contain the answer, reply with exactly {NOT_IN_CORPUS} and "
    "nothing else. Do not use outside knowledge.\n\n"
)


@dataclass(frozen=True)
class CagDocument:
    name: str
    content_hash: str
    text: str


class CorpusDocuments(Protocol):
    """What CAG reads from the store (core.store.Corpus implements it)."""

    def documents(self, workspace: str = ...) -> Sequence[Any]: ...

    def document_text(self, doc_id: str, workspace: str = ...) -> str | None: ...


def load_documents(corpus: CorpusDocuments, workspace: str = DEFAULT_WORKSPACE) -> list[CagDocument]:
    out = []
    for d in corpus.documents(workspace):
        text = corpus.document_text(d.doc_id, workspace) or ""
        out.append(CagDocument(d.name, d.content_hash, text))
    return out


def build_prefix(docs: Sequence[CagDocument]) -> str:
    """Instructions + every document in a stable order. Same documents, same bytes: on every call and restart."""
    parts = [INSTRUCTIONS]
    for d in sorted(docs, key=lambda d: (d.name, d.content_hash)):
        parts.append(f'<document name="{d.name}">\n{d.text.strip()}\n</document>\n')
    return "".join(parts)


def prefix_sha(prefix: str) -> str:
    return hashlib.sha256(prefix.encode("utf-8")).hexdigest()


def cag_request(prefix: str, question: str, *, model: str, max_tokens: int) -> LLMRequest:
    # One breakpoint, after the documents: instructions and corpus are the cached prefix, the question follows.
    return LLMRequest(model=model, system=(TextBlock(prefix, cache=True),), user=(TextBlock(question),),
                      max_tokens=max_tokens, purpose="cag", ref_id="cag")


@dataclass(frozen=True)
class CagEstimate:
    """Dollars per query of CAG (first call writes the cache, later ones read it) and of RAG, and the break-even."""

    model: str
    corpus_tokens: int
    limit_tokens: int
    fits: bool
    available: bool
    note: str
    first_query_usd: float
    next_query_usd: float
    uncached_query_usd: float  # CAG with no prompt cache: the whole corpus at the input price every time
    rag_query_usd: float
    break_even_queries: int | None  # queries within one cache lifetime after which CAG costs no more than RAG

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def estimate(prefix_tokens: int, *, model: str, limit_tokens: int, question_tokens: int, output_tokens: int,
             rag_context_tokens: int, llm_available: bool, llm_reason: str = "", ttl: str = "5m") -> CagEstimate:
    """Cost estimate before the first call. RAG per query = retrieved context + question + output at list price;
    CAG first = cache write of the prefix + question + output; CAG next = cache read of the prefix + question + output.
    Break-even n: first + (n - 1) * next <= n * rag, i.e. n >= (first - next) / (rag - next)."""
    p = price_for(model)
    fits = prefix_tokens <= limit_tokens
    cacheable = prefix_tokens >= p.min_cacheable_tokens
    if cacheable:
        first = tokens_usd(p, input_tokens=question_tokens, output_tokens=output_tokens,
                           cache_write_tokens=prefix_tokens, ttl=ttl)  # type: ignore[arg-type]
        nxt = tokens_usd(p, input_tokens=question_tokens, cache_read_tokens=prefix_tokens, output_tokens=output_tokens)
    else:
        first = nxt = tokens_usd(p, input_tokens=prefix_tokens + question_tokens, output_tokens=output_tokens)
    uncached = tokens_usd(p, input_tokens=prefix_tokens + question_tokens, output_tokens=output_tokens)
    rag = tokens_usd(p, input_tokens=rag_context_tokens + question_tokens, output_tokens=output_tokens)
    be = None
    if rag > nxt:
        be = max(1, math.ceil((first - nxt) / (rag - nxt) - 1e-12))
    notes = []
    if not fits:
        notes.append(f"the corpus is about {prefix_tokens:,} tokens, over the CAG limit of {limit_tokens:,}: "
                     "retrieval only")
    if not cacheable:
        notes.append(f"the corpus is below the {p.min_cacheable_tokens:,}-token minimum {model} caches: every call "
                     "pays the full prefix")
    if not llm_available:
        notes.append(f"CAG needs Claude ({llm_reason or 'no key'}): the route is unavailable; the estimate is what "
                     "it would cost")
    if be is None:
        notes.append("CAG never breaks even here: a cached read of the corpus costs more per query than retrieval")
    return CagEstimate(model, prefix_tokens, limit_tokens, fits, llm_available and fits, "; ".join(notes),
                       round(first, 6), round(nxt, 6), round(uncached, 6), round(rag, 6), be)


@dataclass(frozen=True)
class CagAnswer:
    text: str
    refused: bool  # the model said the documents do not answer: the router may fall back to retrieval
    usage: Usage
    prefix_sha: str
    note: str = ""

    @property
    def cache_read_share(self) -> float:
        total = self.usage.input_tokens + self.usage.cache_write_tokens + self.usage.cache_read_tokens
        return self.usage.cache_read_tokens / total if total else 0.0


def answer(question: str, prefix: str, llm: LLM | None, *, model: str, max_tokens: int = 600,
           workspace: str = DEFAULT_WORKSPACE) -> CagAnswer:
    """One CAG call. Offline (no key) raises LLMError with the reason, which the caller shows."""
    if llm is None or not llm.available:
        raise LLMError(f"CAG needs Claude: {llm.reason if llm is not None else 'no key'}", "unavailable")
    resp = llm.complete(cag_request(prefix, question, model=model, max_tokens=max_tokens), workspace=workspace)
    text = resp.text.strip()
    refused = text == NOT_IN_CORPUS or text.startswith(NOT_IN_CORPUS)
    note = "the documents do not answer this: fall back to retrieval" if refused else resp.cache_note
    return CagAnswer(text, refused, resp.usage, prefix_sha(prefix), note)


def corpus_prefix(corpus: CorpusDocuments, workspace: str = DEFAULT_WORKSPACE) -> tuple[str, int]:
    """The prefix of a workspace and its estimated token count."""
    prefix = build_prefix(load_documents(corpus, workspace))
    return prefix, estimate_llm_tokens(prefix)


def workspace_estimate(corpus: Any, workspace: str, *, model: str, limit_tokens: int, max_chunks: int,
                       output_tokens: int, llm: LLM | None, question_tokens: int = 20, ttl: str = "5m"
                       ) -> tuple[CagEstimate, str]:
    """The estimate for a workspace as it stands (what the Costs page and the CLI show) and its prefix's sha256.
    RAG context = the answer's max_chunks chunks of the corpus's average length."""
    est, prefix = estimate_with_prefix(corpus, workspace, model=model, limit_tokens=limit_tokens,
                                       max_chunks=max_chunks, output_tokens=output_tokens, llm=llm,
                                       question_tokens=question_tokens, ttl=ttl)
    return est, prefix_sha(prefix)


def estimate_with_prefix(corpus: Any, workspace: str, *, model: str, limit_tokens: int, max_chunks: int,
                         output_tokens: int, llm: LLM | None, question_tokens: int = 20, ttl: str = "5m"
                         ) -> tuple[CagEstimate, str]:
    """workspace_estimate with the prefix itself, so the cag route reads the corpus once per query."""
    prefix, tokens = corpus_prefix(corpus, workspace)
    chunks = corpus.chunks(workspace)
    per_chunk = sum(c.n_tokens for c in chunks) / len(chunks) if chunks else 0.0
    est = estimate(tokens, model=model, limit_tokens=limit_tokens, question_tokens=question_tokens,
                   output_tokens=output_tokens, rag_context_tokens=int(per_chunk * max_chunks),
                   llm_available=llm is not None and bool(llm.available), llm_reason=llm.reason if llm is not None else "",
                   ttl=ttl)
    return est, prefix
