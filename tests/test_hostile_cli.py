"""The CLI beside a process that holds the database (the app): read commands read a snapshot, writes wait and
then say who holds the file (issue #12, item 9). DuckDB allows one writing process or several readers."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

import core.cli as cli

ROOT = Path(__file__).resolve().parents[1]
HOLDER = """
import sys
from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.fakes import HashEmbedder
store = Store(sys.argv[1])
ingest_files([("held.md", b"# Held\\n\\nThe app holds this database open for writing.")], store=store,
             embedder=HashEmbedder(), config=PipelineConfig())
print("ready", flush=True)
sys.stdin.read()  # hold the file until the test closes our stdin
"""


@pytest.fixture
def held_db(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen]]:
    db = tmp_path / "app.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield db, proc
    finally:
        if proc.poll() is None:
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(timeout=30)


def test_read_command_reads_a_snapshot_while_the_app_writes(held_db, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    db, _ = held_db
    assert cli.main(["docs", "--db", str(db)]) == 0
    out = capsys.readouterr()
    assert "held.md" in out.out and "snapshot copy" in out.err


def test_write_command_waits_then_names_the_holder(held_db, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db, _ = held_db
    monkeypatch.setenv("RAG_DB_WAIT_S", "0.5")
    start = time.monotonic()
    assert cli.main(["delete", "d000", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert 0.5 <= time.monotonic() - start < 10
    assert "in use by another process" in err and "waited 0.5 s" in err and "make run" in err


def test_write_command_goes_ahead_once_the_holder_lets_go(held_db, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    db, proc = held_db
    monkeypatch.setenv("RAG_DB_WAIT_S", "30")

    def release() -> None:
        time.sleep(1.0)
        proc.stdin.close()

    import threading

    threading.Thread(target=release, daemon=True).start()
    assert cli.main(["delete", "no-such-doc", "--db", str(db)]) == 1  # opened after the wait; the id is unknown
    assert "no document no-such-doc" in capsys.readouterr().err
