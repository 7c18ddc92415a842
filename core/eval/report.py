"""Eval runs -> pandas frames, plotly figures and plain text for the Evaluate page and the CLI; no streamlit here."""
from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd
import plotly.graph_objects as go

from core.eval.metrics import Comparison
from core.eval.run import NOT_COMPARED, EvalRun
from core.types import QuestionResult, StageRecord

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2")


def fmt(v: float | None, spread: float = 0.0, digits: int = 3) -> str:
    if v is None:
        return "—"
    return f"{v:.{digits}f}" + (f" ± {spread:.{digits}f}" if spread else "")


def metric_names(runs: Sequence[EvalRun]) -> list[str]:
    names: list[str] = []
    for r in runs:
        names += [m for m in r.metrics if m not in names and m not in NOT_COMPARED]
    return names


def metrics_frame(runs: Sequence[EvalRun]) -> pd.DataFrame:
    """Metric rows x run columns, each cell 'mean ± spread' (spread shown only when repeats differ)."""
    rows = []
    for m in metric_names(runs):
        row: dict[str, Any] = {"metric": m}
        for r in runs:
            digits = 2 if m.startswith("pass@") or m == "ms" else 3
            row[f"{r.config_name} ({r.config_hash})"] = fmt(r.metrics.get(m), r.spread.get(m, 0.0), digits)
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_frame(cmp: Comparison) -> pd.DataFrame:
    rows = [{"metric": d.metric, "A": d.a, "B": d.b, "Δ (B−A)": d.delta, "spread": d.spread, "verdict": d.verdict}
            for d in cmp.deltas]
    return pd.DataFrame(rows, columns=["metric", "A", "B", "Δ (B−A)", "spread", "verdict"])


def per_query_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    cols = ["status", "qid", "type", "A", "B", "delta", "A first rank", "B first rank", "query"]
    return pd.DataFrame(list(rows), columns=cols)


def ranked_stages(run: EvalRun) -> list[str]:
    """The stages that handed on candidates (a depth above 0 with a recall) in pipeline order: the funnel's rows.
    A stage that never ran, or ran without a list (answer cache, route, answer), has no recall to show."""
    return [n for n, s in run.stage_recall.items() if s.get("recall") is not None and (s.get("depth") or 0) > 0]


def idle_stages(run: EvalRun) -> list[str]:
    """The stages the funnel leaves out (ranked_stages' complement), for a caption that names them."""
    shown = set(ranked_stages(run))
    return [n for n in run.stage_recall if n not in shown]


def stage_frame(run: EvalRun) -> pd.DataFrame:
    """The per-stage funnel as a table: recall of each stage's whole list, its depth, tokens kept and time; only
    the stages that handed on candidates (idle_stages names the rest)."""
    rows = [{"stage": name, "ran": s.get("ran"), "depth": s.get("depth"), "recall": s.get("recall"),
             "tokens": s.get("tokens"), "token share": s.get("token_share"), "ms": s.get("ms")}
            for name, s in ((n, run.stage_recall[n]) for n in ranked_stages(run))]
    return pd.DataFrame(rows, columns=["stage", "ran", "depth", "recall", "tokens", "token share", "ms"])


def by_type_frame(run: EvalRun, metrics: Sequence[str] = ("recall@5", "recall@10", "mrr", "ndcg@10")) -> pd.DataFrame:
    rows = []
    for t, m in run.by_type.items():
        rows.append({"type": t, "n": int(m.get("n") or 0), **{k: m.get(k) for k in metrics}})
    return pd.DataFrame(rows, columns=["type", "n", *metrics])


# -- curves --------------------------------------------------------------------------------------------------------
def _final_hits(result: QuestionResult, unit: str) -> list[set[int]]:
    stage = result.stage(result.final_stage) if result.final_stage else None
    if stage is None:
        return []
    seen: set[str] = set()
    hits = []
    for c in stage.candidates:
        if unit == "doc":
            if c.doc_id in seen:
                continue
            seen.add(c.doc_id)
        hits.append(set(c.gold))
    return hits


def recall_curve(run: EvalRun, max_k: int | None = None) -> list[tuple[int, float]]:
    """Mean recall@k for k = 1..depth of the final list, from the stored per-question hits."""
    per_q = [(_final_hits(r, run.unit), len(r.gold)) for r in run.results if r.gold]
    if not per_q:
        return []
    depth = max((len(h) for h, _ in per_q), default=0)
    depth = min(depth, max_k) if max_k else depth
    out = []
    for k in range(1, depth + 1):
        vals = []
        for hits, n in per_q:
            found: set[int] = set()
            for h in hits[:k]:
                found |= h
            vals.append(len(found) / n)
        out.append((k, sum(vals) / len(vals)))
    return out


def _label(run: EvalRun) -> str:
    return f"{run.config_name} ({run.config_hash})"


def recall_curve_fig(runs: Sequence[EvalRun]) -> go.Figure:
    fig = go.Figure()
    for i, r in enumerate(runs):
        pts = recall_curve(r)
        fig.add_scatter(x=[k for k, _ in pts], y=[v for _, v in pts], mode="lines+markers", name=_label(r),
                        line={"color": PALETTE[i % len(PALETTE)]})
    fig.update_layout(title="recall@k of the final list", xaxis_title="k", yaxis_title="recall",
                      yaxis_range=[0, 1.02], height=360, margin={"t": 40, "b": 40})
    return fig


def funnel_fig(runs: Sequence[EvalRun]) -> go.Figure:
    """Recall after every stage (bars) with the stage depth and token share in the hover."""
    fig = go.Figure()
    # Only stages that handed on candidates, in pipeline order over all runs (one run may have a stage another lacks).
    order: list[str] = []
    for r in runs:
        last = -1
        for n in ranked_stages(r):  # a stage new to the order goes right after its predecessor in this run
            if n in order:
                last = order.index(n)
            else:
                last += 1
                order.insert(last, n)
    grouped = len(runs) > 1
    for i, r in enumerate(runs):
        names = [n for n in order if n in ranked_stages(r)]
        st = [r.stage_recall[n] for n in names]
        # Bars carry only the recall; depth and token share go to the hover. Side by side (A/B), each label sits
        # inside its own bar, turned upright, so two neighbours never run together ("1.001.00"); a label that does
        # not fit its bar is hidden (uniformtext), never drawn over the next one.
        fig.add_bar(x=names, y=[s["recall"] for s in st], name=_label(r), marker_color=PALETTE[i % len(PALETTE)],
                    texttemplate="%{y:.2f}", textposition="inside" if grouped else "outside", cliponaxis=False,
                    textangle=-90 if grouped else 0, insidetextanchor="end",
                    customdata=[[s["depth"], 100 * (s.get("token_share") or 0)] for s in st],
                    hovertemplate="%{x}: recall %{y:.3f}<br>depth %{customdata[0]:.0f} · "
                                  "%{customdata[1]:.0f}% of tokens kept<extra></extra>")
    fig.update_layout(title="recall after every stage (hover: depth and share of tokens kept)", barmode="group",
                      yaxis_title="recall", yaxis_range=[0, 1.15], height=360, margin={"t": 40, "b": 40},
                      xaxis={"categoryorder": "array", "categoryarray": order},
                      uniformtext={"minsize": 9, "mode": "hide"})
    return fig


def latency_fig(runs: Sequence[EvalRun]) -> go.Figure:
    fig = go.Figure()
    for i, r in enumerate(runs):
        names = list(r.latency)
        fig.add_bar(x=names, y=[r.latency[n]["mean"] for n in names], name=_label(r),
                    marker_color=PALETTE[i % len(PALETTE)],
                    error_y={"type": "data", "symmetric": False,
                             "array": [r.latency[n]["p95"] - r.latency[n]["mean"] for n in names],
                             "arrayminus": [0.0] * len(names)})
    fig.update_layout(title="latency per stage (mean, bar to p95)", barmode="group", yaxis_title="ms", height=340,
                      margin={"t": 40, "b": 40})
    return fig


# -- one question, two traces --------------------------------------------------------------------------------------
def router_confusion_fig(rows: Sequence[str], columns: Sequence[str], matrix: Sequence[Sequence[int]],
                         title: str = "") -> go.Figure:
    """The router's confusion matrix as a heatmap: true class down, route taken across, each cell its count."""
    fig = go.Figure(go.Heatmap(z=[list(r) for r in matrix], x=list(columns), y=list(rows), colorscale="Blues",
                               text=[[str(v) for v in r] for r in matrix], texttemplate="%{text}",
                               hovertemplate="true %{y} → routed %{x}: %{z}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="route taken", yaxis_title="true class", height=380,
                      yaxis_autorange="reversed", margin={"t": 50, "l": 10, "r": 10, "b": 10})
    return fig


def gold_status(result: QuestionResult | dict[str, Any]) -> pd.DataFrame:
    """Each gold item and where it was found: the first rank in every stage, or 'missing'."""
    result = QuestionResult.coerce(result)
    rows = []
    for gi, g in enumerate(result.gold):
        row: dict[str, Any] = {"gold": gi + 1, "doc": g.doc, "span": g.text[:120]}
        for s in result.stages:
            if s.skipped or not s.depth:
                continue
            ranks = s.gold_ranks or (None,) * len(result.gold)
            row[s.stage] = f"#{ranks[gi]}" if ranks[gi] else "missing"
        rows.append(row)
    return pd.DataFrame(rows)


def stage_candidates_frame(stage: StageRecord | dict[str, Any], texts: dict[str, str] | None = None,
                           depth: int = 10) -> pd.DataFrame:
    """One stored stage as rows; 'gold' marks the gold items a candidate holds (★1, ★2) for highlighting."""
    stage = stage if isinstance(stage, StageRecord) else StageRecord.from_dict(stage)
    texts = texts or {}
    rows = []
    for c in stage.candidates[:depth]:
        marks = " ".join(f"★{g + 1}" for g in c.gold)
        text = texts.get(c.chunk_id) or c.text or ""
        rows.append({"rank": c.rank, "gold": marks, "score": c.score, "chunk_id": c.chunk_id,
                     "snippet": " ".join(text.split())[:200]})
    return pd.DataFrame(rows, columns=["rank", "gold", "score", "chunk_id", "snippet"])


# -- text for the CLI ----------------------------------------------------------------------------------------------
def text_report(runs: Sequence[EvalRun], cmp: Comparison | None = None) -> str:
    lines = []
    for r in runs:
        lines.append(f"== {r.dataset} · {r.config_name} · config {r.config_hash} · corpus v{r.corpus_version} · "
                     f"{len(r.results)} questions · {r.repeats} repeat(s) · {r.seconds:.1f} s")
        for m in metric_names([r]):
            v = r.metrics.get(m)
            if v is not None:
                digits = 2 if m.startswith("pass@") or m == "ms" else 3
                lines.append(f"  {m:<18} {fmt(v, r.spread.get(m, 0.0), digits)}")
        funnel = [f"{n} {s['recall']:.3f}@{s['depth']:.0f}" for n, s in r.stage_recall.items()
                  if s.get("recall") is not None]
        lines.append("  stage recall: " + " → ".join(funnel))
        lines += [f"  note: {n}" for n in r.notes]
    if cmp is not None and len(runs) >= 2:
        lines.append(f"\n== A/B: A = {runs[0].config_name}, B = {runs[1].config_name}")
        for d in cmp.deltas:
            if d.delta is not None and not math.isnan(d.delta):
                lines.append(f"  {d.metric:<18} A {d.a:.3f}  B {d.b:.3f}  Δ {d.delta:+.3f}  (spread {d.spread:.3f}) "
                             f"{d.verdict}")
    return "\n".join(lines)
