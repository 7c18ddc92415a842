"""Stored golden-set items as the JSONL objects the golden-set reader takes (core/eval/datasets.py parse_line).

One line per item: `id`, `query`, `type`, `answerable`, `answer` and `gold`, a list of {"doc", "span", "chunk"}
(document name, gold text, the chunk id it came from). A gold passage with no text is written as
{"doc", "chunk_id"} so the reader matches that chunk exactly; with text it is matched as a span of the document,
which survives re-chunking. Rejected items are never written; `meta` (generator, measured overlap) rides along.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Sequence

from core.store.golden import STATUSES, GoldenItem, GoldRef

__all__ = ["STATUSES", "USABLE", "GoldRef", "GoldenItem", "item_json", "lab_item", "to_jsonl", "usable"]

USABLE = ("pending", "accepted", "edited")  # what evaluation and export read: everything not rejected


def item_json(item: GoldenItem) -> dict[str, Any]:
    gold: list[dict[str, str]] = []
    for g in item.gold:
        if g.span.strip():
            gold.append({"doc": g.doc, "span": g.span, "chunk": g.chunk})
        elif g.chunk:
            gold.append({"doc": g.doc, "chunk_id": g.chunk})
        elif g.doc:
            gold.append({"doc": g.doc})
    out: dict[str, Any] = {"id": item.item_id, "query": item.query, "type": item.qtype,
                           "answerable": bool(item.answerable), "answer": item.answer, "gold": gold,
                           "generator": item.generator, "status": item.status}
    if item.meta:
        out["meta"] = dict(item.meta)
    return out


def to_jsonl(items: Iterable[GoldenItem]) -> str:
    return "".join(json.dumps(item_json(it), ensure_ascii=False, default=str) + "\n"
                   for it in items if it.status != "rejected")


def usable(items: Sequence[GoldenItem]) -> list[GoldenItem]:
    return [it for it in items if it.status in USABLE]


def lab_item(query: str, gold: Sequence[tuple[str, str]], *, answer: str = "", unanswerable: bool = False,
             spans: Sequence[str] | None = None) -> GoldenItem:
    """A question saved from the Search Lab: the chunks a person ticked as gold ((document name, chunk id) pairs),
    or none and "the corpus does not answer this". Accepted as written: a person chose it."""
    q = " ".join(query.split())
    if not q:
        raise ValueError("the question is empty")
    if not unanswerable and not gold:
        raise ValueError("tick the gold chunk(s), or mark that the corpus does not answer this")
    refs = () if unanswerable else tuple(GoldRef(d, c, (spans[i] if spans else "")) for i, (d, c) in enumerate(gold))
    key = hashlib.sha1("\x1f".join([q, *(c for _, c in gold)]).encode()).hexdigest()[:10]
    return GoldenItem(f"lab{key}", q, "unanswerable" if unanswerable else "factoid", not unanswerable, answer.strip(),
                      refs, "search-lab", "accepted")
