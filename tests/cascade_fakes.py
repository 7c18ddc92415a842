"""Test doubles for the compression cascade: a token encoder whose vectors follow a synonym table, an embedder
that offers it, and a scripted listwise LLM."""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping, Sequence

import numpy as np

from core.types import Usage
from tests.fakes import HashEmbedder

_TOKEN = re.compile(r"\w+|[^\w\s]")


def _seed(word: str) -> int:
    return int(hashlib.md5(word.encode()).hexdigest()[:8], 16)


class ConceptWindowEncoder:
    """Words of one concept (per `synonyms`) share a token id and a vector; every other word gets its own random
    unit vector. So MaxSim "understands" synonyms that share no letters, and nothing else: a tiny, exact model of
    what a contextual encoder adds over lexical matching. Counts the windows it encodes."""

    def __init__(self, synonyms: Mapping[str, str] | None = None, *, dim: int = 48, window_tokens: int = 64,
                 model_id: str = "fake-concepts") -> None:
        self.synonyms = {k.lower(): v.lower() for k, v in (synonyms or {}).items()}
        self.dim = dim
        self.window_tokens = window_tokens
        self.model_id = model_id
        self.windows_encoded = 0
        self._vocab: dict[int, str] = {}

    def concept(self, word: str) -> str:
        return self.synonyms.get(word.lower(), word.lower())

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        ids, offsets = [], []
        for m in _TOKEN.finditer(text):
            c = self.concept(m.group(0))
            tid = _seed(c) % 1_000_000
            self._vocab[tid] = c
            ids.append(tid)
            offsets.append((m.start(), m.end()))
        return ids, offsets

    def vector(self, tid: int) -> np.ndarray:
        v = np.random.default_rng(tid).normal(size=self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        self.windows_encoded += len(windows)
        return [np.stack([self.vector(t) for t in w]) if len(w) else np.zeros((0, self.dim), np.float32)
                for w in windows]


class ConceptEmbedder(HashEmbedder):
    """HashEmbedder (lexical sentence vectors) that also offers token vectors from a ConceptWindowEncoder."""

    def __init__(self, synonyms: Mapping[str, str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.encoder = ConceptWindowEncoder(synonyms, model_id=self.model_id)

    def window_encoder(self) -> ConceptWindowEncoder:
        return self.encoder


class ScriptedListwiseLLM:
    """An available LLM that answers every request with the next scripted ranking (or raises it)."""

    name = "scripted"
    available = True
    reason = ""

    def __init__(self, replies: Sequence[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def complete(self, request: Any, *, workspace: str = "default", run_id: str = "") -> Any:
        from core.models.llm import LLMResponse

        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return LLMResponse(text="", model=request.model, usage=Usage(input_tokens=100, output_tokens=10, usd=0.001,
                                                                     calls=1), ms=1.0, data=reply)


class FixedReranker:
    """Scores texts by a table (unknown texts 0): for pipeline tests that need a known rerank order."""

    name = "fixed:test"

    def __init__(self, table: Mapping[str, float]) -> None:
        self.table = dict(table)
        self.calls = 0

    def score(self, query: str, texts: Sequence[str], *, workspace: str = "default") -> Any:
        from core.cascade.rerank import RerankScores

        self.calls += 1
        return RerankScores(np.array([next((v for k, v in self.table.items() if k in t), 0.0) for t in texts],
                                     dtype=np.float32), 0, len(texts))
