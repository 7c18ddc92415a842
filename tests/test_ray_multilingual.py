"""The multilingual build on Ray (core/ingest/ray_engine.py build_vectors_ray) gives the local build's vectors."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.fakes import HashEmbedder

ray = pytest.importorskip("ray")
from core.ingest.ray_engine import RayOptions, build_vectors_ray  # noqa: E402

pytestmark = pytest.mark.slow  # starts a Ray runtime


def test_ray_build_stores_the_vectors_the_local_embedder_gives_and_a_rerun_does_nothing() -> None:
    store = Store(":memory:")
    files = [(f"doc{i}.md", f"# Topic {i}\n\nParagraph {i} about subject {i * 7}.".encode()) for i in range(5)]
    ingest_files(files, store=store, embedder=HashEmbedder(model_id="main-fake"), config=PipelineConfig())
    seen: list[tuple[int, int]] = []
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, configure_logging=False)
    try:
        stats = build_vectors_ray(store, HashEmbedder, "fake-hash-64", options=RayOptions(actors=1, batch_docs=2),
                                  progress=lambda d, t: seen.append((d, t)), write_every=2)
        again = build_vectors_ray(store, HashEmbedder, "fake-hash-64", options=RayOptions(actors=1))
    finally:
        ray.shutdown()
    total = store.corpus.count("chunks")
    assert stats.computed == total and seen[-1] == (total, total) and again.texts == 0
    ids, vecs = store.corpus.vectors("fake-hash-64")
    texts = {c.chunk_id: c.text for c in store.corpus.chunks()}
    assert np.allclose(vecs, HashEmbedder().encode([texts[i] for i in ids]), atol=1e-6)
