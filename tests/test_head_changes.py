"""The fused and mmr stages say what they changed at the head of the list (issue #44 item 5): which of the
question's own first five the transforms' lists pushed out (and brought in), which incoming first five diversity
moved down (and which it brought up)."""
from __future__ import annotations

from typing import Sequence

from core.cascade.stage import MMR_HEAD, mmr_step
from core.config import FusionConfig, MMRConfig
from core.retrieve.stage import HEAD, fuse_step
from core.types import Candidate, Chunk
from tests.fakes import HashEmbedder


def _list(ids: Sequence[str], stage: str) -> list[Candidate]:
    return [Candidate(cid, f"d-{cid}", f"text {cid}", 1.0 / r, r, {"stage": stage}) for r, cid in enumerate(ids, 1)]


def test_fused_stage_names_what_the_transform_lists_pushed_out_of_the_head() -> None:
    own = ["a", "b", "c", "d", "e", "f"]
    lists = {"bm25": _list(own, "bm25"), "dense": _list(own, "dense"), "decompose": _list(["x", "y"], "decompose")}
    out = fuse_step(lists, FusionConfig(), graph_weight=1.0, raptor_weight=1.0, transform_weight=2.0,
                    rerank_top_n=None)
    head = [c.chunk_id for c in out.candidates[:HEAD]]
    assert set(head) == {"a", "b", "c", "x", "y"}
    info = out.info.to_dict()
    assert info["transforms"] == ["decompose"]
    assert info["lifted"] == ["x", "y"] or set(info["lifted"]) == {"x", "y"}
    assert info["displaced"] == ["d", "e"]
    assert any("pushing out d, e" in n for n in out.notes)


def test_fused_stage_without_transform_lists_keeps_its_record() -> None:
    own = ["a", "b", "c"]
    out = fuse_step({"bm25": _list(own, "bm25"), "dense": _list(own[::-1], "dense")}, FusionConfig(),
                    graph_weight=1.0, raptor_weight=1.0, transform_weight=2.0, rerank_top_n=None)
    assert out.info.to_dict() == {"rrf_k": 60, "weights": [1.0, 1.0]}
    # a transform list that only agrees with the question's own head changes nothing there, and says nothing
    same = fuse_step({"bm25": _list(own, "bm25"), "dense": _list(own, "dense"), "hyde": _list(["a"], "hyde")},
                     FusionConfig(), graph_weight=1.0, raptor_weight=1.0, transform_weight=2.0, rerank_top_n=None)
    assert same.info.to_dict()["displaced"] == [] and same.info.to_dict()["lifted"] == []
    assert not any("transforms' lists" in n for n in same.notes)


class _NoChunks:
    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = "default") -> dict[str, Chunk]:
        return {}


def test_mmr_stage_names_what_diversity_moved_across_the_head() -> None:
    texts = ["alpha beta gamma one", "alpha beta gamma two", "alpha beta gamma three", "alpha beta gamma four",
             "alpha beta gamma five", "delta epsilon zeta", "eta theta iota", "kappa lambda mu"]
    pool = [Candidate(f"c{i}", f"d{i}", t, 1.0 - i / 20, i + 1) for i, t in enumerate(texts)]
    out = mmr_step(pool, MMRConfig(lam=0.3, dedup_threshold=0.999, k=8), corpus=_NoChunks(),
                   embedder=HashEmbedder(), cache=None, workspace="default")
    head_in = [c.chunk_id for c in pool[:MMR_HEAD]]
    head_out = [c.chunk_id for c in out.candidates[:MMR_HEAD]]
    info = out.info.to_dict()
    assert info["pushed_out"] == [c for c in head_in if c not in head_out] and info["pushed_out"]
    assert info["brought_in"] == [c for c in head_out if c not in head_in]
    assert any(n.startswith(f"diversity changed the first {MMR_HEAD}:") for n in out.notes)
    # relevance alone changes nothing: no record, no note
    still = mmr_step(pool, MMRConfig(lam=1.0, dedup_threshold=0.999, k=8), corpus=_NoChunks(),
                     embedder=HashEmbedder(), cache=None, workspace="default")
    assert "pushed_out" not in still.info.to_dict()
    assert not any(n.startswith("diversity changed") for n in still.notes)
