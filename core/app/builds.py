"""Builds the pages start: ingesting uploaded files and contextual-retrieval context builds with their estimates
(core/ingest does the work; LLMError is what a failed Claude call raises)."""
from __future__ import annotations

from core.ingest.context import (
           BuildRequest,
           ContextError,
           coverage,
           estimate_llm_contexts,
           run_build,
)
from core.ingest.pipeline import ingest_files
from core.models.llm import LLMError

__all__ = ["BuildRequest", "ContextError", "LLMError", "coverage", "estimate_llm_contexts", "ingest_files",
           "run_build"]
