"""An evaluation run's configurations share their stage results (core.pipeline.StageMemo): a later configuration
reuses every stage whose inputs an earlier one had, and the results are those of computing everything again."""
from __future__ import annotations

from typing import Any

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.eval.run import EvalRun, NamedConfig, run_eval
from core.ingest.pipeline import ingest_files
from core.pipeline import StageMemo, run_query
from tests.test_eval_run import DOCS, _set  # the tiny corpus and golden set of the runner's own tests

BASE = PipelineConfig().with_overrides({"router.enabled": False})
LATE = BASE.with_overrides({"mmr.lam": 0.3})  # differs in the mmr stage only: every stage before it is shared
ROUTED = PipelineConfig()  # the shipped default, router on


@pytest.fixture
def ingested(deps: Deps) -> Deps:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    return deps


def _view(run: EvalRun) -> list[Any]:
    """Everything a run says about each question but time: metrics, each stage's list with scores, the answer."""
    out = []
    for r in run.results:
        metrics = {k: v for k, v in r.metrics.items() if k != "ms"}
        stages = [(s.stage, s.skipped, s.gold_ranks, [(c.chunk_id, c.score) for c in s.candidates])
                  for s in r.stages]
        out.append((r.qid, metrics, stages, r.answer))
    return out


# A late difference, the router on against off, and an early difference (dense.k: every later stage reads another
# list under the same settings, so its key must follow its input).
@pytest.mark.parametrize("pair", [(BASE, LATE), (ROUTED, BASE), (BASE, BASE.with_overrides({"dense.k": 1}))])
def test_shared_results_equal_results_computed_from_scratch(ingested: Deps, pair: tuple) -> None:
    configs = [NamedConfig("a", pair[0]), NamedConfig("b", pair[1])]
    shared = run_eval(_set(), configs, ingested, save=False)
    alone = run_eval(_set(), configs, ingested, save=False, reuse=False)
    for s, a in zip(shared, alone):
        assert _view(s) == _view(a)
        assert s.metrics.keys() == a.metrics.keys()
        assert all(s.metrics[k] == a.metrics[k] for k in s.metrics if k != "ms")
    assert not alone[0].reuse and not alone[1].reuse
    assert sum(v["reused"] for v in shared[1].reuse.values()) > 0


def test_a_late_difference_reuses_every_earlier_stage(ingested: Deps) -> None:
    a, b = run_eval(_set(), [NamedConfig("a", BASE), NamedConfig("b", LATE)], ingested, save=False)
    assert all(v["reused"] == 0 for v in a.reuse.values())  # the first configuration computes everything
    n = len(b.results)
    for stage in ("bm25", "dense", "fused", "rerank", "prune"):
        assert b.reuse[stage] == {"reused": n, "computed": 0}, stage
    assert b.reuse["mmr"]["computed"] == n and b.reuse["mmr"]["reused"] == 0
    assert any("reused from an earlier configuration" in note and "bm25 4/4" in note for note in b.notes)


def test_repeats_never_share_and_one_config_keeps_no_memo(ingested: Deps) -> None:
    a, b = run_eval(_set(), [NamedConfig("a", BASE), NamedConfig("a2", BASE)], ingested, save=False, repeats=2)
    assert sum(v["reused"] for v in a.reuse.values()) == 0  # repeat 2 of config a computed again
    assert all(v["computed"] == 0 for v in b.reuse.values())  # config a2 reused config a's, repeat by repeat
    assert b.reuse["answer"]["reused"] == 2 * len(b.results)
    (only,) = run_eval(_set(), [NamedConfig("a", BASE)], ingested, save=False)
    assert only.reuse == {}


def test_a_reused_stage_is_the_same_record(ingested: Deps) -> None:
    memo = StageMemo()
    first = run_query("How much did revenue grow?", BASE, ingested, log=False, memo=memo)
    again = run_query("How much did revenue grow?", LATE, ingested, log=False, memo=memo)
    assert memo.reused["bm25"] == 1 and memo.reused["rerank"] == 1 and memo.computed["mmr"] == 2
    by = {s.stage: s for s in first.stages}
    for s in again.stages:
        if s.stage in ("bm25", "dense", "fused", "rerank", "prune"):
            assert s == by[s.stage]  # same candidates, notes, info and the time it took when computed
    other = run_query("hotel cap per night", BASE, ingested, log=False, memo=memo)
    assert memo.reused["bm25"] == 1 and other.final() is not None  # another question shares nothing


def test_a_sweep_shares_results_between_its_configurations(ingested: Deps) -> None:
    from core.eval.sweep import run_sweep

    res = run_sweep(_set(), [NamedConfig("base", BASE), NamedConfig("late", LATE)], ingested)
    notes = {r.name: " ".join(r.notes) for r in res.rows}
    assert "reused from an earlier configuration" in notes["late"] and "bm25 4/4" in notes["late"]
    assert "rerank 4/4" in notes["late"] and "mmr" not in notes["late"].split("reused")[1].split(";")[0]


def test_the_answer_judge_scores_an_answer_once() -> None:
    from core.eval.run import ProductAnswerJudge
    from core.types import Answer
    from tests.fakes import HashEmbedder

    emb = HashEmbedder()
    judge = ProductAnswerJudge(emb)
    ans = Answer("Revenue grew 3% over the previous quarter.", ("finance.md",))
    first = judge.relevancy("How much did revenue grow?", ans)
    assert first is not None and emb.calls == 1
    assert judge.relevancy("How much did revenue grow?", ans) == first and emb.calls == 1
    judge.relevancy("How much did revenue grow?", Answer("Revenue grew.", ()))  # another answer: judged
    assert emb.calls == 2
    ctx = ["Revenue grew 3% over the previous quarter, to 18.1 million euros."]
    assert judge.faithfulness(ans, ctx) == judge.faithfulness(ans, list(ctx))
