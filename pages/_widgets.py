"""Shared render helpers for the pages: empty-store hint, ingest report, the stage row, counters and answer panel."""
from __future__ import annotations

import html
import re
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.app import corpus_ops
from core.app.counters import Counters
from core.app.report import (
    REORDERING,
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
from core.types import Candidate, InRound, StageResult, Trace

LAST_INGEST_KEY = "last_ingest"  # the IngestReport of the last upload, shown until the next one
LAST_QUERY_KEY = "last_query"  # the last submitted query; settings changes re-run it
COLUMN_PX = 112  # a stage column's least width: six lists and three stacks of strips fit in a 1366 px window
STACK_PX = 76  # a column of thin strips (skipped stages, stages without a list of their own)
MORE_CHARS = 1500  # text shown when a card is expanded (the full chunk is under "Chunk detail")

# Retrieval modes of the Search Lab and the switches each one sets.
MODES: dict[str, dict[str, bool]] = {
    "hybrid": {"bm25.enabled": True, "dense.enabled": True, "fusion.enabled": True},
    "BM25": {"bm25.enabled": True, "dense.enabled": False, "fusion.enabled": False},
    "dense": {"bm25.enabled": False, "dense.enabled": True, "fusion.enabled": False},
}


# Stages a served-from-cache query really ran (its follow-up condensed, then the lookup): never marked as stored.
LIVE_WHEN_CACHED = ("condense", "answer_cache")

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
# Sized for a 1366x768 window beside the sidebar: a column per stage with a list (one line per card), and every stage
# without its own list to show (skipped, ran with none, or the same list as the stage before) a thin labelled strip;
# consecutive strips stack in one narrow column, so six or more lists fit side by side.
ROW_CSS = f"""
<style>
.sl-row{{display:flex;gap:5px;overflow-x:auto;align-items:flex-start;padding:2px 0 6px 0;font-size:12px;line-height:1.3}}
.sl-col{{flex:1 1 0;min-width:{COLUMN_PX}px;max-width:300px;border:1px solid rgba(128,128,128,.35);border-radius:6px;
  padding:2px 4px;box-sizing:border-box}}
.sl-stack{{flex:0 0 {STACK_PX}px;max-width:{STACK_PX}px;display:flex;flex-direction:column;gap:2px;min-width:0}}
.sl-skip,.sl-strip{{font-size:10.5px;line-height:13px;border-radius:4px;padding:1px 3px;box-sizing:border-box;
  overflow-wrap:anywhere;max-width:{STACK_PX}px}}
.sl-skip{{border:1px dashed rgba(128,128,128,.45);opacity:.7;cursor:help}}
.sl-strip{{border:1px solid rgba(128,128,128,.35);background:rgba(128,128,128,.07)}}
.sl-strip summary{{list-style:none;cursor:pointer}}
.sl-strip summary::-webkit-details-marker{{display:none}}
.sl-strip .sl-pop{{white-space:normal;overflow-wrap:anywhere;font-size:10.5px}}
.sl-name{{font-weight:700;font-size:13px;margin:0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}}
.sl-meta{{font-size:10.5px;opacity:.75;font-weight:400}}
.sl-routed{{font-size:10.5px;font-weight:600;color:#b45309;margin-left:3px}}
.sl-chip{{display:inline-block;font-size:10.5px;padding:0 5px;margin:1px 2px 1px 0;border-radius:8px;
  background:rgba(128,128,128,.16);max-width:100%;overflow-wrap:anywhere}}
.sl-chip.warn{{background:rgba(255,170,0,.25)}}
.sl-det{{font-size:11px;opacity:.85}} .sl-det summary{{cursor:pointer;opacity:.7}}
.sl-det div{{margin:1px 0;overflow-wrap:anywhere}}
.sl-head-det{{font-size:10.5px;margin:0}} .sl-head-det > summary{{cursor:pointer;opacity:.75;white-space:nowrap;
  overflow:hidden;text-overflow:ellipsis}}
.sl-card{{border-left:4px solid #888;padding:0 3px;margin:1px 0;border-radius:2px;background:rgba(128,128,128,.05)}}
.sl-card summary{{list-style:none;cursor:pointer;display:flex;gap:3px;align-items:baseline;white-space:nowrap;
  overflow:hidden;height:17px;line-height:17px}}
.sl-card summary::-webkit-details-marker{{display:none}}
.sl-card code{{font-size:9.5px;padding:0;margin-left:auto;flex:0 0 auto;background:none}}
.sl-mv{{font-size:10.5px;opacity:.85;flex:0 0 auto}} .sl-up{{color:#2e7d32}} .sl-down{{color:#c62828}}
.sl-new{{color:#1565c0}}
.sl-doc{{opacity:.7;font-size:10.5px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;min-width:0;flex:1 1 auto}}
.sl-more{{font-size:11.5px;white-space:pre-wrap;overflow-wrap:anywhere;max-height:240px;overflow-y:auto;
  border-top:1px dotted rgba(128,128,128,.5);margin-top:2px;padding-top:2px}}
.sl-counters{{display:flex;flex-wrap:wrap;gap:2px 4px;align-items:center;font-size:11.5px;margin:0 0 2px 0}}
.sl-counters b{{margin-right:2px}}
.sl-svg text{{font-size:9.5px}}
.sl-row [data-cached='1']{{border-color:rgba(230,140,0,.85);border-style:dashed}}
.sl-cached-note{{font-size:11.5px;margin:0 0 2px 0;color:#b26a00}}
</style>
"""


def _move_class(move: str) -> str:
    if move.startswith("▲"):
        return "sl-up"
    if move.startswith("▼"):
        return "sl-down"
    return "sl-new" if move.startswith("new") else ""


_RANK_IN = re.compile(r"^(\S+) (#\d+|—)(?: (▲\d+|▼\d+|=))?$")


def short_move(move: str) -> str:
    """The move label cut to fit a one-line card: 'bm25 #2 ▲1 · dense #1 =' -> 'b2 d1', 'bm25 #4' -> 'b4',
    'new (not in bm25)' -> 'new'; '▲2', '▼1', '=' and 'new' stay as they are. The full label is the card's tooltip."""
    if move.startswith("new"):
        return "new"
    parts = []
    for part in move.split(" · "):
        m = _RANK_IN.match(part.strip())
        if m is None:
            return move
        parts.append(m.group(1)[:1] + (m.group(2)[1:] if m.group(2) != "—" else "–"))
    return " ".join(parts)


def short_score(score: float) -> str:
    """A score in at most five characters for the card's line ('.9761', '4.488', '27.70'); the tooltip has four
    decimals."""
    s = f"{score:.4f}"
    s = s[1:] if s.startswith("0.") else ("-" + s[2:] if s.startswith("-0.") else s)
    return s[:5].rstrip(".")


def _stem(name: str) -> str:
    """A document name without its extension: the card's line has room for a few characters of it."""
    head, dot, ext = name.rpartition(".")
    return head if dot and head and len(ext) <= 5 else name


def card_html(c: Candidate, *, move: str = "", doc_name: str = "") -> str:
    """One card on one line: rank, move, document, score; the snippet is its tooltip and a click opens more text."""
    colour = chunk_colour(c.chunk_id)
    mv = f"<span class='sl-mv {_move_class(move)}'>{esc(short_move(move))}</span>" if move else ""
    extra = [f"{k}: {v}" for k, v in c.meta.items() if k in ("entities", "relations", "hop", "context")]
    more = esc(c.text[:MORE_CHARS] + ("…" if len(c.text) > MORE_CHARS else ""))
    extra_html = "".join(f"<div class='sl-doc'>{esc(snippet(x, 200))}</div>" for x in extra)
    doc = doc_name or c.doc_id
    tip = "\n".join(x for x in (f"{doc} · {c.chunk_id}", f"score {c.score:.4f}" + (f" · {move}" if move else ""),
                                snippet(c.text, 240)) if x)
    return (f"<details class='sl-card' data-chunk='{esc(c.chunk_id)}' data-rank='{c.rank}' "
            f"style='border-left-color:{colour}'><summary title='{esc(tip)}'>"
            f"<b>#{c.rank}</b>{mv}<span class='sl-doc'>{esc(_stem(doc))}</span><code>{short_score(c.score)}</code></summary>"
            f"<div class='sl-more'>{more}</div>{extra_html}</details>")


def _chips(chips: Sequence[str], warn: bool = False) -> str:
    cls = "sl-chip warn" if warn else "sl-chip"
    return "".join(f"<span class='{cls}'>{esc(c)}</span>" for c in chips)


def _head_details(stage: StageResult, notes: Sequence[str]) -> str:
    """A stage's chips, notes and details: what its header shows when opened (its first line stays one line)."""
    rows = "".join(f"<div><b>note</b>: {esc(n)}</div>" for n in stage.notes)
    rows += "".join(f"<div><b>{esc(k)}</b>: {esc(v)}</div>" for k, v in stage_details(stage))
    warn = _chips([f"{len(stage.notes)} note(s)"], warn=True) if stage.notes else ""
    return f"<div>{_chips(stage_chips(stage, notes))}{warn}</div>" + (
        f"<details class='sl-det'><summary>details</summary>{rows}</details>" if rows else "")


def _idle_label(stage: StageResult, answer: Any) -> str:
    """The strip label of a stage that ran without a list of its own to show."""
    i = stage.info
    if stage.stage == "answer":
        return "answer ↑ above" if answer is not None else "answer"
    if i.get("verdict"):
        return f"{stage.stage} · {str(i['verdict']).replace('_', ' ')}"
    if stage.stage == "route" and i.get("config"):
        return f"route · {i['config']}"
    return f"{stage.stage} · 0 cand."


def _routed_html(why: str) -> str:
    """The mark of a stage the query's route turned on although the settings have it off: on the stage's first line,
    the reason on hover."""
    return f"<span class='sl-routed' data-routed='1' title='{esc(why)}'>· by route</span>" if why else ""


def strip_html(stage: StageResult, *, answer: Any = None, notes: Sequence[str] = (), same_as: str | None = None,
               from_cache: bool = False, routed: str = "") -> str:
    """A thin labelled strip: a skipped stage (its reason on hover), or one that ran but has no list of its own to
    show: none at all, or the same list as the stage before (`same_as`); click it for its chips and details."""
    name = esc(stage.stage)
    cache = " data-cached='1'" if from_cache else ""
    if stage.skipped is not None:
        return (f"<div class='sl-skip' data-stage='{name}' data-skipped='1' title='skipped: {esc(stage.skipped)}'"
                f"{cache}>{name} · skipped</div>")
    label = (f"{stage.stage} = {same_as} ({len(stage.candidates)})" if same_as is not None
             else _idle_label(stage, answer))
    tip = (f"{stage.stage}: the same {len(stage.candidates)} candidates in the same order as {same_as}"
           if same_as is not None else f"{stage.stage}: {len(stage.candidates)} candidates; click for details")
    kind = "sl-same" if same_as is not None else "sl-idle"
    return (f"<details class='sl-strip {kind}' data-stage='{name}'{cache}><summary title='{esc(tip)}'>{esc(label)}"
            f"{_routed_html(routed)}</summary><div class='sl-pop'>{_head_details(stage, notes)}</div></details>")


def stage_html(stage: StageResult, *, moves: Mapping[str, str], doc_names: Mapping[str, str], depth: int,
               answer: Any = None, notes: Sequence[str] = (), from_cache: bool = False, routed: str = "") -> str:
    """A column for a stage that ran with candidates: its name, time and count on one line (chips and details on a
    click), then one line per candidate. Any other stage is a strip (strip_html)."""
    if stage.skipped is not None or not stage.candidates:
        return strip_html(stage, answer=answer, notes=notes, from_cache=from_cache, routed=routed)
    name = esc(stage.stage)
    meta = f"{stage.ms:,.1f} ms · {len(stage.candidates)}" + (" · cached" if from_cache else "")
    warn = " ⚠" if stage.notes else ""
    head = (f"<div class='sl-name' title='{name}'>{name} <span class='sl-meta'>{esc(meta)}{warn}</span>"
            f"{_routed_html(routed)}</div>"
            f"<details class='sl-head-det'><summary>chips · details</summary>{_head_details(stage, notes)}</details>")
    body = "".join(card_html(c, move=moves.get(c.chunk_id, ""), doc_name=doc_names.get(c.doc_id, ""))
                   for c in stage.candidates[:depth])
    cache = " data-cached='1'" if from_cache else ""
    return f"<div class='sl-col' data-stage='{name}'{cache}>{head}{body}</div>"


def counters_html(query: Counters, session: Counters | None = None) -> str:
    """The counters strip: this query's cost and cache figures on one line; per stage and the session's running
    totals one click away."""
    def chips(c: Counters) -> list[str]:
        out = [f"{c.ms:,.0f} ms", f"${c.usd:.4f}", f"tokens in/out {c.tokens_in:,}/{c.tokens_out:,}",
               f"embeddings {c.embed_hits} from cache / {c.embed_misses} computed",
               f"token vectors {c.token_hits} hit / {c.token_computed} computed",
               f"prompt cache read {c.cache_read_tokens:,} / write {c.cache_write_tokens:,} tokens"]
        if c.answer_cache_seen:
            out.append(f"answer cache {c.answer_hits} hit / {c.answer_misses} miss"
                       + (f" ({c.answer_guarded} guarded)" if c.answer_guarded else "")
                       + (f", saved {c.answer_saved_ms:,.0f} ms ${c.answer_saved_usd:.4f}" if c.answer_hits else ""))
        return out

    def line(label: str, c: Counters) -> str:
        return f"<div class='sl-counters' data-counters='{esc(label)}'><b>{esc(label)}</b>{_chips(chips(c))}</div>"

    out = line("this query", query)
    more = ""
    ran = [s for s in query.stages if s.ran]
    if ran:  # ms and $ of every stage that ran, in one line under the totals
        more += ("<div data-counters='per stage'><b>per stage</b> "
                 + esc(" · ".join(f"{s.stage} {s.ms:,.0f} ms ${s.usd:.4f}" for s in ran)) + "</div>")
    if session is not None and session.queries:
        more += line(f"session ({session.queries} quer{'y' if session.queries == 1 else 'ies'})", session)
    if more:
        out += f"<details class='sl-det' data-counters='more'><summary>per stage · session</summary>{more}</details>"
    return out


def same_list(a: StageResult | None, b: StageResult) -> bool:
    """True when stage b hands on exactly the list a handed it: the same chunks, in the same order, with the same
    text (pruning and expansion change a chunk's text without moving it)."""
    return (a is not None and len(a.candidates) == len(b.candidates)
            and all(x.chunk_id == y.chunk_id and x.text == y.text for x, y in zip(a.candidates, b.candidates)))


def stage_row_html(trace: Trace, *, doc_names: Mapping[str, str], depth: int = 10,
                   inserts: Mapping[str, str] | None = None, from_cache: bool = False,
                   routed: Mapping[str, str] | None = None) -> str:
    """Every stage in trace order in one horizontal row (it scrolls sideways only when the window is too narrow).
    `inserts` puts extra columns (the query's subgraph) right after the named stage; `from_cache` marks every stage
    as read from a stored trace; `routed` marks the stages the query's route turned on (stage -> why)."""
    moves = stage_moves(trace)
    routed = routed or {}
    parts: list[str] = []
    stack: list[str] = []
    previous: StageResult | None = None  # the last stage that handed on a list

    def flush() -> None:
        if stack:
            parts.append(f"<div class='sl-stack'>{''.join(stack)}</div>")
            stack.clear()

    for s in trace.stages:
        mark = from_cache and s.stage not in LIVE_WHEN_CACHED  # the live lookup that served the stored trace is not
        ran = s.skipped is None and bool(s.candidates)
        # A reordering stage that kept its input as it was shows as a strip saying so; an independent list (bm25,
        # then dense) is never "the same" as the one before it, even when it happens to match.
        if ran and s.stage in REORDERING and same_list(previous, s):
            stack.append(strip_html(s, notes=trace.notes, same_as=previous.stage if previous else None,
                                    from_cache=mark, routed=routed.get(s.stage, "")))
        elif ran:
            flush()
            parts.append(stage_html(s, moves=moves.get(s.stage, {}), doc_names=doc_names, depth=depth,
                                    answer=trace.answer, notes=trace.notes, from_cache=mark,
                                    routed=routed.get(s.stage, "")))
        else:
            stack.append(strip_html(s, answer=trace.answer, notes=trace.notes, from_cache=mark,
                                    routed=routed.get(s.stage, "")))
        if ran:
            previous = s
        if inserts and s.stage in inserts:
            flush()
            parts.append(inserts[s.stage])
    flush()
    return f"<div class='sl-row' data-testid='stage-row'>{''.join(parts)}</div>"


def split_rounds(trace: Trace) -> tuple[Trace, list[tuple[int, Trace]]]:
    """The agentic loop's later rounds apart from the main row: (first round + evidence + answer, [(n, round n)])."""
    later: dict[int, list[Any]] = {}
    main = []
    for s in trace.stages:
        rnd = s.info.round if isinstance(s.info, InRound) else None
        (later.setdefault(rnd, []) if isinstance(rnd, int) and rnd > 1 else main).append(s)
    return replace(trace, stages=tuple(main)), [(n, replace(trace, stages=tuple(st_))) for n, st_ in
                                                sorted(later.items())]


def stage_row(trace: Trace, *, doc_names: Mapping[str, str], depth: int = 10, counters: Counters | None = None,
              session: Counters | None = None, inserts: Mapping[str, str] | None = None,
              key: str = "stage_row", from_cache: str = "", routed: Mapping[str, str] | None = None) -> None:
    """Counters strip and stage row as one HTML block (st.html keeps it in the page, styled, scripts removed).
    `from_cache`: the row is a stored trace's (said in that line above it, every stage marked)."""
    top = counters_html(counters, session) if counters is not None else ""
    if from_cache:
        top += f"<div class='sl-cached-note' data-cached-note='1'>{esc(from_cache)}</div>"
    with st.container(key=key):
        st.html(ROW_CSS + top + stage_row_html(trace, doc_names=doc_names, depth=depth, inserts=inserts,
                                               from_cache=bool(from_cache), routed=routed))


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
