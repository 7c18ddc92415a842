"""The collections section: which of a workspace's collections (knowledge bases) a question is searched in."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config.base import Section, chosen_in

_CHOSEN = ("on split A of bench/kb_collections.py (the sample corpus's train questions and half the scifact claims): "
           "the right collection searched for at least 98% of them with the fewest extra collections; the file "
           "reports split B")


class CollectionsConfig(Section):
    """Collection routing (core/route/collections.py): in a workspace with several collections, a `collections`
    stage picks those a question needs from their profiles (or Claude from their descriptions), and the retrieval
    stages search only them."""

    enabled: bool = Field(True, description="pick the collections each question is searched in; false: every "
                                            "collection of the workspace is searched")
    method: Literal["auto", "offline", "llm"] = Field(
        "auto", description="auto: Claude when a key is set, else the offline profiles; offline: the profiles "
                            "(vocabulary + centroid); llm: Claude (the profiles without a key, saying so)")
    model: str = Field("claude-haiku-4-5", description="model that picks the collections")
    only: str = Field("", description="comma-separated collection names: search these alone (the Search Lab's "
                                      "override); \"\" = the router decides")
    min_share: float = Field(
        0.3, ge=0, le=1, description="offline: a collection other than the best is searched too when its share of "
                                     "the evidence reaches this (the router is unsure)",
        json_schema_extra=chosen_in("bench/results/collections.json", _CHOSEN, expert=True))
    temperature: float = Field(
        0.01, gt=0, le=1, description="offline: softmax temperature of the centroid cosines",
        json_schema_extra=chosen_in("bench/results/collections.json", _CHOSEN, expert=True))
    centroid_weight: float = Field(
        0.0, ge=0, le=1, description="offline: weight of the centroid cosine's share beside the vocabulary's (a "
                                     "question whose language the embedder does not read uses the vocabulary alone)",
        json_schema_extra=chosen_in("bench/results/collections.json", _CHOSEN + " (0: the vocabulary alone did as "
                                    "well on split A, so the centroid is shown in the trace but not weighed)", expert=True))
