"""The GraphRAG section: entity graph build settings and its local and global search stages."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config.base import EXPERT, Section


class GraphConfig(Section):
    """GraphRAG: the entity graph built by `python -m core graph build` or the Graph page, and its two search
    stages. Build settings (builder ... max_levels) take effect at the next build or update."""

    enabled: bool = Field(False, description="run the graph search stages (a graph must be built first)")
    mode: Literal["local", "global", "both"] = Field(
        "local", description="local: entities near the query's and their chunks; global: map-reduce over community "
                             "summaries; both: the two stages")
    fuse_with_text: bool = Field(True, description="put the graph lists into the RRF fusion beside BM25 and dense")
    graph_weight: float = Field(1.0, ge=0, description="RRF weight of each graph list when fused", json_schema_extra=EXPERT)
    k: int = Field(30, ge=1, le=500, description="chunk candidates per graph stage")
    # local search
    hops: int = Field(2, ge=1, le=2, description="local: links followed out from the seed entities")
    node_cap: int = Field(40, ge=1, le=1000, description="local: entities held at most while expanding", json_schema_extra=EXPERT)
    hub_percentile: float = Field(95.0, ge=50, le=100, description="local: nodes above this degree percentile are "
                                                                   "not expanded", json_schema_extra=EXPERT)
    seed_k: int = Field(5, ge=0, le=50, description="local: extra seeds by embedding similarity of node names, beside "
                                                    "the names the query contains; 0 = names only", json_schema_extra=EXPERT)
    seed_min_sim: float = Field(0.55, ge=-1, le=1, description="local: cosine a node name needs to the query to be "
                                                               "a seed", json_schema_extra=EXPERT)
    # global search
    level: int = Field(0, ge=0, le=10, description="global: community level searched (0 = the top, coarsest)", json_schema_extra=EXPERT)
    global_max_communities: int = Field(40, ge=1, le=1000, description="global: map calls at most (cost bound)", json_schema_extra=EXPERT)
    global_top: int = Field(5, ge=1, le=50, description="global: partial answers kept for the reduce step", json_schema_extra=EXPERT)
    global_max_usd: float = Field(0.50, ge=0, description="global: LLM summaries and map calls above this estimate "
                                                          "(USD) are skipped")
    llm_summaries: bool = Field(True, description="with a key: LLM community summaries and map-reduce; without, or "
                                                  "false: extractive")
    # build
    builder: Literal["statistical", "llm"] = Field(
        "statistical", description="statistical: names, identifiers and terms, linked by co-occurrence (offline); "
                                   "llm: entities and relations extracted by the LLM")
    llm_model: str = Field("claude-haiku-4-5", description="model of the llm builder, community summaries and "
                                                           "global map calls")
    max_entities_per_chunk: int = Field(20, ge=2, le=200, description="entities extracted from one chunk at most", json_schema_extra=EXPERT)
    min_phrase_chunks: int = Field(2, ge=1, le=100, description="lower-case terms need this many chunks to count", json_schema_extra=EXPERT)
    merge_threshold: float = Field(0.93, ge=0.5, le=1.0, description="name cosine for merge suggestions", json_schema_extra=EXPERT)
    split_by_type: bool = Field(False, description="key nodes by (name, type): homonyms with different types stay "
                                                   "apart", json_schema_extra=EXPERT)
    max_cluster_size: int = Field(30, ge=2, le=100000, description="communities larger than this split a level down", json_schema_extra=EXPERT)
    max_levels: int = Field(3, ge=1, le=10, description="community levels built at most", json_schema_extra=EXPERT)
    resolution: float = Field(1.0, gt=0, le=100, description="Leiden resolution: higher gives more, smaller "
                                                             "communities", json_schema_extra=EXPERT)
    seed: int = Field(42, description="Leiden random seed: the same graph gives the same communities", json_schema_extra=EXPERT)
    follow_ingest: bool = Field(True, description="when a graph exists, every ingest or delete (page, CLI, Ray) "
                                                  "updates it incrementally; false: the graph stays behind the corpus "
                                                  "and the first change says so, with the command that catches up")
    communities: Literal["local", "full"] = Field(
        "local", description="an update re-clusters: local, only the communities the changed chunks touch (seeded; "
                             "only their summaries are invalidated); full, the whole graph (`graph communities` "
                             "re-clusters everything on demand and compares the two)")


class RaptorConfig(Section):
    """RAPTOR: a tree of cluster summaries over the chunk vectors (`python -m core raptor build`), searched at every
    level as its own list and fused with the others."""

    enabled: bool = Field(False, description="run the raptor stage (a tree must be built first)")
    cluster_size: int = Field(8, ge=2, le=100, description="build: members per cluster on average (k-means with "
                                                           "ceil(n / cluster_size) clusters per level)", json_schema_extra=EXPERT)
    max_levels: int = Field(3, ge=1, le=8, description="build: summary levels at most (a level of one cluster ends "
                                                       "the tree)", json_schema_extra=EXPERT)
    summary_sentences: int = Field(3, ge=1, le=10, description="build: sentences an extractive summary quotes", json_schema_extra=EXPERT)
    k: int = Field(30, ge=1, le=500, description="chunk candidates the stage hands to fusion")
    weight: float = Field(1.0, ge=0, description="RRF weight of the raptor list when fused", json_schema_extra=EXPERT)
    seed: int = Field(42, description="k-means seed: the same vectors give the same tree", json_schema_extra=EXPERT)
    summaries: Literal["auto", "extractive", "llm"] = Field(
        "auto", description="build: who writes a cluster's summary: extractive (its members' most shared sentences, "
                            "verbatim), llm (Claude; extractive, saying so, without a key) or auto (Claude when a key "
                            "is set); each node is labelled with how it was written")
    llm_model: str = Field("claude-haiku-4-5", description="build: the model that writes llm summaries")
    max_usd: float = Field(1.0, ge=0, le=100, description="build: dollars Claude's summaries of one build or update "
                                                          "may cost; a summary whose worst case does not fit what is "
                                                          "left is extractive")
