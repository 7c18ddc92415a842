"""The compression cascade's sections, in stage order: rerank -> prune -> mmr -> expand."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config.base import EXPERT, Section, chosen_in


class RerankConfig(Section):
    """Reorder the fused top_n by reading query and chunk together; hand on the best k."""

    enabled: bool = Field(True, description="run the reranker; false: the stage is skipped")
    method: Literal["late-interaction", "cross-encoder", "llm"] = Field(
        "late-interaction", description="late-interaction: MaxSim over the embedder's token vectors (offline, no "
                                        "extra model); cross-encoder: the CrossEncoder `model`; llm: listwise by "
                                        "`llm_model` (needs a key)")
    model: str = Field("cross-encoder/ms-marco-MiniLM-L-6-v2", description="cross-encoder name or local path")
    llm_model: str = Field("claude-haiku-4-5", description="model of the llm method")
    top_n: int = Field(50, ge=1, le=1000, description="fused candidates the reranker reads")
    k: int = Field(10, ge=1, le=1000, description="candidates handed on")
    use_context: bool = Field(True, description="read the chunk's stored context (contextual retrieval) with it, "
                                                "when the searched variant has one", json_schema_extra=EXPERT)
    combine: Literal["replace", "rrf"] = Field(
        "rrf", description="replace: the reranker's order alone; rrf: reciprocal-rank fusion of the incoming order "
                           "(weight input_weight) and the reranker's",
        json_schema_extra=chosen_in("bench/results/generalise.json",
                                    "on the four evaluation sets the blend keeps the fused recall where the "
                                    "reranker alone loses it and most of the reranker's gain where it helps", expert=True))
    input_weight: float = Field(1.0, ge=0, le=10, description="rrf: weight of the incoming order", json_schema_extra=EXPERT)
    rrf_k: int = Field(60, ge=1, le=10000, description="rrf: the RRF constant of the blend", json_schema_extra=EXPERT)
    read_queries: bool = Field(
        True, description="also score every candidate against the queries the transforms generated for the question "
                          "(decomposition's sub-questions and bridge queries, multi-query's rewrites; not HyDE's "
                          "pseudo-document) and keep its best score, so a page a sub-question found is judged by "
                          "the question it answers; late interaction only (one query encoding each)",
        json_schema_extra=chosen_in("bench/results/rerank_gate.json",
                                    "the rerank lost to its own fused list where the transforms had added pages "
                                    "the whole question does not resemble; read on one half of each dev set's "
                                    "questions (question-id hash), reported on the other"))
    keep_top: int = Field(0, ge=0, le=100, description="floor: the incoming list's first keep_top stay within the "
                                                       "first keep_within of the reranked list (0: no floor)",
                          json_schema_extra=chosen_in("bench/results/rerank_gate.json",
                                                      "off since read_queries: the floor (5, chosen on twowiki's "
                                                      "routed lists in cascade_gate_twowiki.json) held the bridge "
                                                      "pages the question alone could not judge, and with them held "
                                                      "every gain of the reranker in the top 5 (code's chunk-level "
                                                      "Pass@5, twowiki's single-shot cascade); 0, 3 and 5 compared "
                                                      "on one half of each dev set, reported on the other",
                                                      expert=True))
    keep_within: int = Field(5, ge=1, le=1000, description="floor: the rank the incoming first keep_top are never "
                                                           "pushed below", json_schema_extra=EXPERT)


class PruneConfig(Section):
    """Keep only the sentences that matter to the query, under a token budget. Whole sentences only: identifiers,
    SKUs, versions and sums are never cut."""

    enabled: bool = Field(True, description="prune sentences; false: whole chunks are handed on")
    token_budget: int = Field(550, ge=16, le=100000,
                              description="tokens handed on, all chunks together (estimated LLM tokens)",
                              json_schema_extra=chosen_in("bench/results/cascade_compression.json",
                                                          "the smallest budget of the sweep whose recall@10 (hybrid "
                                                          "scorer) stays within 2 points of the unpruned rerank "
                                                          "top-10; tighter budgets trade recall for tokens"))
    scorer: Literal["hybrid", "hybrid-encoded", "embedder", "reranker"] = Field(
        "hybrid", description="hybrid: sentence BM25 plus the cosine of the sentence's pooled token vectors (no "
                              "model call); hybrid-encoded: BM25 plus an encoded sentence (slower, stronger under "
                              "tight budgets); embedder: that cosine alone; reranker: the rerank model's scores")
    chunk_weight: float = Field(1.0, ge=0, description="how much the chunk's rerank score lifts its sentences", json_schema_extra=EXPERT)
    keep_neighbours: bool = Field(True, description="a kept sentence opening with 'It', 'This', 'However'... keeps "
                                                    "the one before", json_schema_extra=EXPERT)
    max_unit_tokens: int = Field(80, ge=8, le=4096, description="longer sentences are split at line breaks", json_schema_extra=EXPERT)
    keep_all: bool = Field(True, description="a chunk none of whose sentences fit still hands on its best one "
                                             "(over budget, counted in the trace), so the list keeps its length", json_schema_extra=EXPERT)


class MMRConfig(Section):
    """Collapse exact and near duplicates, then reorder by maximal marginal relevance."""

    enabled: bool = Field(True, description="collapse duplicates and diversify; false: the stage is skipped")
    lam: float = Field(0.7, ge=0, le=1, description="MMR lambda: 1 = relevance only, 0 = diversity only", json_schema_extra=EXPERT)
    dedup_threshold: float = Field(0.95, ge=0, le=1, description="cosine at or above which a chunk is a duplicate", json_schema_extra=EXPERT)
    k: int = Field(10, ge=1, le=1000, description="candidates handed on")
    keep_top: int = Field(0, ge=0, le=100, description="floor: the incoming list's first keep_top (after duplicates "
                                                       "are collapsed) stay within the first keep_within of the "
                                                       "diversified list (0: no floor)",
                          json_schema_extra=chosen_in("bench/results/generalise_paired_twowiki.json",
                                                      "0: a floor of 5 cost twowiki's single-shot cascade 3.3 "
                                                      "points of recall@5 on both halves of its questions (MMR "
                                                      "brings a second gold page up from below the top 5 in 23 "
                                                      "questions and pushes one out in 2)", expert=True))
    keep_within: int = Field(5, ge=1, le=1000, description="floor: the rank the incoming first keep_top are never "
                                                           "pushed below", json_schema_extra=EXPERT)


class CascadeGuardConfig(Section):
    """Step a cascade stage (rerank, prune, MMR) aside in a workspace whose own evaluation shows it losing recall
    against the list it read (core/cascade/guard.py): the stage knows it from the workspace's golden set."""

    enabled: bool = Field(True, description="read the workspace's newest evaluation run in which each stage ran; a "
                                            "stage losing recall there beyond noise hands its input on unchanged")
    k: int = Field(5, ge=1, le=100, description="the cutoff of the recall compared (recall@k of the stage's own list "
                                                "against its input's)", json_schema_extra=EXPERT)
    z: float = Field(1.96, ge=0, le=10, description="standard errors the mean paired loss must exceed (1.96: a "
                                                    "two-sided 95% interval that excludes zero)", json_schema_extra=EXPERT)
    min_loss: float = Field(0.5, ge=0, le=100, description="the smallest mean loss, in points of recall@k, that "
                                                           "steps a stage aside", json_schema_extra=EXPERT)
    min_questions: int = Field(20, ge=1, le=100000, description="questions with gold the run must have scored for "
                                                                "the stage before its verdict counts", json_schema_extra=EXPERT)


class ExpandConfig(Section):
    """Retrieve small, hand over more: the parent section, or n sentences either side of what was kept."""

    enabled: bool = Field(False, description="expand the kept text; false: the stage is skipped")
    mode: Literal["window", "parent"] = Field(
        "window", description="window: sentences either side of the kept text; parent: the chunk's heading section")
    window: int = Field(2, ge=0, le=50, description="sentences added on each side (window mode)")
    parent_max_tokens: int = Field(1000, ge=16, le=100000, description="a longer parent is cut around the chunk", json_schema_extra=EXPERT)
