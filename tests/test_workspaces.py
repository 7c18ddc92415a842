"""Workspaces: create / rename / delete (row counts per table before and after), a re-created name never reuses an
old corpus version, the CLI, and the same question in two workspaces sharing nothing."""
from __future__ import annotations

import json

import pytest

from core import cli
from core.app.workspaces import (
    WorkspaceError,
    create_workspace,
    delete_workspace,
    list_workspaces,
    load_workspace_config,
    rename_workspace,
    save_workspace_config,
    validate_name,
)
from core.config import PipelineConfig
from core.deps import Deps
from core.graph.build import build_graph
from core.ingest.pipeline import ingest_files
from core.pipeline import answer_cache_key, run_query
from core.types import CacheKey, LedgerEntry

ALPHA = [("gw.md", b"# Gateway\n\nThe Harbor gateway sets TLS_VERSION_MIN to 1.2 for every listener. "
                   b"Harbor runs on the Osprey cluster.")]
BETA = [("gw.md", b"# Gateway\n\nThe Falcon gateway sets TLS_VERSION_MIN to 1.3 for every listener. "
                  b"Falcon runs on the Kestrel cluster.")]
Q = "What does the gateway set TLS_VERSION_MIN to?"


def _cfg() -> PipelineConfig:
    return PipelineConfig().with_overrides({"prune.enabled": False, "mmr.enabled": False, "rerank.enabled": False,
                                            "graph.enabled": True, "answer.refusal_threshold": 0.0})


def _fill(deps: Deps, ws: str, files: list[tuple[str, bytes]]) -> None:
    ingest_files(files, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace=ws)
    build_graph(deps.store, PipelineConfig().graph, workspace=ws)
    deps.store.ledger.record_usage(LedgerEntry("answer", "claude-test", 10, 5, usd=0.001, ref_id=ws, workspace=ws))
    run_query(Q, _cfg(), deps, workspace=ws)  # miss: stores the answer
    run_query(Q, _cfg(), deps, workspace=ws)  # hit


def test_names_are_checked() -> None:
    assert validate_name("  team  a ") == "team a"
    assert validate_name("отдел-2") == "отдел-2"
    for bad in ("", "   ", "a/b", "-x", "x" * 65, "semi;colon"):
        with pytest.raises(WorkspaceError):
            validate_name(bad)


def test_same_question_two_workspaces_share_nothing(deps: Deps) -> None:
    _fill(deps, "alpha", ALPHA)
    _fill(deps, "beta", BETA)
    store = deps.store
    a, b = run_query(Q, _cfg(), deps, workspace="alpha"), run_query(Q, _cfg(), deps, workspace="beta")
    assert a.stages[0].info["verdict"] == "hit" and b.stages[0].info["verdict"] == "hit"
    assert "1.2" in a.answer.text and "1.3" not in a.answer.text
    assert "1.3" in b.answer.text and "1.2" not in b.answer.text
    # candidates: every stage of a fresh (uncached) run reads its own corpus only
    fresh = _cfg().with_overrides({"answer_cache.enabled": False})
    for ws, own, other in (("alpha", "Harbor", "Falcon"), ("beta", "Falcon", "Harbor")):
        t = run_query(Q, fresh, deps, workspace=ws)
        texts = [c.text for s in t.stages for c in s.candidates]
        assert texts and all(other not in x for x in texts) and any(own in x for x in texts)
        names = {n[1] for n in store.graph.nodes(ws)}
        assert own in names and other not in names  # graph
        assert all(e.ref_id == ws for e in store.ledger.usage_ledger(ws))  # ledger
        cached = store.answers.cached_answers(answer_cache_key(_cfg(), deps, ws, store.corpus.corpus_version(ws)))
        assert len(cached) == 1 and other not in cached[0].answer  # cached answers
    infos = {w.name: w for w in list_workspaces(store)}
    assert infos["alpha"].cache_hits == 2 and infos["beta"].cache_hits == 2 and infos["default"].cache_hits == 0


def test_delete_removes_every_row_and_nothing_else(deps: Deps) -> None:
    _fill(deps, "alpha", ALPHA)
    _fill(deps, "beta", BETA)
    repo = deps.store.workspaces_repo
    before_a, before_b = repo.row_counts("alpha"), repo.row_counts("beta")
    # the test means something: the workspace has rows in the tables the issue names
    for t in ("documents", "chunks", "vectors", "graph_nodes", "usage_ledger", "runs", "answer_cache",
              "answer_cache_events", "workspaces"):
        assert before_a[t] > 0, t
    deleted = delete_workspace(deps.store, "alpha")
    assert deleted == before_a
    assert all(n == 0 for n in repo.row_counts("alpha").values())
    assert repo.row_counts("beta") == before_b
    with pytest.raises(WorkspaceError, match="no workspace"):
        delete_workspace(deps.store, "alpha")
    with pytest.raises(WorkspaceError, match="cannot be deleted"):
        delete_workspace(deps.store, "default")


def test_recreated_name_starts_above_the_deleted_version(deps: Deps) -> None:
    _fill(deps, "alpha", ALPHA)
    old = deps.store.corpus.corpus_version("alpha")
    delete_workspace(deps.store, "alpha")
    ingest_files(BETA, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace="alpha")
    assert deps.store.corpus.corpus_version("alpha") > old
    # the in-memory index of the old 'alpha' is not reused: the answer reads the new corpus
    t = run_query(Q, _cfg().with_overrides({"answer_cache.enabled": False}), deps, workspace="alpha")
    assert "1.3" in t.answer.text


def test_workspace_config_is_saved_moved_and_deleted(deps: Deps) -> None:
    store = deps.store
    create_workspace(store, "alpha")
    save_workspace_config(store, "alpha", PipelineConfig().with_overrides({"rerank.k": 3}))
    assert load_workspace_config(store, "alpha")[0].rerank.k == 3
    rename_workspace(store, "alpha", "gamma")
    assert load_workspace_config(store, "alpha") == (None, None) and load_workspace_config(store, "gamma")[0].rerank.k == 3
    store.workspaces_repo.save_config("gamma", '{"rerank": {"no_such_key": 1}}')
    cfg, notice = load_workspace_config(store, "gamma")
    assert cfg is None and "no longer fits" in notice
    delete_workspace(store, "gamma")
    assert store.workspaces_repo.load_config("gamma") is None


def test_rename_moves_every_row(deps: Deps) -> None:
    _fill(deps, "alpha", ALPHA)
    before = deps.store.workspaces_repo.row_counts("alpha")
    moved = rename_workspace(deps.store, "alpha", "gamma")
    assert moved == sum(before.values())
    assert deps.store.workspaces_repo.row_counts("gamma") == before
    assert all(n == 0 for n in deps.store.workspaces_repo.row_counts("alpha").values())
    create_workspace(deps.store, "alpha")
    with pytest.raises(WorkspaceError, match="already exists"):
        rename_workspace(deps.store, "gamma", "alpha")


def test_cli_workspaces_and_cache(tmp_path, capsys, monkeypatch) -> None:  # noqa: ANN001
    db = str(tmp_path / "w.duckdb")
    assert cli.main(["workspaces", "create", "team a", "--db", db]) == 0
    assert cli.main(["workspaces", "--json", "--db", db]) == 0
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert [w["name"] for w in json.loads(out)["workspaces"]] == ["default", "team a"]
    assert cli.main(["workspaces", "delete", "team a", "--db", db]) == 2  # needs --yes
    assert cli.main(["workspaces", "delete", "team a", "--yes", "--db", db]) == 0
    assert cli.main(["query", "anything", "--workspace", "team a", "--db", db]) == 2
    assert "no workspace 'team a'" in capsys.readouterr().err
    assert cli.main(["cache", "clear", "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"workspace": "default", "cleared": 0}


def _file_bytes(path) -> bytes:  # noqa: ANN001
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + ".wal")) if p.exists())


ANSWERS = {"alpha": "Harbor answers: the listener minimum is TLS 1.2 on Osprey.",
           "beta": "Falcon answers: the listener minimum is TLS 1.3 on Kestrel."}


def test_delete_leaves_no_trace_in_the_file(tmp_path, embedder) -> None:  # noqa: ANN001
    """Issue #33 item 6: after a delete the database file (and its WAL) holds no byte of the deleted workspace's
    document text or cached answers; the other workspace is intact; the steps are reported."""
    import numpy as np

    from core.store import Store
    from core.types import CachedAnswer

    path = tmp_path / "w.duckdb"
    store = Store(path)
    other = Store(path)  # a second connection of this process (the app's and a page's): it must follow the swap
    keys = {}
    for ws, files in (("alpha", ALPHA), ("beta", BETA)):  # documents and a cached answer each
        ingest_files(files, store=store, embedder=embedder, config=PipelineConfig(), workspace=ws)
        keys[ws] = CacheKey(ws, store.corpus.corpus_version(ws), "cfg")
        store.answers.put_answer(CachedAnswer(keys[ws], Q, np.ones(4, dtype=np.float32) / 2, ANSWERS[ws]))
    store.close()  # checkpointed: the text now sits in the file's blocks, as it does after any restart
    store = Store(path)
    needles = [b"Harbor gateway sets TLS_VERSION_MIN", b"Osprey cluster", ANSWERS["alpha"].encode()]
    assert all(n in _file_bytes(path) for n in needles)  # the check means something: the bytes are there
    before_beta = store.workspaces_repo.row_counts("beta")
    said: list[str] = []
    delete_workspace(store, "alpha", progress=said.append)
    data = _file_bytes(path)
    assert [data.count(n) for n in needles] == [0, 0, 0]
    assert any("compacted the database" in m for m in said)
    assert not list(tmp_path.glob("*.compact*"))
    assert store.workspaces_repo.row_counts("beta") == before_beta
    assert [a.answer for a in store.answers.cached_answers(keys["beta"])] == [ANSWERS["beta"]]
    beta_doc = store.corpus.documents("beta")[0].doc_id
    assert "Falcon gateway sets TLS_VERSION_MIN to 1.3" in store.corpus.document_text(beta_doc, "beta")
    assert other.workspaces() == ["beta", "default"]  # the other connection reads the new file
    ingest_files(ALPHA, store=other, embedder=embedder, config=PipelineConfig(), workspace="gamma")  # writes go on
    assert store.workspaces() == ["beta", "default", "gamma"]
    other.close()
    store.close()
    reopened = Store(path)
    assert reopened.workspaces() == ["beta", "default", "gamma"] and reopened.workspaces_repo.row_counts("beta") == \
        before_beta
    reopened.close()


def test_a_compaction_cut_short_leaves_the_old_file_in_force(tmp_path) -> None:  # noqa: ANN001
    # A crash while the copy was written leaves '<db>.compact' beside the file: the next open removes it and reads
    # the old file, whole.
    from core.store import Store

    path = tmp_path / "w.duckdb"
    s = Store(path)
    create_workspace(s, "alpha")
    s.close()
    (tmp_path / "w.duckdb.compact").write_bytes(b"half a copy")
    s = Store(path)
    assert s.workspaces() == ["alpha", "default"] and not (tmp_path / "w.duckdb.compact").exists()
    assert s.compact().bytes_after > 0 and s.workspaces() == ["alpha", "default"]
    s.close()
