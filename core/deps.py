"""build_deps(config, env) -> Deps: the only place that reads environment variables, keys and model paths."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from core.cascade.guard import GuardCache
from core.cascade.rerank import Reranker, load_reranker
from core.config import PipelineConfig
from core.graph.snapshot import GraphCache
from core.models.embed import Embedder, load_embedder
from core.models.llm import LLM, OfflineLLM
from core.models.multilingual import load_multilingual
from core.models.providers import build_provider
from core.models.tokens import TokenCache
from core.retrieve.ann import ANN_MIN_CHUNKS
from core.retrieve.index import IndexCache
from core.store import Store

DEFAULT_DB = Path("data") / "workbench.duckdb"


def limit_blas_threads(threads: int | None = 1) -> None:
    """numpy's BLAS (OpenBLAS) to `threads` threads for this process (None: leave it). Why: a query's numpy work
    (dense scores, MaxSim, MMR) is small matrices between ONNX Runtime calls; OpenBLAS's second thread spins on the
    second core that ONNX and the other sessions want. bench/results/blas_threads.json measures queries both ways in
    one run; bench/ray_eval.py found the local eval twice as slow as one-thread Ray workers under load for this
    reason. Set at run time (threadpoolctl), because numpy is often imported before our code (Streamlit)."""
    if threads is None:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is pinned in requirements.txt
        return
    threadpool_limits(limits=threads, user_api="blas")


@dataclass
class Deps:
    """Everything a pipeline run needs from the outside world, built once and injected."""

    store: Store
    embedder: Embedder
    indexes: IndexCache = field(default_factory=IndexCache)
    notices: list[str] = field(default_factory=list)  # user-facing: fallbacks, missing keys, ...
    llm: LLM = field(default_factory=OfflineLLM)  # OfflineLLM unless a key was given; never holds the key in clear
    graph: GraphCache = field(default_factory=GraphCache)  # in-memory entity graph, reloaded when its version moves
    # Rerank (core/cascade/rerank.py): a test injects `reranker`; otherwise one is built on first use per configured method
    # and model, and kept (its token-vector cache is what makes a warm query cheap).
    reranker: Reranker | None = None
    token_cache: TokenCache = field(default_factory=TokenCache, repr=False)
    guards: GuardCache = field(default_factory=GuardCache, repr=False)  # the cascade guard's evidence per workspace
    # The multilingual embedder (embedding.multilingual): a test injects one; otherwise loaded on first use per model.
    multilingual: Embedder | None = None
    _multilingual: dict[str, tuple[Embedder | None, str | None]] = field(default_factory=dict, repr=False)
    _rerankers: dict[tuple[str, str, str], Reranker] = field(default_factory=dict, repr=False)
    _rerank_notes: dict[tuple[str, str, str], str | None] = field(default_factory=dict, repr=False)
    _rerank_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _multilingual_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # its own: no wait on rerank

    def reranker_for(self, method: str, model: str = "", llm_model: str = "") -> tuple[Reranker, str | None]:
        """(reranker, fallback notice or None). The notice also joins `notices` once, so the sidebar shows it."""
        if self.reranker is not None:
            return self.reranker, None
        key = (method, model if method == "cross-encoder" else "", llm_model if method == "llm" else "")
        with self._rerank_lock:
            if key not in self._rerankers:
                loaded = load_reranker(method, model=model, embedder=self.embedder, store=self.store, llm=self.llm,
                                       llm_model=llm_model, local_files_only=True, cache=self.token_cache)
                self._rerankers[key] = loaded.reranker
                self._rerank_notes[key] = loaded.notice
                if loaded.notice and loaded.notice not in self.notices:
                    self.notices.append(loaded.notice)
            return self._rerankers[key], self._rerank_notes.get(key)


    def multilingual_for(self, model_id: str) -> tuple[Embedder | None, str | None]:
        """(the multilingual embedder, None) or (None, why it could not be loaded); loaded once per model id."""
        if self.multilingual is not None:
            return self.multilingual, None
        with self._multilingual_lock:
            if model_id not in self._multilingual:
                loaded = load_multilingual(model_id)
                self._multilingual[model_id] = (loaded.embedder, loaded.notice)
            return self._multilingual[model_id]


def db_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("RAG_DB", str(DEFAULT_DB))


# Public evaluation sets live beside the repo (../shared/datasets) unless RAG_DATASETS points elsewhere.
DEFAULT_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def datasets_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("RAG_DATASETS") or DEFAULT_DATASETS)


def model_cache_dir(where: str | Path, env: Mapping[str, str] | None = None) -> Path:
    """Where the exported ONNX model of the database at `where` lives (the Ray engine's workers use it too)."""
    env = os.environ if env is None else env
    if env.get("RAG_MODEL_CACHE"):
        return Path(env["RAG_MODEL_CACHE"])
    return (DEFAULT_DB.parent if str(where) == ":memory:" else Path(where).parent) / "models"


def build_deps(
    config: PipelineConfig,
    env: Mapping[str, str] | None = None,
    *,
    db: str | None = None,
    store: Store | None = None,
    embedder: Embedder | None = None,
    api_key: str | None = None,
    llm: LLM | None = None,
    blas_threads: int | None = 1,
) -> Deps:
    """`api_key` (e.g. from Streamlit secrets) wins over ANTHROPIC_API_KEY; it is handed to the SDK client only,
    never stored in the database, a log, a trace or a page. ANTHROPIC_BASE_URL points the SDK elsewhere (tests)."""
    env = os.environ if env is None else env
    limit_blas_threads(blas_threads)
    notices: list[str] = []
    if store is None:
        store = Store(db or db_path(env))
    if embedder is None:
        # The exported ONNX model is cached beside the database (data/models/ for the default database), unless
        # RAG_MODEL_CACHE names one folder for every database (tests: one export per machine, not per temp DB);
        # an in-memory store has no folder, so its export goes to the default place.
        models = model_cache_dir(getattr(store, "path", None) or db or db_path(env), env)
        loaded = load_embedder(env.get("RAG_EMBED_MODEL", config.embedding.model), batch_size=config.embedding.batch_size,
                               runtime=config.embedding.runtime, cache_dir=models)
        embedder = loaded.embedder
        if loaded.notice:
            notices.append(loaded.notice)
    if llm is None:
        # llm.provider picks the client (core/models/providers.py); LLM_API_KEY is an OpenAI-compatible server's key.
        llm, notice = build_provider(config.llm, anthropic_key=api_key or env.get("ANTHROPIC_API_KEY"),
                                     anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
                                     local_key=env.get("LLM_API_KEY") or None, ledger=store.ledger)
        if notice:
            notices.append(notice)
    # Dense indexes past the ANN threshold keep their graph beside the database (core/retrieve/ann.py).
    where = getattr(store, "path", None) or db or db_path(env)
    ann_dir = None if str(where) == ":memory:" else Path(str(where) + ".ann")
    indexes = IndexCache(ann_dir, int(env.get("RAG_ANN_MIN_CHUNKS", ANN_MIN_CHUNKS)),
                         ann_writable=not getattr(store, "read_only", False))
    return Deps(store=store, embedder=embedder, notices=notices, llm=llm, indexes=indexes)


def with_llm_provider(deps: Deps, config: PipelineConfig, env: Mapping[str, str] | None = None, *,
                      api_key: str | None = None) -> Deps:
    """These deps with the LLM that `config.llm` names (its provider, server or model file) in place of theirs:
    everything else (store, embedder, caches) is shared. The notice of a provider that could not be made replaces
    the LLM notices of the original deps."""
    env = os.environ if env is None else env
    llm, notice = build_provider(config.llm, anthropic_key=api_key or env.get("ANTHROPIC_API_KEY"),
                                 anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
                                 local_key=env.get("LLM_API_KEY") or None, ledger=deps.store.ledger)
    old = getattr(deps.llm, "reason", "")
    notices = [n for n in deps.notices if not (old and old in n) and "ANTHROPIC_API_KEY" not in n]
    return replace(deps, llm=llm, notices=notices + ([notice] if notice else []))
