"""AppTests of the table panels: the Corpus page lists the workspace's tables with a sample, the Search Lab's SQL box
runs the user's own SELECT in the sandbox and shows a refusal's reason."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from pages import _state

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")
FAULTS = b"fault_code,system,reports\nF-1,pump,12\nF-2,pump,30\nF-3,valve,7\n"


def _app(deps: Deps) -> AppTest:
    rep = ingest_files([("faults.csv", FAULTS), ("notes.md", b"# Notes\n\nF-2 means a worn impeller.\n")],
                       store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    assert not rep.errors
    at = AppTest.from_file(APP, default_timeout=15)
    at.session_state[_state.DEPS_KEY] = deps
    return at.run()


def test_corpus_page_lists_tables_with_their_columns_and_sample(deps: Deps) -> None:
    at = _app(deps)
    assert not at.exception
    assert any(e.label.startswith("faults · 3 rows · 3 columns · from faults.csv") for e in at.expander)
    sample = next(d.value for d in at.dataframe if "fault_code" in d.value.columns)
    assert list(sample["reports"]) == [12, 30, 7]


def test_search_lab_sql_box_runs_a_select_and_names_a_refusal(deps: Deps) -> None:
    at = _app(deps).switch_page("pages/search_lab.py").run()
    assert not at.exception
    at.text_area(key="lab_sql").input("SELECT system, sum(reports) AS n FROM faults GROUP BY 1 ORDER BY 1")
    at.button(key="lab_sql_run").click().run()
    rows = next(d.value for d in at.dataframe if "system" in d.value.columns)
    assert list(rows["n"]) == [42, 7]
    at.text_area(key="lab_sql").input("COPY faults TO '/tmp/out.csv'")
    at.button(key="lab_sql_run").click().run()
    assert any("only a read\\-only SELECT may run; this starts with COPY" in e.value for e in at.error)  # escaped
