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


def test_curation_addresses_items_by_id(evaluate: AppTest, deps: Deps) -> None:
    """Issue #47: the curate list names items by id; a Reject hides the item and hands the selection to the one
    that followed it, and the other items keep their labels (a list numbered by position renumbered after a Reject,
    so an edit addressed by number landed on the wrong item)."""
    at = evaluate
    at.number_input(key="gold_n").set_value(6).run()
    at.text_input(key="gold_name").input("ids").run()
    at.button(key="gold_generate").click().run()
    items = deps.store.golden.items("default", "ids")
    assert len(items) >= 3
    a, b, c = items[0], items[1], items[2]
    labels = at.selectbox(key="gold_item").options
    assert all(lab.startswith(it.item_id + " · ") for lab, it in zip(labels, items))
    at.selectbox(key="gold_item").set_value(b.item_id).run()
    at.button(key="gold_reject").click().run()
    assert {it.item_id: it.status for it in deps.store.golden.items("default", "ids")}[b.item_id] == "rejected"
    assert at.selectbox(key="gold_item").value == c.item_id  # the next item, by id
    after = at.selectbox(key="gold_item").options
    assert b.item_id not in [o.split(" · ")[0] for o in after]
    assert [o for o in after if o.startswith(a.item_id)] == [labels[0]]  # the others keep their labels
    at.text_input(key=f"gold_q_{c.item_id}").input("Edited question about backups?").run()
    at.button(key="gold_edit").click().run()
    got = {it.item_id: it for it in deps.store.golden.items("default", "ids")}
    assert got[c.item_id].query == "Edited question about backups?" and got[c.item_id].status == "edited"
    assert got[a.item_id].query == a.query and got[b.item_id].query == b.query
    assert not at.exception


def test_gold_picker_has_no_select_all_and_asks_above_five(deps: Deps) -> None:
    more = [(f"harbour_{n}.md", f"# Harbour {n}\n\nThe harbour {n} gateway keeps nightly backups of revenue "
                                f"ledgers for site {n}.\n".encode()) for n in range(8)]
    ingest_files(more, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = _app(deps, "pages/search_lab.py")
    at.text_input(key="query").input("harbour gateway backups revenue")
    at = at.button(key="search").click().run()
    picker = at.multiselect(key="lab_gold_chunks")
    assert picker.proto.select_all == 0  # the bulk "Select all" is not offered
    options = picker.options
    assert len(options) > 5
    at.multiselect(key="lab_gold_chunks").set_value(options[:6]).run()
    assert at.button(key="lab_gold_add").disabled  # more than five: asks first
    at.checkbox(key="lab_gold_many").check().run()
    assert not at.button(key="lab_gold_add").disabled
    at.button(key="lab_gold_add").click().run()
    [item] = deps.store.golden.items("default", "search-lab")
    assert len(item.gold) == 6
    at.multiselect(key="lab_gold_chunks").set_value(options[:6]).run()
    assert at.checkbox(key="lab_gold_many").value is False
    assert at.button(key="lab_gold_add").disabled  # the confirmation covered that one item only
    assert not at.exception
