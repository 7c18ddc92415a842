"""The golden-set panel on Evaluate: generate a set from the workspace (estimate, budget, progress), then curate it
item by item beside its gold passage (accept, edit, reject, mark unanswerable) and export it as JSONL."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app import corpus_ops
from core.app.report import escape_md
from core.eval.golden import generate_into, passages_from
from core.eval.golden_io import STATUSES, to_jsonl
from core.eval.golden_llm import MODEL, LLMBudget, estimate, generate_llm_into

PAGE = 10  # items listed per page in the overview


def golden_sources(deps: Any, workspace: str) -> list[str]:
    """The workspace's stored golden sets as Evaluate's sources ('golden:WORKSPACE/NAME', loaded by load_dataset)."""
    return [f"golden:{workspace}/{s.name}" for s in deps.store.golden.sets(workspace)]


def golden_panel(deps: Any, workspace: str) -> None:
    store = deps.store
    with st.expander("Golden sets from this workspace's documents: generate, curate, export", expanded=False):
        _generate(deps, workspace)
        sets = store.golden.sets(workspace)
        if not sets:
            st.caption("No golden set stored in this workspace yet. Generate one above, or save questions from "
                       "the Search Lab (\"Add to golden set\").")
            return
        names = [s.name for s in sets]
        label = {s.name: f"{s.name} · {s.items} items · " + ", ".join(f"{k} {v}" for k, v in
                                                                       sorted(s.by_status.items())) for s in sets}
        name = st.selectbox("Golden set", names, format_func=lambda n: label[n], key="gold_set")  # plain text
        _curate(deps, workspace, name)


def _generate(deps: Any, workspace: str) -> None:
    store = deps.store
    c = st.columns([1, 1.6, 1.2, 1.2], vertical_alignment="bottom")
    n = int(c[0].number_input("questions", 5, 1000, 150, step=5, key="gold_n"))
    name = c[1].text_input("set name (empty: generated-v<corpus>-n<N>)", key="gold_name").strip() or None
    llm_ok = bool(deps.llm.available)
    how = c[2].radio("writer", ["offline", "Claude"], horizontal=True, key="gold_writer",
                     help=None if llm_ok else "Claude needs an Anthropic key; the offline generator needs nothing",
                     disabled=not llm_ok)
    budget = float(c[3].number_input("budget $", 0.0, 100.0, 1.0, step=0.5, key="gold_budget",
                                     disabled=how != "Claude"))
    # Read once per corpus version: the expander's body runs on every rerun of the page, open or not.
    at = (workspace, corpus_ops.corpus_version(store, workspace))
    memo = st.session_state.get("gold_passages")
    if memo is None or memo[0] != at:
        memo = st.session_state["gold_passages"] = (at, passages_from(store.corpus, workspace))
    passages = memo[1]
    if not passages:
        st.caption("Ingest documents first: the generator reads this workspace's chunks.")
        return
    batch = how == "Claude" and st.checkbox(
        "as one Message Batch (half price; results within 24 h)", key="gold_batch",
        help="The page waits up to 10 minutes; a batch still running is collected when you press Generate again")
    if how == "Claude":
        parts: dict[str, list[str]] = {}
        for p in passages:  # a document's chunks stand in for its text in the estimate
            parts.setdefault(p.doc, []).append(p.chunk.text)
        texts = {d: "".join(ts) for d, ts in parts.items()}
        worst = estimate(passages, texts, max(1, -(-n // 2)), MODEL, batch=batch)
        st.caption(f"Estimate: about {max(1, -(-n // 2))} calls to {MODEL}, at most ${worst:.4f} before prompt "
                   f"caching (the document is the cached prefix); the run stops before it would pass ${budget:.2f}.")
    else:
        st.caption(f"Estimate: offline, no cost; reads {len(passages)} chunks (a few seconds). Questions ask for a "
                   "fact with a few anchor words; multi-hop, comparison and unanswerable near-miss items are added.")
    if st.button("Generate", type="primary", key="gold_generate"):
        bar = st.progress(0.0, text="reading chunks…")

        def progress(done: int, total: int, msg: str) -> None:
            bar.progress(min(1.0, done / max(1, total)), text=msg)

        version = corpus_ops.corpus_version(store, workspace)
        try:
            if how == "Claude":
                rep = generate_llm_into(store.golden, store.corpus, deps.llm, workspace, n, name=name,
                                        budget=LLMBudget(budget), corpus_version=version, progress=progress,
                                        doc_text=lambda d: store.corpus.document_text(d, workspace),
                                        ledger=store.ledger if batch else None, max_wait_s=600.0, poll_s=10.0)
            else:
                rep = generate_into(store.golden, store.corpus, workspace, n, name=name, corpus_version=version,
                                    progress=progress)
        except ValueError as exc:
            st.error(escape_md(exc))
            return
        bar.progress(1.0, text="done")
        st.session_state["gold_set"] = rep.name
        st.success(f"Stored {escape_md(rep.name)}: {rep.items} items ("
                   + escape_md(", ".join(f"{k} {v}" for k, v in sorted(rep.by_type.items())))
                   + f"); mean question–gold sentence overlap {rep.mean_overlap}"
                   + (f"; ${rep.usd:.4f}" if rep.usd else ""))
        for note in rep.notes:
            st.caption(escape_md(note))


def _curate(deps: Any, workspace: str, name: str) -> None:
    golden = deps.store.golden
    items = golden.items(workspace, name)
    shown_status = st.multiselect("Show", list(STATUSES), default=["pending", "accepted", "edited"],
                                  key="gold_filter")
    view = [it for it in items if it.status in shown_status]
    st.dataframe([{"id": it.item_id, "status": it.status, "type": it.qtype, "question": it.query,
                   "answer": it.answer[:80], "gold": ", ".join(g.doc for g in it.gold)} for it in view],
                 hide_index=True, height=min(400, 40 + 35 * min(len(view), PAGE)),
                 column_config={"question": st.column_config.TextColumn(width="large")})
    st.download_button(":material/download: Export JSONL", to_jsonl(items).encode(), file_name=f"{name}.jsonl",
                       mime="application/json", key="gold_export", on_click="ignore")
    if not view:
        return
    # Items are addressed by id, never by position: a Reject that hides an item from the list must not move an edit
    # onto its neighbour. An item that left the list hands the selection to the one that followed it.
    by_id = {x.item_id: x for x in view}
    order = [x.item_id for x in items]
    chosen = st.session_state.get("gold_item")
    if chosen is not None and chosen not in by_id:
        later = [i for i in order[order.index(chosen) + 1:] if i in by_id] if chosen in order else []
        st.session_state["gold_item"] = later[0] if later else view[-1].item_id
    pick = st.selectbox("Item", list(by_id), key="gold_item",
                        format_func=lambda i: f"{i} · {by_id[i].status} · {by_id[i].query[:90]}")
    it = by_id[pick]
    texts = corpus_ops.chunk_texts(deps.store, [g.chunk for g in it.gold if g.chunk], workspace)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{escape_md(it.query)}**  \n{escape_md(it.qtype)} · {it.status} · "
                    f"{'answerable' if it.answerable else 'unanswerable'} · by {escape_md(it.generator)}")
        if it.answer:
            st.markdown(f"Answer: {escape_md(it.answer)}")
        q = st.text_input("Question", it.query, key=f"gold_q_{it.item_id}")
        a = st.text_input("Answer", it.answer, key=f"gold_a_{it.item_id}")
        b = st.columns(4)
        if b[0].button("Accept", key="gold_accept"):
            golden.update_item(workspace, name, it.item_id, status="accepted")
            st.rerun()
        if b[1].button("Save edit", key="gold_edit", disabled=(q.strip(), a.strip()) == (it.query, it.answer)):
            golden.update_item(workspace, name, it.item_id, query=q.strip() or it.query, answer=a.strip(),
                               status="edited")
            st.rerun()
        if b[2].button("Reject", key="gold_reject"):
            golden.update_item(workspace, name, it.item_id, status="rejected")
            st.rerun()
        if b[3].button("Unanswerable", key="gold_unanswerable", disabled=not it.answerable):
            golden.update_item(workspace, name, it.item_id, answerable=False, qtype="unanswerable", status="edited")
            st.rerun()
    with right:
        if not it.gold:
            st.caption("No gold passage: the corpus should not answer this question"
                       + (f" (swapped: {escape_md(it.meta['swap'])})" if it.meta.get("swap") else ""))
        for g in it.gold:
            st.markdown(f"*{escape_md(g.doc)}* · {escape_md(g.chunk)}")
            body = texts.get(g.chunk, "")
            if g.span:
                st.markdown(f"> {escape_md(g.span)}")
            if body:
                st.caption(escape_md(body[:1200]))
            elif g.chunk:
                st.caption("this chunk is no longer in the corpus (re-ingested or deleted)")
