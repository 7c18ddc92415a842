"""RAPTOR (core/graph/raptor.py, core/store/raptor.py): seeded clustering, verbatim summaries with provenance, the
stored tree, and the `raptor` stage fused like the other lists."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.graph.raptor import build_tree, extractive_summary, kmeans, plan_raptor, raptor_search
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.types import Chunk
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture

WS = "default"


def test_kmeans_is_seeded_and_splits_two_groups() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal([1, 0, 0], 0.05, (10, 3))
    b = rng.normal([0, 1, 0], 0.05, (10, 3))
    x = np.vstack([a, b])
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    labels = kmeans(x, 2, seed=3)
    assert len(set(labels[:10])) == 1 and len(set(labels[10:])) == 1 and labels[0] != labels[10]
    assert np.array_equal(labels, kmeans(x, 2, seed=3))


def test_extractive_summary_quotes_the_most_shared_sentences_verbatim() -> None:
    texts = ["# Pumps\nPump stations report pressure hourly. Lunch is served at noon today.",
             "Pump stations report flow and pressure to the control room.", "Pressure alarms reach pump stations."]
    s = extractive_summary(texts, sentences=2)
    # mean member count of their words: 2.25 and 2.2; the lunch sentence (words no other member uses) and the
    # heading are left out; the quoted ones keep the members' order
    assert s == "Pump stations report pressure hourly. Pressure alarms reach pump stations."
    assert plan_raptor(100, cluster_size=8, max_levels=3, seconds_per_summary=0.5).levels == 3
    assert plan_raptor(5, cluster_size=8, max_levels=3, seconds_per_summary=0.5).nodes == 1
    assert plan_raptor(100, cluster_size=8, max_levels=3, seconds_per_summary=0.5).est_seconds == 0.5 * (13 + 2 + 1)


class _Fixed:
    model_id = "fixed"
    languages = None

    def encode(self, texts):
        return np.asarray([[1.0, float(len(t) % 7), 0.5, 0.0, 0.0, 0.0] for t in texts], dtype=np.float32)


def test_build_tree_levels_and_provenance() -> None:
    ids = [f"c{i}" for i in range(12)]
    texts = [f"Sentence number {i} is about the pump station network here." for i in range(12)]
    vecs = np.eye(12, dtype=np.float32)[:, :6] + 0.01
    nodes, nv = build_tree(ids, texts, vecs, _Fixed(), cluster_size=4, max_levels=3, summary_sentences=1, seed=1,
                           corpus_version=7)
    levels = [n.level for n in nodes]
    assert levels[0] == 1 and max(levels) >= 2 and len(nv) == len(nodes)
    top = [n for n in nodes if n.level == max(levels)]
    assert sum(len(n.chunk_ids) for n in top) == 12  # every chunk lies under the top level, once
    assert all(n.corpus_version == 7 and n.model_id == "fixed" and n.mode == "extractive" for n in nodes)
    assert all(n.text in texts for n in nodes if n.level == 1)  # one sentence quoted verbatim
    chunks = {cid: Chunk(cid, "d", 0, t, 0, len(t)) for cid, t in zip(ids, texts)}
    hits = raptor_search(nv[0], nodes, nv, ids, vecs, lambda want: {c: chunks[c] for c in want}, k=5)
    assert len(hits.candidates) == 5 and any("raptor_node" in c.meta for c in hits.candidates)


DOCS = [("a.md", b"# Pumps\n\nPump stations report pressure hourly to the control room.\n\n"
                 b"The pump station network covers three regions.\n"),
        ("b.md", b"# Travel\n\nThe daily meal allowance abroad is 65 euros.\n\nTrain travel is preferred to flights.\n")]


def test_the_raptor_stage_is_skipped_until_built_then_fused(deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({"raptor.enabled": True, "router.enabled": False,
                                           "answer_cache.enabled": False, "rerank.enabled": False})
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)
    before = run_query("pump station pressure", cfg, deps, log=False).stage("raptor")
    assert before is not None and before.skipped is not None and "raptor build" in before.skipped
    ids, matrix = deps.store.corpus.vectors(deps.embedder.model_id, "raw", WS)
    nodes, vecs = build_tree(ids, [c.text for c in deps.store.corpus.chunks_by_id(ids, WS).values()], matrix,
                             deps.embedder, cluster_size=2, max_levels=2, summary_sentences=1, seed=1,
                             corpus_version=deps.store.corpus.corpus_version(WS))
    deps.store.raptor.replace(WS, nodes, vecs)
    stored, sv = deps.store.raptor.nodes(WS)
    assert [n.node_id for n in stored] == sorted(n.node_id for n in nodes) and sv.shape == vecs.shape
    trace = run_query("pump station pressure", cfg, deps, log=False)
    stage = trace.stage("raptor")
    assert stage is not None and stage.skipped is None and stage.candidates
    fused = trace.stage("fused")
    assert fused is not None and "rank_raptor" in fused.candidates[0].meta  # fused beside BM25 and dense
    assert any(c.meta.get("rank_raptor") == 1 for c in fused.candidates)


# -- incremental update, Claude summaries under a cap, the drawing ----------------------------------------------------
def _groups(n: int, dim: int = 6, seed: int = 0) -> tuple[list[str], list[str], np.ndarray]:
    """n chunks in three well-separated directions (c0 in group 0, c1 in group 1, ...)."""
    rng = np.random.default_rng(seed)
    ids = [f"c{i}" for i in range(n)]
    texts = [f"Chunk {i} talks about topic {i % 3} and the shared pump station network." for i in range(n)]
    base = np.eye(dim, dtype=np.float32)[[i % 3 for i in range(n)]]
    return ids, texts, base + rng.normal(0, 0.02, (n, dim)).astype(np.float32)


def test_update_adds_new_chunks_to_their_nearest_cluster_and_rewrites_only_those_and_their_ancestors() -> None:
    from core.graph.raptor import update_tree

    ids, texts, vecs = _groups(18)
    kw = dict(cluster_size=3, max_levels=3, summary_sentences=1, seed=1)
    old, ov = build_tree(ids[:15], texts[:15], vecs[:15], _Fixed(), corpus_version=1, **kw)
    same, sv, rep = update_tree(old, ov, ids[:15], texts[:15], vecs[:15], _Fixed(), corpus_version=1, **kw)
    assert rep.mode == "unchanged" and same == old and np.array_equal(sv, ov)
    # three new chunks (one per direction) and one removed
    keep = [i for i in range(18) if i != 4]
    new, nv, rep = update_tree(old, ov, [ids[i] for i in keep], [texts[i] for i in keep], vecs[keep], _Fixed(),
                               corpus_version=2, **kw)
    assert rep.mode == "incremental" and (rep.added, rep.removed) == (3, 1) and len(nv) == len(new)
    l1 = {n.node_id: n for n in new if n.level == 1}
    assert {c for n in l1.values() for c in n.children} == {ids[i] for i in keep}  # every leaf once
    assert sum(len(n.children) for n in l1.values()) == len(keep)
    for c in ("c15", "c16", "c17"):  # each joined a cluster of its own direction
        home = next(n for n in l1.values() if c in n.children)
        assert all(int(m[1:]) % 3 == int(c[1:]) % 3 for m in home.children)
    rewritten = {n.node_id for n in new if n.corpus_version == 2}
    untouched = [n for n in new if n.node_id not in rewritten]
    assert rewritten and untouched and len(rewritten) == rep.rewritten  # only the changed branches were rewritten
    before = {n.node_id: (n, ov[i]) for i, n in enumerate(old)}
    for n in untouched:
        assert n == before[n.node_id][0] and np.allclose(nv[new.index(n)], before[n.node_id][1])
    top = max(n.level for n in new)
    assert sorted(c for n in new if n.level == top for c in n.chunk_ids) == sorted(ids[i] for i in keep)
    # a cluster grown past twice the cluster size splits; most leaves changed: a full build
    grown, _, rep = update_tree(old, ov, ids[:15] + [f"x{i}" for i in range(7)], texts[:15] + ["Extra text here "
                                "about the pump stations and their topic zero network."] * 7,
                                np.vstack([vecs[:15], _groups(21, seed=5)[2][::3]]), _Fixed(), corpus_version=3, **kw)
    n1 = sum(1 for n in old if n.level == 1)
    assert rep.mode == "incremental" and sum(1 for n in grown if n.level == 1) > n1  # the grown cluster split
    assert sorted(c for n in grown if n.level == 1 for c in n.children) == sorted(ids[:15] + [f"x{i}" for i in
                                                                                              range(7)])
    _, _, rep = update_tree(old, ov, ids[:3], texts[:3], vecs[:3], _Fixed(), corpus_version=4, **kw)
    assert rep.mode == "full" and "changed" in rep.why


def test_claude_summaries_are_labelled_and_stop_at_the_dollar_cap(deps: Deps, anthropic_stub: Stub) -> None:
    from core.app.raptor_ops import build_raptor, raptor_dot, raptor_plan
    from core.models.llm import AnthropicLLM, worst_usd
    from core.graph.raptor import ClaudeSummaries

    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    anthropic_stub.state.responder = lambda body: '{"summary": "Pump stations and travel rules, summarised."}'
    deps.llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None)
    one = ClaudeSummaries(deps.llm, "claude-haiku-4-5", 1.0, 1).request(["Pump stations report pressure."])
    cfg = PipelineConfig().with_overrides({"raptor.cluster_size": 2, "raptor.max_usd": 5.0})
    plan = raptor_plan(deps, cfg, WS)
    assert plan.worst_usd > 0 and "Claude summaries at most" in plan.label()
    out = build_raptor(deps, cfg, WS)
    nodes, _ = deps.store.raptor.nodes(WS)
    assert out.llm_calls == len(nodes) == len(anthropic_stub.state.messages()) and out.usd > 0
    assert all(n.mode == "llm" and n.text == "Pump stations and travel rules, summarised." for n in nodes)
    assert 'fillcolor' in raptor_dot(deps.store, WS)  # Claude's nodes are drawn filled
    # a cap below one call's worst case: no call, every summary extractive and labelled, the reason said
    sent = len(anthropic_stub.state.messages())
    # (another model: the summaries haiku wrote are kept and would be reused for free, issue #46 item 5)
    out = build_raptor(deps, cfg.with_overrides({"raptor.max_usd": worst_usd(one) / 2,
                                                 "raptor.llm_model": "claude-sonnet-4-5"}), WS)
    nodes, _ = deps.store.raptor.nodes(WS)
    assert len(anthropic_stub.state.messages()) == sent and out.llm_calls == 0
    assert all(n.mode == "extractive" for n in nodes) and any("raptor.max_usd" in n for n in out.notes)
    # extractive asked for: no call at all, even with a key
    build_raptor(deps, cfg.with_overrides({"raptor.summaries": "extractive"}), WS)
    assert len(anthropic_stub.state.messages()) == sent


def test_raptor_dot_draws_the_tree_top_down_within_its_node_cap(deps: Deps) -> None:
    from core.app.raptor_ops import build_raptor, raptor_dot

    six = [(f"d{i}.md", f"# Note {i}\n\nNote {i} says the pump station {i} reports pressure hourly.\n".encode())
           for i in range(6)]
    ingest_files(six, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    assert raptor_dot(deps.store, WS) == ""
    out = build_raptor(deps, PipelineConfig().with_overrides({"raptor.cluster_size": 2}), WS)
    nodes, _ = deps.store.raptor.nodes(WS)
    dot = raptor_dot(deps.store, WS)
    assert dot.startswith("digraph raptor {") and all(f'"{n.node_id}" [label=' in dot for n in nodes)
    edges = dot.count(" -> ")
    assert edges == sum(len(n.children) for n in nodes if n.level > 1) and out.mode == "full" and len(nodes) > 2
    capped = raptor_dot(deps.store, WS, max_nodes=1)
    assert capped.count("[label=") == 2 and f"+{len(nodes) - 1} more" in capped  # the root and the 'more' line
    again = build_raptor(deps, PipelineConfig().with_overrides({"raptor.cluster_size": 2}), WS, full=False)
    assert again.mode == "unchanged" and again.rewritten == 0


def test_a_killed_claude_build_keeps_what_it_paid_for_and_the_rerun_pays_only_the_rest(deps: Deps,
                                                                                       anthropic_stub: Stub) -> None:
    """Issue #46 item 5: each Claude summary is committed as it is written; a build killed after 3 calls leaves them,
    and the next build pays for the others only (an uninterrupted build's calls = killed + re-run)."""
    from core.app.raptor_ops import build_raptor
    from core.models.llm import AnthropicLLM

    notes = [(f"n{i}.md", f"# Note {i}\n\nNote {i} says station {i} of zone {i % 3} reports pressure hourly.\n"
              .encode()) for i in range(12)]
    ingest_files(notes, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    anthropic_stub.state.responder = lambda body: json.dumps(
        {"summary": "Summary of " + str(abs(hash(json.dumps(body["messages"], sort_keys=True))) % 10**6)})
    real = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None)

    class KilledAfter:  # the process dies on the 4th call (a BaseException escapes every handler, as kill -9 would)
        available, name, reason = True, "anthropic", ""

        def __init__(self) -> None:
            self.n = 0

        def complete(self, request, **kw):  # noqa: ANN001, ANN003, ANN201
            self.n += 1
            if self.n > 3:
                raise KeyboardInterrupt("killed")
            return real.complete(request, **kw)

    cfg = PipelineConfig().with_overrides({"raptor.cluster_size": 2, "raptor.max_usd": 5.0})
    deps.llm = KilledAfter()
    with pytest.raises(KeyboardInterrupt):
        build_raptor(deps, cfg, WS)
    assert deps.store.raptor.nodes(WS)[0] == [] and len(anthropic_stub.state.messages()) == 3
    deps.llm = real
    out = build_raptor(deps, cfg, WS)
    nodes, _ = deps.store.raptor.nodes(WS)
    assert out.reused_summaries == 3 and out.llm_calls == len(nodes) - 3
    assert len(anthropic_stub.state.messages()) == len(nodes)  # 3 + the rest: nothing paid twice
    assert all(n.mode == "llm" for n in nodes)
    again = build_raptor(deps, cfg, WS)  # a full rebuild of an unchanged corpus pays nothing
    assert again.llm_calls == 0 and again.reused_summaries == len(nodes)
