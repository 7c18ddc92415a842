"""Ingest from disk (issue #33, items 4, 5, 9, 10, 11): documents keyed by their path relative to the ingest root,
with the mapping of pre-path databases; only regular files, sizes checked before reading, no link followed out of
the folder; progress committed a group at a time (a real `kill -9`); the per-file chunk cap; chunking inside the
sandbox's deadline, and the deadline counts CPU time."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.config import PipelineConfig
from core.ingest.files import read_file, scan_paths
from core.ingest.parse import ParseError
from core.ingest.pipeline import GROUP_CHUNKS, FileResult, ingest_files
from core.ingest.sandbox import ParseSandbox
from core.models.embed import sha256_text
from core.store import Store
from core.store.corpus import PATH_KEYS_SINCE
from tests.fakes import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def sandbox() -> ParseSandbox:
    sb = ParseSandbox()
    yield sb
    sb.close()


# -- item 4: keys are paths relative to the ingest root ---------------------------------------------------------------
def test_same_named_files_in_two_folders_are_two_documents(tmp_path: Path, sandbox: ParseSandbox) -> None:
    _write(tmp_path / "docs" / "a" / "report.md", "# Alpha\n\nThe alpha report covers apples.\n")
    _write(tmp_path / "docs" / "b" / "report.md", "# Beta\n\nThe beta report covers bananas.\n")
    _write(tmp_path / "docs" / "top.md", "# Top\n\nA file at the root keeps its plain name.\n")
    store = Store(":memory:")
    files = scan_paths([tmp_path / "docs"])
    assert [f.key for f in files] == ["a/report.md", "b/report.md", "top.md"]
    rep = ingest_files(files, store=store, embedder=HashEmbedder(), config=PipelineConfig(), sandbox=sandbox)
    assert [(r.name, r.status) for r in rep.results] == [("a/report.md", "ingested"), ("b/report.md", "ingested"),
                                                         ("top.md", "ingested")]
    assert sorted(d.name for d in store.corpus.documents()) == ["a/report.md", "b/report.md", "top.md"]
    again = ingest_files(scan_paths([tmp_path / "docs"]), store=store, embedder=HashEmbedder(),
                         config=PipelineConfig(), sandbox=sandbox)
    assert {r.status for r in again.results} == {"unchanged"}
    # A file named on its own is keyed by its base name.
    assert [f.key for f in scan_paths([tmp_path / "docs" / "a" / "report.md"])] == ["report.md"]


def test_a_key_caps_its_file_name_and_its_whole_path(sandbox: ParseSandbox) -> None:
    deep = "/".join(["d" * 200] * 6) + "/x.md"
    rep = ingest_files([("sub/" + "a" * 252 + ".md", b"# Long\n\nname"), (deep, b"# Deep\n\npath")],
                       store=Store(":memory:"), embedder=HashEmbedder(), config=PipelineConfig(), sandbox=sandbox)
    assert rep.results[0].status == "ingested"  # a 255-character name inside a folder is still a file name
    assert rep.results[1].status == "error" and "the path is 1,210 characters long (at most 1,024)" in \
        rep.results[1].message


def test_two_roots_giving_one_key_refuse_the_second(tmp_path: Path) -> None:
    a = _write(tmp_path / "x" / "report.md", "# X\n\nx")
    _write(tmp_path / "y" / "report.md", "# Y\n\ny")
    files = scan_paths([tmp_path / "x", tmp_path / "y", a])  # the same file named twice is read once
    assert [f.key for f in files] == ["report.md", "report.md"]
    assert not files[0].problem and "same key" in files[1].problem and "common parent folder" in files[1].problem


def test_pre_path_documents_are_mapped_to_their_paths(tmp_path: Path, sandbox: ParseSandbox) -> None:
    """A database from before path keys holds documents under base names. The first open by this code records
    when (meta PATH_KEYS_SINCE); from then on `sub/x.md` with no document of its own takes the older `x.md` as its
    earlier version: renamed in place when unchanged (same doc id, vectors kept), replaced when changed; once only.
    A root file of the same name keeps its own, and documents never ingested again keep their base names."""
    alpha, beta = "# Alpha\n\nThe alpha report covers apples.\n", "# Beta\n\nThe beta report covers bananas.\n"
    db = tmp_path / "old.duckdb"
    old = Store(db)
    ingest_files([("report.md", alpha.encode()), ("guide.md", b"# Guide\n\nOld guide text.\n"),
                  ("notes.md", b"# Notes\n\nRoot notes.\n"), ("keep.md", b"# Keep\n\nNever ingested again.\n")],
                 store=old, embedder=HashEmbedder(), config=PipelineConfig(), sandbox=sandbox)
    ids = {d.name: d.doc_id for d in old.corpus.documents()}
    old.db.cursor().execute("DELETE FROM meta WHERE key = ?", [PATH_KEYS_SINCE])  # as a pre-path database
    old.close()

    store = Store(db)
    folder = tmp_path / "docs"
    _write(folder / "a" / "report.md", alpha)
    _write(folder / "b" / "report.md", beta)
    _write(folder / "x" / "guide.md", "# Guide\n\nNew guide text.\n")
    _write(folder / "notes.md", "# Notes\n\nRoot notes.\n")
    _write(folder / "sub" / "notes.md", "# Sub notes\n\nNotes in a folder.\n")
    emb = HashEmbedder()
    rep = ingest_files(scan_paths([folder]), store=store, embedder=emb, config=PipelineConfig(), sandbox=sandbox)
    status = {r.name: r for r in rep.results}
    assert status["a/report.md"].status == "unchanged" and status["a/report.md"].doc_id == ids["report.md"]
    assert "stored as 'report.md'" in status["a/report.md"].message
    assert status["b/report.md"].status == "ingested"
    assert status["x/guide.md"].status == "replaced"
    assert status["notes.md"].status == "unchanged" and status["notes.md"].doc_id == ids["notes.md"]
    assert status["sub/notes.md"].status == "ingested"
    docs = {d.name: d.doc_id for d in store.corpus.documents()}
    assert sorted(docs) == ["a/report.md", "b/report.md", "keep.md", "notes.md", "sub/notes.md", "x/guide.md"]
    # The replaced pre-path guide keeps its document id under its new key (a new version keeps its lineage id).
    assert docs["keep.md"] == ids["keep.md"] and docs["x/guide.md"] == ids["guide.md"]
    model_ids, _ = store.corpus.vectors(emb.model_id)
    assert len(model_ids) == store.corpus.count("chunks")  # every chunk still has its vector
    store.close()


# -- item 10: only regular files, size before reading, no link out of the folder --------------------------------------
def test_fifo_device_and_outside_links_are_refused_without_a_hang(tmp_path: Path, sandbox: ParseSandbox) -> None:
    folder = tmp_path / "docs"
    _write(folder / "ok.md", "# Fine\n\nA regular file.\n")
    os.mkfifo(folder / "pipe.md")
    (folder / "zero.txt").symlink_to("/dev/zero")
    secret = _write(tmp_path / "outside" / "secret.txt", "a file outside the folder")
    (folder / "leak.txt").symlink_to(secret)
    (folder / "inside.md").symlink_to(folder / "ok.md")  # a link that stays inside is followed
    (folder / "outdir").symlink_to(secret.parent, target_is_directory=True)
    start = time.monotonic()
    files = scan_paths([folder])
    problems = {f.key: f.problem for f in files}
    assert "FIFO" in problems["pipe.md"] and "only regular files are read" in problems["pipe.md"]
    assert "outside" in problems["zero.txt"] and "not followed" in problems["leak.txt"]
    assert "not followed" in problems["outdir/"] and not problems["inside.md"] and not problems["ok.md"]
    rep = ingest_files(files, store=Store(":memory:"), embedder=HashEmbedder(), config=PipelineConfig(),
                       sandbox=sandbox)
    assert {r.name for r in rep.ok} == {"ok.md", "inside.md"}
    assert all("secret" not in r.name for r in rep.ok)
    # Named on the command line: a link to the zero device and a FIFO are refused by name too.
    named = scan_paths([folder / "zero.txt", folder / "pipe.md"])
    assert "a link to a character device" in named[0].problem and "FIFO" in named[1].problem
    for f in named:
        with pytest.raises(ParseError, match="not a regular file"):
            read_file(f)
    assert time.monotonic() - start < 20  # nothing blocked on the FIFO or read the zero device


def test_size_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(4_000_000_000)  # sparse: reading it whole would take 4 GB
    [entry] = scan_paths([big])
    with pytest.raises(ParseError, match=r"^big.txt: 4.0 GB is over the upload limit of 20.0 MB"):
        read_file(entry, 20_000_000)


# -- item 5: committed a group at a time; a real kill -9 and a resume -------------------------------------------------
KILLED = """
import sys, time
import core.cli as cli
from tests.fakes import HashEmbedder

class Slow(HashEmbedder):
    def encode(self, texts):
        time.sleep(0.4)
        out = super().encode(texts)
        with open(sys.argv[1], "a") as f:  # texts whose vectors were made before the kill
            f.write(f"{len(texts)}\\n")
        return out

real = cli.build_deps
cli.build_deps = lambda cfg, *a, **kw: real(cfg, *a, embedder=Slow(), **kw)
sys.exit(cli.main(sys.argv[2:]))
"""
SMALL = {"chunking.size_tokens": 16, "chunking.overlap_tokens": 0}


@pytest.mark.slow  # two Python start-ups; the in-process test below checks the same commits in make test
def test_kill_9_mid_ingest_keeps_committed_documents_and_resume_reembeds_at_most_one_group(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    for d in range(10):
        _write(folder / f"d{d}" / "part.md", f"# Part {d}\n\n" + "".join(
            f"Sentence {i} of part {d} names item{d}x{i} and nothing else here. " for i in range(60)))
    db, log = tmp_path / "k.duckdb", tmp_path / "encoded.log"
    sets = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(log), "ingest", str(folder), "--db", str(db), *sets],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    printed: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # each file's line arrives as it is committed, not at the end
            printed.append(line)
            if line.startswith("ingested"):
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    printed_ok = {ln.split()[1].rstrip(":") for ln in printed if ln.startswith("ingested")}
    store = Store(db)  # the killed process's write-ahead log is replayed
    committed = {d.name for d in store.corpus.documents()}  # the printed line's group: its other lines were next
    assert printed_ok and printed_ok <= committed and len(committed) < 10, (printed, committed)
    chunks = store.corpus.chunks()
    cached = store.caches.cached_embeddings("fake-hash-64", [sha256_text(c.text) for c in chunks])
    assert len(cached) == len(chunks)  # the committed documents' vectors are cache hits for any later ingest
    emb = HashEmbedder()
    results: list[FileResult] = []
    rep = ingest_files(scan_paths([folder]), store=store, embedder=emb,
                       config=PipelineConfig().with_overrides(SMALL), on_result=results.append)
    assert {r.name for r in rep.results if r.status == "unchanged"} == committed
    assert len(rep.ok) == 10 and len(results) == 10
    total = store.corpus.count("chunks")
    made_before = sum(int(x) for x in log.read_text().split())
    redone = made_before + emb.encoded - total  # vectors made twice: what the kill cost
    assert 0 <= redone <= GROUP_CHUNKS, (made_before, emb.encoded, total)
    store.close()


class _Crashing(HashEmbedder):
    """Dies like a killed process (BaseException: nothing in ingest catches it) on its `at`-th encode call."""

    def __init__(self, at: int = 0) -> None:
        super().__init__()
        self.at = at
        self.sizes: list[int] = []

    def encode(self, texts):  # noqa: ANN001, ANN201
        if self.calls + 1 == self.at:
            raise KeyboardInterrupt
        self.sizes.append(len(texts))
        return super().encode(texts)


def test_a_crash_mid_ingest_keeps_each_committed_group_with_its_contexts(sandbox: ParseSandbox) -> None:
    files = [(f"d{d}/part.md", (f"# Part {d}\n\n" + "".join(
        f"Sentence {i} of part {d} names item{d}x{i} and nothing else here. " for i in range(60))).encode())
        for d in range(10)]
    cfg = PipelineConfig().with_overrides(SMALL)
    store = Store(":memory:")
    heard: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        ingest_files(files, store=store, embedder=_Crashing(at=2), config=cfg, sandbox=sandbox,
                     on_result=lambda r: heard.append(r.name))
    committed = {d.name for d in store.corpus.documents()}
    assert heard and set(heard) == committed and len(committed) < 10  # each result heard as it was committed
    chunk_ids = [c.chunk_id for c in store.corpus.chunks()]
    assert len(store.ledger.contexts("heuristic", "default", chunk_ids)) == len(chunk_ids)  # contexts came along
    emb = _Crashing()
    rep = ingest_files(files, store=store, embedder=emb, config=cfg, sandbox=sandbox)
    assert {r.name for r in rep.results if r.status == "unchanged"} == committed and len(rep.ok) == 10
    assert emb.encoded == store.corpus.count("chunks") - len(chunk_ids)  # nothing committed is embedded again
    assert max(emb.sizes) <= GROUP_CHUNKS  # documents are embedded (and committed) a bounded group at a time


# -- item 9: the chunk cap, and chunking inside the deadline ---------------------------------------------------------
def test_chunk_cap_refuses_the_file_with_the_setting_named(sandbox: ParseSandbox) -> None:
    headings = "".join(f"## H{i}\n\nline {i}\n\n" for i in range(300)).encode()
    cfg = PipelineConfig().with_overrides({"limits.max_chunks_per_file": 100})
    rep = ingest_files([("headings.md", headings), ("ok.md", b"# Ok\n\nfine")], store=Store(":memory:"),
                       embedder=HashEmbedder(), config=cfg, sandbox=sandbox)
    assert [r.status for r in rep.results] == ["error", "ingested"]
    assert rep.results[0].message == ("headings.md: cut into 300 chunks, over the limit of 100 per file (setting "
                                      "limits.max_chunks_per_file); split the file or raise the limit; skipped")


@pytest.fixture
def strict(sandbox: ParseSandbox):  # noqa: ANN201
    """The module's sandbox with deadlines a test sets (restored after)."""
    kept = sandbox.timeout_s, sandbox.wall_s
    yield sandbox
    sandbox.timeout_s, sandbox.wall_s = kept


# -- item 11: the deadline counts CPU time, with a wall-clock backstop -----------------------------------------------
def _stop_worker(sb: ParseSandbox) -> int:
    sb.parse("warm.md", b"# w\n\nx")
    pid = sb._idle[-1].proc.pid  # the worker the next parse borrows: stopped, it gets no CPU, as on a machine busy elsewhere
    os.kill(pid, signal.SIGSTOP)
    return pid


def test_a_worker_waiting_for_cpu_is_not_refused(strict: ParseSandbox) -> None:
    strict.timeout_s, strict.wall_s = 0.5, 30.0
    pid = _stop_worker(strict)
    started = strict.started
    threading.Timer(1.5, os.kill, (pid, signal.SIGCONT)).start()
    start = time.monotonic()
    assert strict.parse("ok.md", b"# Fine\n\ntext").title == "Fine"
    assert time.monotonic() - start >= 1.4 and strict.started == started  # 3x the deadline in wall time, same worker


def test_the_wall_clock_backstop_still_ends_a_stuck_worker(strict: ParseSandbox) -> None:
    strict.timeout_s, strict.wall_s = 0.5, 1.0
    _stop_worker(strict)
    started = strict.started
    with pytest.raises(ParseError, match=r"^stuck.md: still not parsed after 1 s of wall-clock time; skipped"):
        strict.parse("stuck.md", b"# Stuck\n\ntext")
    assert strict.started == started and not strict._idle  # that worker was killed (the next file gets a new one)


def test_chunking_runs_inside_the_sandbox_deadline(strict: ParseSandbox) -> None:
    table = ("| cell one | cell two | 3.5 |\n" * 60_000).encode()  # parses in ms; cutting it takes ~1 s of CPU
    strict.timeout_s = 0.3
    rep = ingest_files([("table.txt", table)], store=Store(":memory:"), embedder=HashEmbedder(),
                       config=PipelineConfig(), sandbox=strict)
    assert rep.results[0].message == "table.txt: took more than 0.3 s of CPU time to parse; skipped"
