"""Stored golden-set items as the JSONL objects the golden-set reader takes (core/eval/datasets.py parse_line).

One line per item: `id`, `query`, `type`, `answerable`, `answer` and `gold`, a list of {"doc", "span", "chunk"}
(document name, gold text, the chunk id it came from). A gold passage with no text is written as
{"doc", "chunk_id"} so the reader matches that chunk exactly; with text it is matched as a span of the document,
which survives re-chunking. Rejected items are never written; `meta` (generator, measured overlap) rides along.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from core.store.golden import GoldenItem

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
