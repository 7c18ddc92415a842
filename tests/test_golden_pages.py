"""AppTests: generate and curate a golden set on Evaluate; "Add to golden set" from the Search Lab."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from pages import _state

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "workbench.py")
DOCS = [
    ("ops_guide.md", b"# Operations guide\n\n## Transport security\n\nThe gateway refuses connections below "
                     b"TLS_VERSION_MIN, which defaults to 1.2 in every region. The Kestrel gateway is a hardened "
                     b"edge router for harbour sites.\n\n## Backups\n\nNightly backups are copied to the cold archive "
                     b"in Reykjavik and kept for 90 days since 14 May 2023.\n"),
    ("finance.txt", b"Revenue grew 3% over the previous quarter, to 18.1 million euros. The harbour office hired "
                    b"four engineers in May 2024. Project Heron is a retrofit of the Bergen harbour cranes."),
]


def _app(deps: Deps, page: str) -> AppTest:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides(
        {"answer_cache.enabled": False, "router.enabled": False})
    at.run()
    return at.switch_page(page).run()


@pytest.fixture
def evaluate(deps: Deps, tmp_path: Path) -> AppTest:
    at = _app(deps, "pages/evaluate.py")
    at.session_state["data_dir"] = str(tmp_path)
    return at


def test_generate_then_accept_edit_reject_and_mark_unanswerable(evaluate: AppTest, deps: Deps) -> None:
    at = evaluate
    assert not at.exception
    at.number_input(key="gold_n").set_value(6).run()
    at.text_input(key="gold_name").input("mine").run()
    at.button(key="gold_generate").click().run()
    assert not at.exception and any("Stored mine" in s.value for s in at.success)
    items = deps.store.golden.items("default", "mine")
    assert items and all(it.status == "pending" for it in items)
    assert at.selectbox(key="gold_set").value == "mine"
    first = items[0]
    at.button(key="gold_accept").click().run()
    assert deps.store.golden.items("default", "mine")[0].status == "accepted"
    at.text_input(key=f"gold_q_{first.item_id}").input("What does the gateway refuse?").run()
    at.button(key="gold_edit").click().run()
    got = deps.store.golden.items("default", "mine")[0]
    assert (got.query, got.status) == ("What does the gateway refuse?", "edited")
    at.button(key="gold_unanswerable").click().run()
    got = deps.store.golden.items("default", "mine")[0]
    assert not got.answerable and got.qtype == "unanswerable"
    at.button(key="gold_reject").click().run()
    assert deps.store.golden.items("default", "mine")[0].status == "rejected"
    at.radio(key="eval_source").set_value("golden:default/mine").run()  # the stored set is a source to evaluate
    assert any("questions (" in c.value and "workspace 'default'" in c.value for c in at.caption)
    # rejected items leave the default view: the next item is on show
    assert at.selectbox(key="gold_item").options and "rejected" not in at.selectbox(key="gold_item").options[0]
    assert not at.exception


def test_search_lab_adds_ticked_chunks_and_unanswered_questions(deps: Deps) -> None:
    at = _app(deps, "pages/search_lab.py")
    at.text_input(key="query").input("Where are nightly backups kept?")
    at = at.button(key="search").click().run()
    assert not at.exception
    options = at.multiselect(key="lab_gold_chunks").options
    assert options
    at.multiselect(key="lab_gold_chunks").select(options[0]).run()
    at.button(key="lab_gold_add").click().run()
    [item] = deps.store.golden.items("default", "search-lab")
    assert item.query == "Where are nightly backups kept?" and item.answerable and item.status == "accepted"
    assert item.gold[0].doc in {"ops_guide.md", "finance.txt"} and item.gold[0].chunk
    at.text_input(key="query").input("Who painted the lighthouse?")
    at = at.button(key="search").click().run()
    at.checkbox(key="lab_gold_none").check().run()
    at.button(key="lab_gold_add").click().run()
    items = deps.store.golden.items("default", "search-lab")
    assert len(items) == 2 and not items[1].answerable and items[1].gold == ()
    assert not at.exception
