"""Batch eval on Ray (core/eval/ray_eval.py) against the local eval, on one in-process Ray runtime for the module."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.eval.datasets import parse_jsonl
from core.eval.run import EvalRun, NamedConfig, load_run, run_eval
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.fakes import HashEmbedder
from tests.ray_fakes import LoggingEmbedderFactory

ray = pytest.importorskip("ray")
from core.eval.ray_eval import RayEvalEngine, RayEvalOptions, plan_chunks  # noqa: E402
from core.ingest.ray_engine import RayEngineError  # noqa: E402

TOPICS = ["torque wrench calibration", "duckdb write-ahead log", "leiden community detection",
          "prompt caching minimum", "sentence window expansion", "reciprocal rank fusion"]
CONFIG = PipelineConfig().with_overrides({"chunking.size_tokens": 40, "chunking.overlap_tokens": 4})
# Two configurations that rank differently (BM25 alone; the default hybrid cascade), router off as in test_eval_run.
A = CONFIG.with_overrides({"dense.enabled": False, "fusion.enabled": False, "router.enabled": False})
B = CONFIG.with_overrides({"router.enabled": False})
CONFIGS = [NamedConfig("bm25", A), NamedConfig("hybrid", B)]


def _files() -> list[tuple[str, bytes]]:
    out = []
    for i, topic in enumerate(TOPICS):
        paras = [f"The {topic} step {p} checks setting number {i * 10 + p} before the next stage reads it, "
                 f"because the {topic} stage logs why." for p in range(3)]
        out.append((f"doc{i}.md", f"# {topic.title()}\n\n" + "\n\n".join(paras) + "\n"))
    return [(n, t.encode()) for n, t in out]


def _golden():  # noqa: ANN202
    rows = []
    for i, topic in enumerate(TOPICS):
        rows.append({"id": f"q{i}a", "query": f"which setting does the {topic} step 1 check?",
                     "gold": [{"doc": f"doc{i}.md", "span": f"checks setting number {i * 10 + 1}"}]})
        rows.append({"id": f"q{i}b", "query": f"why does {topic.split()[0]} log", "type": "why",
                     "gold": [{"doc": f"doc{i}.md"}]})
    rows.append({"id": "u1", "query": "who founded the Mars office?", "answerable": False, "gold": []})
    return parse_jsonl("\n".join(json.dumps(r) for r in rows), "tiny.jsonl")


@pytest.fixture(scope="module")
def ray_rt():  # noqa: ANN201
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A file database with the corpus, and the local engine's runs over it (the oracle)."""
    folder = tmp_path_factory.mktemp("ray_eval")
    store = Store(folder / "w.duckdb")
    ingest_files(_files(), store=store, embedder=HashEmbedder(), config=CONFIG)
    deps = Deps(store=store, embedder=HashEmbedder())
    local = run_eval(_golden(), CONFIGS, deps, save=False)
    yield {"folder": folder, "deps": deps, "local": local}
    store.close()


def _ranks(run: EvalRun) -> list:
    return [(r.qid, r.error, r.final_stage, [(s.stage, s.skipped, s.gold_ranks) for s in r.stages],
             [c.chunk_id for s in r.stages if s.stage == r.final_stage for c in s.candidates]) for r in run.results]


def _metrics(run: EvalRun) -> list:
    # Latency differs between processes by nature; every other number must be the same.
    return [(r.qid, {k: v for k, v in r.metrics.items() if k != "ms"}) for r in run.results]


def _no_ms(table: dict) -> dict:
    return {name: {k: v for k, v in row.items() if k != "ms"} for name, row in table.items()}


def _assert_same(ray_runs: list[EvalRun], local_runs: list[EvalRun]) -> None:
    assert len(ray_runs) == len(local_runs) == 2
    for a, b in zip(ray_runs, local_runs):
        assert a.config_name == b.config_name and a.config_hash == b.config_hash
        assert [r.qid for r in a.results] == [r.qid for r in b.results]  # each question once, in set order
        assert _ranks(a) == _ranks(b)
        assert _metrics(a) == _metrics(b)
        assert {k: v for k, v in a.metrics.items() if k != "ms"} == {k: v for k, v in b.metrics.items() if k != "ms"}
        assert _no_ms(a.stage_recall) == _no_ms(b.stage_recall) and _no_ms(a.by_type) == _no_ms(b.by_type)


def test_plan_chunks_covers_every_question_once_config_major() -> None:
    tasks = plan_chunks(10, 2, 3, actors=2, chunk=4)
    assert [(c, r, len(i)) for c, r, i in tasks[:3]] == [(0, 0, 4), (0, 0, 4), (0, 0, 2)]
    seen = [(c, r, i) for c, r, idx in tasks for i in idx]
    assert sorted(seen) == [(c, r, i) for c in range(2) for r in range(3) for i in range(10)]
    assert [c for c, _, _ in tasks] == sorted(c for c, _, _ in tasks)  # all of config 0 before config 1
    assert max(len(i) for _, _, i in plan_chunks(1000, 1, 1, actors=2)) == 16  # default: at most MAX_CHUNK
    assert [len(i) for _, _, i in plan_chunks(5, 1, 1, actors=2)] == [1] * 5  # small sets: one per task


def test_ray_eval_equals_local_stores_the_runs_and_removes_the_snapshot(ray_rt, db, tmp_path: Path) -> None:
    deps, local = db["deps"], db["local"]
    assert local[0].metrics["recall@5"] != local[1].metrics["recall@5"] or _ranks(local[0]) != _ranks(local[1])
    seen: list[tuple[int, int]] = []
    engine = RayEvalEngine(LoggingEmbedderFactory(tmp_path / "enc.log"), RayEvalOptions(actors=2, chunk=3))
    runs = run_eval(_golden(), CONFIGS, deps, engine=engine, progress=lambda d, t, m: seen.append((d, t)))
    _assert_same(runs, local)
    assert seen[-1] == (26, 26)  # 13 questions x 2 configurations, all counted once
    assert engine.stats["tasks"] == 10 and engine.stats["duplicates"] == 0
    assert any(n.startswith("scored on Ray: 2 actors") for n in runs[0].notes)
    stored = load_run(deps.store, runs[1].eval_id)  # the driver's single writer stored both runs
    assert stored is not None and stored.metrics == runs[1].metrics
    assert not list(db["folder"].glob("*.eval-snapshot-*"))  # the snapshot is gone, the database is not
    assert (db["folder"] / "w.duckdb").is_file()


def test_a_killed_worker_is_retried_and_no_question_counts_twice(ray_rt, db, tmp_path: Path) -> None:
    log, marker = tmp_path / "enc.log", tmp_path / "kill-once"
    marker.touch()
    # The kill text is the second question of the second chunk: the actor dies with one question of it done.
    engine = RayEvalEngine(LoggingEmbedderFactory(log, marker, "why does duckdb log"),
                           RayEvalOptions(actors=1, chunk=2))
    runs = run_eval(_golden(), CONFIGS, db["deps"], engine=engine, save=False)
    assert not marker.exists()  # an actor did die once, mid-chunk
    _assert_same(runs, db["local"])
    assert engine.stats["duplicates"] == 0
    encoded = log.read_text().splitlines()
    # The killed chunk's first question was scored before the kill and again in the retry (its text went through
    # the model more often than its twin's in the first chunk, which no kill touched), yet it counts once above.
    twin, retried = (encoded.count(f"which setting does the {t} step 1 check?") for t in TOPICS[:2])
    assert 0 < twin < retried


def test_workers_that_give_up_store_nothing_and_say_so(ray_rt, db, tmp_path: Path) -> None:
    marker = tmp_path / "kill"
    marker.touch()
    before = len(db["deps"].store.runs.eval_runs())
    engine = RayEvalEngine(LoggingEmbedderFactory(tmp_path / "enc.log", marker, "torque"),
                           RayEvalOptions(actors=1, chunk=4, max_restarts=0))
    with pytest.raises(RayEngineError, match="nothing was stored"):
        run_eval(_golden(), CONFIGS, db["deps"], engine=engine)
    assert len(db["deps"].store.runs.eval_runs()) == before
    assert not list(db["folder"].glob("*.eval-snapshot-*"))


def test_ray_eval_refuses_llm_runs_and_a_model_other_than_the_drivers(ray_rt, db, tmp_path: Path) -> None:
    class KeyedLLM:
        available = True

    deps = Deps(store=db["deps"].store, embedder=HashEmbedder(), llm=KeyedLLM())  # type: ignore[arg-type]
    with pytest.raises(RayEngineError, match="offline only"):
        run_eval(_golden(), CONFIGS, deps, engine=RayEvalEngine(HashEmbedder), save=False)
    other = Deps(store=db["deps"].store, embedder=HashEmbedder(model_id="another-model"))
    with pytest.raises(RayEngineError, match="same model"):
        run_eval(_golden(), CONFIGS, other, engine=RayEvalEngine(HashEmbedder, RayEvalOptions(actors=1)), save=False)
    assert not list(db["folder"].glob("*.eval-snapshot-*"))


def test_cli_eval_ray_address_needs_the_ray_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli import main

    assert main(["eval", "--dataset", "sample", "--ray-address", "auto", "--db", str(tmp_path / "w.duckdb")]) == 2
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
    assert not (tmp_path / "w.duckdb").exists()


def test_a_read_only_store_serves_its_stored_token_vectors_to_late_interaction(tmp_path: Path) -> None:
    """What every Ray eval worker opens: a read-only copy. Its token vectors are read, never recomputed or written
    (before, a read-only store was not read at all and every candidate was re-encoded on every query)."""
    from core.cascade.rerank import LateInteractionReranker, late_interaction_or_cosine
    from tests.cascade_fakes import ConceptEmbedder, ConceptWindowEncoder

    texts = [f"the {t} stage checks setting {i} before the next one" for i, t in enumerate(TOPICS)]
    path = tmp_path / "w.duckdb"
    rw = Store(path)
    LateInteractionReranker(ConceptWindowEncoder(model_id="fake-hash-64"), persist=rw.caches).warm(texts)
    rw.close()
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    ro = Store(path, read_only=True)
    emb = ConceptEmbedder()
    reranker, notice = late_interaction_or_cosine(emb, store=ro)
    assert notice is None
    got = reranker.score("which stage checks setting 3", texts)
    assert got.computed == 0 and got.cache_hits == len(texts)
    assert emb.encoder.windows_encoded <= 1  # the query alone went through the encoder
    ro.close()
    assert {p.name: p.stat().st_size for p in tmp_path.iterdir()} == sizes  # nothing written
