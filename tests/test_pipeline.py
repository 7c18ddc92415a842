"""run_query end to end on fakes: one traced stage per technique, skip reasons, language-aware fusion, JSON shape."""
from __future__ import annotations

import json

import pytest

from core.config import ConfigError, PipelineConfig, load_config_file
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import QueryError, run_query

FILES = [
    ("gw.md", b"# Gateway\n\n## TLS\n\nSet TLS_VERSION_MIN to 1.2 for every listener.\n\n"
              b"## Retries\n\nThe client waits retryBackoffMs milliseconds between attempts."),
    ("fin.md", b"# Finance\n\nRevenue grew 3% over the previous quarter. Costs stayed flat."),
    ("ru.txt", "Выручка компании выросла на пять процентов во втором квартале.".encode()),
]

# The stages of the retrieval core that this test pins; later stages may follow them.
CORE_STAGES = ["bm25", "dense", "fused"]


@pytest.fixture
def loaded(deps: Deps) -> Deps:
    ingest_files(FILES, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    return deps


def _cfg(**overrides) -> PipelineConfig:
    return PipelineConfig().with_overrides(overrides)


def test_three_core_stages_in_order(loaded: Deps) -> None:
    trace = run_query("What is TLS_VERSION_MIN set to?", _cfg(), loaded)
    names = [s.stage for s in trace.stages]
    # Graph stages (skipped unless graph.enabled) sit between dense and fused; the core order is what matters.
    # The answer cache is the first stage (issue #15's contract for `query --json`), the router the second (issue
    # #16): a cache hit needs no route. The cag stage (skipped unless the route is cag) and retrieval follow them.
    assert names[0] == "answer_cache" and names[1] == "route" and trace.stages[0].info["verdict"] == "miss"
    assert names[2] == "cag" and trace.stages[2].skipped == "cag.enabled = false"
    assert [n for n in names if n in CORE_STAGES] == CORE_STAGES and names[3:5] == CORE_STAGES[:2]
    for name in CORE_STAGES:
        stage = trace.stage(name)
        assert stage is not None and stage.skipped is None and stage.ms >= 0
        assert stage.candidates[0].text.endswith("Set TLS_VERSION_MIN to 1.2 for every listener.")
    fused = trace.stage("fused").candidates[0]
    assert fused.meta["rank_bm25"] == 1 and fused.meta["rank_dense"] == 1
    assert trace.config_hash == _cfg().stable_hash() and trace.corpus_version == 3


def test_disabled_stages_are_skipped_with_reason(loaded: Deps) -> None:
    trace = run_query("retry backoff", _cfg(**{"dense.enabled": False}), loaded)
    assert trace.stage("dense").skipped == "dense.enabled = false"
    assert trace.stage("fused").skipped == "needs both BM25 and dense results"
    assert "retryBackoffMs" in trace.stage("bm25").candidates[0].text  # the Retries section's chunk


def test_foreign_language_query_drops_blind_dense_list(loaded: Deps) -> None:
    trace = run_query("выручка квартал", _cfg(), loaded)
    assert trace.query_lang == "ru"
    assert any("not covered" in n for n in trace.notes)
    fused = trace.stage("fused")
    assert any("dense weight x0" in n for n in fused.notes)
    # Only BM25 members survive fusion: the dense list cannot drown it.
    bm25_ids = [c.chunk_id for c in trace.stage("bm25").candidates]
    assert [c.chunk_id for c in fused.candidates] == bm25_ids[: len(fused.candidates)]
    half = run_query("выручка квартал", _cfg(**{"fusion.foreign_dense_weight": 0.5}), loaded)
    assert len(half.stage("fused").candidates) >= len(fused.candidates)


@pytest.mark.parametrize("bad", ["", "   ", "x" * 10_000])
def test_bad_queries_raise_clear_errors(loaded: Deps, bad: str) -> None:
    with pytest.raises(QueryError) as info:
        run_query(bad, _cfg(), loaded)
    assert "empty" in str(info.value) or "limit" in str(info.value)


def test_trace_json_shape_and_run_log(loaded: Deps) -> None:
    trace = run_query("revenue grew", _cfg(), loaded)
    data = json.loads(json.dumps(trace.to_dict()))
    assert {"query", "config_hash", "stages"} <= set(data)
    for stage in data["stages"]:
        assert {"stage", "ms", "skipped", "candidates"} <= set(stage)
        for c in stage["candidates"]:
            assert {"chunk_id", "doc_id", "rank", "score", "text"} <= set(c)
    runs = loaded.store.runs.recent_runs()
    assert runs[0].query == "revenue grew" and runs[0].trace["config_hash"] == trace.config_hash


def test_empty_store_gives_empty_stages(deps: Deps) -> None:
    trace = run_query("anything at all", _cfg(), deps)
    assert trace.stage("bm25").candidates == () and trace.stage("dense").candidates == ()


def test_config_hash_is_stable_and_sensitive(tmp_path) -> None:
    a, b = PipelineConfig(), PipelineConfig()
    assert a.stable_hash() == b.stable_hash()
    assert a.with_overrides({"fusion.rrf_k": 30}).stable_hash() != a.stable_hash()
    p = tmp_path / "c.toml"
    p.write_text("[fusion]\nrrf_k = 30\n")
    assert load_config_file(p).fusion.rrf_k == 30
    with pytest.raises(ConfigError, match="unknown setting"):
        a.with_overrides({"fusion.nope": 1})
    with pytest.raises(ConfigError, match="invalid configuration"):
        a.with_overrides({"fusion.rrf_k": -1})
    p.write_text("[fusion\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config_file(p)


def test_tracer_step_runs_times_and_skips_with_keep():
    from core.pipeline import StepOutput, Tracer, off
    from core.types import Candidate, Stage, Usage

    tracer = Tracer()
    pool = [Candidate("c1", "d1", "one", 1.0, 1), Candidate("c2", "d1", "two", 0.5, 2)]
    ran = tracer.step(Stage.RERANK, lambda: StepOutput(pool[::-1], ["swapped"], Usage(calls=1), {"k": 2}))
    assert [c.chunk_id for c in ran] == ["c2", "c1"]
    kept = tracer.step(Stage.PRUNE, lambda: StepOutput([]), skip=off(False, "prune.enabled"), keep=ran)
    assert kept == ran  # a skipped cascade stage hands on what it would have read
    empty = tracer.step(Stage.MMR, lambda: StepOutput(pool), skip=off(True, "mmr.enabled", [], "nothing to do"))
    assert empty == []
    rerank, prune, mmr = tracer.stages
    assert (rerank.stage, rerank.skipped, rerank.notes, dict(rerank.info), rerank.usage.calls) == (
        "rerank", None, ("swapped",), {"k": 2}, 1)
    assert rerank.ms >= 0
    assert (prune.skipped, mmr.skipped) == ("prune.enabled = false", "nothing to do")
    assert tracer.final() is rerank
    assert off(True, "x.enabled", pool) is None


def test_a_read_only_store_runs_queries_and_keeps_no_run_log(tmp_path) -> None:
    from core.config import PipelineConfig
    from core.deps import Deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from core.store import Store
    from tests.fakes import HashEmbedder

    path = tmp_path / "ro.duckdb"
    writer = Store(path)
    ingest_files([("a.md", b"# Backups\n\nNightly backups go to the cold archive in Reykjavik.")], store=writer,
                 embedder=HashEmbedder(), config=PipelineConfig())
    writer.close()
    store = Store(path, read_only=True)
    trace = run_query("where do nightly backups go", PipelineConfig(), Deps(store=store, embedder=HashEmbedder()))
    assert trace.stage("bm25").candidates and store.runs.recent_runs() == []


def test_tracer_run_hands_back_the_stage_output():
    from core.pipeline import AnswerStep, Tracer
    from core.types import Answer, Stage

    tracer = Tracer()
    out = tracer.run(Stage.ANSWER, lambda: AnswerStep((), ["n"], info={"mode": "extractive"}, answer=Answer("a")))
    assert out is not None and out.answer == Answer("a")  # what the stage gave, with no closure to carry it out
    assert tracer.run(Stage.ANSWER, lambda: AnswerStep((), answer=Answer("b")), skip="answer.enabled = false") is None
    assert [s.skipped for s in tracer.stages] == [None, "answer.enabled = false"]


def test_route_and_answer_stages_record_typed_info_with_the_same_json(loaded: Deps) -> None:
    from core.types import AnswerInfo, RouteInfo

    trace = run_query("What is TLS_VERSION_MIN set to?", _cfg(), loaded)
    route, answer = trace.route_info(), trace.answer_info()
    assert isinstance(route, RouteInfo) and isinstance(answer, AnswerInfo)
    assert trace.stage("route").info is route and trace.stage("answer").info is answer
    assert route.config == route["config"] == trace.route()["config"] and route.retrieve
    assert (answer.mode, answer.refused, answer.citations) == (trace.answer.mode, trace.answer.refused,
                                                              trace.answer.citations)
    assert answer.source == trace.final().stage and not answer.cached
    # The trace's JSON (query --json, the run log) shows each record as the mapping it always was.
    stages = {s["stage"]: s for s in json.loads(json.dumps(trace.to_dict()))["stages"]}
    assert list(stages["route"]["info"]) == ["class", "confidence", "reason", "config", "method", "predicted",
                                             "description", "transforms", "overrides", "probabilities", "retrieve"]
    assert stages["answer"]["info"] == {"mode": answer.mode, "refused": answer.refused,
                                        "citations": list(answer.citations), "support": answer.support,
                                        "source": answer.source, "threshold": answer.threshold,
                                        "threshold_from": answer.threshold_from}
    assert answer.threshold is not None and answer.threshold_from.startswith("shipped prior")  # offline answer
    assert route == route.to_dict() and dict(answer) == answer.to_dict()
    off = run_query("What is TLS_VERSION_MIN set to?", _cfg(**{"router.enabled": False, "answer.enabled": False}),
                    loaded)
    assert off.route_info() is None and off.answer_info() is None


def test_a_cache_hit_records_where_its_answer_came_from(loaded: Deps) -> None:
    q = "What is TLS_VERSION_MIN set to?"
    run_query(q, _cfg(), loaded)
    hit = run_query(q, _cfg(), loaded)
    info = hit.answer_info()
    assert info is not None and info.cached and info.source == "answer_cache" and info["cached"] is True


def test_a_repeated_question_computes_no_query_embedding(loaded: Deps) -> None:
    # issue #32 item 6: the question's vector is kept by (model id, text); asking again encodes nothing
    calls: list[list[str]] = []
    encode = loaded.embedder.encode
    loaded.embedder.encode = lambda texts: calls.append(list(texts)) or encode(texts)  # type: ignore[method-assign]
    cfg = _cfg(**{"answer_cache.enabled": False, "answer.enabled": False, "rerank.enabled": False,
                  "prune.enabled": False, "mmr.enabled": False, "router.enabled": False})
    first = run_query("How did revenue change over the quarter?", cfg, loaded, log=False)
    assert calls == [["How did revenue change over the quarter?"]]
    again = run_query("How did revenue change over the quarter?", cfg, loaded, log=False)
    assert calls == [["How did revenue change over the quarter?"]]  # no second encode
    assert again.stage("dense").info["embed_cache_misses"] == 0 and again.stage("dense").info["embed_cache_hits"] == 1
    assert [c.chunk_id for c in again.stage("dense").candidates] == [c.chunk_id for c in first.stage("dense").candidates]
