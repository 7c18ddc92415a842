"""The Search Lab's conversation: the session's turns, handed to the pipeline as history, and "New conversation"."""
from __future__ import annotations

import streamlit as st

from core.app.conversation import MAX_TURNS, turn_of
from core.app.report import escape_md
from core.types import Trace, Turn

TURNS_KEY = "conversation_turns"
BASE_KEY = "conversation_base"  # how many turns the last searched question had before it (settings re-runs reuse it)


def history(submitted: bool) -> list[Turn]:
    """The turns before the current question: a new search reads them all; a re-run of the same question (a
    setting changed) reads the turns it first ran with, not itself."""
    turns: list[Turn] = st.session_state.setdefault(TURNS_KEY, [])
    if submitted:
        st.session_state[BASE_KEY] = len(turns)
    return list(turns[: st.session_state.get(BASE_KEY, len(turns))])


def panel(question: str, trace: Trace, submitted: bool) -> None:
    """Keep the searched question's turn, then show the conversation with a button that starts a new one."""
    turns: list[Turn] = st.session_state.setdefault(TURNS_KEY, [])
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
            st.session_state[TURNS_KEY] = []
            st.session_state[BASE_KEY] = 0
            st.rerun()
