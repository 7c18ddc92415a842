"""Chunk contexts stored beside the chunk: heuristic (structure), late chunking (vectors), and LLM-written ones with
prompt caching, cost estimates, a hard budget, resume, and Message Batches."""
from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from core.models.embed import Embedder
from core.models.llm import (
    LLM,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextBlock,
    TokenCountingLLM,
    wait_for_batch,
)
from core.models.pricing import (
    ModelPrice,
    RunEstimate,
    Ttl,
    estimate_document,
    fmt_usd,
    price_for,
    worst_call_usd,
)
from core.models.tokens import (
    NoTokenVectors,
    TokenEncoder,
    token_windows,
    window_encoder_for,
)
from core.retrieve.index import backfill_vectors
from core.store import Store
from core.text import estimate_llm_tokens, llm_tokens_upper_bound, sentence_spans
from core.types import DEFAULT_WORKSPACE, Chunk, OpenBatch

HEURISTIC_LABEL = "heuristic"  # the `model` column of a heuristic context says what made it
Progress = Callable[[int, int, float], None]  # (done, total, dollars spent so far)


class ContextError(RuntimeError):
    """A context build that cannot run; the message is fit for the user."""


def index_variant(variant: str) -> tuple[str, str]:
    """(BM25 text variant, dense vector variant) searched for a context.variant setting."""
    if variant == "none":
        return "raw", "raw"
    if variant == "late":
        return "raw", "late"  # late chunking changes the vectors only; BM25 keeps the raw text
    return variant, variant


@dataclass(frozen=True)
class ContextReport:
    """What one build did. `remaining` > 0 means a resumed run has work left (and will not redo `written`)."""

    variant: str
    written: int = 0
    existing: int = 0
    remaining: int = 0
    usd: float = 0.0
    stopped: str = ""  # why the run ended early: budget, an error, a batch still running
    warnings: tuple[str, ...] = ()
    run_id: str = ""
    batch_id: str = ""
    vectors: int = 0  # contextual vectors embedded after the contexts were written


def coverage(store: Store, variant: str, workspace: str = DEFAULT_WORKSPACE, model_id: str | None = None) -> tuple[int, int]:
    """(chunks with this variant, all chunks). For 'late' it counts late vectors of `model_id`."""
    total = store.corpus.count("chunks", workspace)
    if variant == "none":
        return total, total
    if variant == "late":
        have = sum(n for m, v, n in store.corpus.vector_models(workspace) if v == "late" and (model_id is None or m == model_id))
        return have, total
    # Counted in SQL: a query calls this (prepare_variant), and loading every context to count it grew with the corpus.
    return sum(store.ledger.context_models(variant, workspace).values()), total


def _by_doc(chunks: Sequence[Chunk]) -> dict[str, list[Chunk]]:
    out: dict[str, list[Chunk]] = {}
    for c in chunks:
        out.setdefault(c.doc_id, []).append(c)
    return out


# -- heuristic ----------------------------------------------------------------------------------------------------
def lead_sentence(text: str, title: str = "", max_chars: int = 220) -> str:
    """The document's first real sentence (not its heading or title), cut at max_chars."""
    head = text[:4000]
    for s, e in sentence_spans(head):
        sent = " ".join(head[s:e].split()).lstrip("#>*-•/! ").strip()
        if len(sent.split()) < 4 or sent == title or sent.startswith(("|", "```")):
            continue
        return sent if len(sent) <= max_chars else sent[: max_chars - 1].rstrip() + "…"
    return ""


def heuristic_context(title: str, name: str, heading_path: Sequence[str], lead: str) -> str:
    """A context from structure alone: document title (or file name), heading path, and the lead sentence."""
    parts = [f"Document: {title or name}" + (f" ({name})" if title and name and title != name else "") + "."]
    if heading_path:
        parts.append("Section: " + " > ".join(h.strip() for h in heading_path if h.strip()) + ".")
    if lead:
        parts.append(f"The document opens: {lead}")
    return " ".join(parts)


def build_heuristic(store: Store, *, workspace: str = DEFAULT_WORKSPACE, progress: Progress | None = None,
                    doc_ids: Sequence[str] | None = None) -> ContextReport:
    """Write heuristic contexts for every chunk that has none (cheap, offline, idempotent). Ingest calls it with the
    documents it just stored (`doc_ids`): then every chunk of them is recomputed and written when its context is
    missing or differs, since an unchanged chunk of an edited document keeps its stored context, and that context
    reads the document's title and lead sentence (an edit there changes it). Queries find them built, never write."""
    docs = {d.doc_id: d for d in store.corpus.documents(workspace)}
    if doc_ids is None:
        chunks = store.corpus.chunks(workspace)
    else:
        chunks = [c for d in dict.fromkeys(doc_ids) for c in store.corpus.chunks(workspace, doc_id=d)]
    have = store.ledger.contexts("heuristic", workspace, [c.chunk_id for c in chunks] if doc_ids is not None
                                 else None)
    todo = chunks if doc_ids is not None else [c for c in chunks if c.chunk_id not in have]
    written = 0
    pending: list[tuple[str, str]] = []
    for i, (doc_id, chunks) in enumerate(_by_doc(todo).items()):
        d = docs.get(doc_id)
        text = store.corpus.document_text(doc_id, workspace) or ""
        title = (d.title if d else "") or ""
        name = d.name if d else doc_id
        lead = lead_sentence(text, title)
        made = [(c.chunk_id, heuristic_context(title, name, c.heading_path, lead)) for c in chunks]
        made = [(cid, ctx) for cid, ctx in made if have.get(cid) != ctx]
        pending += made
        # Free to recompute, so written in batches rather than one transaction per document: per document it was
        # about a quarter of the non-model time of ingesting SciFact abstracts (bench/ingest.py, issue #14).
        if len(pending) >= _HEURISTIC_BATCH:
            store.ledger.put_contexts(pending, "heuristic", HEURISTIC_LABEL, workspace)
            pending = []
        written += len(made)
        if progress:
            progress(written, len(todo), 0.0)
    store.ledger.put_contexts(pending, "heuristic", HEURISTIC_LABEL, workspace)
    return ContextReport("heuristic", written=written, existing=len(have))


_HEURISTIC_BATCH = 2000


def embed_variant(store: Store, embedder: Embedder, variant: str, *, workspace: str = DEFAULT_WORKSPACE) -> int:
    """Embed context + chunk for chunks of a contextual variant that lack a vector, so the Search Lab toggle
    switches without re-indexing. Returns how many vectors were stored."""
    stats = backfill_vectors(store.corpus, store.ledger, store.caches, store.corpus, embedder, workspace, variant,
                             purpose=f"context:{variant}")
    return stats.texts


# -- late chunking ----------------------------------------------------------------------------------------------
def late_chunk_vectors(
    text: str, spans: Sequence[tuple[int, int]], encoder: TokenEncoder, *, overlap: int | None = None,
) -> np.ndarray:
    """Late chunking: encode the whole document (overlapping windows of the model's max length when it is
    longer), then mean-pool the contextual token vectors inside each chunk's character span. Every token takes its
    vector from the window where it sits farthest from an edge, i.e. with the most context on both sides."""
    ids, offsets = encoder.tokenize(text)
    size = encoder.window_tokens
    overlap = size // 2 if overlap is None else overlap
    wins = token_windows(len(ids), size, overlap)
    out_vecs = encoder.encode_windows([ids[a:b] for a, b in wins]) if wins else []
    dim = out_vecs[0].shape[1] if out_vecs else 0
    tok = np.zeros((len(ids), dim), dtype=np.float32)
    best = np.full(len(ids), -1, dtype=np.int64)
    for (a, b), vecs in zip(wins, out_vecs):
        idx = np.arange(a, b)
        margin = np.minimum(idx - a, b - 1 - idx)
        take = margin > best[a:b]
        tok[a:b][take] = vecs[take]
        best[a:b][take] = margin[take]
    starts = np.array([s for s, _ in offsets], dtype=np.int64)
    ends = np.array([e for _, e in offsets], dtype=np.int64)
    result = np.zeros((len(spans), max(dim, 1)), dtype=np.float32)
    for i, (s, e) in enumerate(spans):
        inside = (starts < e) & (ends > s) & (ends > starts)
        if not inside.any() and len(ids):
            # A span with no token of its own (whitespace): borrow the nearest token so the chunk still has a vector.
            inside = np.zeros(len(ids), dtype=bool)
            inside[int(np.argmin(np.abs(starts - s)))] = True
        if inside.any():
            v = tok[inside].mean(axis=0)
            n = float(np.linalg.norm(v))
            result[i] = v / n if n else v
    return result


def chunk_spans(text: str, chunks: Sequence[Chunk]) -> list[tuple[int, int]]:
    """Character spans of chunks in their document: the stored offsets when they match the text, otherwise the
    chunk text is searched for (pre-chunked corpora may carry no offsets), in order from the previous match."""
    out, pos = [], 0
    for c in chunks:
        if 0 <= c.start < c.end <= len(text) and text[c.start : c.end] == c.text:
            out.append((c.start, c.end))
            pos = c.start
            continue
        at = text.find(c.text, pos)
        if at < 0:
            at = text.find(c.text)
        if at < 0:
            probe = c.text.strip()[:200]
            at = text.find(probe) if probe else -1
            if at < 0:
                out.append((c.start, max(c.end, c.start)))
                continue
            out.append((at, at + len(c.text.strip())))
        else:
            out.append((at, at + len(c.text)))
        pos = out[-1][0]
    return out


def build_late(
    store: Store, encoder: TokenEncoder, *, workspace: str = DEFAULT_WORKSPACE, progress: Progress | None = None,
) -> ContextReport:
    """Late-chunking vectors (variant 'late') for every document with a chunk that lacks one; documents already
    done are skipped, so a stopped build resumes where it was."""
    have = {cid for cid in store.corpus.vectors(encoder.model_id, "late", workspace)[0]}
    chunks = store.corpus.chunks(workspace)
    todo = {d: cs for d, cs in _by_doc(chunks).items() if any(c.chunk_id not in have for c in cs)}
    written = 0
    for i, (doc_id, cs) in enumerate(todo.items()):
        text = store.corpus.document_text(doc_id, workspace) or ""
        vecs = late_chunk_vectors(text, chunk_spans(text, cs), encoder)
        store.corpus.put_vectors([c.chunk_id for c in cs], vecs, encoder.model_id, "late", workspace)
        written += len(cs)
        if progress:
            progress(i + 1, len(todo), 0.0)
    return ContextReport("late", written=written, existing=len(have), vectors=written)


# -- LLM contexts -------------------------------------------------------------------------------------------------
# Stable text only: nothing here may change between calls for one document (no date, no counter), or the
# cached prefix stops matching and every call pays 1.25x instead of 0.1x.
CONTEXT_INSTRUCTIONS = (
    "You write short search contexts for excerpts of a document. The full document follows. For each excerpt "
    "you are shown, reply with one to three sentences that place it in the document: name the entity it is about "
    "(company, product, person, module), the period it covers when the document gives one, and the section it "
    "belongs to. Do not restate or summarise the excerpt itself, add nothing the document does not say, and reply "
    "with the context sentences only."
)
CONTEXT_ASK = "Here is the excerpt to situate within the document above:"


def context_request(doc_text: str, chunk: Chunk, *, model: str, max_tokens: int = 150) -> LLMRequest:
    """Instructions, then the document behind the cache breakpoint, then the chunk (the only volatile part)."""
    return LLMRequest(
        model=model,
        system=(TextBlock(CONTEXT_INSTRUCTIONS), TextBlock(f"<document>\n{doc_text}\n</document>", cache=True)),
        user=(TextBlock(f"{CONTEXT_ASK}\n<excerpt>\n{chunk.text}\n</excerpt>"),),
        max_tokens=max_tokens, purpose="context", ref_id=chunk.doc_id,
    )


def _prefix_tokens(doc_text: str) -> int:
    return estimate_llm_tokens(CONTEXT_INSTRUCTIONS) + estimate_llm_tokens(f"<document>\n{doc_text}\n</document>")


def _call_tokens(chunk: Chunk) -> int:
    return estimate_llm_tokens(f"{CONTEXT_ASK}\n<excerpt>\n{chunk.text}\n</excerpt>")


def _call_bound(chunk: Chunk) -> int:
    return llm_tokens_upper_bound(f"{CONTEXT_ASK}\n<excerpt>\n{chunk.text}\n</excerpt>")


def _prefix_bound(llm: LLM, doc_text: str, model: str, warnings: list[str]) -> int:
    """Tokens of the cached prefix for the budget guard: the provider's own count when it can be asked (exact, free),
    else a per-script upper bound. Never the ~4-characters estimate, which undercounts Russian by half."""
    if isinstance(llm, TokenCountingLLM):
        probe = LLMRequest(model, (TextBlock(CONTEXT_INSTRUCTIONS), TextBlock(f"<document>\n{doc_text}\n</document>")),
                           (TextBlock("."),), purpose="count")
        try:
            return int(llm.count_tokens(probe))
        except LLMError as exc:
            if not any(w.startswith("token counter") for w in warnings):
                warnings.append(f"token counter unavailable ({exc}); budget checked against an upper bound")
    return llm_tokens_upper_bound(CONTEXT_INSTRUCTIONS) + llm_tokens_upper_bound(f"<document>\n{doc_text}\n</document>")


def workspace_spent(store: Store, workspace: str) -> float:
    """Dollars of every LLM call ever ledgered in the workspace: the running total a workspace budget caps."""
    return float(sum(e.usd for e in store.ledger.usage_ledger(workspace)))


def _limit(store: Store, workspace: str, budget_usd: float, workspace_budget_usd: float) -> tuple[float, str]:
    """What this run may spend, and the stop message prefix naming whichever budget binds."""
    if workspace_budget_usd <= 0:
        return budget_usd, f"budget: {{spent}} spent of {fmt_usd(budget_usd)}"
    before = workspace_spent(store, workspace)
    left = max(0.0, workspace_budget_usd - before)
    if left < budget_usd:
        return left, (f"workspace budget: {{spent}} spent in this run, {fmt_usd(before)} before it, of "
                      f"{fmt_usd(workspace_budget_usd)} for workspace {workspace!r}")
    return budget_usd, f"budget: {{spent}} spent of {fmt_usd(budget_usd)}"


def _todo(store: Store, workspace: str, exclude: set[str] = frozenset()) -> tuple[dict[str, list[Chunk]], int]:
    have = set(store.ledger.contexts("llm", workspace))
    todo = [c for c in store.corpus.chunks(workspace) if c.chunk_id not in have and c.chunk_id not in exclude]
    return _by_doc(todo), len(have)


def _start_llm_run(store: Store, workspace: str, llm: LLM, model: str, run_id: str | None
                   ) -> tuple[str, dict[str, list[Chunk]], int, int, ModelPrice, dict[str, str]]:
    """What both LLM-context builders (build_llm_contexts here, the Ray one in core/ingest/ray_engine.py) start
    from: the key check, the run id, the chunks still without a context by document (and how many have one), their
    count, the model's price and the document names."""
    if not llm.available:
        raise ContextError(f"LLM contexts need an LLM: {llm.reason}. Offline variants: heuristic, late")
    todo, existing = _todo(store, workspace)
    return (run_id or uuid.uuid4().hex, todo, existing, sum(len(cs) for cs in todo.values()), price_for(model),
            {d.doc_id: d.name for d in store.corpus.documents(workspace)})


def estimate_llm_contexts(
    store: Store, *, model: str, workspace: str = DEFAULT_WORKSPACE, output_tokens: int = 80, ttl: Ttl = "5m",
    batch: bool = False,
) -> tuple[RunEstimate, list[str]]:
    """Cost of writing the missing LLM contexts, with and without prompt caching, from estimated token counts
    (~4 characters per token: there is no offline Claude tokenizer). Warnings name documents too short for the
    cache to form."""
    todo, _ = _todo(store, workspace)
    p = price_for(model)
    docs, warnings = [], []
    names = {d.doc_id: d.name for d in store.corpus.documents(workspace)}
    have = set(store.ledger.contexts("llm", workspace))
    edited = {"docs": 0, "write": 0, "kept": 0, "full_usd": 0.0, "usd": 0.0}
    for doc_id, chunks in todo.items():
        text = store.corpus.document_text(doc_id, workspace) or ""
        est = estimate_document(_prefix_tokens(text), len(chunks), model=model,
                                per_call_tokens=[_call_tokens(c) for c in chunks], output_tokens=output_tokens,
                                ttl=ttl, batch=batch, doc_id=doc_id)
        docs.append(est)
        every = store.corpus.chunks(workspace, doc_id)
        kept = sum(1 for c in every if c.chunk_id in have)
        if kept:  # an edited document: its unchanged chunks kept their contexts (context.reindex)
            full = estimate_document(_prefix_tokens(text), len(every), model=model,
                                     per_call_tokens=[_call_tokens(c) for c in every], output_tokens=output_tokens,
                                     ttl=ttl, batch=batch, doc_id=doc_id)
            edited = {"docs": edited["docs"] + 1, "write": edited["write"] + len(chunks),
                      "kept": edited["kept"] + kept, "full_usd": edited["full_usd"] + full.with_cache_usd,
                      "usd": edited["usd"] + est.with_cache_usd}
        if not est.cache_forms and len(chunks) > 1:
            warnings.append(f"{names.get(doc_id, doc_id)}: about {est.prefix_tokens:,} tokens, below the "
                            f"{p.min_cacheable_tokens:,}-token minimum of {model}; the prompt cache will not form "
                            "(cache reads stay 0) and each of its calls pays the full document")
    if not p.known:
        warnings.append(f"{model} is not in core/models/data/prices.toml: priced as the most expensive listed model")
    return RunEstimate(model, tuple(docs), batch, p.known), rebuild_plan(store, todo, edited, workspace) + warnings


def rebuild_plan(store: Store, todo: dict[str, list[Chunk]], edited: dict[str, float], workspace: str) -> list[str]:
    """What a build will write and why, as 'plan:' lines: chunks of documents never contextualised, changed and
    new chunks of edited documents (with the contexts kept and what rewriting those documents whole would cost),
    and contexts marked possibly stale."""
    n = sum(len(cs) for cs in todo.values())
    out = []
    fresh = n - int(edited["write"])
    if fresh:
        out.append(f"plan: {fresh:,} chunks of {len(todo) - int(edited['docs']):,} documents have no llm context yet")
    if edited["docs"]:
        out.append(f"plan: {int(edited['write']):,} changed or new chunks of {int(edited['docs']):,} edited documents "
                   f"need one; their {int(edited['kept']):,} unchanged chunks keep theirs (context.reindex): "
                   f"{fmt_usd(edited['usd'])} instead of {fmt_usd(edited['full_usd'])} for rewriting those documents "
                   "whole")
    stale = store.ledger.stale_contexts("llm", workspace)
    if stale:
        out.append(f"plan: {len(stale):,} kept contexts are marked possibly stale (context.reindex = major) and are "
                   "not rewritten; `python -m core context --variant llm --refresh-stale` rewrites them")
    return out


def build_llm_contexts(
    store: Store, llm: LLM, *, model: str, budget_usd: float, workspace: str = DEFAULT_WORKSPACE,
    max_output_tokens: int = 150, ttl: Ttl = "5m", progress: Progress | None = None, run_id: str | None = None,
    workspace_budget_usd: float = 0.0,
) -> ContextReport:
    """Write LLM contexts for chunks that have none, one document at a time (its chunks back to back, so the
    cached document stays warm). Before every call the worst case of that call (whole prompt at the cache-write
    price + the full output allowance) must fit in what is left of the budget, so the budget is never overshot;
    each context is stored the moment it arrives, so a stopped run resumes without paying for it again."""
    run_id, todo, existing, total, p, names = _start_llm_run(store, workspace, llm, model, run_id)
    spent, written, stopped, flagged = 0.0, 0, "", 0
    warnings: list[str] = []
    # The run may spend up to the smaller of its own budget and what the workspace budget has left (ledger total).
    limit, why = _limit(store, workspace, budget_usd, workspace_budget_usd)
    # A local model (core/models/gguf.py, a local OpenAI-compatible server) books $0: no dollar bound per call, and
    # its prefix reuse has no minimum length. Its cost is time and tokens, in the ledger like any call.
    free = bool(getattr(llm, "free", False))
    for doc_id, chunks in todo.items():
        text = store.corpus.document_text(doc_id, workspace) or ""
        prefix = _prefix_bound(llm, text, model, warnings)
        if prefix < p.min_cacheable_tokens and len(chunks) > 1 and not free:
            warnings.append(f"{names.get(doc_id, doc_id)}: ~{prefix:,} tokens < {p.min_cacheable_tokens:,} minimum "
                            f"of {model}: no prompt cache for this document")
        for c in chunks:
            bound = 0.0 if free else worst_call_usd(model, prefix, _call_bound(c), max_output_tokens, ttl=ttl)
            if spent + bound > limit:
                stopped = (f"{why.format(spent=fmt_usd(spent))}; the next call could cost up to {fmt_usd(bound)}. "
                           "Run again (with a budget) to continue; done contexts are kept")
                break
            # The bound this check used goes with the request: the client books no more than it, whatever the
            # provider reports (core/models/llm.py check_usage), so one call cannot overshoot.
            req = replace(context_request(text, c, model=model, max_tokens=max_output_tokens),
                          input_bound=prefix + _call_bound(c))
            try:
                resp = llm.complete(req, workspace=workspace, run_id=run_id)
            except LLMError as exc:
                stopped = f"error: {exc}. Run again to continue; done contexts are kept"
                break
            spent += resp.usage.usd
            if resp.usage_flag:
                flagged += 1
            store.ledger.put_contexts([(c.chunk_id, _clean(resp.text))], "llm", resp.model, workspace)
            written += 1
            if progress:
                progress(written, total, spent)
        if stopped:
            break
    if flagged:
        warnings.append(f"{flagged} replies reported implausible usage; each was booked at its bound (ledger "
                        "column usage_flag)")
    return ContextReport("llm", written, existing, total - written, spent, stopped, tuple(warnings), run_id)


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def build_llm_contexts_batch(
    store: Store, llm: LLM, *, model: str, budget_usd: float, workspace: str = DEFAULT_WORKSPACE,
    max_output_tokens: int = 150, ttl: Ttl = "5m", poll_s: float = 30.0, max_wait_s: float = 3600.0,
    sleep: Callable[[float], None] = time.sleep, progress: Progress | None = None, workspace_budget_usd: float = 0.0,
) -> ContextReport:
    """Bulk mode through the Message Batches API (-50 %). Batches already submitted and not yet collected are
    polled and collected first (a resumed run never submits the same chunks twice); then the missing chunks are
    submitted, as many as the budget's worst case allows, and polled until they end or `max_wait_s` passes."""
    if not llm.available:
        raise ContextError(f"LLM contexts need Claude: {llm.reason}")
    spent, written, stopped, batch_id = 0.0, 0, "", ""
    pending: set[str] = set()
    existing = len(store.ledger.contexts("llm", workspace))

    def collect(b: OpenBatch) -> bool:
        nonlocal spent, written, stopped
        status = wait_for_batch(llm, b.batch_id, poll_s=poll_s, max_wait_s=max_wait_s, sleep=sleep)
        if not status.ended:
            stopped = f"batch {b.batch_id} still {status.status}; run again later to collect it"
            return False
        ids = list(b.chunk_ids)
        chunks = store.corpus.chunks_by_id(ids, workspace)
        texts: dict[str, str] = {}
        prefixes: dict[str, int] = {}
        requests = {}
        for i, cid in enumerate(ids):
            c = chunks.get(cid)
            if c is None:
                continue  # the document was deleted meanwhile
            if c.doc_id not in texts:
                texts[c.doc_id] = store.corpus.document_text(c.doc_id, workspace) or ""
                prefixes[c.doc_id] = _prefix_bound(llm, texts[c.doc_id], b.model, [])
            # The bound the submit-time budget check used: no result is booked above it (see build_llm_contexts).
            requests[f"r{i}"] = replace(context_request(texts[c.doc_id], c, model=b.model,
                                                        max_tokens=max_output_tokens),
                                        input_bound=prefixes[c.doc_id] + _call_bound(c))
        results = llm.batch_results(b.batch_id, requests, workspace=workspace, run_id=b.run_id)
        good = [(ids[int(k[1:])], _clean(r.text)) for k, r in results.items() if isinstance(r, LLMResponse)]
        spent += sum(r.usage.usd for r in results.values() if isinstance(r, LLMResponse))
        store.ledger.put_contexts(good, "llm", b.model, workspace)
        written += len(good)
        store.ledger.set_batch_status(b.batch_id, "collected", workspace)
        if progress:
            progress(written, written, spent)
        return True

    for b in store.ledger.open_batches("context", "llm", workspace):
        if not collect(b):
            pending.update(b.chunk_ids)
            break
    if not stopped:
        todo, _ = _todo(store, workspace)
        items: list[tuple[Chunk, str]] = []
        bound_total = 0.0
        limit, why = _limit(store, workspace, budget_usd, workspace_budget_usd)
        count_warnings: list[str] = []
        for doc_id, chunks in todo.items():
            text = store.corpus.document_text(doc_id, workspace) or ""
            prefix = _prefix_bound(llm, text, model, count_warnings)
            for c in chunks:
                bound = worst_call_usd(model, prefix, _call_bound(c), max_output_tokens, ttl=ttl, batch=True)
                if spent + bound_total + bound > limit:
                    stopped = (f"{why.format(spent=fmt_usd(spent))}: only {len(items)} requests fit "
                               "(worst case)")
                    break
                bound_total += bound
                items.append((c, text))
            if stopped:
                break
        if items:
            run_id = uuid.uuid4().hex
            reqs = [(f"r{i}", context_request(t, c, model=model, max_tokens=max_output_tokens))
                    for i, (c, t) in enumerate(items)]
            batch_id = llm.submit_batch(reqs)
            store.ledger.put_batch(batch_id, purpose="context", variant="llm", model=model, run_id=run_id,
                                   chunk_ids=[c.chunk_id for c, _ in items], workspace=workspace)
            budget_note = stopped
            stopped = ""
            submitted = OpenBatch(batch_id, model, run_id, len(items), "in_progress",
                                  tuple(c.chunk_id for c, _ in items), None)
            if not collect(submitted):
                pending.update(c.chunk_id for c, _ in items)
            stopped = stopped or budget_note
    todo_after, _ = _todo(store, workspace, exclude=pending)
    remaining = sum(len(v) for v in todo_after.values()) + len(pending)
    return ContextReport("llm", written, existing, remaining, spent, stopped, (), "", batch_id)


@dataclass(frozen=True)
class BuildRequest:
    """What a context build should do: the CLI and the Costs page fill this from config and widgets."""

    variant: str
    model: str = "claude-haiku-4-5"
    budget_usd: float = 5.0
    use_batches: bool = False
    max_output_tokens: int = 150
    ttl: Ttl = "5m"
    embed: bool = True  # embed context + chunk right after, so the toggle is instant
    extra: dict = field(default_factory=dict)
    workspace_budget_usd: float = 0.0  # cap on the workspace's ledger total (all runs together); 0 = none


def run_build(
    req: BuildRequest, store: Store, embedder: Embedder, llm: LLM, *, workspace: str = DEFAULT_WORKSPACE,
    progress: Progress | None = None, encoder: TokenEncoder | None = None,
) -> ContextReport:
    """One entry point for every variant (CLI and page)."""
    if req.variant == "heuristic":
        rep = build_heuristic(store, workspace=workspace, progress=progress)
    elif req.variant == "late":
        try:
            encoder = encoder or window_encoder_for(embedder)  # the embedder's own token encoder, any runtime
        except NoTokenVectors as exc:
            raise ContextError(str(exc)) from exc
        return build_late(store, encoder, workspace=workspace, progress=progress)
    elif req.variant == "llm":
        if req.use_batches:
            rep = build_llm_contexts_batch(store, llm, model=req.model, budget_usd=req.budget_usd, workspace=workspace,
                                           max_output_tokens=req.max_output_tokens, ttl=req.ttl, progress=progress,
                                           workspace_budget_usd=req.workspace_budget_usd, **req.extra)
        else:
            rep = build_llm_contexts(store, llm, model=req.model, budget_usd=req.budget_usd, workspace=workspace,
                                     max_output_tokens=req.max_output_tokens, ttl=req.ttl, progress=progress,
                                     workspace_budget_usd=req.workspace_budget_usd)
    else:
        raise ContextError(f"unknown context variant {req.variant!r}; choose one of heuristic, late, llm")
    if req.embed:
        rep = replace(rep, vectors=embed_variant(store, embedder, req.variant, workspace=workspace))
    return rep


def prepare_variant(store: Store, variant: str, workspace: str = DEFAULT_WORKSPACE, model_id: str | None = None) -> list[str]:
    """Called by the pipeline before searching; reads two counts and writes nothing (a query only reads). The notes
    say how much of the corpus has the variant (the rest is searched raw) and how to build the rest: heuristic
    contexts are written at ingest, so only a corpus stored before that needs the build."""
    if variant == "none":
        return []
    label = {"heuristic": "heuristic contexts", "late": "late-chunking vectors"}.get(variant, "LLM contexts")
    have, total = coverage(store, variant, workspace, model_id)
    build = f"`python -m core context --variant {variant}` or on the Costs page"
    if have == 0 and total:
        return [f"context.variant = {variant} but no {label} exist yet, so raw text is searched; build them with "
                f"{build}"]
    if have < total:
        return [f"{label} cover {have} of {total} chunks; the other chunks are searched raw (build the rest with "
                f"{build})"]
    return []
