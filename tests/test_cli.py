"""The headless CLI, for real: a subprocess with the bundled MiniLM ingests files and answers a --json query."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, db: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "core", *args, "--db", str(db)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_ingest_and_query_json(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "gw.md").write_text("# Gateway\n\n## TLS\n\nSet TLS_VERSION_MIN to 1.2 for every listener.\n")
    (docs / "fin.md").write_text("# Finance\n\nRevenue grew 3% over the previous quarter.\n")
    (docs / "bad.pdf").write_bytes(b"not a pdf at all")
    db = tmp_path / "w.duckdb"
    out = _run("ingest", str(docs), db=db)
    assert out.returncode == 0, out.stderr
    assert "error     bad.pdf: not a PDF" in out.stdout and "2 ok, 1 failed" in out.stdout

    again = _run("ingest", str(docs / "gw.md"), "--json", db=db)
    assert json.loads(again.stdout)["embedded"] == 0  # unchanged file: zero embeddings

    q = _run("query", "minimum TLS version", "--json", "--set", "fusion.rrf_k=30", db=db)
    assert q.returncode == 0, q.stderr
    data = json.loads(q.stdout)
    names = [s["stage"] for s in data["stages"]]
    # Graph stages (skipped by default) sit between dense and fused; the text retrieval order is what matters here.
    assert [n for n in names if n in ("bm25", "dense", "fused")] == ["bm25", "dense", "fused"]
    assert "TLS_VERSION_MIN" in data["stages"][names.index("fused")]["candidates"][0]["text"]
    assert data["query"] == "minimum TLS version" and len(data["config_hash"]) == 12
    counted = data["counters"]  # per-stage ms and $ and cache figures (core/app/counters.py), one line per stage
    assert [s["stage"] for s in counted["stages"]] == names and counted["queries"] == 1
    assert counted["ms"] == pytest.approx(sum(s["ms"] for s in data["stages"]), abs=0.01)
    assert counted["embedding_cache"]["misses"] >= 1  # the query itself was encoded

    # An unbuilt context variant is searched as raw text with a notice (no in-memory embedding on the query's path);
    # --build builds and keeps it, so the next query searches it.
    raw = _run("query", "minimum TLS version", "--json", "--set", "context.variant=heuristic", db=db)
    assert raw.returncode == 0, raw.stderr
    got = json.loads(raw.stdout)
    assert any("heuristic is not built yet" in n and "searched raw text" in n for n in got["notices"])
    searched = lambda d: {s["stage"]: s["info"].get("text") for s in d["stages"] if s["stage"] in ("bm25", "dense")}  # noqa: E731
    assert searched(got) == {"bm25": "raw", "dense": "raw"}
    built = _run("query", "minimum TLS version", "--json", "--set", "context.variant=heuristic", "--build", db=db)
    assert built.returncode == 0, built.stderr
    got = json.loads(built.stdout)
    assert searched(got) == {"bm25": "heuristic", "dense": "heuristic"}, searched(got)
    assert any("built before the query: heuristic" in n for n in got["notices"])
    again = json.loads(_run("query", "revenue growth", "--json", "--set", "context.variant=heuristic", db=db).stdout)
    assert searched(again)["dense"] == "heuristic" and not any("not built" in n for n in again["notices"])

    tree = _run("raptor", "build", "--json", db=db)  # extractive offline (no key in the subprocess's env)
    assert tree.returncode == 0, tree.stderr
    assert json.loads(tree.stdout)["mode"] == "full" and json.loads(tree.stdout)["summaries"] == "extractive"
    upd = json.loads(_run("raptor", "update", "--json", db=db).stdout)  # incremental: tests/test_raptor.py
    assert (upd["mode"], upd["added"], upd["rewritten"]) == ("unchanged", 0, 0)

    empty = _run("query", " ", db=db)
    assert empty.returncode == 2 and "query is empty" in empty.stderr
    bad = _run("query", "x", "--set", "fusion.nope=1", db=db)
    assert bad.returncode == 2 and "unknown setting" in bad.stderr


def test_every_command_in_the_table_is_a_subcommand_in_order() -> None:
    import argparse

    from core.cli import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [c.name for c in COMMANDS] == [
        "ingest", "query", "docs", "delete", "eval", "calibrate", "sweep", "context", "graph", "raptor", "workspaces", "cache",
        "cag", "golden", "trace", "sql", "collections", "doctor"]
    assert [a.help for a in sub._choices_actions] == [c.help for c in COMMANDS]
    ev = sub.choices["eval"].parse_args(["--dataset", "sample"])
    assert ev.workspace is None and ev.config == [] and ev.engine == "local"  # eval's own defaults survive
    q = sub.choices["query"].parse_args(["q?", "--set", "a.b=1", "--set", "c.d=2"])
    assert (q.depth, q.set, q.json, q.build) == (10, ["a.b=1", "c.d=2"], False, False)


def test_an_ingest_builds_the_multilingual_vectors_a_russian_corpus_needs_and_says_why(tmp_path: Path) -> None:
    """Issue #44: the README's ingest alone leaves a Russian corpus with every list it needs (the real models)."""
    ru = tmp_path / "ru"
    ru.mkdir()
    (ru / "fin.txt").write_text("Выручка компании за третий квартал выросла на 12 процентов.\n\nРасходы снизились.\n")
    (ru / "gw.txt").write_text("Шлюз принимает соединения только по TLS 1.2 и выше.\n")
    db = tmp_path / "w.duckdb"
    skip = _run("ingest", str(ru), "--no-multilingual", "--workspace", "skip", db=db)
    assert skip.returncode == 0 and "multilingual" not in skip.stderr, skip.stderr
    out = _run("ingest", str(ru), db=db)
    assert out.returncode == 0, out.stderr
    assert "building: multilingual vectors" in out.stderr and "the corpus's languages ask for it" in out.stderr
    assert "multilingual vectors: 2 embedded" in out.stderr
    q = _run("query", "Насколько выросла выручка?", "--json", db=db)
    stages = {s["stage"]: s for s in json.loads(q.stdout)["stages"]}
    assert not stages["dense_ml"]["skipped"] and "Выручка" in stages["dense_ml"]["candidates"][0]["text"]
    # An English corpus over the budget: not built, and the ingest names the command.
    en = tmp_path / "en"
    en.mkdir()
    (en / "a.txt").write_text("Revenue grew by twelve percent in the third quarter.\n")
    over = _run("ingest", str(en), "--workspace", "en", "--set", "embedding.multilingual_ingest_budget_s=0", db=db)
    assert "not built" in over.stderr and "`python -m core ingest --multilingual --workspace en`" in over.stderr
    fill = _run("ingest", "--multilingual", "--workspace", "en", db=db)
    assert fill.returncode == 0 and "multilingual vectors: 1 embedded" in fill.stderr, fill.stderr
