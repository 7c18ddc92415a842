"""Search Lab panel: the user's own read-only SELECT over the workspace's tables, run in the same SQL sandbox as the
sql stage (one checked SELECT, no files or settings, a row cap and a time limit)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.report import escape_md
from core.app.tables import csv_bytes, export_rows, run_user_sql


def sql_panel(store: Any, workspace: str) -> None:
    views = store.tables.list(workspace)  # the schema only: no table is read on every rerun
    if not views:
        return
    with st.expander("SQL over the workspace's tables"):
        st.caption("Tables: " + escape_md("; ".join(v.schema_line() for v in views)))
        with st.form("sql_form", border=False):
            sql = st.text_area("SELECT", key="lab_sql", height=90,
                               placeholder=f"SELECT count(*) FROM {views[0].name}", label_visibility="collapsed")
            run = st.form_submit_button("Run SQL", key="lab_sql_run")
        if run and sql.strip():
            out = run_user_sql(store, sql, workspace)
            if out.result is None:
                st.error(escape_md(out.error))
            else:
                r = out.result
                # formula-like text neutralised: the grid's CSV download opens safely in a spreadsheet
                st.dataframe(export_rows(r.columns, r.rows), hide_index=True, key="lab_sql_rows")
                st.caption(f"{len(r.rows):,} row(s){' (cut at the row cap)' if r.truncated else ''} · {r.ms:.0f} ms"
                           + "".join(f" · {escape_md(n)}" for n in r.notes))
                st.download_button(":material/download: CSV", csv_bytes(r.columns, r.rows), file_name="result.csv",
                                   mime="text/csv", key="lab_sql_csv")
