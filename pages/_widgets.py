"""Shared render helpers for the pages: empty-store hint, ingest report, the stage row, counters and answer panel."""
from __future__ import annotations

import html
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.app import corpus_ops
from core.app.counters import Counters
from core.app.report import (
    chunk_colour,
    escape_md,
    inert_text,
    ingest_frame,
    snippet,
    stage_chips,
    stage_details,
    stage_moves,
)
from core.config import PipelineConfig
from core.types import Candidate, StageResult, Trace

LAST_INGEST_KEY = "last_ingest"  # the IngestReport of the last upload, shown until the next one
LAST_QUERY_KEY = "last_query"  # the last submitted query; settings changes re-run it
COLUMN_PX = 206  # one stage column: five fit beside the sidebar in a 1366 px window
EMPTY_PX = 140  # a stage that ran but hands on no candidates (answer cache, router): its header is all there is
MORE_CHARS = 1500  # text shown when a card is expanded (the full chunk is under "Chunk detail")

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
    if corpus_ops.has_documents(store, workspace):
        return False
    st.info(f"Workspace '{escape_md(workspace)}' has no documents yet: upload documents on the Corpus page.")
    st.page_link("pages/corpus.py", label="Go to the Corpus page", icon=":material/library_books:")
    return True


def ingest_report(report: Any) -> None:
    """Per-file outcome of the last upload; each error names its file (the message starts with the name)."""
    if report is None or not report.results:
        return
    ok, errors = report.ok, report.errors
    ch = report.chunk_changes()
    st.success(f"{len(ok)} of {len(report.results)} file(s) ingested or up to date · embeddings: "
               f"{report.embedded} computed, {report.cache_hits} from the cache · chunks: {ch['unchanged']} "
               f"unchanged, {ch['changed']} changed, {ch['new']} new, {ch['removed']} removed"
               + (f" · llm contexts: {ch['contexts_kept']} kept, {ch['contexts_to_write']} to write"
                  if ch["contexts_kept"] or ch["contexts_to_write"] else ""))
    if report.graph is not None:
        st.caption(f"Entity graph updated in {report.graph.seconds:.2f} s: +{report.graph.chunks_added} / "
                   f"-{report.graph.chunks_removed} chunks, {report.graph.summaries_invalidated} community summaries "
                   "invalidated")
    for note in report.notes:
        st.info(note)
    for r in errors:
        # The name and the parser's text come from the upload: escaped, so a name like ![p](http://…) stays text.
        st.error(escape_md(r.message if r.message.startswith(r.name) else f"{r.name}: {r.message}"))
    st.dataframe(ingest_frame(report.results), hide_index=True)


def esc(text: Any) -> str:
    # Documents and queries are untrusted: escape everything, and '$' too so Streamlit does not typeset it as maths;
    # addresses unclickable and bidi controls visible (inert_text).
    return html.escape(inert_text(text), quote=True).replace("$", "&#36;")


# -- the stage row: pure HTML builders (tested without a browser) ------------------------------------------------------
ROW_CSS = f"""
<style>
.sl-row{{display:flex;gap:6px;overflow-x:auto;align-items:flex-start;padding:2px 0 8px 0;font-size:12px;line-height:1.3}}
.sl-col{{flex:0 0 {COLUMN_PX}px;max-width:{COLUMN_PX}px;border:1px solid rgba(128,128,128,.35);border-radius:6px;
  padding:3px 5px;box-sizing:border-box}}
.sl-col.sl-empty{{flex-basis:{EMPTY_PX}px;max-width:{EMPTY_PX}px}}
.sl-skip{{flex:0 0 20px;align-self:stretch;min-height:120px;writing-mode:vertical-rl;transform:rotate(180deg);
  font-size:11px;opacity:.65;border:1px dashed rgba(128,128,128,.45);border-radius:6px;padding:4px 1px;
  white-space:nowrap;overflow:hidden}}
.sl-name{{font-weight:700;font-size:13.5px;margin:0}}
.sl-chip{{display:inline-block;font-size:10.5px;padding:0 5px;margin:1px 2px 1px 0;border-radius:8px;
  background:rgba(128,128,128,.16);max-width:100%;overflow-wrap:anywhere}}
.sl-chip.warn{{background:rgba(255,170,0,.25)}}
.sl-det{{font-size:11px;opacity:.85}} .sl-det summary{{cursor:pointer;opacity:.7}}
.sl-det div{{margin:1px 0;overflow-wrap:anywhere}}
.sl-card{{border-left:5px solid #888;padding:1px 5px;margin:3px 0;border-radius:2px;background:rgba(128,128,128,.05)}}
.sl-card summary{{list-style:none;cursor:pointer}} .sl-card summary::-webkit-details-marker{{display:none}}
.sl-top{{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}}
.sl-mv{{font-size:11px;opacity:.85}} .sl-up{{color:#2e7d32}} .sl-down{{color:#c62828}} .sl-new{{color:#1565c0}}
.sl-doc{{opacity:.65;font-size:11px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}}
.sl-snip{{display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden}}
.sl-more{{font-size:11.5px;white-space:pre-wrap;overflow-wrap:anywhere;max-height:240px;overflow-y:auto;
  border-top:1px dotted rgba(128,128,128,.5);margin-top:2px;padding-top:2px}}
.sl-counters{{display:flex;flex-wrap:wrap;gap:2px 4px;align-items:center;font-size:11.5px;margin:0 0 4px 0}}
.sl-counters b{{margin-right:2px}}
.sl-svg text{{font-size:9.5px}}
</style>
"""


def _move_class(move: str) -> str:
    if move.startswith("▲"):
        return "sl-up"
    if move.startswith("▼"):
        return "sl-down"
    return "sl-new" if move.startswith("new") else ""


def card_html(c: Candidate, *, move: str = "", doc_name: str = "") -> str:
    """One compact card: rank, score, move and document on one line, a two-line snippet; click to read more."""
    colour = chunk_colour(c.chunk_id)
    mv = f" <span class='sl-mv {_move_class(move)}'>{esc(move)}</span>" if move else ""
    extra = [f"{k}: {v}" for k, v in c.meta.items() if k in ("entities", "relations", "hop", "context")]
    more = esc(c.text[:MORE_CHARS] + ("…" if len(c.text) > MORE_CHARS else ""))
    extra_html = "".join(f"<div class='sl-doc'>{esc(snippet(x, 200))}</div>" for x in extra)
    return (f"<details class='sl-card' data-chunk='{esc(c.chunk_id)}' data-rank='{c.rank}' "
            f"style='border-left-color:{colour}'><summary>"
            f"<div class='sl-top' title='{esc(move)}'><b>#{c.rank}</b> <code>{c.score:.4f}</code>{mv}</div>"
            f"<div class='sl-doc' title='{esc(c.chunk_id)}'>{esc(doc_name or c.doc_id)} · {esc(c.chunk_id)}</div>"
            f"<div class='sl-snip'>{esc(snippet(c.text, 240))}</div></summary>"
            f"<div class='sl-more'>{more}</div>{extra_html}</details>")


def _chips(chips: Sequence[str], warn: bool = False) -> str:
    cls = "sl-chip warn" if warn else "sl-chip"
    return "".join(f"<span class='{cls}'>{esc(c)}</span>" for c in chips)


def stage_html(stage: StageResult, *, moves: Mapping[str, str], doc_names: Mapping[str, str], depth: int,
               answer: Any = None, notes: Sequence[str] = ()) -> str:
    """A column for a stage that ran, or a thin labelled strip for a skipped one (its reason on hover)."""
    name = esc(stage.stage)
    if stage.skipped is not None:
        return (f"<div class='sl-skip' data-stage='{name}' data-skipped='1' title='skipped: {esc(stage.skipped)}'>"
                f"{name} · skipped</div>")
    details = stage_details(stage)
    head = (f"<div class='sl-name'>{name}</div><div>{_chips(stage_chips(stage, notes))}"
            f"{_chips([f'{len(stage.notes)} note(s)'], warn=True) if stage.notes else ''}</div>")
    if details or stage.notes:
        rows = "".join(f"<div><b>note</b>: {esc(n)}</div>" for n in stage.notes)
        rows += "".join(f"<div><b>{esc(k)}</b>: {esc(v)}</div>" for k, v in details)
        head += f"<details class='sl-det'><summary>details</summary>{rows}</details>"
    if stage.stage == "answer" and answer is not None:
        state = "refused" if answer.refused else answer.mode
        body = (f"<div class='sl-card' style='border-left-color:#555'><div><b>{esc(state)}</b></div>"
                f"<div class='sl-more' style='border:0;max-height:300px'>{esc(answer.text)}</div></div>")
    elif not stage.candidates:
        body = "<div class='sl-doc'>no candidates</div>"
    else:
        body = "".join(card_html(c, move=moves.get(c.chunk_id, ""), doc_name=doc_names.get(c.doc_id, ""))
                       for c in stage.candidates[:depth])
    empty = " sl-empty" if not stage.candidates and not (stage.stage == "answer" and answer is not None) else ""
    return f"<div class='sl-col{empty}' data-stage='{name}'>{head}{body}</div>"


def counters_html(query: Counters, session: Counters | None = None) -> str:
    """The counters strip: this query's cost and cache figures, then the session's running totals."""
    def line(label: str, c: Counters) -> str:
        chips = [f"{c.ms:,.0f} ms", f"${c.usd:.4f}", f"tokens in/out {c.tokens_in:,}/{c.tokens_out:,}",
                 f"embeddings {c.embed_hits} from cache / {c.embed_misses} computed",
                 f"token vectors {c.token_hits} hit / {c.token_computed} computed",
                 f"prompt cache read {c.cache_read_tokens:,} / write {c.cache_write_tokens:,} tokens"]
        if c.answer_cache_seen:
            chips.append(f"answer cache {c.answer_hits} hit / {c.answer_misses} miss"
                         + (f" ({c.answer_guarded} guarded)" if c.answer_guarded else "")
                         + (f", saved {c.answer_saved_ms:,.0f} ms ${c.answer_saved_usd:.4f}" if c.answer_hits else ""))
        return f"<div class='sl-counters' data-counters='{esc(label)}'><b>{esc(label)}</b>{_chips(chips)}</div>"

    out = line("this query", query)
    ran = [s for s in query.stages if s.ran]
    if ran:  # ms and $ of every stage that ran, in one line under the totals
        per = " · ".join(f"{s.stage} {s.ms:,.0f} ms ${s.usd:.4f}" for s in ran)
        out += f"<details class='sl-det' data-counters='per stage'><summary>per stage</summary>{esc(per)}</details>"
    if session is not None and session.queries:
        out += line(f"session ({session.queries} quer{'y' if session.queries == 1 else 'ies'})", session)
    return out


def stage_row_html(trace: Trace, *, doc_names: Mapping[str, str], depth: int = 10,
                   inserts: Mapping[str, str] | None = None) -> str:
    """Every stage in trace order in one horizontal row (it scrolls sideways). `inserts` puts extra columns (the
    query's subgraph) right after the named stage."""
    moves = stage_moves(trace)
    parts = []
    for s in trace.stages:
        parts.append(stage_html(s, moves=moves.get(s.stage, {}), doc_names=doc_names, depth=depth,
                                answer=trace.answer, notes=trace.notes))
        if inserts and s.stage in inserts:
            parts.append(inserts[s.stage])
    return f"<div class='sl-row' data-testid='stage-row'>{''.join(parts)}</div>"


def split_rounds(trace: Trace) -> tuple[Trace, list[tuple[int, Trace]]]:
    """The agentic loop's later rounds apart from the main row: (first round + evidence + answer, [(n, round n)])."""
    later: dict[int, list[Any]] = {}
    main = []
    for s in trace.stages:
        rnd = s.info.get("round") if isinstance(s.info, Mapping) else None
        (later.setdefault(rnd, []) if isinstance(rnd, int) and rnd > 1 else main).append(s)
    return replace(trace, stages=tuple(main)), [(n, replace(trace, stages=tuple(st_))) for n, st_ in
                                                sorted(later.items())]


def stage_row(trace: Trace, *, doc_names: Mapping[str, str], depth: int = 10, counters: Counters | None = None,
              session: Counters | None = None, inserts: Mapping[str, str] | None = None,
              key: str = "stage_row") -> None:
    """Counters strip and stage row as one HTML block (st.html keeps it in the page, styled, scripts removed)."""
    top = counters_html(counters, session) if counters is not None else ""
    with st.container(key=key):
        st.html(ROW_CSS + top + stage_row_html(trace, doc_names=doc_names, depth=depth, inserts=inserts))


def citation_labels(citations: Sequence[str], trace: Trace | None, doc_names: Mapping[str, str],
                    lookup: Callable[[list[str]], Mapping[str, Any]] | None = None) -> list[str]:
    """Each cited chunk id with the name of its document ('d7e9…-5e7a… (q2_2024_report.html)'), so a reader sees at
    once that two quoted sentences come from, say, a draft and a final policy. Chunks no stage listed (an answer
    served from the cache) are read through `lookup` (ids -> chunks); an id found nowhere stays bare."""
    docs = {c.chunk_id: c.doc_id for s in (trace.stages if trace else ()) for c in s.candidates}
    missing = [cid for cid in citations if cid not in docs]
    if missing and lookup is not None:
        docs.update({cid: chunk.doc_id for cid, chunk in lookup(missing).items()})
    return [f"{cid} ({doc_names.get(docs[cid], docs[cid])})" if cid in docs else cid for cid in citations]


def answer_panel(answer: Any, served: str | None = None, *, trace: Trace | None = None,
                 doc_names: Mapping[str, str] | None = None,
                 lookup: Callable[[list[str]], Mapping[str, Any]] | None = None) -> None:
    """The answer below the stage row: mode label (never pretend an extractive answer was generated), refusal, cites
    with their documents' names; `served` is the answer cache's label when the stored answer of an earlier question
    was served."""
    if answer is None:
        return
    label = {"llm": "answer (Claude)", "extractive": "answer (extractive, offline: sentences copied, not generated)"}
    with st.container(border=True, key="answer_panel"):
        st.markdown(f"**{label.get(answer.mode, 'answer (' + answer.mode + ')')}**")
        if served:
            st.caption(f":material/cached: {escape_md(served)}")  # quotes an earlier question
        if answer.refused:
            st.info(escape_md(answer.text or "The corpus does not say."), icon=":material/block:")
        else:
            st.text(inert_text(answer.text))
        if answer.citations:
            listed = {c.chunk_id for s in (trace.stages if trace else ()) for c in s.candidates}
            where = " (open them under Chunk detail)" if set(answer.citations) <= listed else ""
            cites = citation_labels(answer.citations, trace, doc_names or {}, lookup)
            st.caption("citations: " + escape_md(" · ".join(cites)) + where)


def chunk_detail(trace: Trace, chunks_by_id: Any, workspace: str, doc_names: Mapping[str, str]) -> None:
    """Full text and provenance of any chunk that appears in some stage. `chunks_by_id(ids, workspace)` reads them."""
    ids = list(dict.fromkeys(c.chunk_id for s in trace.stages for c in s.candidates))
    if not ids:
        return
    with st.expander("Chunk detail"):
        texts = {c.chunk_id: c.text for s in trace.stages for c in s.candidates}
        cid = st.selectbox("Chunk", ids, format_func=lambda i: f"{i} — {inert_text(snippet(texts[i], 70))}",
                           key="detail_chunk")
        chunk = chunks_by_id([cid], workspace).get(cid)
        if chunk is None:
            st.caption("this chunk is no longer in the store")
            return
        ranks = " · ".join(f"{s.stage} #{c.rank}" for s in trace.stages for c in s.candidates if c.chunk_id == cid)
        # Document name and headings come from the file: escaped, so `### ![hp](http://…)` is shown, not fetched.
        st.caption(f"{escape_md(doc_names.get(chunk.doc_id, chunk.doc_id))} · "
                   f"{escape_md(' › '.join(chunk.heading_path)) or '(no heading)'}"
                   f" · chars {chunk.start}–{chunk.end} · {chunk.n_tokens} tokens · {chunk.lang} · {ranks}")
        st.code(inert_text(chunk.text), language=None, wrap_lines=True)
