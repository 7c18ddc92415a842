"""The Search Lab's conversation: the session's turns, handed to the pipeline as history, and "New conversation"."""
from __future__ import annotations

import streamlit as st

from core.app.conversation import MAX_TURNS, turn_of
from core.app.report import escape_md
from core.types import Trace, Turn

TURNS_KEY = "conversation_turns"
BASE_KEY = "conversation_base"  # how many turns the last searched question had before it (settings re-runs reuse it)


def _keys(workspace: str) -> tuple[str, str]:
    """A conversation belongs to its workspace: a follow-up never reads another workspace's turns."""
    return f"{TURNS_KEY}::{workspace}", f"{BASE_KEY}::{workspace}"


def history(submitted: bool, workspace: str) -> list[Turn]:
    """The turns before the current question: a new search reads them all; a re-run of the same question (a
    setting changed) reads the turns it first ran with, not itself."""
    tk, bk = _keys(workspace)
    turns: list[Turn] = st.session_state.setdefault(tk, [])
    if submitted:
        st.session_state[bk] = len(turns)
    return list(turns[: st.session_state.get(bk, len(turns))])


def panel(question: str, trace: Trace, submitted: bool, workspace: str) -> None:
    """Keep the searched question's turn, then show the conversation with a button that starts a new one."""
    tk, bk = _keys(workspace)
    turns: list[Turn] = st.session_state.setdefault(tk, [])
    if submitted and trace.answer is not None:
        turns.append(turn_of(question, trace))
        del turns[:-MAX_TURNS]
    if not turns:
        return
    with st.expander(f"Conversation: {len(turns)} turn(s); a follow-up is condensed into a standalone question",
                     expanded=False):
        for t in turns[-10:]:
            st.markdown(f"**Q:** {escape_md(t.question)}" + (f"  \n*as:* {escape_md(t.condensed)}" if t.condensed
                                                              else ""))
        if st.button("New conversation", key="new_conversation"):
            st.session_state[tk] = []
            st.session_state[bk] = 0
            st.rerun()
