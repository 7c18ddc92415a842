"""Evaluate page panel: the workspace's offline-answer calibration (its cut, the set it was fitted on, its CV figures
beside the shipped prior's) and a button that calibrates on the golden set on show."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.report import escape_md
from core.eval.calibrate import CalibrationError, calibrate, summary_rows
from core.eval.datasets import GoldenSet
from pages import _state

DONE_KEY = "cal_done_msg"


def calibration_panel(gs: GoldenSet | None, deps: Any, workspace: str) -> None:
    ws = (gs.workspace if gs is not None and gs.workspace else workspace)
    with st.expander("Offline answer: refusal threshold calibrated on this workspace"):
        if msg := st.session_state.pop(DONE_KEY, None):
            st.success(msg)
        cal = deps.store.calibrations.get(ws)
        if cal is None:
            st.caption(f"No calibration in workspace '{escape_md(ws)}': the offline answer refuses below the "
                       "shipped model's threshold (a prior fitted elsewhere). Calibrating fits the cut on this "
                       "set's answerable and unanswerable questions by 5-fold cross-validation.")
        else:
            version = deps.store.corpus.corpus_version(ws)
            st.markdown(f"Threshold **{cal.threshold:.3f}** · fitted on '{escape_md(cal.dataset)}' · corpus "
                        f"v{cal.corpus_version}{' (the corpus has changed since)' if version != cal.corpus_version else ''}"
                        f" · {cal.folds}-fold CV"
                        + (f" · {escape_md(cal.figures.get('kept_prior_why') or 'the cut fitted on this set did no better than the shipped prior in cross-validation')}, "
                           "so the prior is kept" if cal.figures.get("kept_prior") else ""))
            # Short headers, the full meaning on hover: the long names made the table wider than a 1366 px window.
            col = st.column_config.NumberColumn
            st.dataframe(summary_rows(cal), hide_index=True, key="cal_figures", column_config={
                "figures": st.column_config.TextColumn("figures", width="medium"),
                "threshold": col("cut", format="%.3f", help="the support below which the answer refuses"),
                "answered correctly (gold passage retrieved)": col(
                    "right · gold read", format="%.3f", help="answered correctly, of the questions whose gold "
                                                             "passage was retrieved"),
                "answered correctly (all answerable)": col("right · all", format="%.3f",
                                                           help="answered correctly, of all answerable questions"),
                "answered correctly (gold sentence retrieved: ceiling)": col(
                    "ceiling", format="%.3f", help="answered correctly, of the questions whose gold sentence was "
                                                   "among those the answer read"),
                "refused correctly (unanswerable)": col("refused · unanswerable", format="%.3f",
                                                        help="refused correctly, of the unanswerable questions")})
            st.caption("CV figures: each fold's questions judged at the cut chosen on the other folds. Answered "
                       "correctly = the answer quotes a gold sentence; the ceiling counts questions whose gold "
                       "sentence was among those the answer read.")
        if st.button("Calibrate on this set", key="cal_run", disabled=gs is None):
            bar = st.progress(0.0, text="preparing…")
            try:
                rep = calibrate(gs, deps, workspace=workspace, config=_state.config(),  # type: ignore[arg-type]
                                progress=lambda d, t, m: bar.progress(min(1.0, d / max(t, 1)),
                                                                      text=f"{d}/{t} {escape_md(m)}"))
            except CalibrationError as exc:
                bar.empty()
                st.warning(escape_md(exc))
                return
            bar.empty()
            st.session_state[DONE_KEY] = (f"Calibrated '{escape_md(rep.calibration.workspace)}': threshold "
                                          f"{rep.calibration.threshold:.3f}")
            st.rerun()
