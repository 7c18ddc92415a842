"""Shared render helpers for the pages: empty-store hint, ingest report, stage grid and candidate cards."""
from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

import streamlit as st

from core.config import PipelineConfig
from core.report import chunk_colour, ingest_frame, snippet, stage_moves
from core.types import Candidate, StageResult, Trace

LAST_INGEST_KEY = "last_ingest"  # the IngestReport of the last upload, shown until the next one
LAST_QUERY_KEY = "last_query"  # the last submitted query; settings changes re-run it
STAGES_PER_ROW = 5  # retrieval (bm25, dense, graph x2, fused) on one row, the cascade and answer on the next

# Retrieval modes of the Search Lab and the switches each one sets.
MODES: dict[str, dict[str, bool]] = {
    "hybrid": {"bm25.enabled": True, "dense.enabled": True, "fusion.enabled": True},
    "BM25": {"bm25.enabled": True, "dense.enabled": False, "fusion.enabled": False},
    "dense": {"bm25.enabled": False, "dense.enabled": True, "fusion.enabled": False},
}


def mode_of(cfg: PipelineConfig) -> str:
    """The mode a config corresponds to; anything that is not clearly one retriever counts as hybrid."""
    if cfg.bm25.enabled and not cfg.dense.enabled:
        return "BM25"
    if cfg.dense.enabled and not cfg.bm25.enabled:
        return "dense"
    return "hybrid"


def empty_store_hint(store: Any, workspace: str) -> bool:
    """Say how to get started when the workspace has no documents; True when it is empty."""
    if store.count("documents", workspace):
        return False
    st.info(f"Workspace '{workspace}' has no documents yet: upload documents on the Corpus page.")
    st.page_link("pages/corpus.py", label="Go to the Corpus page", icon="📚")
    return True


def ingest_report(report: Any) -> None:
    """Per-file outcome of the last upload; each error names its file (the message starts with the name)."""
    if report is None or not report.results:
        return
    ok, errors = report.ok, report.errors
    st.success(f"{len(ok)} of {len(report.results)} file(s) ingested or up to date · embeddings: "
               f"{report.embedded} computed, {report.cache_hits} from the cache")
    for r in errors:
        st.error(r.message if r.message.startswith(r.name) else f"{r.name}: {r.message}")
    st.dataframe(ingest_frame(report.results), hide_index=True)


def _html(text: str) -> str:
    # Documents are untrusted: escape everything, and '$' too so Streamlit does not typeset it as maths.
    return html.escape(text).replace("$", "&#36;")


def candidate_card(c: Candidate, *, move: str = "", doc_name: str = "") -> None:
    colour = chunk_colour(c.chunk_id)
    move_html = f" · <span style='opacity:0.8'>{_html(move)}</span>" if move else ""
    st.markdown(
        f"<div style='border-left:6px solid {colour};padding:2px 8px;margin-bottom:4px'>"
        f"<span style='display:inline-block;width:0.75em;height:0.75em;background:{colour};"
        f"border-radius:2px;margin-right:4px' title='{_html(c.chunk_id)}'></span>"
        f"<b>#{c.rank}</b> · <code>{c.score:.4f}</code>{move_html}<br>"
        f"<small style='opacity:0.7'>{_html(doc_name or c.doc_id)} · {_html(c.chunk_id)}</small><br>"
        f"<span style='font-size:0.9em'>{_html(snippet(c.text, 180))}</span></div>",
        unsafe_allow_html=True,
    )


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        value = "[" + ", ".join(_short(v) for v in value) + "]"
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"  # a stage header, not a dump: the trace has the full value


def _info_text(info: Mapping[str, Any]) -> str:
    return " · ".join(f"{k} {_short(v)}" for k, v in info.items() if isinstance(v, (str, int, float, list, tuple)))


def stage_column(stage: StageResult, *, moves: Mapping[str, str], doc_names: Mapping[str, str], depth: int) -> None:
    st.markdown(f"##### {_html(stage.stage)}")
    if stage.skipped is not None:
        st.caption(f"skipped: {stage.skipped}")
        return
    st.caption(f"{stage.ms:.1f} ms · {len(stage.candidates)} candidates" +
               (f" · {_info_text(stage.info)}" if _info_text(stage.info) else ""))
    for note in stage.notes:
        st.warning(note, icon="⚠️")
    if not stage.candidates:
        st.caption("no candidates")
    for c in stage.candidates[:depth]:
        candidate_card(c, move=moves.get(c.chunk_id, ""), doc_name=doc_names.get(c.doc_id, ""))


def answer_panel(answer: Any) -> None:
    """The answer above the stage grid: mode label (never pretend an extractive answer was generated), refusal, cites."""
    if answer is None:
        return
    label = {"llm": "answer (Claude)", "extractive": "answer (extractive, offline: sentences copied, not generated)"}
    with st.container(border=True, key="answer_panel"):
        st.markdown(f"**{label.get(answer.mode, 'answer (' + answer.mode + ')')}**")
        if answer.refused:
            st.info(answer.text or "The corpus does not say.", icon=":material/block:")
        else:
            st.text(answer.text)
        if answer.citations:
            st.caption("citations: " + " · ".join(answer.citations) + " (open them under Chunk detail)")


def stage_grid(trace: Trace, *, doc_names: Mapping[str, str], depth: int = 10) -> None:
    """One column per stage in trace order, wrapped into rows of at most STAGES_PER_ROW columns."""
    moves = stage_moves(trace)
    stages: Sequence[StageResult] = trace.stages
    per_row = max(1, min(STAGES_PER_ROW, len(stages)))
    with st.container(key="stage_grid"):
        for start in range(0, len(stages), per_row):
            for i, (col, stage) in enumerate(zip(st.columns(per_row, border=True), stages[start:start + per_row])):
                with col, st.container(key=f"stage_{start + i}_{stage.stage}"):
                    stage_column(stage, moves=moves.get(stage.stage, {}), doc_names=doc_names, depth=depth)


def chunk_detail(trace: Trace, store: Any, workspace: str, doc_names: Mapping[str, str]) -> None:
    """Full text and provenance of any chunk that appears in some stage."""
    ids = list(dict.fromkeys(c.chunk_id for s in trace.stages for c in s.candidates))
    if not ids:
        return
    with st.expander("Chunk detail"):
        texts = {c.chunk_id: c.text for s in trace.stages for c in s.candidates}
        cid = st.selectbox("Chunk", ids, format_func=lambda i: f"{i} — {snippet(texts[i], 70)}", key="detail_chunk")
        chunk = store.chunks_by_id([cid], workspace).get(cid)
        if chunk is None:
            st.caption("this chunk is no longer in the store")
            return
        ranks = " · ".join(f"{s.stage} #{c.rank}" for s in trace.stages for c in s.candidates if c.chunk_id == cid)
        st.caption(f"{doc_names.get(chunk.doc_id, chunk.doc_id)} · {' › '.join(chunk.heading_path) or '(no heading)'}"
                   f" · chars {chunk.start}–{chunk.end} · {chunk.n_tokens} tokens · {chunk.lang} · {ranks}")
        st.code(chunk.text, language=None, wrap_lines=True)
