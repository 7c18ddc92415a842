"""Golden sets in the store: items, curation, golden:NAME loading and the JSONL export's round trip."""
from __future__ import annotations

import pytest

from core.eval.datasets import DatasetError, load_dataset, parse_jsonl
from core.eval.golden_io import to_jsonl
from core.store import Store, StoreError
from core.store.golden import GoldenItem, GoldRef


def _items() -> list[GoldenItem]:
    return [
        GoldenItem("q1", "Who operates the test rig?", "factoid", True, "Ada Lind",
                   (GoldRef("a.md", "d1-0000", "The rig operator is Ada Lind."),), "offline"),
        GoldenItem("q2", "Which rig is in Oslo?", "unanswerable", False, "", (), "offline"),
        GoldenItem("q3", "Where is it?", "factoid", True, "", (GoldRef("b.md", "d2-0001", ""),), "lab"),
        GoldenItem("q4", "garbled", "factoid", True, "", (), "offline", "rejected"),
    ]


def test_put_list_update_and_delete(store: Store) -> None:
    assert store.golden.put_set("ws", "g", _items(), generator="offline", corpus_version=3) == 4
    [row] = store.golden.sets("ws")
    assert (row.name, row.items, row.corpus_version) == ("g", 4, 3)
    assert row.by_status == {"pending": 3, "rejected": 1} and row.by_type["unanswerable"] == 1
    assert store.golden.find_set("g") == ["ws"] and store.golden.sets("default") == []
    assert store.golden.update_item("ws", "g", "q1", query="Who runs the rig?", status="edited")
    assert not store.golden.update_item("ws", "g", "nope", status="accepted")
    with pytest.raises(StoreError):
        store.golden.update_item("ws", "g", "q1", status="maybe")
    store.golden.update_item("ws", "g", "q3", answerable=False, status="accepted")
    got = {it.item_id: it for it in store.golden.items("ws", "g")}
    assert got["q1"].query == "Who runs the rig?" and got["q1"].gold == _items()[0].gold
    assert got["q3"].answerable is False and got["q3"].status == "accepted"
    assert [it.item_id for it in store.golden.items("ws", "g", statuses=["rejected"])] == ["q4"]
    store.golden.add_items("ws", "g", [GoldenItem("q5", "new one", "factoid", True, "", (), "lab")])
    assert store.golden.items("ws", "g")[-1].ordinal == 4
    assert store.golden.delete_set("ws", "g") and store.golden.items("ws", "g") == []


def test_golden_name_loads_through_load_dataset(store: Store) -> None:
    store.golden.put_set("ws", "g", _items())
    gs = load_dataset("golden:g", store=store)
    assert gs.workspace == "ws" and [q.qid for q in gs.queries] == ["q1", "q2", "q3"]  # rejected left out
    q1, q2, q3 = gs.queries
    assert q1.gold[0].doc == "a.md" and q1.gold[0].match == "span" and q1.reference == "Ada Lind"
    assert not q2.answerable and q2.qtype == "unanswerable"
    assert q3.gold[0].match == "chunk" and q3.gold[0].text == "d2-0001"  # no text: the chunk itself
    assert load_dataset("golden:ws/g", store=store).queries == gs.queries
    store.golden.put_set("other", "g", _items()[:1])
    with pytest.raises(DatasetError, match="golden:WORKSPACE/g"):
        load_dataset("golden:g", store=store)
    with pytest.raises(DatasetError, match="no golden set"):
        load_dataset("golden:missing", store=store)


def test_export_reads_back_as_the_stored_set(store: Store) -> None:
    store.golden.put_set("ws", "g", _items())
    text = to_jsonl(store.golden.items("ws", "g"))
    back = parse_jsonl(text, "g.jsonl")
    assert not back.problems and back.queries == load_dataset("golden:g", store=store).queries
    assert '"rejected"' not in text


def test_golden_name_opens_rag_db_read_only(tmp_path, monkeypatch) -> None:
    path = tmp_path / "w.duckdb"
    s = Store(path)
    s.golden.put_set("default", "g", _items()[:2])
    s.close()
    monkeypatch.setenv("RAG_DB", str(path))
    assert len(load_dataset("golden:g").queries) == 2
    s = Store(path)  # closed again: a writer can open the file afterwards
    s.close()
    monkeypatch.setenv("RAG_DB", str(tmp_path / "none.duckdb"))
    with pytest.raises(DatasetError, match="no database"):
        load_dataset("golden:g")


def test_put_set_refuses_a_bad_item_before_touching_the_stored_set() -> None:
    from dataclasses import replace as _replace

    from core.store import Store
    from core.store.db import StoreError as _StoreError
    from core.store.golden import GoldenItem, GoldRef

    store = Store()
    good = GoldenItem("i1", "Who runs it?", "factoid", True, "Ann", (GoldRef("a.md", "c1", "Ann runs it."),), "hand")
    store.golden.put_set("default", "mine", [good])
    try:
        store.golden.put_set("default", "mine", [_replace(good, item_id="i2", status="nonsense")])
    except _StoreError:
        pass
    assert [it.item_id for it in store.golden.items("default", "mine")] == ["i1"]  # the stored set is whole
