"""Trace -> pandas frames and plain-text tables for the views and the CLI; no streamlit here."""
from __future__ import annotations

import hashlib
from typing import Sequence

import pandas as pd

from core.types import StageResult, Trace

# A fixed qualitative palette: the same chunk gets the same colour in every column (hash of its id).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def chunk_colour(chunk_id: str) -> str:
    return PALETTE[int(hashlib.md5(chunk_id.encode()).hexdigest(), 16) % len(PALETTE)]


def snippet(text: str, n: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def stage_frame(stage: StageResult, previous: StageResult | None = None) -> pd.DataFrame:
    """One stage's candidates: rank, score, chunk, snippet, and the move relative to the previous stage that ran
    (positive = moved up; 'new' = not in the previous list)."""
    prev_rank = {c.chunk_id: c.rank for c in previous.candidates} if previous else {}
    rows = []
    for c in stage.candidates:
        if previous is None:
            move = ""
        elif c.chunk_id in prev_rank:
            d = prev_rank[c.chunk_id] - c.rank
            move = f"▲{d}" if d > 0 else (f"▼{-d}" if d < 0 else "=")
        else:
            move = "new"
        rows.append({"rank": c.rank, "score": round(float(c.score), 4), "move": move, "chunk_id": c.chunk_id,
                     "doc_id": c.doc_id, "snippet": snippet(c.text), "colour": chunk_colour(c.chunk_id)})
    return pd.DataFrame(rows, columns=["rank", "score", "move", "chunk_id", "doc_id", "snippet", "colour"])


def fused_moves(stage: StageResult, inputs: Sequence[str]) -> pd.DataFrame:
    """For a fusion stage: the rank each chunk had in every input list beside its fused rank."""
    rows = []
    for c in stage.candidates:
        row = {"rank": c.rank, "chunk_id": c.chunk_id}
        for name in inputs:
            r = c.meta.get(f"rank_{name}")
            row[f"{name} rank"] = r if r is not None else "—"
            row[f"from {name}"] = "" if r is None else (f"▲{r - c.rank}" if r > c.rank else
                                                       (f"▼{c.rank - r}" if r < c.rank else "="))
        rows.append(row)
    return pd.DataFrame(rows)


def grid(trace: Trace, depth: int = 10) -> pd.DataFrame:
    """Rank x stage grid of chunk ids: the side-by-side view as one table."""
    cols: dict[str, list[str]] = {}
    for s in trace.stages:
        if s.skipped is None:
            ids = [c.chunk_id for c in s.candidates[:depth]]
            cols[s.stage] = ids + [""] * (depth - len(ids))
    return pd.DataFrame(cols, index=pd.RangeIndex(1, depth + 1, name="rank"))


def stage_summary(trace: Trace) -> pd.DataFrame:
    rows = []
    for s in trace.stages:
        rows.append({"stage": s.stage, "ran": s.skipped is None, "candidates": len(s.candidates),
                     "ms": round(s.ms, 2), "skip reason": s.skipped or "", "notes": "; ".join(s.notes)})
    return pd.DataFrame(rows)


def text_table(trace: Trace, depth: int = 10, width: int = 70) -> str:
    """The per-stage table the CLI prints."""
    lines = [f"query: {trace.query}", f"config {trace.config_hash} · corpus v{trace.corpus_version} · "
             f"lang {trace.query_lang}"]
    lines += [f"note: {n}" for n in trace.notes]
    for s in trace.stages:
        head = f"\n== {s.stage} " + (f"(skipped: {s.skipped})" if s.skipped else f"{s.ms:.1f} ms, {len(s.candidates)} candidates")
        lines.append(head)
        lines += [f"   note: {n}" for n in s.notes]
        for c in s.candidates[:depth]:
            lines.append(f"  {c.rank:>3}  {c.score:>9.4f}  {c.chunk_id:<18} {snippet(c.text, width)}")
    if trace.answer is not None:
        a = trace.answer
        lines.append(f"\n== answer ({a.mode}{', refused' if a.refused else ''})\n{a.text}")
        if a.citations:
            lines.append("citations: " + ", ".join(a.citations))
    return "\n".join(lines)
