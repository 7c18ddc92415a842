"""RAPTOR (core/graph/raptor.py, core/store/raptor.py): seeded clustering, verbatim summaries with provenance, the
stored tree, and the `raptor` stage fused like the other lists."""
from __future__ import annotations

import numpy as np

from core.config import PipelineConfig
from core.deps import Deps
from core.graph.raptor import build_tree, extractive_summary, kmeans, plan_raptor, raptor_search
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.types import Chunk

WS = "default"


def test_kmeans_is_seeded_and_splits_two_groups() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal([1, 0, 0], 0.05, (10, 3))
    b = rng.normal([0, 1, 0], 0.05, (10, 3))
    x = np.vstack([a, b])
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    labels = kmeans(x, 2, seed=3)
    assert len(set(labels[:10])) == 1 and len(set(labels[10:])) == 1 and labels[0] != labels[10]
    assert np.array_equal(labels, kmeans(x, 2, seed=3))


def test_extractive_summary_quotes_the_most_shared_sentences_verbatim() -> None:
    texts = ["# Pumps\nPump stations report pressure hourly. Lunch is served at noon today.",
             "Pump stations report flow and pressure to the control room.", "Pressure alarms reach pump stations."]
    s = extractive_summary(texts, sentences=2)
    # mean member count of their words: 2.25 and 2.2; the lunch sentence (words no other member uses) and the
    # heading are left out; the quoted ones keep the members' order
    assert s == "Pump stations report pressure hourly. Pressure alarms reach pump stations."
    assert plan_raptor(100, cluster_size=8, max_levels=3).levels == 3
    assert plan_raptor(5, cluster_size=8, max_levels=3).nodes == 1


class _Fixed:
    model_id = "fixed"
    languages = None

    def encode(self, texts):
        return np.asarray([[1.0, float(len(t) % 7), 0.5, 0.0, 0.0, 0.0] for t in texts], dtype=np.float32)


def test_build_tree_levels_and_provenance() -> None:
    ids = [f"c{i}" for i in range(12)]
    texts = [f"Sentence number {i} is about the pump station network here." for i in range(12)]
    vecs = np.eye(12, dtype=np.float32)[:, :6] + 0.01
    nodes, nv = build_tree(ids, texts, vecs, _Fixed(), cluster_size=4, max_levels=3, summary_sentences=1, seed=1,
                           corpus_version=7)
    levels = [n.level for n in nodes]
    assert levels[0] == 1 and max(levels) >= 2 and len(nv) == len(nodes)
    top = [n for n in nodes if n.level == max(levels)]
    assert sum(len(n.chunk_ids) for n in top) == 12  # every chunk lies under the top level, once
    assert all(n.corpus_version == 7 and n.model_id == "fixed" and n.mode == "extractive" for n in nodes)
    assert all(n.text in texts for n in nodes if n.level == 1)  # one sentence quoted verbatim
    chunks = {cid: Chunk(cid, "d", 0, t, 0, len(t)) for cid, t in zip(ids, texts)}
    hits = raptor_search(nv[0], nodes, nv, ids, vecs, lambda want: {c: chunks[c] for c in want}, k=5)
    assert len(hits.candidates) == 5 and any("raptor_node" in c.meta for c in hits.candidates)


DOCS = [("a.md", b"# Pumps\n\nPump stations report pressure hourly to the control room.\n\n"
                 b"The pump station network covers three regions.\n"),
        ("b.md", b"# Travel\n\nThe daily meal allowance abroad is 65 euros.\n\nTrain travel is preferred to flights.\n")]


def test_the_raptor_stage_is_skipped_until_built_then_fused(deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({"raptor.enabled": True, "router.enabled": False,
                                           "answer_cache.enabled": False, "rerank.enabled": False})
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)
    before = run_query("pump station pressure", cfg, deps, log=False).stage("raptor")
    assert before is not None and before.skipped is not None and "raptor build" in before.skipped
    ids, matrix = deps.store.corpus.vectors(deps.embedder.model_id, "raw", WS)
    nodes, vecs = build_tree(ids, [c.text for c in deps.store.corpus.chunks_by_id(ids, WS).values()], matrix,
                             deps.embedder, cluster_size=2, max_levels=2, summary_sentences=1, seed=1,
                             corpus_version=deps.store.corpus.corpus_version(WS))
    deps.store.raptor.replace(WS, nodes, vecs)
    stored, sv = deps.store.raptor.nodes(WS)
    assert [n.node_id for n in stored] == sorted(n.node_id for n in nodes) and sv.shape == vecs.shape
    trace = run_query("pump station pressure", cfg, deps, log=False)
    stage = trace.stage("raptor")
    assert stage is not None and stage.skipped is None and stage.candidates
    fused = trace.stage("fused")
    assert fused is not None and "rank_raptor" in fused.candidates[0].meta  # fused beside BM25 and dense
    assert any(c.meta.get("rank_raptor") == 1 for c in fused.candidates)
