"""Issue #46 item 1: a workspace delete is crash-safe and resumable (a journal the next open finishes), never leaves
a running app without its DuckDB connection (a lock a CLI writer honours), and removes everything the workspace
owns on disk (session files, saved configs, ANN graph files) besides its rows and their bytes."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.app.conversation import save_turns, session_path
from core.app.workspaces import WorkspaceError, delete_workspace
from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.store import Store
from core.store.workspaces import journal_path, workspace_dir
from core.types import Turn

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"Harbor gateway sets TLS_VERSION_MIN"
ALPHA = [("gw.md", b"# Gateway\n\nThe Harbor gateway sets TLS_VERSION_MIN to 1.2 for every listener. "
                   b"Harbor runs on the Osprey cluster.")]
BETA = [("gw.md", b"# Gateway\n\nThe Falcon gateway sets TLS_VERSION_MIN to 1.3 for every listener.")]


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + ".wal")) if p.exists())


def _two_workspaces(path: Path, embedder) -> None:  # noqa: ANN001
    store = Store(path)
    for ws, files in (("alpha", ALPHA), ("beta", BETA)):
        ingest_files(files, store=store, embedder=embedder, config=PipelineConfig(), workspace=ws)
    store.close()


_KILLER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from core.store import Store
    from core.app.workspaces import delete_workspace
    store = Store(sys.argv[1])
    def progress(msg):
        if sys.argv[2] in msg:
            os.kill(os.getpid(), signal.SIGKILL)
    delete_workspace(store, "alpha", progress=progress)
""")


@pytest.mark.parametrize("moment", ["copying live rows", "swapping in"])
def test_a_delete_killed_mid_rewrite_is_finished_by_the_next_open(tmp_path, embedder, moment) -> None:  # noqa: ANN001
    path = tmp_path / "w.duckdb"
    _two_workspaces(path, embedder)
    sess = session_path(path, "s1", "alpha")
    save_turns(sess, [Turn("q", "a Harbor answer")])
    assert SECRET in _file_bytes(path)
    run = subprocess.run([sys.executable, "-c", _KILLER.format(root=str(ROOT)), str(path), moment],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    assert journal_path(path).exists()  # the delete is recorded as unfinished
    assert SECRET in _file_bytes(path)  # killed before the rewrite landed: the bytes are still there
    store = Store(path)  # the next read-write open finishes it
    try:
        assert store.workspaces() == ["beta", "default"]
        assert any("finished the delete of workspace 'alpha'" in n for n in store.notices)
        assert SECRET not in _file_bytes(path)
        assert not journal_path(path).exists() and not sess.exists()
        assert "Falcon gateway" in store.corpus.document_text(store.corpus.documents("beta")[0].doc_id, "beta")
    finally:
        store.close()


def test_delete_of_a_journalled_workspace_finishes_instead_of_saying_no_workspace(tmp_path, embedder) -> None:  # noqa: ANN001
    path = tmp_path / "w.duckdb"
    _two_workspaces(path, embedder)
    store = Store(path)
    # The rows went (their transaction committed) but the process died before the rewrite: what a kill leaves.
    store.workspaces_repo.begin_delete("alpha")
    assert sum(store.workspaces_repo.delete("alpha").values()) > 0
    store.db.cursor().execute("CHECKPOINT")
    assert SECRET in _file_bytes(path)  # deleted rows, bytes still in the file
    deleted = delete_workspace(store, "alpha")  # not "no workspace 'alpha'"
    assert sum(deleted.values()) == 0
    assert SECRET not in _file_bytes(path) and not journal_path(path).exists()
    with pytest.raises(WorkspaceError, match="no workspace"):
        delete_workspace(store, "alpha")
    store.close()


def test_delete_removes_the_workspace_files_on_disk(tmp_path, embedder) -> None:  # noqa: ANN001
    path = tmp_path / "w.duckdb"
    _two_workspaces(path, embedder)
    store = Store(path)
    a, b = session_path(path, "s1", "alpha"), session_path(path, "s1", "beta")
    save_turns(a, [Turn("q", "alpha answer")])
    save_turns(b, [Turn("q", "beta answer")])
    (workspace_dir(path, "alpha") / "configs").mkdir(parents=True)
    (workspace_dir(path, "alpha") / "configs" / "mine.json").write_text("{}")
    ann = Path(str(path) + ".ann")
    ann.mkdir()
    from core.retrieve.ann import ann_path
    pa, pb = ann_path(ann, "alpha", "m", "text"), ann_path(ann, "beta", "m", "text")
    for p in (pa, pb):
        p.write_bytes(b"graph")
        p.with_suffix(".json").write_text("{}")
    delete_workspace(store, "alpha")
    assert not a.exists() and not workspace_dir(path, "alpha").exists()
    assert not pa.exists() and not pa.with_suffix(".json").exists()
    assert b.exists() and pb.exists() and pb.with_suffix(".json").exists()
    store.close()


_CLI_WRITER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    from core.store import Store, StoreError
    end = time.monotonic() + float(sys.argv[2])
    got = 0
    print("polling", flush=True)
    while time.monotonic() < end and not os.path.exists(sys.argv[3]):  # until told the delete is over
        try:
            s = Store(sys.argv[1])
        except StoreError:
            continue
        got += 1
        time.sleep(0.5)  # a CLI write that takes the file for a while
        s.close()
        break
    print(got)
""")


def test_a_cli_writer_racing_the_delete_never_takes_the_apps_connection(tmp_path, embedder) -> None:  # noqa: ANN001
    """The documented CLI-beside-the-app setup: a writer polls for the file while the app deletes a workspace. The
    writer may not take the file in the swap gap (it honours the swap lock); the app's connection lives on."""
    path = tmp_path / "w.duckdb"
    _two_workspaces(path, embedder)
    app = Store(path)
    for round_ in range(3):
        app.ensure_workspace(f"x{round_}")
        stop = tmp_path / f"stop{round_}"
        writer = subprocess.Popen([sys.executable, "-c", _CLI_WRITER.format(root=str(ROOT)), str(path), "60",
                                   str(stop)], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        # ready when it says so, on a busy machine too
        assert writer.stdout is not None and writer.stdout.readline().strip() == "polling"
        time.sleep(0.2)  # a few of its attempts fail on the app's lock before the delete
        delete_workspace(app, f"x{round_}")
        assert app.workspaces()  # the app's connection works right after the delete
        stop.touch()  # the swap is over: the writer stops polling (or finishes the write it got in the gap)
        writer.wait(timeout=60)
        assert f"x{round_}" not in app.workspaces()
    assert "beta" in app.workspaces()
    app.close()


def test_a_lost_reopen_is_retried_by_the_next_call_not_lost_for_good(tmp_path) -> None:  # noqa: ANN001
    """When a reopen after a swap fails (a process that ignores the lock held the file), the connection is left
    unset and the next call connects again: never 'Connection already closed!' until a restart."""
    store = Store(tmp_path / "w.duckdb")
    store.ensure_workspace("alpha")
    with store.db._swap_lock:  # noqa: SLF001 - what compact leaves behind when its reopen lost the race
        store.db._con.close()  # noqa: SLF001
        store.db._con = None  # noqa: SLF001
    assert store.workspaces() == ["alpha", "default"]
    store.close()
