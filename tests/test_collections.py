"""Collections (issue #29): assignment and profiles in the store, the offline router choosing from the profiles,
Claude choosing through the loopback stub (malformed replies included), the retrieval filter holding, and tenancy."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM
from core.pipeline import run_query
from core.route.collections import ChunkFilter, build_profiles, choose_offline, refresh_profiles
from core.store import Store, StoreError
from core.text import tokenize
from core.types import DEFAULT_COLLECTION
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture

HR = [("hr/leave.md", b"# Leave\n\nEmployees accrue annual leave of 25 days. Parental leave lasts 16 weeks."),
      ("hr/payroll.md", b"# Payroll\n\nSalaries are paid monthly. Payroll questions go to the HR office."),
      ("hr/shared.md", b"# Shared\n\nThe gateway timeout question is answered by the HR office only for payroll.")]
TECH = [("tech/gateway.md", b"# Gateway\n\nThe gateway timeout is 30 seconds. Set TLS_VERSION_MIN to 1.2."),
        ("tech/retries.md", b"# Retries\n\nThe client retries three times with exponential backoff."),
        ("tech/leave.md", b"# Drain\n\nA node on leave from the cluster drains its gateway connections first.")]
CFG = PipelineConfig().with_overrides({"router.enabled": False, "answer.enabled": False, "rerank.enabled": False,
                                       "mmr.enabled": False, "prune.enabled": False, "expand.enabled": False,
                                       "answer_cache.enabled": False, "transforms.hyde": "off",
                                       "collections.centroid_weight": 0.0})  # the fake embedder's centroids: noise
HR_Q = "How many weeks of parental leave, and are salaries paid monthly by payroll?"


def _load(deps: Deps, workspace: str = "default") -> None:
    ingest_files(HR + TECH, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace=workspace)
    n = deps.store.collections.assign_names(workspace, {k: k.split("/")[0] for k, _ in HR + TECH})
    assert n == 6


@pytest.fixture
def two(deps: Deps) -> Deps:
    _load(deps)
    return deps


def test_assignment_listing_description_and_profiles(two: Deps) -> None:
    repo = two.store.collections
    assert [(c.name, c.n_docs, c.profile) for c in repo.list("default")] == [("hr", 3, None), ("tech", 3, None)]
    # A move changes what queries search: the corpus version moves; assigning where it already is does not.
    v = two.store.corpus.corpus_version()
    hr_ids = [d for d, c in repo.doc_collections().items() if c == "hr"]
    assert repo.assign("default", "hr", hr_ids) == 3 and two.store.corpus.corpus_version() == v
    assert repo.assign("default", "tmp", hr_ids[:1]) == 1 and two.store.corpus.corpus_version() == v + 1
    assert repo.assign("default", "hr", hr_ids[:1]) == 1 and two.store.corpus.corpus_version() == v + 2
    repo.set_description("default", "hr", "  people matters  ")
    assert repo.get("default", "hr").description == "people matters"
    with pytest.raises(StoreError):
        repo.set_description("default", "nope", "x")
    with pytest.raises(StoreError):
        repo.assign("default", "bad name!", [])
    cols = refresh_profiles(two.store.corpus, repo, [], "default", two.embedder.model_id, tokenize)
    hr = next(c for c in cols if c.name == "hr")
    assert hr.description == "people matters" and hr.profile is not None
    p = hr.profile
    assert (p.n_docs, p.n_chunks, p.languages, p.model_id) == (3, 3, {"en": 3}, two.embedder.model_id)
    assert p.df["payrol"] == 2 and "payrol" in p.top_terms and p.corpus_version == two.store.corpus.corpus_version()
    assert abs(np.linalg.norm(p.centroid) - 1) < 1e-5
    # Stored: a second refresh of the same version reads them back instead of computing.
    assert refresh_profiles(two.store.corpus, repo, [], "default", two.embedder.model_id,
                            lambda t: pytest.fail("recomputed")) == cols
    # An unassigned document is the default collection's; a deleted one leaves its collection.
    ingest_files([("loose.md", b"A loose note about nothing.")], store=two.store, embedder=two.embedder,
                 config=PipelineConfig())
    assert [c.name for c in repo.list("default")] == [DEFAULT_COLLECTION, "hr", "tech"]
    doc = two.store.corpus.find_document_by_name("loose.md")
    two.store.corpus.delete_document(doc.doc_id)
    assert [c.name for c in repo.list("default")] == ["hr", "tech"]


def test_profile_centroid_and_counts_known_answer() -> None:
    from core.types import Chunk

    chunks = [Chunk(f"c{i}", f"d{i}", 0, t, 0, len(t), (), 3, lang) for i, (t, lang) in
              enumerate([("alpha beta", "en"), ("alpha gamma", "en"), ("delta", "ru")])]
    coll = {"c0": "a", "c1": "a", "c2": "b"}
    vecs = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]], dtype=np.float32)
    got = build_profiles(chunks, coll, {"d0": "a", "d1": "a", "d2": "b"}, (["c0", "c1", "c2"], vecs), "m", [], 7,
                         lambda t: t.split())
    a, b = got["a"], got["b"]
    assert (a.n_docs, a.n_chunks, a.n_terms, dict(a.df)) == (2, 2, 4, {"alpha": 2, "beta": 1, "gamma": 1})
    assert np.allclose(a.centroid, [2 ** -0.5, 2 ** -0.5], atol=1e-6) and b.languages == {"ru": 1}
    assert a.top_terms[0] == "alpha"


def test_offline_router_picks_by_vocabulary_and_centroid(two: Deps) -> None:
    cols = refresh_profiles(two.store.corpus, two.store.collections, [], "default", two.embedder.model_id, tokenize)
    pick = choose_offline(tokenize(HR_Q), None, cols, min_share=0.1,
                          temperature=0.02, centroid_weight=0.5)
    assert pick.searched == ("hr",) and pick.method == "offline" and pick.scores[0].share > 0.9
    pick = choose_offline(tokenize("TLS_VERSION_MIN exponential backoff"), None, cols, min_share=0.1,
                          temperature=0.02, centroid_weight=0.5)
    assert pick.searched == ("tech",)
    # "leave" and "gateway" occur in both: unsure, so both are searched (share of the second >= min_share).
    both = choose_offline(tokenize("leave gateway"), None, cols, min_share=0.1, temperature=0.02,
                          centroid_weight=0.5)
    assert both.searched == ("hr", "tech") and "share >=" in both.reason
    # No known term and no vector: every collection.
    none = choose_offline(tokenize("zyzzyva"), None, cols, min_share=0.1, temperature=0.02, centroid_weight=0.5)
    assert none.searched == ("hr", "tech") and none.terms == 0
    # The centroid decides when the vocabulary cannot: a vector equal to tech's centroid.
    tech = next(c for c in cols if c.name == "tech").profile
    by_vec = choose_offline([], np.asarray(tech.centroid), cols, min_share=0.1, temperature=0.02,
                            centroid_weight=0.5)
    assert by_vec.searched[0] == "tech" and by_vec.scores[1].centroid > by_vec.scores[0].centroid


def test_pipeline_stage_and_filter_hold(two: Deps) -> None:
    tr = run_query(HR_Q, CFG, two)
    st = tr.stage("collections")
    assert st is not None and st.info["searched"] == ["hr"] and st.info["available"] == ["hr", "tech"]
    assert st.info["method"] == "offline" and any("searched hr of 2" in n for n in st.notes)
    hr_docs = {d for d, c in two.store.collections.doc_collections().items() if c == "hr"}
    for name in ("bm25", "dense", "fused"):
        got = tr.stage(name).candidates
        assert got and {c.doc_id for c in got} <= hr_docs  # tech's "leave" chunk never comes back
    # Forced to tech: only tech's chunks, although the question is HR's.
    tr = run_query("parental leave", CFG.with_overrides({"collections.only": "tech"}), two)
    tech_docs = {d for d, c in two.store.collections.doc_collections().items() if c == "tech"}
    assert tr.stage("collections").info["method"] == "forced"
    assert {c.doc_id for c in tr.stage("bm25").candidates} <= tech_docs and tr.stage("bm25").candidates
    # Off: every collection searched, said so.
    tr = run_query("parental leave", CFG.with_overrides({"collections.enabled": False}), two)
    assert tr.stage("collections").info["method"] == "all"
    assert {c.doc_id for c in tr.stage("bm25").candidates} & tech_docs  # tech's "leave" chunk is back


def test_one_collection_records_no_stage(deps: Deps) -> None:
    ingest_files(HR, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    assert run_query("parental leave", CFG, deps).stage("collections") is None


def test_tenancy_collections_never_cross_workspaces(deps: Deps) -> None:
    _load(deps, "a")
    ingest_files(HR, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace="b")
    assert [c.name for c in deps.store.collections.list("a")] == ["hr", "tech"]
    assert [c.name for c in deps.store.collections.list("b")] == [DEFAULT_COLLECTION]
    # The same files (the same document ids) in workspace b: moving them there leaves workspace a as it was.
    ids = list(deps.store.collections.doc_collections("a"))
    assert deps.store.collections.assign("b", "tech", ids) == 3  # b holds three of them (HR's)
    assert [(c.name, c.n_docs) for c in deps.store.collections.list("a")] == [("hr", 3), ("tech", 3)]
    assert [(c.name, c.n_docs) for c in deps.store.collections.list("b")] == [("tech", 3)]
    tr = run_query("parental leave", CFG, deps, workspace="b")
    assert tr.stage("collections") is None  # one collection in b: nothing to choose
    assert {c.doc_id for c in tr.stage("bm25").candidates} <= set(deps.store.collections.doc_collections("b"))
    deps.store.workspaces_repo.delete("a")
    assert deps.store.collections.list("a") == []


def test_chunk_filter_mask() -> None:
    f = ChunkFilter({"x": "a", "y": "b"}, frozenset({"a", DEFAULT_COLLECTION}))
    ids = ["x", "y", "z"]
    assert f.mask(ids).tolist() == [True, False, True] and f.mask(ids) is f.mask(ids)


def test_claude_chooses_through_the_stub_and_bad_replies_fall_back(two: Deps, anthropic_stub: Stub) -> None:
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None, max_retries=0)
    deps = Deps(store=two.store, embedder=two.embedder, llm=llm)
    two.store.collections.set_description("default", "tech", "the gateway's configuration")
    replies = iter([json.dumps({"collections": ["tech"], "reason": "about the gateway"}),
                    "not json at all",
                    json.dumps({"collections": ["payroll-kb", 3], "reason": "x"}),
                    json.dumps({"collections": ["hr", "ghost"], "reason": "both"})])
    anthropic_stub.state.responder = lambda body: next(replies)
    cfg = CFG.with_overrides({"collections.method": "llm"})
    tr = run_query(HR_Q, cfg, deps)
    st = tr.stage("collections")
    assert st.info["method"] == "llm" and st.info["searched"] == ["tech"] and st.info["reason"] == "about the gateway"
    sent = anthropic_stub.state.messages()[-1]
    text = sent["messages"][0]["content"][0]["text"]
    assert "the gateway's configuration" in text and "hr:" in text and st.usage.input_tokens > 0
    # Malformed JSON, then only unknown names: the offline choice stands, and the notes say why.
    for _ in range(2):
        st = run_query(HR_Q, cfg, deps).stage("collections")
        assert st.info["method"] == "offline" and st.info["searched"] == ["hr"]
        assert any("offline choice stands" in n for n in st.notes)
    st = run_query(HR_Q, cfg, deps).stage("collections")
    assert st.info["searched"] == ["hr"] and any("ghost" in n for n in st.notes)


def test_cli_ingest_folders_become_collections_list_describe(tmp_path, monkeypatch, capsys) -> None:
    import core.cli as cli
    from tests.fakes import HashEmbedder

    monkeypatch.setattr(cli, "build_deps", lambda cfg, store=None, **kw: Deps(store=store, embedder=HashEmbedder()))
    root = tmp_path / "kb"
    for key, body in HR + TECH:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)
    (tmp_path / "note.md").write_bytes(b"A stray note about payroll forms.")
    db = str(tmp_path / "w.duckdb")
    assert cli.main(["ingest", str(root), "--db", db]) == 0
    assert "3 file(s) in hr, 3 file(s) in tech" in capsys.readouterr().out
    assert cli.main(["ingest", str(tmp_path / "note.md"), "--collection", "hr", "--db", db]) == 0
    capsys.readouterr()
    assert cli.main(["collections", "describe", "hr", "--description", "people and pay", "--json", "--db", db]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["documents"] == 4 and d["description"] == "people and pay" and d["profile"]["chunks"] == 4
    assert d["profile"]["centroid"]["model"] == "fake-hash-64" and "payrol" in d["profile"]["top_terms"]
    assert cli.main(["collections", "list", "--json", "--db", db]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["documents"]) for c in listed] == [("hr", 4), ("tech", 3)]
    assert cli.main(["collections", "describe", "nope", "--db", db]) == 2
    assert cli.main(["ingest", str(root), "--collection", "bad name!", "--db", db]) == 2


def test_llm_method_without_a_key_keeps_the_offline_choice_and_says_so(two: Deps) -> None:
    st = run_query(HR_Q, CFG.with_overrides({"collections.method": "llm"}), two).stage("collections")
    assert st.info["method"] == "offline" and st.info["searched"] == ["hr"]
    assert any("without a key" in n for n in st.notes) and st.usage.input_tokens == 0


def test_a_query_lists_the_collections_once_and_reads_tables_only_to_rebuild_profiles(two: Deps, monkeypatch) -> None:
    cfg = CFG
    run_query(HR_Q, cfg, two)  # profiles built (and stored) for this corpus version
    calls = {"collections": 0, "tables": 0}
    lister, tables = two.store.collections.list, two.store.tables.list

    def count_collections(*a, **k):
        calls["collections"] += 1
        return lister(*a, **k)

    def count_tables(*a, **k):
        calls["tables"] += 1
        return tables(*a, **k)

    monkeypatch.setattr(two.store.collections, "list", count_collections)
    monkeypatch.setattr(two.store.tables, "list", count_tables)
    trace = run_query("How long is the gateway timeout?", cfg, two)
    assert trace.stage("collections") is not None
    # one list of the collections; tables once, by the sql stage (the collections stage reads none with fresh profiles)
    assert calls == {"collections": 1, "tables": 1}
