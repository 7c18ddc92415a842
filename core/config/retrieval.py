"""First-stage retrieval sections: BM25, dense vectors and their reciprocal-rank fusion."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config.base import EXPERT, Section, chosen_in


class BM25Config(Section):
    """Lexical retrieval: BM25 over the chunks' search tokens."""

    enabled: bool = Field(True, description="run the BM25 list; false: it is skipped")
    k: int = Field(50, ge=1, le=1000, description="candidates the BM25 list hands on")
    k1: float = Field(1.2, gt=0, description="term-frequency saturation: higher lets repeated terms count longer", json_schema_extra=EXPERT)
    b: float = Field(0.75, ge=0, le=1, description="document-length normalisation: 0 = none, 1 = full", json_schema_extra=EXPERT)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
        "lucene", description="BM25 variant (idf and term-frequency formulas, as bm25s names them)", json_schema_extra=EXPERT)
    split_identifiers: bool = Field(True, description="also index the parts of camelCase, snake_case and dotted "
                                                      "identifiers beside the whole identifier", json_schema_extra=EXPERT)
    stem: bool = Field(True, description="stem words (English and Russian Snowball stemmers) so word forms match", json_schema_extra=EXPERT)


class DenseConfig(Section):
    """Dense retrieval: cosine of the query vector against the chunk vectors."""

    enabled: bool = Field(True, description="run the dense list; false: it is skipped")
    k: int = Field(50, ge=1, le=1000, description="candidates the dense list hands on")


class FusionConfig(Section):
    """Reciprocal-rank fusion of the BM25, dense, graph and transform lists into one."""

    enabled: bool = Field(True, description="fuse the lists; false: the cascade starts from one list (dense, or "
                                                 "BM25 when the embedder cannot read the query)")
    method: Literal["rrf", "weighted_rrf"] = Field(
        "rrf", description="rrf: every list weighs 1; weighted_rrf: BM25 and dense take the weights below")
    rrf_k: int = Field(60, ge=1, le=10000, description="RRF constant: score = Σ weight / (rrf_k + rank); larger "
                                                       "flattens the difference between ranks", json_schema_extra=EXPERT)
    bm25_weight: float = Field(1.0, ge=0, description="weighted_rrf: weight of the BM25 list")
    dense_weight: float = Field(1.0, ge=0, description="weighted_rrf: weight of the dense list")
    k: int = Field(20, ge=1, le=1000, description="fused candidates handed on (more when the reranker reads more)")
    foreign_dense_weight: float = Field(0.0, ge=0, le=1,
                                        description="factor on the dense and graph weights when the embedder does "
                                                    "not cover the query's language; 0 = drop those lists", json_schema_extra=EXPERT)
    multilingual_weight: float = Field(1.0, ge=0, description="weight of the multilingual dense list (dense_ml) "
                                                               "in fusion when it runs", json_schema_extra=EXPERT)
    cross_lingual_bm25_weight: float = Field(
        0.0, ge=0, le=1, description="factor on the BM25 weight when the question's language is none of the corpus's "
                                     "and the multilingual list ran (BM25 then matches only names, numbers and "
                                     "shared words); 0 = drop BM25",
        json_schema_extra=chosen_in("bench/results/xquad.json",
                                    "the best recall@1 of 0, 0.1, 0.25, 0.33, 0.5, 1 on de->en articles 40-43; "
                                    "reported on de->en articles 44-47 and ru->en ('weight_choice')", expert=True))
