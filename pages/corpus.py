"""Corpus page: choose the chunker, upload and ingest files, browse documents and their chunks, delete documents."""
from __future__ import annotations

import math

import streamlit as st

from core.app import corpus_ops, readiness
from core.app.collections import assign_ingested, name_problem
from core.app.builds import ingest_files
from core.app.report import chunks_frame, documents_frame, escape_md
from pages import _form, _state, _widgets
from pages._collections_panel import collections_panel
from pages._tables_panel import tables_panel

ML_BUILD_KEY = "last_multilingual_build"

UPLOAD_TYPES = ["pdf", "docx", "md", "markdown", "html", "htm", "txt",
                "csv", "tsv", "xlsx", "parquet", "jsonl", "ndjson"]  # tables (core/ingest/tables.py)
STRATEGIES = {"structure": "structure-aware (headings)", "sentence": "sentence-aware", "fixed": "fixed token window"}

deps, ws = _state.deps(), _state.workspace()
store = deps.store
st.title("Corpus")

# -- chunker: the widgets write straight into the session config, so the next ingest uses them ------------------
cfg = _state.config()
with st.container(border=True):
    st.markdown("**Chunker** — applies to the next ingest; a file ingested with another chunker is re-chunked.")
    c1, c2, c3 = st.columns([2, 1, 1])
    strategy = _form.setting(cfg, "chunking.strategy", "Strategy", key="chunk_strategy", where=c1, labels=STRATEGIES)
    size = _form.setting(cfg, "chunking.size_tokens", "Size (tokens)", key="chunk_size", where=c2, step=10)
    overlap = _form.setting(cfg, "chunking.overlap_tokens", "Overlap (tokens)", key="chunk_overlap", where=c3, step=5)
    wanted = cfg.with_overrides({"chunking.strategy": strategy, "chunking.size_tokens": size,
                                 "chunking.overlap_tokens": overlap})
    if wanted != cfg:
        _state.set_config(wanted)
        cfg = wanted
    if overlap >= size:
        st.warning(f"Overlap {overlap} is not below the size {size}: windows will advance one token at a time.")

# -- upload + ingest ------------------------------------------------------------------------------------------------
# A fresh uploader key after each ingest empties the uploader, so the same files are not ingested twice by accident.
upload_round = st.session_state.setdefault("upload_round", 0)
# The browser refuses files over the configured limit early; core/ingest checks it again and names the file.
uploaded = st.file_uploader("Upload documents (PDF, DOCX, Markdown, HTML, plain text) or tables (CSV, TSV, XLSX, "
                            "Parquet, JSON-lines)", type=UPLOAD_TYPES,
                            accept_multiple_files=True, key=f"uploads_{upload_round}",
                            max_upload_size=max(1, math.ceil(cfg.limits.max_file_mb)))
collection = st.text_input("Collection", key="upload_collection", placeholder="default",
                           help="the knowledge base of this workspace the files go to (letters, digits, _ - .); "
                                "empty: a new file goes to 'default', a file already stored stays where it is")
bad_collection = name_problem(collection.strip()) if collection.strip() else ""
if bad_collection:
    st.error(escape_md(bad_collection))
if st.button("Ingest", type="primary", disabled=not uploaded or bool(bad_collection), key="ingest"):
    files = [(f.name, f.getvalue()) for f in uploaded]
    bar = st.progress(0.0, text="starting…")

    def _progress(done: float, total: int, name: str) -> None:
        # `done` is fractional while a big file is embedded batch by batch; `name` then says how far it is.
        bar.progress(min(1.0, done / max(total, 1)),
                     text=f"{int(done)}/{total} · {escape_md(name)}" if name else f"{int(done)}/{total} done")

    st.session_state[_widgets.LAST_INGEST_KEY] = report = ingest_files(
        files, store=store, embedder=deps.embedder, config=cfg, workspace=ws, progress=_progress)
    assign_ingested(store, [r.name for r in report.ok], ws, collection.strip() or None)
    # The multilingual list's vectors when the corpus's languages ask for them or the estimate is within budget
    # (readiness.ingest_multilingual_need); else the reason, shown with the report.
    readiness.probe_for_ingest(deps, cfg, ws)  # the estimate at this moment's load, when vectors are missing
    ml_need, ml_why = readiness.ingest_multilingual_need(store, cfg, ws, deps.embedder.model_id)
    if ml_need is not None:
        bar.progress(0.0, text=f"multilingual vectors (about {ml_need.est_seconds:,.0f} s; {escape_md(ml_why)})")
        st.session_state[ML_BUILD_KEY] = readiness.build(ml_need, cfg, deps, ws, progress=lambda d, t: bar.progress(
            min(1.0, d / max(t, 1)), text=f"multilingual vectors {d}/{t} (about {ml_need.est_seconds:,.0f} s)"))
    else:
        st.session_state[ML_BUILD_KEY] = f"multilingual vectors not built: {ml_why}" if ml_why else None
    st.session_state["upload_round"] = upload_round + 1
    st.rerun()
_widgets.ingest_report(st.session_state.get(_widgets.LAST_INGEST_KEY))
if ml_done := st.session_state.get(ML_BUILD_KEY):
    st.caption(escape_md(ml_done))

# -- documents ------------------------------------------------------------------------------------------------------
docs = corpus_ops.documents(store, ws)
if not docs:
    st.info("No documents yet: upload files above and press Ingest.")
    st.stop()

st.subheader(f"Documents ({len(docs)})")
st.dataframe(documents_frame(docs), hide_index=True, column_config={"doc_id": None})
tables_panel(store, ws)
collections_panel(store, ws, deps.embedder.model_id)
by_id = {d.doc_id: d for d in docs}
doc_id = st.selectbox("Browse a document's chunks", list(by_id), format_func=lambda d: by_id[d].name, key="doc_pick")
doc = by_id[doc_id]
# Names and titles come from uploads: everything shown through Markdown (captions, labels, warnings) is escaped.
st.caption(f"{escape_md(doc.name)} · {doc.kind} · {doc.n_chunks} chunks · chunker {doc.chunker} · language {doc.lang} · "
           f"sha256 {doc.content_hash[:12]}…")
st.dataframe(chunks_frame(corpus_ops.document_chunks(store, doc_id, ws)), hide_index=True, column_config={
    "chunk_id": None, "text": st.column_config.TextColumn("text", width="large")})

# -- delete with confirmation -----------------------------------------------------------------------------------------
pending = st.session_state.get("pending_delete")
if pending != doc_id:
    if st.button(f"Delete {escape_md(doc.name)}…", key="delete"):
        st.session_state["pending_delete"] = doc_id
        st.rerun()
else:
    st.warning(f"Delete **{escape_md(doc.name)}** with its {doc.n_chunks} chunks, their vectors and index entries? "
               "This cannot be undone.")
    yes, no = st.columns(2)
    if yes.button("Yes, delete", type="primary", key="confirm_delete"):
        # The entity graph forgets the document's mentions too (an incremental update; nothing when no graph).
        notices: list[str] = []
        corpus_ops.delete_document(store, doc_id, graph=cfg.graph, embedder=deps.embedder, workspace=ws,
                                   notices=notices)
        st.session_state.pop("pending_delete", None)
        st.toast(f"deleted {escape_md(doc.name)}" + "".join(f" · {n}" for n in notices))
        st.rerun()
    if no.button("Cancel", key="cancel_delete"):
        st.session_state.pop("pending_delete", None)
        st.rerun()
