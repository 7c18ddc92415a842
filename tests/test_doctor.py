"""The mistakes doctor (core/app/doctor.py): each check on a tiny workspace that makes, or avoids, its mistake; the
`python -m core doctor --json` contract; the refusal share of live traffic (core/app/costs.py)."""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from core.app.costs import REFUSAL_COLUMNS, refusal_share
from core.app.doctor import FAIL, NA, OK, STATUSES, WARN, Facts, agent_budget, doctor, exact_strings, pruning_exact
from core.cli import main
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from core.types import CachedAnswer, CacheKey, LedgerEntry, RunRecord
from tests.fakes import HashEmbedder

DOC_A = b"# Depot\n\nThe depot inspects brake pads every night. Torque values are logged in form TX-42.\n"
DOC_B = b"# Payroll\n\nSalaries are paid on the 25th. Overtime needs approval by a manager.\n"


def _ingest(store: Store, embedder: HashEmbedder, name: str, data: bytes, ws: str = "default") -> None:
    ingest_files([(name, data)], store=store, embedder=embedder, config=PipelineConfig(), workspace=ws)


def _by_number(store: Store, cfg: PipelineConfig, embedder_id: str = "fake-hash-64", ws: str = "default"):
    return {c.number: c for c in doctor(store, ws, cfg, embedder_id=embedder_id)}


def test_ten_checks_each_with_a_known_status(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "depot.md", DOC_A)
    checks = doctor(store, "default", PipelineConfig(), embedder_id=embedder.model_id)
    assert [c.number for c in checks] == list(range(1, 11))
    assert all(c.status in STATUSES and c.evidence and c.fix and c.mistake for c in checks)
    by = {c.number: c for c in checks}
    assert by[6].status == FAIL and "no stored evaluation" in by[6].evidence  # nothing measured yet
    assert by[5].status == OK and "of other models" not in by[5].evidence
    assert by[9].status == NA  # no LLM call


def test_graph_on_with_reranker_off_fails(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "depot.md", DOC_A)
    bad = PipelineConfig().with_overrides({"graph.enabled": True, "rerank.enabled": False})
    c = _by_number(store, bad)[1]
    assert c.status == FAIL and "reranker is off" in c.evidence
    c = _by_number(store, PipelineConfig().with_overrides({"graph.enabled": True}))[1]
    assert c.status == WARN and "unmeasured" in c.evidence  # on, but no evaluation measured it
    assert _by_number(store, PipelineConfig())[1].status == OK


def test_cache_threshold_needs_the_guard_below_095(store: Store, embedder: HashEmbedder) -> None:
    loose = PipelineConfig().with_overrides({"answer_cache.threshold": 0.85, "answer_cache.guard": False})
    assert _by_number(store, loose)[4].status == FAIL
    tight = PipelineConfig().with_overrides({"answer_cache.threshold": 0.97, "answer_cache.guard": False})
    assert _by_number(store, tight)[4].status == OK
    store.answers.record_lookup("default", "hit", 0.9)
    store.answers.record_lookup("default", "guarded_miss", 0.96)
    c = _by_number(store, PipelineConfig())[4]
    assert "2 lookups: 1 hits (1 served below cosine 0.95), 1 refused by the guard" in c.evidence


def test_embedder_without_vectors_warns(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "depot.md", DOC_A)
    c = _by_number(store, PipelineConfig(), embedder_id="another-model")[5]
    assert c.status == WARN and "of other models: fake-hash-64: 1" in c.evidence and "no vector of the running model" in c.evidence


def test_cached_answer_citing_another_workspace_fails(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "depot.md", DOC_A, ws="a")
    _ingest(store, embedder, "pay.md", DOC_B, ws="b")
    foreign = store.corpus.chunks("b")[0].chunk_id
    own = store.corpus.chunks("a")[0].chunk_id
    key = CacheKey("a", store.corpus.corpus_version("a"), "h")
    store.answers.put_answer(CachedAnswer(key, "q1", embedder.encode(["q1"])[0], "x", (own,)))
    assert _by_number(store, PipelineConfig(), ws="a")[3].status == OK
    store.answers.put_answer(CachedAnswer(key, "q2", embedder.encode(["q2"])[0], "y", (own, foreign)))
    c = _by_number(store, PipelineConfig(), ws="a")[3]
    assert c.status == FAIL and "1 cached answers cite another workspace's chunks" in c.evidence


def _entry(run: str, w: int, r: int, note: str = "") -> LedgerEntry:
    return LedgerEntry("context", "claude-haiku-4-5", 50, 40, w, r, 0.001, 0.002, 10.0, "d1", run, note=note)


def test_prompt_cache_that_never_reads(store: Store) -> None:
    store.ledger.record_usage(_entry("r1", 3000, 0))
    store.ledger.record_usage(_entry("r1", 0, 3000))
    assert _by_number(store, PipelineConfig())[9].status == OK
    store.ledger.record_usage(_entry("r2", 3000, 0))
    store.ledger.record_usage(_entry("r2", 3000, 0))  # the prefix was rewritten: never read
    c = _by_number(store, PipelineConfig())[9]
    assert c.status == FAIL and "1 runs wrote the cache on every call" in c.evidence
    store2 = Store(":memory:")
    store2.ledger.record_usage(_entry("r3", 0, 0, note="no prompt cache: the prefix is probably below the minimum"))
    assert _by_number(store2, PipelineConfig())[9].status == WARN
    store2.close()


def test_graph_behind_the_corpus(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "depot.md", DOC_A)
    assert _by_number(store, PipelineConfig())[10].status == NA
    store.graph.set_state(corpus_version=store.corpus.corpus_version(), builder="statistical", settings={}, stats={})
    assert _by_number(store, PipelineConfig())[10].status == OK
    _ingest(store, embedder, "pay.md", DOC_B)  # a graph state with no graph rows is not followed: it falls behind
    if store.graph.state().corpus_version < store.corpus.corpus_version():
        assert _by_number(store, PipelineConfig())[10].status == WARN
        assert _by_number(store, PipelineConfig().with_overrides({"graph.enabled": True}))[10].status == FAIL


def _run(query: str, stages: list[dict], answer: dict | None = None, agent: dict | None = None,
         route: str | None = "factoid", at: datetime = datetime(2026, 12, 5, 10)) -> RunRecord:
    trace = {"query": query, "stages": stages, "answer": answer, "route": {"config": route} if route else None,
             "usage": {"usd": 0.01}}
    if agent is not None:
        trace["agent"] = agent
    return RunRecord("r" + query[:5], "query", query, "h", 1, trace, at)


def _facts(store: Store, runs: list[RunRecord], cfg: PipelineConfig | None = None) -> Facts:
    return Facts(store, "default", cfg or PipelineConfig(), "m", runs, [], lambda _: ())


def test_exact_strings_lost_by_pruning(store: Store) -> None:
    assert exact_strings("What does TX-42 cost in v2.3, and 15% of $40?") >= {"TX-42", "v2.3", "15%", "$40"}
    assert exact_strings("no digits here") == set()
    kept = _run("Form TX-42?", [{"stage": "rerank", "candidates": [{"text": "Use form TX-42 daily."}]},
                                {"stage": "prune", "candidates": [{"text": "Use form TX-42 daily."}]}])
    lost = _run("Form TX-43?", [{"stage": "rerank", "candidates": [{"text": "Form TX-43 is new. Other text."}]},
                                {"stage": "prune", "candidates": [{"text": "Other text."}]}])
    assert pruning_exact(_facts(store, [kept])).status == OK
    c = pruning_exact(_facts(store, [kept, lost]))
    assert c.status == WARN and "the pruned text lost it in 1" in c.evidence and "TX-43" in c.evidence


def test_agent_runs_over_the_limits_fail(store: Store) -> None:
    fine = _run("a", [], agent={"rounds": 2, "stop_reason": "answered", "spent": {"llm_calls": 2, "seconds": 3.0}})
    long = _run("b", [], agent={"rounds": 5, "stop_reason": "answered", "spent": {"llm_calls": 9, "seconds": 99.0}})
    assert agent_budget(_facts(store, [fine])).status == OK
    c = agent_budget(_facts(store, [fine, long]))
    assert c.status == FAIL and "a run took 5 rounds" in c.evidence and "99.0 s" in c.evidence


def test_refusal_share_by_day_and_route() -> None:
    runs = [_run("q1", [], {"refused": True}), _run("q2", [], {"refused": False}),
            _run("q3", [], {"refused": True}, route="global"),
            _run("q4", [], {"refused": False}, route=None, at=datetime(2026, 12, 4, 9)),
            _run("q5", [], None)]  # no answer record: not counted
    df = refusal_share(runs)
    assert list(df.columns) == REFUSAL_COLUMNS
    rows = {(r["day"], r["route"]): r for r in df.to_dict("records")}
    assert rows[("2026-12-05", "factoid")]["queries"] == 2 and rows[("2026-12-05", "factoid")]["refusal share"] == 0.5
    assert rows[("2026-12-05", "global")]["refusal share"] == 1.0
    assert rows[("2026-12-04", "router off")]["refused"] == 0
    assert df.queries.sum() == 4 and df.usd.sum() == pytest.approx(0.04)
    assert refusal_share([]).empty


def test_refusal_share_counts_cache_hits_from_real_traces(store: Store, embedder: HashEmbedder) -> None:
    _ingest(store, embedder, "depot.md", DOC_A)
    deps = Deps(store=store, embedder=embedder)
    for q in ("When are brake pads inspected?", "When are brake pads inspected?", "What is the capital of Peru?"):
        run_query(q, PipelineConfig(), deps)
    df = refusal_share(store.runs.recent_runs("default"))
    assert df.queries.sum() == 3
    assert df["answer-cache hits"].sum() == 1  # the repeated question was served from the answer cache
    assert "unknown (answer cache)" not in set(df.route)  # a hit counts under its stored trace's route


def test_cli_doctor_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "w.duckdb")
    s = Store(db)
    s.ledger.record_usage(_entry("r1", 3000, 0))
    s.close()
    assert main(["doctor", "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["checks"]) == 10
    for c in out["checks"]:
        assert set(c) >= {"mistake", "status", "evidence", "fix"} and c["status"] in STATUSES
    assert sum(out["summary"].values()) == 10
    assert main(["doctor", "--db", db]) == 0
    assert "10. [" in capsys.readouterr().out


def test_a_fresh_process_reads_the_query_vector_from_the_store(store: Store) -> None:
    """Issue #47, item 7: the query embedding is cached in the store by model and text, so a second process (a
    fresh Deps, as a new CLI run builds) computes no forward of a question asked before. (Rerank and prune are off:
    with the fake embedder they score by encoding query and sentences together, which is not the query vector.)"""
    emb = HashEmbedder()
    _ingest(store, emb, "depot.md", DOC_A)
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False, "rerank.enabled": False,
                                           "prune.enabled": False})
    run_query("When are brake pads inspected?", cfg, Deps(store=store, embedder=emb))

    class Counting(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.texts: list[list[str]] = []

        def encode(self, texts):  # noqa: ANN001, ANN202
            self.texts.append(list(texts))
            return super().encode(texts)

    fresh = Counting()  # a new process: new in-memory caches, the same store
    run_query("When are brake pads inspected?", cfg, Deps(store=store, embedder=fresh))
    assert fresh.texts == []  # no forward at all
    run_query("Who logs torque values?", cfg, Deps(store=store, embedder=fresh))
    assert fresh.texts == [["Who logs torque values?"]]  # a new question is encoded once
    s2 = Deps(store=store, embedder=Counting())
    run_query("Who logs torque values?", cfg, s2)
    assert s2.embedder.texts == []
