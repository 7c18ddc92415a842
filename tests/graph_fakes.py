"""Test doubles for the graph tests: a scripted LLM that replays extraction JSON, and an embedder with fixed vectors."""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from core.models.llm import LLMRequest, LLMResponse
from core.types import Usage


class ScriptedLLM:
    """Answers every request with `reply(request)` (a JSON-able dict); counts calls; says it is available."""

    name = "scripted"
    available = True
    reason = ""

    def __init__(self, reply: Callable[[LLMRequest], Any], usage: Usage = Usage(100, 20, 0, 0, 0.0001, 1)) -> None:
        self.reply = reply
        self.usage = usage
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest, *, workspace: str = "default", run_id: str = "") -> LLMResponse:
        self.requests.append(request)
        data = self.reply(request)
        return LLMResponse(text="" if isinstance(data, dict) else str(data), model=request.model, usage=self.usage,
                           ms=1.0, data=data if isinstance(data, dict) else None)


def extraction_by_passage(table: Mapping[str, dict[str, Any]]) -> Callable[[LLMRequest], Any]:
    """Reply with table[key] for the first key found in the passage (graph extraction requests)."""

    def reply(req: LLMRequest) -> Any:
        passage = " ".join(b.text for b in req.user)
        for key, data in table.items():
            if key in passage:
                return data
        return {"entities": [], "relations": []}

    return reply


class VectorEmbedder:
    """Fixed vectors for known texts (lower-cased); anything else gets a vector of its own, far from the rest."""

    def __init__(self, vectors: Mapping[str, Sequence[float]], dim: int = 8, model_id: str = "fake-fixed") -> None:
        self.vectors = {k.lower(): np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
        self.dim = dim
        self.model_id = model_id
        self.languages = None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = self.vectors.get(t.lower())
            if v is None:
                # Deterministic filler in the last dimensions, never close to the fixed vectors' first ones.
                h = sum(ord(c) * (j + 1) for j, c in enumerate(re.sub(r"\s+", " ", t.lower())))
                v = np.zeros(self.dim, dtype=np.float32)
                v[self.dim - 1 - h % 3] = 1.0
                v[self.dim - 4] = (h % 97) / 97
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out
