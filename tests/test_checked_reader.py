"""Issue #46 items 2 and 3: one checked reader for every path a user names (core/safeio/files.py). A FIFO never hangs, the
zero device is no MemoryError, a link loop is one file's problem, deep JSON is a message, and each cap on a size
that can grow (history turns, collection descriptions) names itself when hit."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from core.app.conversation import MAX_TURN_CHARS, ConversationError, load_turns, parse_turns
from core.config import ConfigError, PipelineConfig, load_config_file
from core.eval.datasets import DatasetError, load_jsonl_file, parse_jsonl
from core.eval.sweep import load_grid
from core.safeio.files import MAX_JSON_DEPTH, FileProblem, read_checked
from core.ingest.files import read_file, scan_paths
from core.ingest.pipeline import ingest_files
from core.store import Store

DEEP = "[" * 100_000 + "]" * 100_000


def _fifo(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    os.mkfifo(p)
    return p


def _bounded(fn, seconds: float = 10.0):  # noqa: ANN001, ANN202 - a hang fails the test instead of hanging it
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_the_reader_refuses_fifos_devices_and_oversize_by_name(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path, "h.jsonl")
    with pytest.raises(FileProblem, match=r"h.jsonl: a FIFO \(named pipe\), not a regular file"):
        _bounded(lambda: read_checked(fifo, max_bytes=100))
    with pytest.raises(FileProblem, match="/dev/zero: a character device"):
        _bounded(lambda: read_checked("/dev/zero", max_bytes=100))
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 1000)
    with pytest.raises(FileProblem, match="big.json: 1.0 kB is over the limit for a file of 100 B"):
        read_checked(big, max_bytes=100)
    with pytest.raises(FileProblem, match="missing.json: cannot be read"):
        read_checked(tmp_path / "missing.json", max_bytes=100)


def test_history_files_fifo_zero_device_and_deep_json_are_messages(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path, "history.jsonl")
    with pytest.raises(ConversationError, match="history.jsonl: a FIFO"):
        _bounded(lambda: load_turns(fifo))
    with pytest.raises(ConversationError, match="character device"):
        _bounded(lambda: load_turns("/dev/zero"))
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(ConversationError, match=f"nested deeper than {MAX_JSON_DEPTH}"):
        load_turns(deep)
    line = tmp_path / "deep.jsonl"
    line.write_text('{"question": ' + DEEP + "}\n")
    with pytest.raises(ConversationError, match="nested deeper"):
        load_turns(line)


def test_a_huge_history_turn_is_cut_and_the_cut_is_said(tmp_path: Path) -> None:
    notes: list[str] = []
    turns = parse_turns('[{"question": "' + "q" * 5_000_000 + '", "answer": "short"}]', "h.json", notes)
    assert len(turns[0].question) == MAX_TURN_CHARS and turns[0].answer == "short"
    assert notes == [f"h.json item 1: the question was cut at {MAX_TURN_CHARS:,} characters (MAX_TURN_CHARS); it "
                     "had 5,000,000"]


def test_golden_sets_configs_and_grids_go_through_the_reader(tmp_path: Path) -> None:
    gs = parse_jsonl('{"id": "a", "question": "q", "gold": [{"doc": "d"}]}\n{"id": "b", "question": ' + DEEP + "}\n")
    assert [q.qid for q in gs.queries] == ["a"] and "nested deeper" in gs.problems[0].message
    with pytest.raises(DatasetError, match="gold.jsonl: a FIFO"):
        _bounded(lambda: load_jsonl_file(_fifo(tmp_path, "gold.jsonl")))
    deep = tmp_path / "c.json"
    deep.write_text('{"bm25": ' + DEEP + "}")
    with pytest.raises(ConfigError, match="nested deeper"):
        load_config_file(deep)
    toml = tmp_path / "c.toml"
    toml.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nested deeper"):
        load_config_file(toml)
    with pytest.raises(ConfigError, match="c2.json: a FIFO"):
        _bounded(lambda: load_config_file(_fifo(tmp_path, "c2.json")))
    with pytest.raises(ConfigError, match="grid.json: a FIFO"):
        _bounded(lambda: load_grid(_fifo(tmp_path, "grid.json")))
    grid = tmp_path / "g.json"
    grid.write_text(DEEP)
    with pytest.raises(ConfigError, match="nested deeper"):
        load_grid(grid)


def test_a_symlink_loop_is_one_files_problem_not_the_runs(tmp_path: Path, embedder) -> None:  # noqa: ANN001
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nThe pump runs at 40 bar.\n")
    (docs / "a.md").symlink_to(docs / "b.md")
    (docs / "b.md").symlink_to(docs / "a.md")
    (docs / "self.md").symlink_to(docs / "self.md")
    (docs / "loopdir").symlink_to(docs / "loopdir")  # no supported suffix: walked past, never an abort
    (docs / "sub").mkdir()
    (docs / "sub" / "up").symlink_to(docs / "sub")  # a folder link back up: never descended
    files = scan_paths([docs])  # no RuntimeError
    by = {f.key.rstrip("/"): f for f in files}
    assert not by["good.md"].problem
    for key in ("a.md", "b.md", "self.md"):
        assert "link loop" in by[key].problem, key
    named = scan_paths([docs / "self.md"])  # a loop named on the command line
    assert "link loop" in named[0].problem
    assert read_file(by["good.md"]).startswith(b"# Good")
    store = Store()
    rep = ingest_files(files, store=store, embedder=embedder, config=PipelineConfig())
    assert store.corpus.count("documents") == 1  # the good file went in; each loop is its own error
    assert sum("link loop" in e.message for e in rep.errors) == 3


def test_a_collection_description_cut_at_its_cap_says_so(embedder) -> None:  # noqa: ANN001
    from core.app.collections import refresh, set_description
    from core.store.collections import MAX_DESCRIPTION

    store = Store()
    ingest_files([("a.md", b"# A\n\nText.\n")], store=store, embedder=embedder, config=PipelineConfig())
    name = refresh(store, "default")[0].name
    assert set_description(store, "default", name, "short") == ""
    note = set_description(store, "default", name, "d" * (MAX_DESCRIPTION + 10))
    assert "MAX_DESCRIPTION" in note and f"{MAX_DESCRIPTION + 10:,}" in note
    assert len(store.collections.list("default")[0].description) == MAX_DESCRIPTION
