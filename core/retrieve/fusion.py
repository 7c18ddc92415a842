"""Reciprocal rank fusion (plain and weighted) of ranked candidate lists."""
from __future__ import annotations

from typing import Sequence

from core.types import Candidate


def rrf(
    lists: Sequence[Sequence[Candidate]], *, k: int = 60, weights: Sequence[float] | None = None,
    names: Sequence[str] | None = None, top: int | None = None,
) -> list[Candidate]:
    """score(d) = sum_i w_i / (k + rank_i(d)). Lists with weight 0 are left out entirely. Ties keep first-seen order.
    Each fused candidate records its rank in every input list (meta 'rank_<name>') so the view can show moves."""
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError("one weight per list")
    names = list(names) if names is not None else [f"list{i}" for i in range(len(lists))]
    scores: dict[str, float] = {}
    first: dict[str, Candidate] = {}
    ranks: dict[str, dict[str, int]] = {}
    order: list[str] = []
    for cands, w, name in zip(lists, weights, names):
        if w <= 0:
            continue  # a dropped list must not even contribute zero-score members
        for c in cands:
            if c.chunk_id not in first:
                first[c.chunk_id] = c
                order.append(c.chunk_id)
                scores[c.chunk_id] = 0.0
                ranks[c.chunk_id] = {}
            ranks[c.chunk_id][name] = c.rank
            scores[c.chunk_id] += w / (k + c.rank)
    pos = {cid: i for i, cid in enumerate(order)}
    ranked = sorted(order, key=lambda cid: (-scores[cid], pos[cid]))
    if top is not None:
        ranked = ranked[:top]
    out = []
    for r, cid in enumerate(ranked, start=1):
        base = first[cid]
        meta = {f"rank_{n}": ranks[cid].get(n) for n in names}
        out.append(Candidate(cid, base.doc_id, base.text, scores[cid], r, {**dict(base.meta), **meta}))
    return out
