"""The eval runner end to end on a tiny corpus: A/B runs, repeats, stored runs reopened, and the `eval` CLI --json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import cli
from core.config import PipelineConfig
from core.deps import Deps
from core.eval.datasets import parse_jsonl
from core.eval.report import (
    by_type_frame,
    comparison_frame,
    funnel_fig,
    gold_status,
    latency_fig,
    metrics_frame,
    recall_curve,
    recall_curve_fig,
    stage_candidates_frame,
    stage_frame,
    text_report,
)
from core.eval.run import NamedConfig, compare, load_run, per_query_diff, run_eval
from core.ingest.pipeline import ingest_files
from core.store import Store
from tests.fakes import HashEmbedder

DOCS = [
    ("gateway.md", b"# Gateway\n\n## TLS\n\nThe gateway refuses connections below TLS_VERSION_MIN, which defaults to "
                   b"1.2 in every region.\n\n## Backups\n\nNightly backups go to the cold archive in Reykjavik and are "
                   b"kept for ninety days.\n"),
    ("finance.md", b"# Finance\n\nRevenue grew 3% over the previous quarter, to 18.1 million euros.\n\nThe harbour "
                   b"office hired four engineers in May.\n"),
    ("policy.md", b"# Travel policy\n\nEconomy class is required for flights under six hours. Hotel stays are "
                  b"capped at 180 euros per night.\n"),
]
GOLD = [
    {"id": "q1", "query": "What does TLS_VERSION_MIN default to?", "type": "exact-id",
     "gold": [{"doc": "gateway.md", "span": "refuses connections below TLS_VERSION_MIN, which defaults to 1.2"}]},
    {"id": "q2", "query": "How much did revenue grow?", "type": "factoid",
     "gold": [{"doc": "finance.md", "span": "Revenue grew 3% over the previous quarter"}]},
    {"id": "q3", "query": "hotel cap per night", "type": "factoid",
     "gold": [{"doc": "policy.md", "span": "Hotel stays are capped at 180 euros per night."}]},
    {"id": "q4", "query": "Who founded the Mars office?", "type": "unanswerable", "answerable": False, "gold": []},
    {"id": "q5", "query": "Where are backups kept?", "gold": [{"doc": "gone.md", "span": "cold archive"}]},
]
# The router is off: these tests score the retrieval stages (routing has its own tests).
A = PipelineConfig().with_overrides({"dense.enabled": False, "fusion.enabled": False, "router.enabled": False})
B = PipelineConfig().with_overrides({"router.enabled": False})


@pytest.fixture
def ingested(deps: Deps) -> Deps:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    return deps


def _set() -> object:
    return parse_jsonl("\n".join(json.dumps(g) for g in GOLD), "tiny.jsonl")


def test_ab_run_scores_stores_and_reopens(ingested: Deps) -> None:
    seen: list[tuple[int, int]] = []
    runs = run_eval(_set(), [NamedConfig("bm25", A), NamedConfig("hybrid", B)], ingested,
                    progress=lambda d, t, m: seen.append((d, t)))
    assert seen[-1] == (8, 8) and len(seen) == 8  # 4 usable questions x 2 configs
    a, b = runs
    assert a.config_hash == A.stable_hash() and b.config_hash == B.stable_hash()
    assert [r["qid"] for r in a.results] == ["q1", "q2", "q3", "q4"]
    assert any("unknown document 'gone.md'" in p for p in a.problems)
    assert a.metrics["recall@5"] == 1.0 and a.metrics["mrr"] == 1.0  # BM25 finds all three at rank 1
    assert a.stage_recall["bm25"]["recall"] == 1.0 and a.stage_recall["dense"]["ran"] == 0.0
    assert set(b.stage_recall) >= {"bm25", "dense", "fused"}
    assert a.by_type["unanswerable"]["recall@5"] is None and a.by_type["factoid"]["n"] == 2
    assert any("without gold" in n for n in a.notes)
    # the pipeline answers (offline extractive by default): answer-level columns fill, the answer stage has no recall
    assert 0.0 <= a.metrics["refusal_accuracy"] <= 1.0 and a.results[3]["metrics"]["refusal_accuracy"] is not None
    assert a.stage_recall["answer"]["recall"] is None and a.stage_recall["answer"]["ran"] == 1.0
    # stored, and reopened with the same numbers and per-question records
    listed = ingested.store.runs.eval_runs()
    assert {r.eval_id for r in listed} == {a.eval_id, b.eval_id}
    again = load_run(ingested.store, a.eval_id)
    assert again.metrics == a.metrics and again.results[0].stage("bm25").candidates[0].gold == (0,)
    assert again.config == A.model_dump(mode="json")
    # A/B tables
    cmp = compare(a, b)
    assert {d.metric for d in cmp.deltas} >= {"recall@5", "mrr", "ndcg@10"}
    assert all(d.verdict in {"A better", "B better", "no clear difference", "n/a"} for d in cmp.deltas)
    diff = per_query_diff(a, b, "ndcg@10")
    assert [r["qid"] for r in diff] == ["q1", "q2", "q3", "q4"]
    assert diff[3]["status"] == "n/a" and all(r["status"] in {"same", "improved", "regressed"} for r in diff[:3])
    # frames and figures build from the stored runs
    assert len(metrics_frame([a, b])) >= 6 and len(comparison_frame(cmp)) == len(cmp.deltas)
    assert "bm25" in list(stage_frame(a)["stage"]) and len(by_type_frame(a)) == 3
    assert recall_curve(a)[0] == (1, 1.0)
    assert len(recall_curve_fig([a, b]).data) == 2 and len(funnel_fig([a, b]).data) == 2
    assert len(latency_fig([a, b]).data) == 2
    gs = gold_status(a.results[0])
    assert gs.loc[0, "bm25"] == "#1" and "dense" not in gs.columns  # skipped stages get no column
    frame = stage_candidates_frame(a.results[0].stage("bm25"))
    assert frame.loc[0, "gold"] == "★1"
    assert "recall@5" in text_report([a, b], cmp) and "A/B" in text_report([a, b], cmp)


def test_an_unbuilt_context_variant_is_built_once_before_scoring(ingested: Deps) -> None:
    """Heuristic contexts missing: built and stored before the first question (said in the notes), not embedded in
    memory inside a timed query; a second run finds them built."""
    heur = B.with_overrides({"context.variant": "heuristic"})
    store, model = ingested.store, ingested.embedder.model_id
    variants = lambda: {v for m, v, n in store.corpus.vector_models() if m == model}  # noqa: E731
    assert "heuristic" not in variants()
    seen: list[str] = []
    run = run_eval(_set(), [NamedConfig("heur", heur), NamedConfig("heur-again", heur)], ingested,
                   progress=lambda d, t, m: seen.append(m), save=False)
    assert "heuristic" in variants()
    built = [n for n in run[0].notes if n.startswith("built before scoring (for heur)")]
    assert len(built) == 1 and "heuristic" in built[0] and not any("heur-again" in n for n in run[1].notes)
    assert any(m.startswith("building heuristic") for m in seen)
    scored = [i for i, m in enumerate(seen) if m.startswith(("heur: ", "heur-again: "))]
    assert seen[0].startswith("building heuristic") and len(scored) == 8 and min(scored) > 0  # built, then scored
    again = run_eval(_set(), [NamedConfig("heur", heur)], ingested, save=False)[0]
    assert not any("built before scoring" in n for n in again.notes)
    assert again.metrics["recall@5"] == run[0].metrics["recall@5"]


def test_missing_gold_is_marked_missing(ingested: Deps) -> None:
    run = run_eval(_set(), [NamedConfig("bm25-1", A.with_overrides({"bm25.k": 1}))], ingested, save=False)[0]
    q2 = next(r for r in run.results if r["qid"] == "q2")
    assert q2["metrics"]["recall@5"] == 1.0
    q = parse_jsonl(json.dumps({"id": "x", "query": "ninety days archive",
                                "gold": [{"doc": "policy.md", "span": "Economy class is required for flights"}]}))
    miss = run_eval(q, [NamedConfig("bm25-1", A.with_overrides({"bm25.k": 1}))], ingested, save=False)[0]
    assert gold_status(miss.results[0]).loc[0, "bm25"] == "missing" and miss.metrics["recall@5"] == 0.0


def test_repeats_give_a_spread_and_say_when_the_pipeline_is_deterministic(ingested: Deps) -> None:
    run = run_eval(_set(), [NamedConfig("hybrid", B)], ingested, repeats=3, save=False)[0]
    assert run.repeats == 3 and len(run.per_repeat) == 3
    # retrieval is deterministic: no spread in any quality metric (latency may vary, it is not checked)
    assert all(v == 0.0 for k, v in run.spread.items() if k != "ms")
    assert any("identical lists" in n for n in run.notes)


def test_eval_cli_json_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    ingest_files(DOCS, store=store, embedder=HashEmbedder(), config=PipelineConfig())
    store.close()
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps(g) for g in GOLD))
    a, b = tmp_path / "a.json", tmp_path / "b.toml"
    a.write_text(json.dumps(A.model_dump(mode="json")))
    b.write_text("[fusion]\nrrf_k = 10\n")
    monkeypatch.setattr(cli, "build_deps", lambda cfg, **kw: Deps(store=kw["store"], embedder=HashEmbedder()))
    code = cli.main(["eval", "--dataset", str(gold), "--db", str(db), "--config", str(a), "--config", str(b),
                     "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    b_hash = PipelineConfig().with_overrides({"fusion.rrf_k": 10}).stable_hash()
    assert [r["config_hash"] for r in out["runs"]] == [A.stable_hash(), b_hash]
    for r in out["runs"]:
        assert {"recall@5", "recall@10", "recall@20", "mrr", "ndcg@10"} <= set(r["metrics"])
        assert "bm25" in r["stage_recall"]
    assert out["comparison"] and out["questions"] == 4
    bad = cli.main(["eval", "--dataset", "no_such_set", "--db", str(db)])
    assert bad == 2 and "unknown dataset" in capsys.readouterr().err


def test_stored_record_is_compact_but_keeps_gold_ranks_beyond_the_kept_depth() -> None:
    from core.eval.metrics import Gold, score_trace
    from core.eval.run import KEEP_DEPTH, TEXT_DEPTH, _stage_record
    from core.types import Candidate, StageResult, Trace

    wide = tuple(Candidate(f"c{i}", "d", "gold words here" if i == 25 else f"filler {i}", 1.0, i) for i in range(1, 31))
    final = tuple(Candidate(f"c{i}", "d", f"filler {i}", 1.0, r) for r, i in enumerate(range(1, 6), start=1))
    trace = Trace("q", "h", 1, (StageResult("bm25", wide, 1.0), StageResult("fused", final, 1.0)))
    gold = [Gold(text="gold words here")]
    rec = {s.stage: s for s in _stage_record(score_trace(trace, gold), trace, gold)}
    assert len(rec["bm25"].candidates) == KEEP_DEPTH and rec["bm25"].gold_ranks == (25,)
    assert rec["bm25"]["depth"] == 30 and rec["bm25"]["recall"] == 1.0
    assert len(rec["fused"].candidates) == 5 and rec["fused"].gold_ranks == (None,)
    assert sum(c.text is not None for c in rec["bm25"].candidates) == TEXT_DEPTH


def test_eval_cli_contract_k_level_gold_ranks_and_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture) -> None:
    """`eval --dataset PATH --k 1,2,5,10 --level document --json`: recall@1.. per run and, per question, the rank of
    each gold item in every stage's list (documents, best chunk each). The gold spans below are NOT in the files:
    at document level they still count, because the document is what is asked for."""
    db = tmp_path / "w.duckdb"
    store = Store(db)
    ingest_files(DOCS, store=store, embedder=HashEmbedder(), config=PipelineConfig())
    store.close()
    gold = tmp_path / "gold.csv"
    gold.write_text("id,question,gold_docs,gold_spans\n"
                    "t1,What does TLS_VERSION_MIN default to?,gateway.md,no such words anywhere\n"
                    "t2,hotel cap per night,policy.md,\n")
    monkeypatch.setattr(cli, "build_deps", lambda cfg, **kw: Deps(store=kw["store"], embedder=HashEmbedder()))
    args = ["eval", "--dataset", str(gold), "--db", str(db), "--k", "1,2,5,10", "--json",
            "--set", "dense.enabled=false", "--set", "fusion.enabled=false", "--set", "rerank.enabled=false",
            "--set", "prune.enabled=false", "--set", "mmr.enabled=false", "--set", "answer.enabled=false"]
    assert cli.main(args + ["--level", "document"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["unit"] == "doc" and run["ks"] == [1, 2, 5, 10]
    assert {"recall@1", "recall@2", "recall@5", "recall@10"} <= set(run["metrics"])
    assert run["metrics"]["recall@1"] == 1.0  # BM25 puts each gold document first here
    by_q = {r["qid"]: {s["stage"]: s for s in r["stages"]} for r in run["results"]}
    assert by_q["t1"]["bm25"]["gold_ranks"] == [1] and by_q["t2"]["bm25"]["gold_ranks"] == [1]
    assert by_q["t1"]["bm25"]["recall_at"]["recall@1"] == 1.0 and by_q["t1"]["rerank"]["skipped"]
    assert run["stage_recall_at"]["bm25"]["recall@1"] == 1.0
    # At chunk level the made-up span is nowhere: t1's gold is not found.
    assert cli.main(args + ["--level", "chunk"]) == 0
    chunk_run = json.loads(capsys.readouterr().out)["runs"][0]
    t1 = next(r for r in chunk_run["results"] if r["qid"] == "t1")
    assert t1["stages"][0]["gold_ranks"] == [None]
    # A read-only open scores the same and stores nothing.
    n_runs = len(Store(db).runs.eval_runs())
    assert cli.main(args + ["--level", "document", "--read-only"]) == 0
    ro = json.loads(capsys.readouterr().out)["runs"][0]
    assert ro["metrics"]["recall@1"] == 1.0 and any("read-only" in n for n in ro["notes"])
    assert len(Store(db).runs.eval_runs()) == n_runs
    assert cli.main(["eval", "--dataset", str(gold), "--db", str(db), "--k", "1,x"]) == 2
    assert "--k expects" in capsys.readouterr().err


def test_question_records_are_typed_and_round_trip_through_json() -> None:
    from core.types import CandidateRow, GoldRow, QuestionResult, StageRecord

    rec = QuestionResult("q1", "what?", "factoid", True, 3, (GoldRow("a.md", "span", 2, "span"),), {"recall@5": 1.0},
                         "mmr", (StageRecord("bm25", False, None, 1.5, 10, 1.0, 2, 40, 1.0, (2,), {"recall@1": 0.0},
                                             (CandidateRow("c1", "a", 1, 0.5, (), "x"),)),), None, None)
    back = QuestionResult.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back == rec and back.stage("bm25").gold_ranks == (2,)
    assert rec["qid"] == "q1" and rec["stages"][0]["gold_ranks"] == (2,) and rec.get("nope", 7) == 7
    with pytest.raises(KeyError):
        rec["nope"]
    with pytest.raises(AttributeError):
        rec.qid = "other"  # type: ignore[misc]


def test_funnel_shows_only_stages_with_candidates_and_ab_labels_sit_in_their_own_bars() -> None:
    """Issue #28: route and answer (no list of their own) and skipped stages are not funnel rows, even in a run
    stored with recall 0.0 for them; side-by-side bars carry their labels inside, upright."""
    from core.eval.report import idle_stages
    from core.eval.run import EvalRun

    def run(eid: str, recalls: dict[str, tuple[float | None, float | None]]) -> EvalRun:
        sr = {n: {"ran": 1.0 if d else 0.0, "depth": d, "recall": r, "tokens": None, "token_share": None, "ms": 1.0}
              for n, (r, d) in recalls.items()}
        return EvalRun(eid, "set", eid, "h", {}, 1, "default", 1, {}, {}, [], sr, {}, {}, [])

    a = run("A", {"answer_cache": (None, None), "route": (0.0, 0.0), "bm25": (1.0, 50.0), "hyde": (None, None),
                  "fused": (1.0, 50.0), "answer": (0.0, 0.0)})
    b = run("B", {"route": (0.0, 0.0), "bm25": (0.9, 50.0), "hyde": (0.5, 3.0), "fused": (1.0, 50.0)})
    assert list(stage_frame(a)["stage"]) == ["bm25", "fused"] and idle_stages(a) == ["answer_cache", "route", "hyde",
                                                                                      "answer"]
    fig = funnel_fig([a, b])
    assert [list(t.x) for t in fig.data] == [["bm25", "fused"], ["bm25", "hyde", "fused"]]
    assert list(fig.layout.xaxis.categoryarray) == ["bm25", "hyde", "fused"]  # pipeline order over both runs
    assert all(t.textposition == "inside" and t.textangle == -90 for t in fig.data)
    single = funnel_fig([a])
    assert single.data[0].textposition == "outside"
