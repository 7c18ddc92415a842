"""Golden-set items written by Claude: per sampled chunk, the document as a cached prefix, a JSON schema, a budget.

Documents are taken one at a time: every call about a chunk of a document sends the same system block and the same
document block (both cache breakpoints), so the second and later calls read the prefix from the cache. Before each
call the worst case (the whole prompt at the cache-write price plus the full output allowance) is checked against
what is left of the budget, so the budget is never overshot. Every item is validated before it is kept: the gold
span must be in its chunk, the answer's words in the span, and a near-miss's swapped-in term absent from every
chunk; a malformed reply or a failed call costs that chunk's items and nothing else.

With `batch`, the same requests go through the Message Batches API at half the price: every planned call is
checked against the budget at the batch rate's worst case before one batch is submitted, the batch is remembered in
the ledger (purpose "golden"), polled until it ends or the wait runs out, and collected; a batch still running when
the wait ends is collected by the next batched run instead of being submitted again.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from core.eval.golden import (
    CorpusIndex,
    CorpusReader,
    GenerateReport,
    GoldenWriter,
    Passage,
    content_words,
    counts_by_type,
    default_name,
    generation_notes,
    mean_overlap,
    overlap,
    passages_from,
    item_key,
)
from core.eval.golden_check import problem
from core.eval.metrics import span_in_text
from core.models.llm import LLM, LLMError, LLMRequest, LLMResponse, TextBlock, parse_json, wait_for_batch
from core.models.pricing import worst_call_usd
from core.store.golden import GoldenItem, GoldRef
from core.text import estimate_llm_tokens
from core.types import OpenBatch

GENERATOR = "claude-v1"
MODEL = "claude-haiku-4-5"
MAX_DOC_CHARS = 60_000  # a longer document is cut: the chunk itself is always sent whole
MAX_OUTPUT = 700
Progress = Callable[[int, int, str], None]

INSTRUCTIONS = """You write evaluation questions for a retrieval system over the user's own documents.
You are given a whole document and then one passage of it. Write questions a user of these documents would ask
whose answer is stated in THAT passage. Rules:
- Ask about one fact (a name, number, date, identifier, definition or relation) in your own words: do not copy the
  passage's sentence; mention only what a person would need to say to be understood.
- "gold_span" is copied exactly, character for character, from the passage: the shortest sentence or clause that
  states the answer.
- "answer" is short and its words appear in gold_span.
- Also write one near-miss: the same kind of question with one entity, period or attribute swapped for one the
  document does not mention; give that swapped-in term as "missing_term" and set answerable to false, gold_span "".
- Write in the passage's language (a Russian passage gets Russian questions).
Reply with JSON only, valid for the schema."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {
        "type": "object",
        "properties": {
            "question": {"type": "string"}, "answer": {"type": "string"}, "gold_span": {"type": "string"},
            "type": {"type": "string", "enum": ["factoid", "exact-id", "unanswerable"]},
            "answerable": {"type": "boolean"}, "missing_term": {"type": "string"},
        },
        "required": ["question", "answer", "gold_span", "type", "answerable", "missing_term"],
        "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False,
}


@dataclass
class LLMBudget:
    """A hard dollar limit; `spent` grows with each call's priced usage."""

    usd: float
    spent: float = 0.0

    def allows(self, worst: float) -> bool:
        return self.spent + worst <= self.usd


@dataclass
class Outcome:
    items: list[GoldenItem] = field(default_factory=list)
    calls: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    stopped: str = ""  # why it ended early ("budget", ...), "" when it finished

    def reject(self, why: str) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + 1


def _norm(s: str) -> str:
    return " ".join(s.split())


def request_for(p: Passage, doc_text: str, model: str = MODEL) -> LLMRequest:
    """The prefix (instructions, document) is byte-identical for every chunk of one document."""
    doc = doc_text[:MAX_DOC_CHARS]
    return LLMRequest(model, (TextBlock(INSTRUCTIONS, cache=True),),
                      (TextBlock(f"<document title=\"{p.title}\">\n{doc}\n</document>", cache=True),
                       TextBlock(f"<passage>\n{p.chunk.text}\n</passage>\nWrite one or two answerable questions and "
                                 "one near-miss about this passage.")),
                      max_tokens=MAX_OUTPUT, json_schema=SCHEMA, purpose="golden", ref_id=p.chunk.chunk_id)


def validate(raw: Any, p: Passage, index: CorpusIndex, out: Outcome) -> list[GoldenItem]:
    """Items of one reply that pass every check; each failure is counted by its reason."""
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list):
        out.reject("malformed reply")
        return []
    kept = []
    text = _norm(p.chunk.text)
    for obj in raw["items"]:
        if not isinstance(obj, dict) or not isinstance(obj.get("question"), str) or not obj["question"].strip():
            out.reject("no question")
            continue
        q = _norm(obj["question"])
        answerable = obj.get("answerable") is not False and obj.get("type") != "unanswerable"
        # held to the offline generator's check: one standalone question, in the passage's language, no give-away
        why = problem(q, lang="ru" if p.chunk.lang == "ru" else "en", answer=_norm(str(obj.get("answer", ""))),
                      evidence=_norm(str(obj.get("gold_span", ""))), content=content_words, answerable=answerable)
        if why:
            out.reject(why)
            continue
        if answerable:
            span, answer = _norm(str(obj.get("gold_span", ""))), _norm(str(obj.get("answer", "")))
            if not span or not (span in text or span_in_text(span, text, 0.9)):
                out.reject("span not in its chunk")
                continue
            aw = {w.casefold() for w in content_words(answer)}
            if not answer or (aw and len(aw & {w.casefold() for w in content_words(span)}) < 0.5 * len(aw)):
                out.reject("answer not in its span")
                continue
            qtype = obj.get("type") if obj.get("type") in ("factoid", "exact-id") else "factoid"
            kept.append(GoldenItem(item_key("llm", q, p.chunk.chunk_id), q, qtype, True, answer,
                                   (GoldRef(p.doc, p.chunk.chunk_id, span),), GENERATOR,
                                   meta={"overlap": round(overlap(q, span), 3), "lang": p.chunk.lang}))
        else:
            term = _norm(str(obj.get("missing_term", "")))
            if not term or index.contains(term):
                out.reject("near-miss term found in the corpus" if term else "near-miss without its term")
                continue
            kept.append(GoldenItem(item_key("llm-nm", q), q, "unanswerable", False, "", (), GENERATOR,
                                   meta={"missing_term": term, "lang": p.chunk.lang, "near_miss_of": p.chunk.chunk_id}))
    return kept


def items_of(resp: LLMResponse, p: Passage, index: CorpusIndex, out: Outcome) -> list[GoldenItem]:
    """The valid items of one reply about passage `p` (validate), or none when the reply is not JSON."""
    try:
        data = resp.data if resp.data is not None else parse_json(resp.text)
    except LLMError:
        out.reject("malformed reply")
        return []
    return validate(data, p, index, out)


def estimate(passages: Sequence[Passage], doc_texts: dict[str, str], calls: int, model: str = MODEL, *,
             batch: bool = False) -> float:
    """Worst-case dollars for `calls` chunk calls (every prompt at the cache-write price, full output; at the batch
    rate with `batch`)."""
    if not passages or calls <= 0:
        return 0.0
    sizes = [estimate_llm_tokens(INSTRUCTIONS) + estimate_llm_tokens(doc_texts.get(p.doc, "")[:MAX_DOC_CHARS])
             + estimate_llm_tokens(p.chunk.text) + 40 for p in passages]
    mean = sum(sizes) / len(sizes)
    return calls * worst_call_usd(model, int(mean), 0, MAX_OUTPUT, batch=batch)


def plan_calls(passages: Sequence[Passage], n: int, seed: int = 0) -> list[Passage]:
    """The chunks to ask about, in call order: documents one at a time (shuffled), a few sampled chunks of each, about
    n/2 calls in all (each call gives up to three items, a near-miss among them)."""
    rng = random.Random(seed)
    by_doc: dict[str, list[Passage]] = {}
    for p in passages:
        by_doc.setdefault(p.doc, []).append(p)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    calls_wanted = max(1, -(-n // 2))
    per_doc = max(1, -(-calls_wanted // max(1, len(docs))))
    return [p for d in docs for p in rng.sample(by_doc[d], min(per_doc, len(by_doc[d])))]


def generate_llm(passages: Sequence[Passage], doc_texts: dict[str, str], llm: LLM, n: int, *, budget: LLMBudget,
                 seed: int = 0, model: str = MODEL, workspace: str = "default",
                 progress: Progress | None = None) -> Outcome:
    """About n items, one call at a time (see plan_calls), stopping before the budget could be overshot."""
    index = CorpusIndex(passages)
    out = Outcome()
    for p in plan_calls(passages, n, seed):
        d = p.doc
        if len(out.items) >= n:
            return out
        req = request_for(p, doc_texts.get(d, p.chunk.text), model)
        prefix = sum(estimate_llm_tokens(b.text) for b in (*req.system, *req.user))
        # A local model books $0 (core/models/gguf.py, a local server): the dollar budget does not bound it.
        if not getattr(llm, "free", False) and not budget.allows(worst_call_usd(model, prefix, 0, MAX_OUTPUT)):
            out.stopped = "budget"
            return out
        out.calls += 1
        try:
            resp = llm.complete(req, workspace=workspace)
        except LLMError as exc:
            out.reject(f"call failed ({exc.kind})")
            if exc.kind in ("auth", "unavailable", "budget"):
                out.stopped = exc.kind
                return out
            continue
        budget.spent += resp.usage.usd
        out.items.extend(items_of(resp, p, index, out))
        if progress:
            progress(min(len(out.items), n), n, f"{out.calls} calls, ${budget.spent:.4f}")
    return out


class BatchLedger(Protocol):
    """Where submitted batches are remembered until collected (core.store's ledger implements it)."""

    def put_batch(self, batch_id: str, *, purpose: str, variant: str, model: str, run_id: str,
                  chunk_ids: Sequence[str], status: str = ..., workspace: str = ...) -> None: ...

    def set_batch_status(self, batch_id: str, status: str, workspace: str = ...) -> None: ...

    def open_batches(self, purpose: str, variant: str, workspace: str = ...) -> list[OpenBatch]: ...


BATCH_PURPOSE, BATCH_VARIANT = "golden", GENERATOR


def generate_llm_batch(passages: Sequence[Passage], doc_texts: dict[str, str], llm: LLM, n: int, *,
                       budget: LLMBudget, ledger: BatchLedger, seed: int = 0, model: str = MODEL,
                       workspace: str = "default", poll_s: float = 30.0, max_wait_s: float = 3600.0,
                       sleep: Callable[[float], None] = time.sleep, progress: Progress | None = None) -> Outcome:
    """The planned calls of generate_llm as one Message Batch (-50 %). Batches of an earlier run still open in the
    ledger are collected first; if one is still running when the wait ends, nothing new is submitted."""
    index = CorpusIndex(passages)
    by_chunk = {p.chunk.chunk_id: p for p in passages}
    out = Outcome()

    def collect(b: OpenBatch) -> bool:
        status = wait_for_batch(llm, b.batch_id, poll_s=poll_s, max_wait_s=max_wait_s, sleep=sleep)
        if not status.ended:
            out.stopped = f"batch {b.batch_id} still {status.status}; run again later to collect it"
            return False
        reqs = {f"r{i}": request_for(by_chunk[cid], doc_texts.get(by_chunk[cid].doc, by_chunk[cid].chunk.text),
                                     b.model)
                for i, cid in enumerate(b.chunk_ids) if cid in by_chunk}  # a deleted chunk's result is dropped
        results = llm.batch_results(b.batch_id, reqs, workspace=workspace, run_id=b.run_id)
        for key in sorted(results, key=lambda k: int(k[1:])):
            r = results[key]
            if key not in reqs:
                continue
            if isinstance(r, LLMError):
                out.reject(f"call failed ({r.kind})")
                continue
            budget.spent += r.usage.usd
            out.items.extend(items_of(r, by_chunk[b.chunk_ids[int(key[1:])]], index, out))
        ledger.set_batch_status(b.batch_id, "collected", workspace)
        if progress:
            progress(min(len(out.items), n), n, f"batch {b.batch_id} collected, ${budget.spent:.4f}")
        return True

    asked: set[str] = set()
    for b in ledger.open_batches(BATCH_PURPOSE, BATCH_VARIANT, workspace):
        if not collect(b):
            return out
        asked.update(b.chunk_ids)
    planned: list[tuple[Passage, LLMRequest]] = []
    bound = 0.0
    rest = [p for p in passages if p.chunk.chunk_id not in asked]  # a collected batch's chunks are not asked again
    for p in plan_calls(rest, max(0, n - len(out.items)), seed) if len(out.items) < n and rest else []:
        req = request_for(p, doc_texts.get(p.doc, p.chunk.text), model)
        prefix = sum(estimate_llm_tokens(x.text) for x in (*req.system, *req.user))
        worst = worst_call_usd(model, prefix, 0, MAX_OUTPUT, batch=True)
        if not budget.allows(bound + worst):
            out.stopped = f"budget: {len(planned)} requests fit (worst case at the batch rate)"
            break
        bound += worst
        planned.append((p, req))
    if not planned:
        return out
    batch_id = llm.submit_batch([(f"r{i}", req) for i, (_, req) in enumerate(planned)])
    out.calls += len(planned)
    run_id = f"golden-{batch_id}"
    ledger.put_batch(batch_id, purpose=BATCH_PURPOSE, variant=BATCH_VARIANT, model=model, run_id=run_id,
                     chunk_ids=[p.chunk.chunk_id for p, _ in planned], workspace=workspace)
    budget_note = out.stopped
    out.stopped = ""
    collect(OpenBatch(batch_id, model, run_id, len(planned), "in_progress",
                      tuple(p.chunk.chunk_id for p, _ in planned), None))
    out.stopped = out.stopped or budget_note
    return out


def generate_llm_into(golden: GoldenWriter, corpus: CorpusReader, llm: LLM, workspace: str, n: int, *,
                      name: str | None = None, seed: int = 0, budget: LLMBudget, corpus_version: int = 0,
                      model: str = MODEL, progress: Progress | None = None,
                      doc_text: Callable[[str], str | None] | None = None, ledger: BatchLedger | None = None,
                      max_wait_s: float = 3600.0, poll_s: float = 30.0,
                      sleep: Callable[[float], None] = time.sleep) -> GenerateReport:
    """Generate and store a set; with a `ledger`, through the Message Batches API (see generate_llm_batch)."""
    passages = passages_from(corpus, workspace)
    if not passages:
        raise ValueError(f"workspace {workspace!r} holds no chunks: ingest documents first")
    texts: dict[str, str] = {}
    by_name = {p.doc: p.chunk.doc_id for p in passages}
    for nm, did in by_name.items():
        t = doc_text(did) if doc_text else None
        texts[nm] = t if t else "\n\n".join(q.chunk.text for q in passages if q.doc == nm)
    if ledger is not None:
        out = generate_llm_batch(passages, texts, llm, n, budget=budget, ledger=ledger, seed=seed, model=model,
                                 workspace=workspace, poll_s=poll_s, max_wait_s=max_wait_s, sleep=sleep,
                                 progress=progress)
    else:
        out = generate_llm(passages, texts, llm, n, budget=budget, seed=seed, model=model, workspace=workspace,
                           progress=progress)
    unique: dict[str, GoldenItem] = {}
    for it in out.items:  # two chunks can yield the same near-miss question: it is one item
        unique.setdefault(it.item_id, it)
    items = list(unique.values())[:n]
    name = name or default_name(corpus_version, n) + "-claude"
    if not items and out.stopped.startswith("batch "):  # nothing to store yet: the next run collects the batch
        return GenerateReport(name, workspace, 0, {}, None, GENERATOR, budget.spent,
                              (f"{out.calls} requests submitted", f"stopped early: {out.stopped}"))
    golden.put_set(workspace, name, items, generator=GENERATOR, corpus_version=corpus_version,
                   notes=generation_notes(out.rejected, writer=model, seed=seed,
                                          spent=f"${budget.spent:.4f} of ${budget.usd:.2f}"))
    notes = tuple([f"{out.calls} {'batched requests' if ledger is not None else 'calls'}, ${budget.spent:.4f} spent "
                   f"of ${budget.usd:.2f}"]
                  + [f"rejected {v}: {k}" for k, v in sorted(out.rejected.items())]
                  + ([f"stopped early: {out.stopped}"] if out.stopped else []))
    return GenerateReport(name, workspace, len(items), counts_by_type(items), mean_overlap(items), GENERATOR,
                          budget.spent, notes, dict(out.rejected))
