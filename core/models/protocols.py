"""The model layer's protocols: an Embedder (texts to vectors), a TokenEncoder (its contextual token vectors), and
the optional capabilities an embedder may have, each a runtime-checkable Protocol that code asks with isinstance."""
from __future__ import annotations

from typing import Protocol, Sequence, TypeGuard, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors. `model_id` goes on every stored vector."""

    model_id: str
    languages: frozenset[str] | None  # None: multilingual / unknown-but-broad

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class TokenEncoder(Protocol):
    """A transformer's tokenizer and forward pass: contextual token vectors of an embedder. `model_id` must equal the dense embedder's: late vectors
    are compared with its query vectors."""

    model_id: str
    window_tokens: int  # content tokens one forward pass can take (without special tokens)

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> list[np.ndarray]: ...


# One text's token vectors from a forward pass: (token ids, character offsets, rows), special tokens left out.
TokenRows = tuple[list[int], list[tuple[int, int]], np.ndarray]


@runtime_checkable
class TokenEmbedder(Embedder, Protocol):
    """An Embedder with the optional token capability: its sentence forward pass also gives each text's token vectors
    (None for a text the sentence encoding truncated), so ingest and the answer cache's verifier need no second
    forward."""

    def encode_with_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[TokenRows | None]]: ...


@runtime_checkable
class HasTokenEncoder(Protocol):
    """Optional capability of an Embedder: a TokenEncoder of its own (late interaction, late chunking, and the long
    texts a TokenEmbedder's sentence forward truncated). Without it core.models.tokens wraps a transformer's model."""

    def window_encoder(self) -> TokenEncoder: ...


class SharedForwardEmbedder(TokenEmbedder, HasTokenEncoder, Protocol):
    """An Embedder with both token capabilities (the ONNX runtimes): ingest stores chunk token vectors from the forward
    pass that makes the chunk vectors."""


def shares_token_forward(embedder: Embedder) -> TypeGuard[SharedForwardEmbedder]:
    """Whether this embedder gives token vectors from its sentence forward pass and reads longer texts in windows."""
    return isinstance(embedder, TokenEmbedder) and isinstance(embedder, HasTokenEncoder)


@runtime_checkable
class CountsTokens(Protocol):
    """An embedder that says how many of its own tokens a text is (no special tokens; a count may stop just past
    max_seq_length) and how many it reads in one forward (max_seq_length, with [CLS] and [SEP]): ingest cuts every
    chunk to fit that window, so no chunk text goes unread."""

    max_seq_length: int

    def token_count(self, text: str) -> int: ...


@runtime_checkable
class KnowsDimension(Protocol):
    """Optional capability of an Embedder: its vector width without encoding a probe text."""

    dim: int


@runtime_checkable
class DeclaresLanguages(Protocol):
    """A model (embedder, reranker) that says which languages it reads; None: multilingual or unknown-but-broad."""

    languages: frozenset[str] | None


def model_languages(model: object) -> frozenset[str] | None:
    """The languages a model object declares (DeclaresLanguages); None when it declares none."""
    return model.languages if isinstance(model, DeclaresLanguages) else None


_ENGLISH_ONLY_HINTS = ("all-minilm", "all-mpnet", "msmarco", "ms-marco", "bge-small-en", "bge-base-en",
                       "bge-large-en", "e5-small-v2", "e5-base-v2", "gte-small", "gte-base")
_MULTILINGUAL_HINTS = ("multilingual", "bge-m3", "labse", "paraphrase-xlm", "distiluse")


def declared_languages(model_name: str) -> frozenset[str] | None:
    low = model_name.lower()
    if any(h in low for h in _MULTILINGUAL_HINTS):
        return None
    if any(h in low for h in _ENGLISH_ONLY_HINTS):
        return frozenset({"en"})
    return None


@runtime_checkable
class QueryEmbedder(Protocol):
    """Optional capability of an Embedder trained with separate query and passage inputs (e5's prefixes):
    `encode` embeds passages, `encode_queries` questions."""

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...


def encode_query(embedder: Embedder, text: str) -> np.ndarray:
    """One question's vector: the query side of a QueryEmbedder, else the embedder's only side."""
    if isinstance(embedder, QueryEmbedder):
        return np.asarray(embedder.encode_queries([text]), dtype=np.float32)[0]
    return np.asarray(embedder.encode([text]), dtype=np.float32)[0]
