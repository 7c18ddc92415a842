"""Embedders for the Ray tests (tests/test_ray.py, tests/test_ray_eval.py). They live in a module of their own because
Ray actors import them by name in their own processes."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from tests.fakes import HashEmbedder


class TokenHashEmbedder(HashEmbedder):
    """A HashEmbedder whose 'forward pass' also gives per-token vectors, as the ONNX runtimes do, so ingest (either
    engine) stores late-interaction token vectors. Tokens are whitespace words; rows depend on word and position."""

    def encode_with_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list]:
        vecs = self.encode(texts)
        out = []
        for t in texts:
            spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", t)]
            ids = [int(hashlib.md5(t[a:b].encode()).hexdigest()[:6], 16) % 30000 for a, b in spans]
            rows = np.array([[(i * 7 + j * 3 + k) % 11 - 5.0 for k in range(8)] for j, i in enumerate(ids)],
                            dtype=np.float32).reshape(len(ids), 8)
            out.append((ids, spans, rows))
        return vecs, out

    def window_encoder(self):  # noqa: ANN201 - only texts longer than one forward need it; none here are
        raise AssertionError("no chunk in these tests needs windows")


class LoggingEmbedderFactory:
    """Builds, inside each Ray actor, an embedder that appends every text it encodes to a log file (so a test counts
    what was embedded across processes) and, while `kill_marker` exists, kills its process on the first encode of a
    batch holding `kill_text`: the marker is removed first, so the retried batch goes through. `tokens`: a
    TokenHashEmbedder (ingest stores token vectors) instead of a plain HashEmbedder."""

    def __init__(self, log: Path, kill_marker: Path | None = None, kill_text: str = "", *, tokens: bool = False) -> None:
        self.log, self.kill_marker, self.kill_text, self.tokens = str(log), str(kill_marker or ""), kill_text, tokens

    def __call__(self) -> HashEmbedder:
        return (_LoggingTokenHash if self.tokens else _LoggingHash)(self)


class _LogAndKill:
    spec: LoggingEmbedderFactory

    def __init__(self, spec: LoggingEmbedderFactory) -> None:
        super().__init__()
        self.spec = spec

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        s = self.spec
        if s.kill_marker and any(s.kill_text in t for t in texts) and os.path.exists(s.kill_marker):
            os.remove(s.kill_marker)
            os._exit(1)  # the actor's process dies mid-batch, as an OOM kill or a lost node would end it
        with open(s.log, "a") as f:
            f.writelines(t.replace("\n", " ") + "\n" for t in texts)
        return super().encode(texts)  # type: ignore[misc]


class _LoggingHash(_LogAndKill, HashEmbedder):
    pass


class _LoggingTokenHash(_LogAndKill, TokenHashEmbedder):
    pass
