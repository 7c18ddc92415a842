"""The cascade guard: a stage steps aside where the workspace's own evaluation shows it losing recall beyond noise,
and runs where it does not (paired differences against the list it read; a known answer per fixture)."""
from __future__ import annotations

from typing import Any

import pytest

from core.cascade.guard import EvalEvidence, GuardCache, paired_deltas, stage_evidence, steps_aside
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import guard_key, run_query
from core.types import QuestionResult

RULE = {"z": 1.96, "min_loss": 0.5, "min_questions": 20}


def _q(**recalls: float | None) -> dict[str, Any]:
    """One question's stored record: stages in pipeline order with their recall@5 (None: the stage was skipped)."""
    stages = [{"stage": name, "skipped": r is None, "recall_at": {} if r is None else {"recall@5": r}}
              for name, r in recalls.items()]
    return {"qid": "q", "stages": stages}


def test_paired_deltas_compare_each_stage_with_the_list_it_read() -> None:
    qs = [_q(bm25=1.0, dense=0.0, fused=1.0, rerank=0.0, prune=0.0, mmr=1.0),
          _q(bm25=0.5, dense=0.5, fused=0.5, rerank=None, prune=1.0, mmr=1.0)]
    d = paired_deltas(qs, 5)
    assert d[("rerank", "fused")] == [-100.0]
    # prune read rerank in the first question and fused (rerank skipped) in the second
    assert d[("prune", "rerank")] == [0.0] and d[("prune", "fused")] == [50.0]
    assert d[("mmr", "prune")] == [100.0, 0.0]


def test_a_consistent_loss_steps_aside_and_noise_does_not() -> None:
    losing = [_q(fused=1.0, rerank=0.0 if i % 4 == 0 else 1.0, mmr=1.0 if i % 4 == 0 else 1.0) for i in range(40)]
    ev = stage_evidence([EvalEvidence("e1", "mine", losing)], k=5)
    assert ev["rerank"].questions == 40 and ev["rerank"].delta == pytest.approx(-25.0)
    aside = steps_aside(ev, **RULE)
    assert set(aside) == {"rerank"} and "lost 25.0 points of recall@5 against fused" in aside["rerank"]
    assert "'mine'" in aside["rerank"]  # mmr gained (+25): it stays
    # Gains and losses that cancel out: no verdict
    noisy = [_q(fused=1.0 if i % 2 else 0.0, rerank=0.0 if i % 2 else 1.0) for i in range(40)]
    assert steps_aside(stage_evidence([EvalEvidence("e2", "mine", noisy)], k=5), **RULE) == {}
    # Too few questions: no verdict, however large the loss
    few = losing[:10]
    assert steps_aside(stage_evidence([EvalEvidence("e3", "mine", few)], k=5), **RULE) == {}


def test_the_newest_run_in_which_the_stage_ran_decides() -> None:
    gains = [_q(fused=0.0, rerank=1.0) for _ in range(30)]
    losses = [_q(fused=1.0, rerank=0.0) for _ in range(30)]
    skipped = [_q(fused=1.0, rerank=None) for _ in range(30)]
    # Newest first: a run with rerank stepped aside says nothing; the one before it (a loss) stands.
    ev = stage_evidence([EvalEvidence("new", "s", skipped), EvalEvidence("mid", "s", losses),
                         EvalEvidence("old", "s", gains)], k=5)
    assert ev["rerank"].eval_id == "mid" and ev["rerank"].delta == -100.0


FILES = [("gw.md", b"# Gateway\n\nSet TLS_VERSION_MIN to 1.2 for every listener. The client waits between tries."),
         ("fin.md", b"# Finance\n\nRevenue grew 3% over the previous quarter. Costs stayed flat.")]


def _save(deps: Deps, eval_id: str, questions: list[dict[str, Any]], config: PipelineConfig) -> None:
    run = {"eval_id": eval_id, "dataset": "my-set", "config_name": "default", "config_hash": "h",
           "config": config.model_dump(mode="json"), "corpus_version": 1, "repeats": 1}
    deps.store.runs.save_eval_run("default", run, [QuestionResult.from_dict(
        {**q, "qid": f"q{i}", "query": "x", "qtype": "factoid", "answerable": True}) for i, q in enumerate(questions)])


def test_the_pipeline_steps_a_losing_stage_aside_and_says_why(deps: Deps) -> None:
    ingest_files(FILES, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"answer.enabled": False, "router.enabled": False})
    before = run_query("What is TLS_VERSION_MIN?", cfg, deps)
    assert before.stage("rerank").skipped is None
    # Evidence measured with another configuration says nothing of this one
    _save(deps, "f" * 32, [_q(fused=1.0, rerank=0.0, prune=0.0, mmr=0.0) for _ in range(25)],
          cfg.with_overrides({"mmr.lam": 0.5}))
    assert run_query("What is TLS_VERSION_MIN?", cfg, deps).stage("rerank").skipped is None
    # Measured with this configuration (the guard off while measuring): rerank steps aside
    _save(deps, "e" * 32, [_q(fused=1.0, rerank=0.0, prune=0.0, mmr=0.0) for _ in range(25)],
          cfg.with_overrides({"cascade_guard.enabled": False}))
    after = run_query("What is TLS_VERSION_MIN?", cfg, deps)
    reason = after.stage("rerank").skipped
    assert reason is not None and reason.startswith("steps aside: on golden set 'my-set'")
    # The fused order is handed on, cut to what rerank hands on (rerank.k): prune reads that list
    assert after.stage("prune").skipped is None
    fused = [c.chunk_id for c in after.stage("fused").candidates]
    assert [c.chunk_id for c in after.stage("prune").candidates] == fused[: cfg.rerank.k]
    off = run_query("What is TLS_VERSION_MIN?", cfg.with_overrides({"cascade_guard.enabled": False}), deps)
    assert off.stage("rerank").skipped is None


def test_the_cache_rereads_only_when_the_runs_change(deps: Deps) -> None:
    cache, cfg = GuardCache(), PipelineConfig()
    key = guard_key(cfg)
    assert cache.evidence(deps.store.runs, "default", k=5, config_key=key, key_of=guard_key) == {}
    _save(deps, "a" * 32, [_q(fused=1.0, rerank=0.0) for _ in range(25)], cfg)
    assert cache.evidence(deps.store.runs, "default", k=5, config_key=key, key_of=guard_key)["rerank"].questions == 25
