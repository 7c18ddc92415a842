"""Expansion before generation: hand the model the parent section, or n sentences either side of what was kept."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, Sequence

from core.cascade.prune import GAP
from core.text import estimate_llm_tokens, sentence_spans
from core.types import DEFAULT_WORKSPACE, Candidate, Chunk, Span


class DocumentSource(Protocol):
    """Document text and chunk offsets (core.store's corpus repository, `store.corpus`, implements it)."""

    def document_text(self, doc_id: str, workspace: str = ...) -> str | None: ...

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = ...) -> dict[str, Chunk]: ...

    def chunks(self, workspace: str = ..., doc_id: str | None = None) -> list[Chunk]: ...


@dataclass(frozen=True)
class ExpandOutcome:
    candidates: list[Candidate]
    merged: list[tuple[str, str]]  # (chunk id folded in, chunk id it was folded into): expansions that overlapped
    unexpanded: list[str]  # chunk ids whose document text or offsets were not found (handed on as they came)


def chunk_span(doc_text: str, chunk: Chunk) -> Span | None:
    """Where the chunk sits in its document: the stored offsets when they hold the chunk text, else a search."""
    if 0 <= chunk.start < chunk.end <= len(doc_text) and doc_text[chunk.start : chunk.end] == chunk.text:
        return chunk.start, chunk.end
    at = doc_text.find(chunk.text)
    return (at, at + len(chunk.text)) if at >= 0 else None


def _merge(spans: Sequence[Span]) -> list[Span]:
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def window_spans(sentences: Sequence[Span], anchors: Sequence[Span], n: int) -> list[Span]:
    """The sentences touching any anchor, plus n sentences either side, as merged character ranges."""
    picked: set[int] = set()
    for a, b in anchors:
        for i, (s, e) in enumerate(sentences):
            if s < b and e > a:
                picked.update(range(max(0, i - n), min(len(sentences), i + n + 1)))
    # Consecutive sentences join into one range, so the whitespace between them comes along verbatim.
    runs: list[list[int]] = []
    for i in sorted(picked):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return _merge([(sentences[a][0], sentences[b][1]) for a, b in runs] + list(anchors))


def parent_span(chunk: Chunk, siblings: Sequence[Chunk], doc_len: int) -> Span:
    """The chunk's section: the run of neighbouring chunks that share its heading path; the whole document when the
    chunk has no heading path."""
    if not chunk.heading_path:
        return 0, doc_len
    ordered = sorted(siblings, key=lambda c: c.ordinal)
    pos = next((i for i, c in enumerate(ordered) if c.chunk_id == chunk.chunk_id), None)
    if pos is None:
        return chunk.start, chunk.end
    lo = hi = pos
    while lo > 0 and ordered[lo - 1].heading_path == chunk.heading_path:
        lo -= 1
    while hi < len(ordered) - 1 and ordered[hi + 1].heading_path == chunk.heading_path:
        hi += 1
    return min(c.start for c in ordered[lo : hi + 1]), max(c.end for c in ordered[lo : hi + 1])


def capped_parent(doc_text: str, sentences: Sequence[Span], parent: Span, anchor: Span, max_tokens: int) -> list[Span]:
    """The parent when it fits max_tokens; otherwise the anchor grown a sentence at a time on alternate sides,
    inside the parent, while it fits."""
    if estimate_llm_tokens(doc_text[parent[0] : parent[1]]) <= max_tokens:
        return [parent]
    inside = [i for i, (s, e) in enumerate(sentences) if s >= parent[0] and e <= parent[1]]
    touching = [i for i in inside if sentences[i][0] < anchor[1] and sentences[i][1] > anchor[0]]
    if not touching:
        return [anchor]
    lo, hi = min(touching), max(touching)
    first, last = inside[0], inside[-1]
    span = (min(anchor[0], sentences[lo][0]), max(anchor[1], sentences[hi][1]))
    grew = True
    while grew:
        grew = False
        for side in ("before", "after"):
            if side == "before" and lo > first:
                trial = (sentences[lo - 1][0], span[1])
                if estimate_llm_tokens(doc_text[trial[0] : trial[1]]) <= max_tokens:
                    lo, span, grew = lo - 1, trial, True
            elif side == "after" and hi < last:
                trial = (span[0], sentences[hi + 1][1])
                if estimate_llm_tokens(doc_text[trial[0] : trial[1]]) <= max_tokens:
                    hi, span, grew = hi + 1, trial, True
    return [span]


def expand(
    candidates: Sequence[Candidate], source: DocumentSource, *, mode: str, window: int = 2,
    parent_max_tokens: int = 1000, workspace: str = DEFAULT_WORKSPACE,
) -> ExpandOutcome:
    """The expand stage. Anchors are what the previous stage kept (pruned sentences, meta 'kept_spans', else the
    whole chunk). 'window' adds `window` sentences either side of each anchor; 'parent' hands over the chunk's
    section (capped at parent_max_tokens around the chunk). Expansions of one document that overlap are merged
    into the better-ranked candidate, and the trace says which chunk went into which."""
    if mode not in ("window", "parent"):
        raise ValueError(f"unknown expansion mode {mode!r}")
    chunks = source.chunks_by_id([c.chunk_id for c in candidates], workspace)
    texts: dict[str, str | None] = {}
    sentences: dict[str, list[Span]] = {}
    siblings: dict[str, list[Chunk]] = {}
    planned: list[tuple[Candidate, str | None, list[Span]]] = []
    unexpanded: list[str] = []
    for c in candidates:
        chunk = chunks.get(c.chunk_id)
        if chunk is not None and chunk.doc_id not in texts:
            texts[chunk.doc_id] = source.document_text(chunk.doc_id, workspace)
        doc_text = texts.get(chunk.doc_id) if chunk is not None else None
        where = chunk_span(doc_text, chunk) if chunk is not None and doc_text else None
        if chunk is None or doc_text is None or where is None:
            unexpanded.append(c.chunk_id)
            planned.append((c, None, []))
            continue
        if chunk.doc_id not in sentences:
            sentences[chunk.doc_id] = sentence_spans(doc_text)
        kept = c.meta.get("kept_spans")
        anchors = [(where[0] + s, where[0] + e) for s, e in kept] if kept else [where]
        if mode == "window":
            spans = window_spans(sentences[chunk.doc_id], anchors, window)
        else:
            if chunk.doc_id not in siblings:
                siblings[chunk.doc_id] = source.chunks(workspace, chunk.doc_id)
            parent = parent_span(chunk, siblings[chunk.doc_id], len(doc_text))
            spans = capped_parent(doc_text, sentences[chunk.doc_id], parent, where, parent_max_tokens)
        planned.append((c, chunk.doc_id, spans))

    # Fold overlapping expansions of the same document into the better-ranked candidate.
    merged: list[tuple[str, str]] = []
    groups: list[tuple[Candidate, str | None, list[Span], list[str]]] = []
    for c, doc_id, spans in planned:
        target = next((g for g in groups if doc_id is not None and g[1] == doc_id
                       and any(s < be and e > bs for s, e in spans for bs, be in g[2])), None)
        if target is None:
            groups.append((c, doc_id, spans, []))
        else:
            target[2][:] = _merge([*target[2], *spans])
            target[3].append(c.chunk_id)
            merged.append((c.chunk_id, target[0].chunk_id))
    out: list[Candidate] = []
    for c, doc_id, spans, folded in groups:
        rank = len(out) + 1
        if doc_id is None:
            out.append(c.with_rank(rank, None, stage="expand"))
            continue
        doc_text = texts[doc_id] or ""
        text = GAP.join(doc_text[s:e] for s, e in spans)
        extra = {"merged": ", ".join(folded)} if folded else {}
        moved = c.with_rank(rank, None, stage="expand", rank_before=c.rank, expanded=mode,
                            expanded_to=", ".join(f"{s}-{e}" for s, e in spans), **extra)
        out.append(replace(moved, text=text))
    return ExpandOutcome(out, merged, unexpanded)
