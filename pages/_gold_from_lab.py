"""Search Lab's "Add to golden set": tick the gold chunk(s) among this query's candidates, or mark that the corpus
does not answer it, and save the question into a golden set of the workspace."""
from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from core.app.report import escape_md
from core.eval.golden_io import lab_item
from core.types import Trace
from pages import _state

NEW = "+ new set"
MANY_GOLD = 5  # more ticked gold chunks than this asks for a confirmation


def add_to_golden(deps: Any, workspace: str, trace: Trace, doc_names: Mapping[str, str]) -> None:
    final = trace.final()
    cands = list(final.candidates) if final is not None else []
    seen: dict[str, Any] = {}
    for s in trace.stages:  # every chunk any stage ranked, final list first
        for c in s.candidates:
            seen.setdefault(c.chunk_id, c)
    order = [c.chunk_id for c in cands] + [cid for cid in seen if cid not in {c.chunk_id for c in cands}]
    _state.apply_disarm()  # the sidebar does it first in the app; a page run alone (tests) does it here
    with st.expander("Add to golden set", expanded=False):
        sets = [s.name for s in deps.store.golden.sets(workspace)]
        c = st.columns([1.2, 1.2])
        pick = c[0].selectbox("Golden set", [*sets, NEW], key="lab_gold_set")
        name = c[1].text_input("new set name", "search-lab", key="lab_gold_new",
                               disabled=pick != NEW).strip() if pick == NEW else pick
        none = st.checkbox("The corpus does not answer this", key="lab_gold_none")
        # No "Select all": a gold chunk is one a person read and chose (one click once stored 50 of them).
        ticked = st.multiselect(
            "Gold chunk(s)", order[:50], key="lab_gold_chunks", disabled=none, select_all=False,
            format_func=lambda cid: (f"{doc_names.get(seen[cid].doc_id, seen[cid].doc_id)} · "
                                     + " ".join(seen[cid].text.split())[:90]))
        many = not none and len(ticked) > MANY_GOLD
        sure = st.checkbox(f"Yes, {len(ticked)} chunks are all gold for this question", key="lab_gold_many",
                           help=f"more than {MANY_GOLD} gold chunks makes recall@k hard to reach and is rarely "
                                "meant") if many else True
        answer = st.text_input("Answer (optional)", key="lab_gold_answer")
        if st.button("Add to golden set", key="lab_gold_add",
                     disabled=not name or (not none and not ticked) or not sure):
            gold = [(doc_names.get(seen[cid].doc_id, seen[cid].doc_id), cid) for cid in ticked]
            try:
                item = lab_item(trace.query, gold, answer=answer, unanswerable=none)
            except ValueError as exc:
                st.error(escape_md(exc))
                return
            deps.store.golden.add_items(workspace, name, [item])
            _state.disarm()  # the "all gold" confirmation covers this item only
            st.success(f"Added to {escape_md(name)}: "
                       + ("marked as not answered by the corpus" if none else f"{len(gold)} gold chunk(s)"))
