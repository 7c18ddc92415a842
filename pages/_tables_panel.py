"""Corpus page panel: the workspace's tables (from CSV, TSV, XLSX, Parquet and JSON-lines files) with their typed
columns, row counts and first rows."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.report import escape_md
from core.app.tables import export_rows, table_views


def tables_panel(store: Any, workspace: str) -> None:
    views = table_views(store, workspace)
    if not views:
        return
    st.subheader(f"Tables ({len(views)})")
    st.caption("Each table file is a DuckDB table named after its file's stem; ask questions about it in the Search "
               "Lab (counts, totals, averages, rankings go to SQL) or run your own SELECT in its SQL box.")
    for v in views:
        t = v.info
        cols = ", ".join(f"{c} {typ.lower()}" for c, typ in t.columns)
        with st.expander(f"{t.name} · {t.n_rows:,} rows · {len(t.columns)} columns · from {t.source}"):
            st.caption(escape_md(cols))
            st.dataframe(export_rows(v.columns, v.sample), hide_index=True,  # its CSV download is formula-safe
                         key=f"table_sample_{t.name}")
