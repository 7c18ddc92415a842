"""core/retrieve/ann.py: the ANN graph beside the database: same top-k as the exact scan on small known data, saved
with its model id, brought in step when chunks come and go, rebuilt for another model."""
from __future__ import annotations

import numpy as np
import pytest

from core.retrieve import ann as ann_mod
from core.retrieve.ann import AnnIndex, ann_path, synced
from core.retrieve.dense import DenseIndex

pytest.importorskip("hnswlib")


def _unit(rng: np.random.Generator, n: int, dim: int = 32) -> np.ndarray:
    centres = rng.normal(size=(8, dim))
    x = centres[rng.integers(0, 8, n)] + 0.5 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_dense_search_through_the_graph_gives_the_exact_top_k_and_exact_scores() -> None:
    rng = np.random.default_rng(3)
    x = _unit(rng, 600)
    ids = [f"c{i}" for i in range(len(x))]
    exact = DenseIndex("m", ids, x)
    graphed = DenseIndex("m", ids, x)
    graphed.attach_ann(AnnIndex.build("m", ids, x))
    for q in _unit(rng, 20):
        a, b = exact.search(q, 10), graphed.search(q, 10)
        assert [c for c, _ in a] == [c for c, _ in b]
        assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-6)  # rescored on the float32 matrix


def test_saved_graph_is_reused_updated_in_place_and_rebuilt_for_another_model(tmp_path) -> None:
    rng = np.random.default_rng(5)
    x = _unit(rng, 300)
    ids = [f"c{i}" for i in range(len(x))]
    path = ann_path(tmp_path, "ws", "m", "raw")
    first, sync = synced(path, "m", ids[:250], x[:250])
    assert sync.built and path.is_file() and path.with_suffix(".json").is_file()
    again, sync = synced(path, "m", ids[:250], x[:250])
    assert not sync.built and (sync.added, sync.removed) == (0, 0) and len(again) == 250
    # 50 chunks ingested, 10 deleted: the saved graph takes the difference instead of a rebuild
    kept = ids[10:]
    grown, sync = synced(path, "m", kept, x[10:])
    assert not sync.built and (sync.added, sync.removed) == (50, 10) and len(grown) == 290
    idx = DenseIndex("m", kept, x[10:])
    idx.attach_ann(AnnIndex.load(path, "m", 32))
    hits = [c for c, _ in idx.search(x[299], 5)]
    assert hits[0] == "c299" and not {"c0", "c5"} & set(hits)
    # another embedder's vectors never meet this graph: a fresh one is built
    other, sync = synced(path, "other-model", kept, x[10:])
    assert sync.built and other.meta.model_id == "other-model"
    # a read-only reader uses the saved graph and writes nothing
    before = path.stat().st_mtime_ns
    _, sync = synced(path, "other-model", ids, x, save=False)
    assert not sync.built and sync.added == 10 and path.stat().st_mtime_ns == before


def test_the_index_cache_attaches_a_graph_above_its_threshold_only(tmp_path, deps) -> None:
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.retrieve.index import IndexCache

    files = [(f"f{i}.md", f"# Doc {i}\n\nTopic number {i} covers widgets and gadgets of size {i}.".encode())
             for i in range(6)]
    ingest_files(files, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    small = IndexCache(tmp_path, ann_min_chunks=10_000).dense(deps.store, deps.embedder, "default")
    assert small.ann is None
    cache = IndexCache(tmp_path, ann_min_chunks=1)
    big = cache.dense(deps.store, deps.embedder, "default")
    assert big.ann is not None and cache.last_ann_sync is not None and cache.last_ann_sync.built
    assert list(tmp_path.glob("dense-*.hnsw"))
    q = deps.embedder.encode(["widgets of size 3"])[0]
    # the same scores (the fake embedder ties some chunks, so ids may swap places within a tie)
    assert np.allclose([s for _, s in big.search(q, 6)], [s for _, s in small.search(q, 6)], atol=1e-6)
    assert ann_mod.ANN_MIN_CHUNKS >= 10_000  # the shipped threshold keeps small corpora exact


def test_holes_left_by_removals_add_up_across_syncs_to_a_rebuild(tmp_path) -> None:
    rng = np.random.default_rng(7)
    x = _unit(rng, 200)
    ids = [f"c{i}" for i in range(len(x))]
    path = ann_path(tmp_path, "ws", "m", "raw")
    synced(path, "m", ids, x)
    built = []
    for step in range(1, 6):  # 15 chunks removed a time: each under a fifth of what is live, together not
        _, sync = synced(path, "m", ids[15 * step:], x[15 * step:])
        built.append(sync.built)
    assert built[:2] == [False, False] and True in built  # 30 holes of 200 kept; by 45 the graph was rebuilt
    assert AnnIndex.load(path, "m", 32).holes < 45


def test_the_dense_stage_says_whether_it_searched_the_graph_or_scanned(tmp_path, deps) -> None:
    """What a person reads beside the dense column: nothing extra below the threshold (the exact scan); above it a
    chip with the graph and its query width, with the same list."""
    from dataclasses import replace

    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from core.retrieve.index import IndexCache

    files = [(f"f{i}.md", f"# Doc {i}\n\nTopic number {i} covers widgets and gadgets of size {i}.".encode())
             for i in range(6)]
    cfg = PipelineConfig()
    ingest_files(files, store=deps.store, embedder=deps.embedder, config=cfg)
    cfg = cfg.with_overrides({"answer.enabled": False, "answer_cache.enabled": False, "router.enabled": False})
    exact = run_query("widgets of size 3", cfg, replace(deps, indexes=IndexCache(tmp_path, ann_min_chunks=10_000)))
    graphed = run_query("widgets of size 3", cfg, replace(deps, indexes=IndexCache(tmp_path, ann_min_chunks=1)))
    a, b = exact.stage("dense"), graphed.stage("dense")
    assert a is not None and b is not None
    from core.app.report import stage_chips

    assert a.info["search"] == "exact scan" and not any("HNSW" in c for c in stage_chips(a))
    width = ann_mod.expansion(a.info["indexed"], ann_mod.candidates(cfg.dense.k))
    assert b.info["search"] == f"approximate: HNSW graph, query width {width}"
    assert f"HNSW graph, query width {width}" in stage_chips(b) and not b.notes  # a fact beside the name, no warning
    assert sorted(c.score for c in a.candidates) == pytest.approx(sorted(c.score for c in b.candidates), abs=1e-6)


def test_after_an_ingest_the_graph_is_synced_above_the_threshold_and_says_what_it_did(tmp_path, deps) -> None:
    from dataclasses import replace

    from core.app.readiness import sync_ann
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.retrieve.index import IndexCache

    cfg = PipelineConfig()
    files = [(f"f{i}.md", f"# Doc {i}\n\nTopic number {i} covers widgets and gadgets of size {i}.".encode())
             for i in range(6)]
    ingest_files(files[:4], store=deps.store, embedder=deps.embedder, config=cfg)
    assert sync_ann(replace(deps, indexes=IndexCache(tmp_path, ann_min_chunks=10_000)), cfg) is None  # below
    assert sync_ann(replace(deps, indexes=IndexCache(None, ann_min_chunks=1)), cfg) is None  # nowhere to keep it
    n = deps.store.corpus.count("chunks")
    first = sync_ann(replace(deps, indexes=IndexCache(tmp_path, ann_min_chunks=1)), cfg)
    assert first is not None and f"built over {n:,} vectors" in first and list(tmp_path.glob("dense-*.hnsw"))
    ingest_files(files, store=deps.store, embedder=deps.embedder, config=cfg)  # two more documents
    added = deps.store.corpus.count("chunks") - n
    again = sync_ann(replace(deps, indexes=IndexCache(tmp_path, ann_min_chunks=1)), cfg)  # a new process: from disk
    assert again is not None and f"{added:,} added, 0 removed" in again
    same = sync_ann(replace(deps, indexes=IndexCache(tmp_path, ann_min_chunks=1)), cfg)
    assert same is not None and "already in step" in same
