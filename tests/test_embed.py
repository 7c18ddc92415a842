"""Embedding providers: cache-first encoding and the honest fallback when a configured model cannot be loaded."""
from __future__ import annotations

import numpy as np

from core.models.embed import BUNDLED_MODEL, embed_with_cache, load_embedder
from core.models.protocols import declared_languages
from core.store import Store
from tests.fakes import HashEmbedder


def test_cache_first_encodes_only_misses_and_dedupes(store: Store) -> None:
    emb = HashEmbedder()
    v1, s1 = embed_with_cache(["alpha beta", "gamma", "alpha  beta"], emb, store.caches, "default")
    assert (s1.computed, s1.cache_hits) == (2, 1)  # whitespace-normalised duplicate encoded once
    np.testing.assert_allclose(v1[0], v1[2])
    v2, s2 = embed_with_cache(["gamma", "delta"], emb, store.caches, "default")
    assert (s2.computed, s2.cache_hits) == (1, 1) and emb.encoded == 3
    np.testing.assert_allclose(v2[0], v1[1])
    other = HashEmbedder(model_id="other-model")
    _, s3 = embed_with_cache(["gamma"], other, store.caches, "default")
    assert s3.computed == 1  # the cache is keyed by model: no cross-model hit


def test_declared_languages() -> None:
    assert declared_languages(BUNDLED_MODEL) == frozenset({"en"})
    assert declared_languages("intfloat/multilingual-e5-small") is None


def test_unloadable_model_falls_back_to_the_bundled_one_and_says_so(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = load_embedder(str(tmp_path / "no-such-model"))
    assert loaded.embedder.model_id == BUNDLED_MODEL
    assert loaded.notice is not None and "could not be loaded" in loaded.notice and BUNDLED_MODEL in loaded.notice
    vec = loaded.embedder.encode(["hello world"])
    assert vec.shape == (1, 384) and abs(float(np.linalg.norm(vec[0])) - 1.0) < 1e-4


def test_deps_cache_the_onnx_export_beside_the_database_or_in_rag_model_cache(monkeypatch, tmp_path) -> None:
    import core.deps as deps_mod
    from core.config import PipelineConfig
    from core.models.embed import LoadedEmbedder
    from tests.fakes import HashEmbedder

    seen: list[tuple[str, object]] = []

    def fake_load(name, *, batch_size, runtime, cache_dir):  # noqa: ANN001, ANN202
        seen.append((runtime, cache_dir))
        return LoadedEmbedder(HashEmbedder(), name, None)

    monkeypatch.setattr(deps_mod, "load_embedder", fake_load)
    cfg = PipelineConfig().with_overrides({"embedding.runtime": "onnx-int8"})
    db = tmp_path / "w" / "x.duckdb"
    deps_mod.build_deps(cfg, {}, db=str(db)).store.close()
    deps_mod.build_deps(cfg, {"RAG_MODEL_CACHE": str(tmp_path / "shared")}, db=str(db)).store.close()
    assert seen == [("onnx-int8", db.parent / "models"), ("onnx-int8", tmp_path / "shared")]
