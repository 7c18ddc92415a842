"""AppTest of the Evaluate page: a pasted golden set with bad lines, an A/B run, its tables, and a reopened question."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.app.report import escape_md
from core.config import PipelineConfig
from core.config.saved import save_config
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from pages import _state

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "workbench.py")
DOCS = [
    ("gateway.md", b"# Gateway\n\nThe gateway refuses connections below TLS_VERSION_MIN, which defaults to 1.2.\n\n"
                   b"## Backups\n\nNightly backups go to the cold archive in Reykjavik for ninety days.\n"),
    ("finance.md", b"# Finance\n\nRevenue grew 3% over the previous quarter, to 18.1 million euros.\n"),
]
LINES = [
    json.dumps({"id": "q1", "query": "What does TLS_VERSION_MIN default to?", "type": "exact-id",
                "gold": [{"doc": "gateway.md", "span": "refuses connections below TLS_VERSION_MIN, which defaults"}]}),
    json.dumps({"id": "q2", "query": "How much did revenue grow?",
                "gold": [{"doc": "finance.md", "span": "Revenue grew 3% over the previous quarter"}]}),
    '{"id": "q3", "query": broken json',
    json.dumps({"id": "q4", "query": "", "gold": []}),
    json.dumps({"id": "q5", "query": "Where do backups go?", "gold": [{"doc": "nowhere.md", "span": "cold archive"}]}),
]


def _frames(at: AppTest, *columns: str) -> list:
    """Tables on the page that have all these columns (st.dataframe keys do not reach AppTest)."""
    return [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]


@pytest.fixture
def page(deps: Deps, tmp_path: Path) -> AppTest:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    save_config("bm25-only", PipelineConfig().with_overrides({"dense.enabled": False, "fusion.enabled": False}),
                "default", data_dir=tmp_path)
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state["data_dir"] = str(tmp_path)
    at.run()
    return at.switch_page("pages/evaluate.py").run()


def test_paste_set_run_ab_and_see_tables(page: AppTest, deps: Deps) -> None:
    at = page
    assert not at.exception and at.title[0].value == "Evaluate"
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input("\n".join(LINES)).run()
    (problems,) = _frames(at, "line", "problem")
    assert list(problems["line"]) == [3, 4] and "empty query" in problems["problem"].tolist()
    labels = at.selectbox(key="cfg_a").options
    assert any(lbl.startswith("bm25-only · ") for lbl in labels) and labels[0].startswith("session · ")
    at.selectbox(key="cfg_a").set_value(next(lbl for lbl in labels if lbl.startswith("bm25-only"))).run()
    at.selectbox(key="cfg_b").set_value(labels[0]).run()
    assert any("dense.enabled False → True" in c.value for c in at.caption)
    at.button(key="eval_run").click().run()
    assert not at.exception
    (cmp,) = _frames(at, "metric", "verdict")
    assert {"recall@5", "mrr", "ndcg@10"} <= set(cmp["metric"])
    assert set(cmp["verdict"]) <= {"A better", "B better", "no clear difference", "n/a"}
    # the unknown document is reported at run time, and that question is left out
    assert len(deps.store.runs.eval_runs()) == 2
    (per_q,) = _frames(at, "qid", "status")
    assert list(per_q["qid"]) == ["q1", "q2"] and set(per_q["status"]) <= {"improved", "regressed", "same"}
    # one question's two traces: gold status per stage, and the gold-holding candidate marked
    gold = _frames(at, "gold", "doc", "span")
    assert len(gold) == 2 and gold[0].loc[0, "bm25"] == "#1"
    stages = [f for f in _frames(at, "rank", "gold", "snippet") if len(f)]  # stages with candidates, in order
    assert stages and stages[0].iloc[0]["gold"] == "★1"  # A's first list (bm25): the gold chunk at rank 1


def test_stored_runs_can_be_reopened(page: AppTest) -> None:
    at = page
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input(LINES[0]).run()
    at.button(key="eval_run").click().run()
    fresh = AppTest.from_file(APP, default_timeout=60)
    fresh.session_state[_state.DEPS_KEY] = at.session_state[_state.DEPS_KEY]
    fresh.session_state["data_dir"] = at.session_state["data_dir"]
    fresh.run()
    fresh.switch_page("pages/evaluate.py").run()
    fresh.radio(key="eval_source").set_value("paste").run()
    options = fresh.multiselect(key="eval_reopen").options
    assert len(options) == 2 and {o.split(" · ")[2] for o in options} == {"session", "bm25-only"}
    ids = [r.eval_id for r in fresh.session_state[_state.DEPS_KEY].store.runs.eval_runs()]  # newest first
    fresh.multiselect(key="eval_reopen").set_value([ids[0]]).run()  # one run alone: its metrics
    assert not fresh.exception
    (metrics,) = _frames(fresh, "metric")
    assert "recall@5" in set(metrics["metric"]) and "verdict" not in metrics.columns
    fresh.multiselect(key="eval_reopen").set_value(ids).run()  # two: the A/B table
    (cmp,) = _frames(fresh, "metric", "verdict")
    assert {"recall@5", "mrr"} <= set(cmp["metric"])


def test_save_session_config_from_the_page(page: AppTest, tmp_path: Path) -> None:
    at = page
    at.text_input(key="cfg_name").input("mine").run()
    at.radio(key="cfg_fmt").set_value("toml").run()
    at.button(key="cfg_save").click().run()
    assert (tmp_path / "workspaces" / "default" / "configs" / "mine.toml").is_file()
    assert any(o.startswith("mine · ") for o in at.selectbox(key="cfg_a").options)
    # The save is confirmed after the rerun that lists it, with the file it wrote.
    saved = escape_md(str(tmp_path / "workspaces" / "default" / "configs" / "mine.toml"))
    assert [s.value for s in at.success] == [f"Saved 'mine' ({at.session_state['config'].stable_hash()}) to {saved}"]
    at.text_input(key="cfg_name").input("  ").run()
    at.button(key="cfg_save").click().run()
    assert [w.value for w in at.warning] == ["Type a name for the configuration first."] and not at.success


def test_saved_configs_live_beside_the_database(monkeypatch: pytest.MonkeyPatch, page: AppTest, tmp_path: Path
                                                ) -> None:
    """Without a test override, the page saves under the folder of RAG_DB, not under a fixed data/."""
    db = tmp_path / "elsewhere" / "wb.duckdb"
    monkeypatch.setenv("RAG_DB", str(db))
    at = page
    del at.session_state["data_dir"]
    at.text_input(key="cfg_name").input("beside").run()
    at.button(key="cfg_save").click().run()
    assert (db.parent / "workspaces" / "default" / "configs" / "beside.json").is_file()


def test_configuration_b_starts_on_settings_that_differ_from_the_session(deps: Deps, tmp_path: Path) -> None:
    # No saved configuration: the list is session, routed, single pipeline. With the router on by default, "routed"
    # hashes like the session itself; B must not start on a copy of A.
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state["data_dir"] = str(tmp_path)
    at.run()
    at = at.switch_page("pages/evaluate.py").run()
    a, b = at.selectbox(key="cfg_a").value, at.selectbox(key="cfg_b").value
    assert a.startswith("session · ")
    assert b.split(" · ")[-1] != a.split(" · ")[-1], (a, b)
    assert not any("B changes: nothing" in c.value for c in at.caption)


def test_a_built_in_set_about_other_documents_says_so_before_a_run(page: AppTest) -> None:
    """The workspace holds the user's own two documents: the sample set (about the sample corpus) is named as such
    with what to do instead; a pasted set about these documents is not."""
    at = page
    at.radio(key="eval_source").set_value("sample").run()
    note = [i.value for i in at.info if "documents this set asks about" in i.value]
    assert len(note) == 1 and "None of the" in note[0] and "workspace 'default'" in note[0]
    assert "Generate a golden set from this workspace's own documents" in note[0]
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input("\n".join(LINES)).run()
    assert not [i.value for i in at.info if "documents this set asks about" in i.value]
