"""Token vectors, one home: the TokenEncoder protocol, windows over long texts, token matrices, their caches, MaxSim.

Late interaction (rerank), late chunking (contexts) and the shared forward pass at ingest all read these."""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from core.models.protocols import Embedder, HasTokenEncoder, TokenEncoder
from core.types import DEFAULT_WORKSPACE, Span


class NoTokenVectors(ValueError):
    """The embedder gives no token vectors (not a transformer, or a runtime without a token encoder)."""


def token_windows(n: int, size: int, overlap: int, *, full_last: bool = False) -> list[tuple[int, int]]:
    """Token ranges [a, b) of width `size` covering 0..n, each sharing `overlap` tokens with the previous. The last
    window ends at n; with `full_last` it keeps the full width (starting before the previous step would), which the
    windowed token reader uses so its last window has as much context as the others; late chunking steps on."""
    if n <= 0:
        return []
    if n <= size:
        return [(0, n)]
    step = max(1, size - min(overlap, size - 1))
    out, a = [], 0
    while a + size < n:
        out.append((a, a + size))
        a += step
    out.append((max(0, n - size), n) if full_last else (a, n))
    return out


# -- token matrices ------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenMatrix:
    """Contextual token vectors of one text: content tokens only (punctuation dropped), unit rows stored as float16
    to halve the cache, with their vocabulary ids and character spans in the encoded text."""

    ids: np.ndarray  # int32 (n,)
    vecs: np.ndarray  # float16 (n, dim)
    spans: np.ndarray  # int32 (n, 2)

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.vecs.nbytes + self.spans.nbytes)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def rows_in(self, start: int, end: int) -> np.ndarray:
        """Mask of the tokens lying wholly inside the character span [start, end) of the encoded text."""
        return (self.spans[:, 0] >= start) & (self.spans[:, 1] <= end) if len(self) else np.zeros(0, bool)


def _is_content(piece: str) -> bool:
    return any(ch.isalnum() for ch in piece)


def encode_token_matrices(encoder: TokenEncoder, texts: Sequence[str], *, overlap: int = 32) -> list[TokenMatrix]:
    """Token vectors for whole texts of any length: a text longer than one forward pass is read in overlapping
    windows, and each token keeps the vector from the window where it has context on both sides (cut points sit in
    the middle of each overlap). Windows of all texts are batched by length so padding stays small."""
    toks = [encoder.tokenize(t) for t in texts]
    jobs: list[tuple[int, Span, Span]] = []  # (text index, window, the part of the window this text keeps)
    for ti, (ids, _) in enumerate(toks):
        wins = token_windows(len(ids), encoder.window_tokens, overlap, full_last=True) if ids else []
        for wi, (a, b) in enumerate(wins):
            lo = a if wi == 0 else (a + wins[wi - 1][1]) // 2
            hi = b if wi == len(wins) - 1 else (wins[wi + 1][0] + b) // 2
            jobs.append((ti, (a, b), (lo, hi)))
    order = sorted(range(len(jobs)), key=lambda j: jobs[j][1][1] - jobs[j][1][0])
    encoded = encoder.encode_windows([toks[jobs[j][0]][0][jobs[j][1][0]:jobs[j][1][1]] for j in order]) if order else []
    by_job = {j: v for j, v in zip(order, encoded)}
    parts: list[list[np.ndarray]] = [[] for _ in texts]
    for j, (ti, (a, _), (lo, hi)) in enumerate(jobs):
        parts[ti].append(by_job[j][lo - a : hi - a])
    out = []
    for ti, (text, (ids, offsets)) in enumerate(zip(texts, toks)):
        dim = next((p.shape[1] for p in parts[ti] if p.ndim == 2), 0)
        vecs = np.concatenate(parts[ti]).astype(np.float32) if parts[ti] else np.zeros((0, dim), dtype=np.float32)
        out.append(token_matrix(text, ids, offsets, vecs))
    return out


def token_matrix(text: str, ids: Sequence[int], offsets: Sequence[tuple[int, int]], vecs: np.ndarray) -> TokenMatrix:
    """One text's TokenMatrix from its tokens (no special tokens) and their contextual vectors: punctuation dropped,
    rows made unit length, float16. Shared by the windowed reader above and by ingest, which takes the vectors from
    the forward pass that made the chunk's sentence vector (core.models.embed.embed_groups_with_cache)."""
    vecs = np.asarray(vecs, dtype=np.float32)
    keep = np.array([_is_content(text[s:e]) for s, e in offsets], dtype=bool) if len(offsets) else np.zeros(0, bool)
    vecs = vecs[keep]
    norms = np.linalg.norm(vecs, axis=1, keepdims=True) if len(vecs) else np.ones((0, 1))
    return TokenMatrix(
        np.asarray(ids, dtype=np.int32)[keep],
        (vecs / np.maximum(norms, 1e-12)).astype(np.float16),
        np.asarray(offsets, dtype=np.int32).reshape(-1, 2)[keep],
    )


def text_key(model_id: str, text: str) -> str:
    """Cache key part for token vectors: sha256 of the exact text (spans point into it, so no normalising)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TokenCache:
    """In-memory LRU of token matrices keyed by (model id, text sha256), bounded in bytes: it never holds more than
    max_bytes (a matrix bigger than the whole budget is not kept at all). A corpus's token vectors can be many times
    the budget (SciFact: ~2 GB); the persistent store holds them all and a query reads its <= 50 candidates from it."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], TokenMatrix] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, model_id: str, sha: str) -> TokenMatrix | None:
        with self._lock:
            tm = self._items.get((model_id, sha))
            if tm is not None:
                self._items.move_to_end((model_id, sha))
            return tm

    def put(self, model_id: str, sha: str, tm: TokenMatrix) -> None:
        with self._lock:
            old = self._items.pop((model_id, sha), None)
            if old is not None:
                self._bytes -= old.nbytes
            if tm.nbytes > self.max_bytes:
                return  # the caller still has it; keeping it would break the budget
            while self._items and self._bytes + tm.nbytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes
            self._items[(model_id, sha)] = tm
            self._bytes += tm.nbytes

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes


class TokenStore(Protocol):
    """Persistent token-vector cache (`store.caches`, core.store's caches repository); optional."""

    def cached_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = ...
                             ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]: ...

    def cache_token_vectors(self, model_id: str, items: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                            workspace: str = ...) -> None: ...


@runtime_checkable
class HeldTokenKeys(Protocol):
    """Optional capability of a TokenStore: which keys it holds, asked without reading their vectors (core.store's
    caches repository has it; a read-only wrapper does not)."""

    def held_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = ...) -> set[str]: ...


def maxsim(query: np.ndarray, weights: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
    """Sum over query tokens of (weight x best cosine with any token of the doc), divided by the weight sum.
    One matrix product over all docs stacked; a doc without tokens scores 0."""
    out = np.zeros(len(docs), dtype=np.float32)
    live = [i for i, d in enumerate(docs) if len(d)]
    if not live or not len(query) or float(weights.sum()) <= 0:
        return out
    stacked = np.concatenate([docs[i] for i in live]).astype(np.float32, copy=False)
    sims = query.astype(np.float32) @ stacked.T  # (q tokens, all doc tokens)
    starts = np.cumsum([0] + [len(docs[i]) for i in live[:-1]])
    best = np.maximum.reduceat(sims, starts, axis=1)  # (q tokens, live docs)
    out[live] = (weights.astype(np.float32) @ best) / float(weights.sum())
    return out


class TransformerTokenEncoder:
    """Token vectors from the sentence-transformers model behind an embedder (the bundled MiniLM by default),
    with the tokenizer's character offsets. Loads nothing new: it reuses the embedder's model."""

    def __init__(self, embedder: Embedder, batch_size: int = 16) -> None:
        model = getattr(embedder, "model", None)
        first = model[0] if model is not None else None
        if first is None or not hasattr(first, "tokenizer") or not hasattr(first, "auto_model"):
            raise NoTokenVectors(f"late chunking needs a transformer embedder; {embedder.model_id} has no token vectors")
        self.model_id = embedder.model_id
        self._tok = first.tokenizer
        self._model = first.auto_model
        self.window_tokens = int(model.max_seq_length) - 2  # room for [CLS] and [SEP]
        self.batch_size = batch_size

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        import torch

        cls, sep, pad = self._tok.cls_token_id, self._tok.sep_token_id, self._tok.pad_token_id or 0
        out: list[np.ndarray] = []
        for i in range(0, len(windows), self.batch_size):
            group = [list(w) for w in windows[i : i + self.batch_size]]
            width = max(len(w) for w in group) + 2
            ids = torch.full((len(group), width), pad, dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for j, w in enumerate(group):
                ids[j, : len(w) + 2] = torch.tensor([cls, *w, sep])
                mask[j, : len(w) + 2] = 1
            with torch.inference_mode():
                hidden = self._model(input_ids=ids, attention_mask=mask).last_hidden_state
            for j, w in enumerate(group):
                out.append(hidden[j, 1 : 1 + len(w)].float().cpu().numpy())
        return out


def window_encoder_for(embedder: Embedder) -> TokenEncoder:
    """The embedder's own token encoder when it has one (HasTokenEncoder: the ONNX runtimes, test fakes); a
    sentence-transformers embedder is wrapped by TransformerTokenEncoder. Raises ValueError when the embedder has no
    token vectors."""
    if isinstance(embedder, HasTokenEncoder):
        return embedder.window_encoder()
    return TransformerTokenEncoder(embedder)


class ReadOnlyTokens:
    """A read-only store's token vectors as a TokenStore: reads pass through, writes are dropped (the file belongs to
    the process that writes the database; what a query computes stays in the memory cache)."""

    def __init__(self, inner: TokenStore) -> None:
        self.inner = inner

    def cached_token_vectors(self, model_id: str, hashes: Sequence[str], workspace: str = DEFAULT_WORKSPACE
                             ) -> dict[str, Any]:
        return self.inner.cached_token_vectors(model_id, hashes, workspace)

    def cache_token_vectors(self, model_id: str, items: Any, workspace: str = DEFAULT_WORKSPACE) -> None:
        return None
