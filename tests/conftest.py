"""Shared fixtures: an in-memory store, a fake embedder, and Deps built from them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One ONNX export of the embedding model per machine, shared by every temporary test database (and CLI subprocess).
os.environ.setdefault("RAG_MODEL_CACHE", str(ROOT / "data" / "models"))

from core.config import PipelineConfig  # noqa: E402
from core.deps import Deps  # noqa: E402
from core.store import Store  # noqa: E402
from tests.fakes import HashEmbedder  # noqa: E402

SHARED_DATASETS = Path(os.environ.get("RAG_DATASETS", ROOT.parent / "shared" / "datasets"))


@pytest.fixture
def store() -> Store:
    s = Store(":memory:")
    yield s
    s.close()


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def config() -> PipelineConfig:
    return PipelineConfig()


@pytest.fixture
def deps(store: Store, embedder: HashEmbedder) -> Deps:
    return Deps(store=store, embedder=embedder)


@pytest.fixture
def datasets_dir() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATASETS}")
    return SHARED_DATASETS


@pytest.fixture(scope="session")
def bundled_embedder():  # noqa: ANN201 - the sentence-transformers type stays out of test signatures
    """The bundled MiniLM, loaded once per test session and shared by the tests that need the real model (all
    marked slow, so `make test` never loads it through this fixture)."""
    from core.models.embed import BUNDLED_MODEL, SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(BUNDLED_MODEL)
    emb.warm_up()
    return emb
