"""Cascade benchmark: rerank latency per reranker, Pass@k with late-interaction rerank, and what pruning saves.

Run from the repo root (each part can run alone; each writes its own bench/results/cascade_<part>.json):
    .venv/bin/python bench/cascade.py                       # all three parts
    .venv/bin/python bench/cascade.py --only latency,quality,compression --limit 40
    .venv/bin/python bench/cascade.py --only scifact --latency-queries 30   # whole SciFact: ingest + eval, peak RSS

- latency: wall time of one rerank call over the 50 fused candidates of a query, per reranker, on this CPU.
  late-interaction is timed warm (chunk token vectors cached in memory: the query pays for its own tokens only),
  after a restart (memory empty, vectors read from the store) and cold (nothing cached). The cross-encoder is timed on
  an architecture twin of ms-marco-MiniLM-L-6-v2 (the bundled MiniLM-L6 weights with an untrained one-logit head,
  built in a temp folder: no reranker weights can be downloaded here), so its scores mean nothing but its cost is
  that of the real model. The llm reranker needs an API key and is not timed.
- quality: Pass@5/10/20 on anthropic_codebase (cookbook scoring, core.eval.metrics) for hybrid vs hybrid + late
  interaction over the fused top-50, through the product pipeline (core.pipeline.run_query).
- compression: on sample_corpus/eval.jsonl, tokens handed to the model and recall@10 (span rule of
  core.eval.metrics) with and without sentence pruning, plus the full default cascade.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from _common import CAPTION, ROOT, Table, datasets_dir, grid, loss, machine_info, num, pct, table, utc_now, write_result

from core.cascade.prune import llm_tokens  # noqa: E402
from core.cascade.rerank import (
    CrossEncoderReranker,
    EmbedderCosineReranker,
    LateInteractionReranker,
)
from core.config import PipelineConfig  # noqa: E402
from core.deps import Deps, build_deps  # noqa: E402
from core.eval.datasets import GoldenSet, load_dataset  # noqa: E402
from core.eval.metrics import score_trace  # noqa: E402
from core.eval.run import prepare  # noqa: E402
from core.models.tokens import TokenCache, window_encoder_for
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402

OFF = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "expand.enabled": False,
       "answer.enabled": False}
# Rerank hands on the whole top-50 reordered, so Pass@20 reads the reranked order (Pass@k looks at the top k only).
LI = {**OFF, "rerank.enabled": True, "rerank.method": "late-interaction", "rerank.top_n": 50, "rerank.k": 50}
HEUR = {"context.variant": "heuristic"}
QUALITY = [
    ("hybrid", "BM25 + dense, RRF k=60 (no cascade)", OFF),
    ("hybrid+late-interaction", "hybrid, then MaxSim rerank of the fused top-50", LI),
    ("heur-hybrid", "heuristic chunk context (core.ingest.context), hybrid, no cascade", {**OFF, **HEUR}),
    ("heur-hybrid+late-interaction", "heuristic context; the reranker reads context + chunk", {**LI, **HEUR}),
]
PUBLISHED = {"voyage-2 basic RAG": {"pass@5": 80.92, "pass@10": 87.15, "pass@20": 90.06},
             "contextual embeddings + Cohere rerank": {"pass@5": 91.24, "pass@10": 94.79, "pass@20": 96.30}}
COMPRESSION = [
    ("hybrid top-10", "no cascade: the fused top-10 as it is", {**OFF, "fusion.k": 10}),
    ("rerank top-10", "late-interaction rerank of the fused top-50 to 10, no pruning", {**OFF, "rerank.enabled": True}),
    ("rerank+prune", "the same 10, whole-sentence pruning (default budget)", {**OFF, "rerank.enabled": True,
                                                                             "prune.enabled": True}),
    ("default cascade", "rerank + prune + mmr (the shipped defaults; answer off)", {"answer.enabled": False}),
]


BUDGETS = (250, 400, 550, 700)
# Sentence scorers of the prune stage (prune.scorer), swept side by side over the same budgets and the same run.
SCORERS = ("hybrid", "hybrid-encoded", "embedder", "reranker")


def pct(values: Sequence[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def timing(values_ms: Sequence[float]) -> dict[str, float]:
    return {"n": len(values_ms), "median_ms": round(statistics.median(values_ms), 1),
            "p95_ms": round(pct(values_ms, 95), 1), "max_ms": round(max(values_ms), 1)}


# -- evaluation loop (product scorer) -----------------------------------------------------------------------------
def evaluate(gs: GoldenSet, deps: Deps, workspace: str, name: str, desc: str, overrides: dict[str, Any],
             limit: int | None) -> dict[str, Any]:
    cfg = PipelineConfig().with_overrides(overrides)
    queries = [q for q in gs.queries if q.gold][:limit] if limit else [q for q in gs.queries if q.gold]
    t0 = time.perf_counter()
    sums: dict[str, list[float]] = {}
    funnel: dict[str, list[float]] = {}
    stage_ms: dict[str, list[float]] = {}
    tokens: list[int] = []
    by_type: dict[str, list[float]] = {}
    for q in queries:
        trace = run_query(q.query, cfg, deps, workspace=workspace, log=False)
        score = score_trace(trace, q.gold, ks=gs.ks, unit=gs.unit, pass_k=gs.pass_k)
        for k, v in score.metrics.items():
            if v is not None:
                sums.setdefault(k, []).append(float(v))
        for st in score.stages:
            if not st.skipped and st.recall is not None:
                funnel.setdefault(st.stage, []).append(st.recall)
        for s in trace.stages:
            if s.skipped is None:
                stage_ms.setdefault(s.stage, []).append(s.ms)
        final = trace.final()
        tokens.append(llm_tokens(final.candidates[:10]) if final else 0)
        if score.metrics.get("recall@10") is not None:
            by_type.setdefault(q.qtype, []).append(float(score.metrics["recall@10"]))
    return {
        "name": name, "description": desc, "overrides": overrides, "config_hash": cfg.stable_hash(),
        "questions": len(queries),
        "metrics": {k: round(statistics.mean(v), 4) for k, v in sums.items()},
        "stage_recall": {k: round(statistics.mean(v), 4) for k, v in funnel.items()},
        "stage_ms_median": {k: round(statistics.median(v), 1) for k, v in stage_ms.items()},
        "tokens_to_model_mean": round(statistics.mean(tokens), 1) if tokens else 0.0,
        "recall@10_by_type": {k: round(statistics.mean(v), 4) for k, v in sorted(by_type.items())},
        "seconds": round(time.perf_counter() - t0, 1), "measured_at": utc_now(),
    }


def corpus(dataset: str, root: Path, db: Path) -> tuple[GoldenSet, Deps, str]:
    gs = load_dataset(dataset, root)
    deps = build_deps(PipelineConfig(), store=Store(str(db)))
    deps.token_cache.max_bytes = 2 * 1024**3  # the whole set's token vectors (raw and contextual) stay in memory
    ws = gs.workspace or "default"
    t = time.perf_counter()
    resolved, notes = prepare(gs, deps, workspace=ws)
    for n in notes:
        print(f"  {n}", file=sys.stderr)
    print(f"{dataset}: corpus ready in {time.perf_counter() - t:.1f} s ({db})", file=sys.stderr)
    return resolved, deps, ws


def warm_late_interaction(deps: Deps, ws: str, variant: str | None = None) -> dict[str, Any]:
    """Token vectors of every chunk (and of context + chunk for a variant), computed once and kept in the store."""
    from core.retrieve.index import contextual_text

    reranker, _ = deps.reranker_for("late-interaction")
    assert isinstance(reranker, LateInteractionReranker)
    chunks = deps.store.corpus.chunks(ws)
    texts = [c.text for c in chunks]
    if variant:
        ctx = deps.store.ledger.contexts(variant, ws)
        texts = [contextual_text(ctx.get(c.chunk_id), c.text) for c in chunks]
    t = time.perf_counter()
    computed = reranker.warm(texts, ws)
    return {"texts": len(texts), "computed": computed, "seconds": round(time.perf_counter() - t, 1)}


# -- parts --------------------------------------------------------------------------------------------------------
def part_quality(root: Path, db: Path, limit: int | None) -> dict[str, Any]:
    gs, deps, ws = corpus("anthropic_codebase", root, db)
    warm = {"raw": warm_late_interaction(deps, ws)}
    rows = []
    for name, desc, ov in QUALITY:
        if ov.get("context.variant") == "heuristic" and "heuristic" not in warm:
            from core.ingest.context import build_heuristic

            build_heuristic(deps.store, workspace=ws)
            warm["heuristic"] = warm_late_interaction(deps, ws, "heuristic")
        row = evaluate(gs, deps, ws, name, desc, ov, limit)
        m = row["metrics"]
        row["beats_voyage2_basic_rag"] = all(m.get(k, 0) >= v for k, v in PUBLISHED["voyage-2 basic RAG"].items())
        rows.append(row)
        print(f"  {name:<30} pass@5 {m.get('pass@5', 0):.2f}  pass@10 {m.get('pass@10', 0):.2f}  "
              f"pass@20 {m.get('pass@20', 0):.2f}  ({row['seconds']} s)", file=sys.stderr)
    return {"dataset": "anthropic_codebase", "published": PUBLISHED, "token_vector_warmup": warm, "rows": rows,
            "scoring": "Pass@k as the cookbook: per query, share of golden chunks whose stripped text equals a top-k "
                       "chunk's, averaged x100 (core.eval.metrics.pass_at_k)"}


def part_compression(limit: int | None, db: Path) -> dict[str, Any]:
    gs, deps, ws = corpus("sample", Path("."), db)
    rows = [evaluate(gs, deps, ws, n, d, ov, limit) for n, d, ov in COMPRESSION]
    sweep = []
    for scorer in SCORERS:
        for budget in BUDGETS:
            ov = {**OFF, "rerank.enabled": True, "prune.enabled": True, "prune.token_budget": budget,
                  "prune.scorer": scorer}
            r = evaluate(gs, deps, ws, f"rerank+prune {scorer} @{budget}", "budget sweep", ov, limit)
            sweep.append({"scorer": scorer, "token_budget": budget, "recall@10": r["metrics"].get("recall@10"),
                          "tokens_to_model_mean": r["tokens_to_model_mean"], "stage_recall": r["stage_recall"],
                          "prune_ms_median": r["stage_ms_median"].get("prune")})
    by = {r["name"]: r for r in rows}
    out: dict[str, Any] = {"dataset": "sample_corpus/eval.jsonl", "token_budget": PipelineConfig().prune.token_budget,
                           "tokens": "estimated LLM tokens (core.text.estimate_llm_tokens) of the final top-10 texts",
                           "rows": rows, "budget_sweep": sweep, "comparisons": []}
    for base in ("hybrid top-10", "rerank top-10"):
        for pruned in ("rerank+prune", "default cascade"):
            b, p = by[base], by[pruned]
            out["comparisons"].append({
                "baseline": base, "compressed": pruned,
                "token_reduction": round(1 - p["tokens_to_model_mean"] / b["tokens_to_model_mean"], 4),
                "recall@10_drop_points": round(100 * (b["metrics"]["recall@10"] - p["metrics"]["recall@10"]), 2),
            })
    base = by["rerank top-10"]
    for sw in sweep:
        sw["token_reduction_vs_rerank_top10"] = round(1 - sw["tokens_to_model_mean"] / base["tokens_to_model_mean"], 4)
        sw["recall@10_drop_points_vs_rerank_top10"] = round(100 * (base["metrics"]["recall@10"] - sw["recall@10"]), 2)
        print(f"  {sw['scorer']:<9} budget {sw['token_budget']:<5} recall@10 {sw['recall@10']:.3f}  tokens {sw['tokens_to_model_mean']}",
              file=sys.stderr)
    for r in rows:
        print(f"  {r['name']:<18} recall@10 {r['metrics'].get('recall@10', 0):.3f}  tokens {r['tokens_to_model_mean']}",
              file=sys.stderr)
    return out


def part_latency(root: Path, db: Path, n_queries: int, n_slow: int) -> dict[str, Any]:
    gs, deps, ws = corpus("anthropic_codebase", root, db)
    cfg = PipelineConfig().with_overrides({**OFF, "fusion.k": 50})
    lists = []
    for q in gs.queries[:n_queries]:
        fused = run_query(q.query, cfg, deps, workspace=ws, log=False).stage("fused")
        lists.append((q.query, [c.text for c in fused.candidates][:50]))
    sizes = sorted(len(t) for _, t in lists)
    out: dict[str, Any] = {"candidates_per_call": {"min": sizes[0], "max": sizes[-1]}, "rerankers": {}}
    encoder = window_encoder_for(deps.embedder)

    def run(name: str, reranker: Any, items: Sequence[tuple[str, list[str]]], fresh: Any = None, **extra: Any) -> None:
        # Wall time is what a user waits; CPU time (this process, all threads) is what the call costs, and stays
        # meaningful when other jobs share the 2 cores (the load average is recorded beside it).
        times, cpu = [], []
        load0 = os.getloadavg()[0]
        for q, texts in items:
            r = fresh() if fresh else reranker
            t, c = time.perf_counter(), time.process_time()
            r.score(q, texts, workspace=ws)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        out["rerankers"][name] = {**timing(times), "cpu_median_ms": round(statistics.median(cpu), 1),
                                  "cpu_p95_ms": round(pct(cpu, 95), 1),
                                  "load_avg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)], **extra}
        got = out["rerankers"][name]
        print(f"  {name:<40} wall median {got['median_ms']} ms p95 {got['p95_ms']} ms; cpu median "
              f"{got['cpu_median_ms']} ms; load {got['load_avg_1min']}", file=sys.stderr)

    warm = LateInteractionReranker(encoder, persist=deps.store.caches, corpus=deps.store.corpus, cache=TokenCache())
    warm.warm(sorted({t for _, texts in lists for t in texts}), ws)
    warm.score("warm-up", ["warm-up"], workspace=ws)  # the corpus IDF table is built once per corpus version
    run("late-interaction (warm: token vectors cached)", warm, lists,
        note="chunk token vectors in the memory cache; the query is encoded each call")
    run("late-interaction (restart: from store)", None, lists[:n_slow],
        fresh=lambda: LateInteractionReranker(encoder, persist=deps.store.caches, corpus=deps.store.corpus, cache=TokenCache()),
        note="empty memory cache, token vectors read from DuckDB; includes the one-off corpus IDF table")
    run("late-interaction (cold: nothing cached)", None, lists[:n_slow],
        fresh=lambda: LateInteractionReranker(encoder, persist=None, corpus=None, cache=TokenCache()),
        note="all 50 chunks encoded (windows of 256 tokens)")
    run("embedder-cosine (fallback)", EmbedderCosineReranker(deps.embedder), lists[:n_slow],
        note="bi-encoder cosine, 50 chunk texts encoded per call")
    with tempfile.TemporaryDirectory() as tmp:
        path = twin_cross_encoder(Path(tmp))
        ce = CrossEncoderReranker(str(path), max_length=512)
        ce.score("warm-up", ["warm-up"])
        run("cross-encoder (MiniLM-L6 twin, max_length 512)", ce, lists[:n_slow],
            note="same architecture and size as cross-encoder/ms-marco-MiniLM-L-6-v2; untrained head: cost only")
    out["llm"] = "not timed: needs ANTHROPIC_API_KEY (one listwise call per query; cost lands in the trace and ledger)"
    out["target"] = "late-interaction warm <= 150 ms"
    warm_row = out["rerankers"]["late-interaction (warm: token vectors cached)"]
    out["meets_target"] = {"wall_median": warm_row["median_ms"] <= 150, "wall_p95": warm_row["p95_ms"] <= 150,
                           "cpu_median": warm_row["cpu_median_ms"] <= 150}
    return out


def part_scifact(root: Path, db: Path, n_queries: int, *, fresh: bool, docs: int | None, limit: int | None
                 ) -> dict[str, Any]:
    """Issue #14 part 2, the whole default configuration on the whole SciFact corpus (5,183 abstracts), each phase in
    its own child process so each peak RSS (ru_maxrss of that process) is its own:
    - ingest: a fresh database (fresh=True removes it and its token-vector files first) filled by the product's corpus
      path with the default PipelineConfig: chunk vectors and, from the same forward pass, token vectors (stored in
      the file beside the database, core/store/tokvec_file.py);
    - eval: the product default configuration over the 300 queries (nDCG@10, recall@100; as bench/quality.py's
      product-defaults row), then late-interaction rerank of the fused top-50 timed per query 'from store' (memory
      cache emptied: a restart reads the 50 candidates' vectors in one go) and 'warm' (memory cache holding them)."""
    import subprocess

    if fresh:
        for f in [db, Path(str(db) + ".wal"), *db.parent.glob(db.name + ".tokvec.*")]:
            f.unlink(missing_ok=True)
    out: dict[str, Any] = {"dataset": "beir_scifact", "database": str(db.relative_to(ROOT)) if db.is_relative_to(ROOT)
                           else str(db), "fresh_database": fresh}
    for phase in ("ingest", "eval"):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--scifact-phase", phase, "--scifact-db", str(db),
               "--latency-queries", str(n_queries)]
        cmd += ["--datasets", str(root)]
        cmd += ["--scifact-docs", str(docs)] if docs else []
        cmd += ["--limit", str(limit)] if limit else []
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"scifact {phase} phase failed (exit {proc.returncode})")
        out[phase] = {**json.loads(proc.stdout.strip().splitlines()[-1]),
                      "wall_s": round(time.perf_counter() - t, 1)}
    ev, ing = out["eval"], out["ingest"]
    out["peak_rss_mb"] = {"ingest": ing["peak_rss_mb"], "eval": ev["peak_rss_mb"]}
    out["target"] = ("peak RSS <= 3 GB for ingest and for eval; rerank warm <= 150 ms median for 50 candidates; "
                     "nDCG@10 as before the token-vector file (0.717)")
    out["meets_target"] = {"peak_rss": max(ing["peak_rss_mb"], ev["peak_rss_mb"]) <= 3000,
                           "rerank_warm": ev["rerank"]["warm (memory cache)"]["median_ms"] <= 150}
    return out


def _rss_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def scifact_ingest(root: Path, db: Path, docs: int | None) -> dict[str, Any]:
    """Child process: the corpus into `db` the way core.eval.run.prepare puts it there (core.eval.datasets.ensure_corpus ->
    ingest_predocs with the default config's token sink), or its first `docs` documents for a smoke run."""
    from core.eval.datasets import ingest_predocs
    from core.ingest.pipeline import token_sink

    gs = load_dataset("beir_scifact", root)
    cfg = PipelineConfig()
    deps = build_deps(cfg, store=Store(str(db)))
    ws = gs.workspace or "default"
    predocs = gs.predocs()
    predocs = predocs[:docs] if docs else predocs
    rss_model = _rss_mb()
    t = time.perf_counter()
    rep = ingest_predocs(predocs, store=deps.store, embedder=deps.embedder, workspace=ws,
                         tokens=token_sink(deps.store, cfg))
    secs = time.perf_counter() - t
    space = deps.store.caches.token_vector_space()
    n_chunks = len(deps.store.corpus.chunks(ws))
    deps.store.close()
    return {"documents": len(predocs), "added": rep.added, "chunks": n_chunks, "embedded": rep.embedded,
            "errors": len(rep.errors), "seconds": round(secs, 1), "runtime": deps.embedder.model_id,
            "token_vector_rows": space["rows"], "token_vector_file_mb": round(space["file_bytes"] / 1e6, 1),
            "token_vector_legacy_rows": space["legacy_rows"],
            "duckdb_file_mb": round(db.stat().st_size / 1e6, 1),
            "rss_after_model_load_mb": rss_model, "peak_rss_mb": _rss_mb(),
            "load_avg_1min_end": round(os.getloadavg()[0], 2)}


def scifact_eval(root: Path, db: Path, n_queries: int, limit: int | None) -> dict[str, Any]:
    """Child process: the product default configuration over the set (core.eval.run.run_eval, not stored), then the
    rerank timing over the first n_queries' fused top-50."""
    from core.eval.run import NamedConfig, resolve_gold, run_config

    gs = load_dataset("beir_scifact", root)
    ws = gs.workspace or "default"
    store = Store(str(db))
    # Queries must use the runtime the ingest phase used (the default then): if the default changed in between
    # (another runtime chosen while this ran), the stored vectors' runtime is kept rather than mixing two models.
    ingested = [m.model_id for m in store.corpus.vector_models(ws)]
    runtime = ingested[0].rsplit("@", 1)[1] if ingested and "@" in ingested[0] else PipelineConfig().embedding.runtime
    same = {"embedding.runtime": runtime}
    deps = build_deps(PipelineConfig().with_overrides(same), store=store)  # default token memory cache (256 MiB)
    t = time.perf_counter()
    # run_config on the corpus as the ingest phase left it (run_eval would first add any abstract still missing,
    # which in a --scifact-docs smoke run is nearly all of them, and measure that ingest here)
    run = run_config(resolve_gold(gs, deps.store, ws),
                     NamedConfig("product-defaults", PipelineConfig().with_overrides({**gs.overrides, **same})), deps,
                     workspace=ws, limit=limit)
    eval_s = time.perf_counter() - t
    rss_eval = _rss_mb()
    keys = ("ndcg@10", "recall@100", "recall@10", "mrr")
    cfg = PipelineConfig().with_overrides({**OFF, "fusion.k": 50, **same})
    lists = []
    for q in gs.queries[:n_queries]:
        fused = run_query(q.query, cfg, deps, workspace=ws, log=False).stage("fused")
        lists.append((q.query, [c.text for c in fused.candidates][:50]))
    encoder = window_encoder_for(deps.embedder)
    cache = TokenCache()  # the product's default budget (256 MiB)
    reranker = LateInteractionReranker(encoder, persist=deps.store.caches, corpus=deps.store.corpus, cache=cache)
    reranker.score("warm-up", ["warm-up"], workspace=ws)  # the corpus IDF table is built once per corpus version
    rows: dict[str, Any] = {}
    for name, fresh in (("from store (empty memory cache)", True), ("warm (memory cache)", False)):
        times, cpu, computed = [], [], 0
        for q, texts in lists:
            if fresh:
                cache._items.clear()  # noqa: SLF001 - a restart, without rebuilding the IDF table each time
                cache._bytes = 0  # noqa: SLF001
            else:
                reranker.score(q, texts, workspace=ws)  # this query's candidates in memory (and the query's own)
            t, c = time.perf_counter(), time.process_time()
            res = reranker.score(q, texts, workspace=ws)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            computed += res.computed
        rows[name] = {**timing(times), "cpu_median_ms": round(statistics.median(cpu), 1),
                      "chunks_encoded": computed, "load_avg_1min": round(os.getloadavg()[0], 2)}
        print(f"  {name:<36} wall median {rows[name]['median_ms']} ms p95 {rows[name]['p95_ms']} ms; "
              f"encoded {computed}", file=sys.stderr)
    return {"documents": len(deps.store.corpus.documents(ws)), "questions": len(run.results),
            "runtime": deps.embedder.model_id, "vectors_model": ingested,
            "config": "product-defaults (PipelineConfig() + the set's overrides, as bench/quality.py)",
            "metrics": {k: round(float(run.metrics[k]), 4) for k in keys if run.metrics.get(k) is not None},
            "eval_seconds": round(eval_s, 1), "peak_rss_after_eval_mb": rss_eval,
            "rerank_queries": len(lists), "candidates_per_call": max((len(t) for _, t in lists), default=0),
            "rerank": rows, "memory_cache_max_mb": round(cache.max_bytes / 1e6, 1), "peak_rss_mb": _rss_mb(),
            "load_avg_1min_end": round(os.getloadavg()[0], 2)}


def twin_cross_encoder(folder: Path) -> Path:
    """MiniLM-L6 (the bundled embedder's weights) with a fresh one-logit classification head, saved as a
    cross-encoder folder: the same compute as ms-marco-MiniLM-L-6-v2, built offline."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from core.models.embed import bundled_model_path

    hf_logging.set_verbosity_error()
    src = bundled_model_path()
    model = AutoModelForSequenceClassification.from_pretrained(str(src), num_labels=1)
    tok = AutoTokenizer.from_pretrained(str(src))
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="latency,quality,compression")
    ap.add_argument("--datasets", help="folder of the public sets (default RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--db-dir", type=Path, default=ROOT / "data" / "bench")
    ap.add_argument("--limit", type=int, help="first N questions per set (smoke run; nothing is written)")
    ap.add_argument("--latency-queries", type=int, default=40)
    ap.add_argument("--latency-slow", type=int, default=5, help="queries for the slow (uncached) rerankers")
    ap.add_argument("--scifact-db", type=Path, default=ROOT / "data" / "bench" / "cascade_scifact.duckdb",
                    help="part 'scifact': the DuckDB for the whole SciFact corpus")
    ap.add_argument("--scifact-keep", action="store_true",
                    help="part 'scifact': keep the database (default: start from an empty one, so ingest is measured)")
    ap.add_argument("--scifact-docs", type=int, help="part 'scifact': first N abstracts only (smoke run, not written)")
    ap.add_argument("--scifact-phase", choices=["ingest", "eval"], help=argparse.SUPPRESS)  # the child processes
    args = ap.parse_args(argv)
    if args.scifact_phase:
        root = datasets_dir(args.datasets)
        res = (scifact_ingest(root, args.scifact_db, args.scifact_docs) if args.scifact_phase == "ingest"
               else scifact_eval(root, args.scifact_db, args.latency_queries, args.limit))
        print(json.dumps(res))
        return 0
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    root = datasets_dir(args.datasets)
    args.db_dir.mkdir(parents=True, exist_ok=True)
    ac_db = args.db_dir / "cascade_anthropic_codebase.duckdb"
    results: dict[str, Any] = {}
    if "latency" in parts:
        results["latency"] = part_latency(root, ac_db, args.latency_queries, args.latency_slow)
    if "quality" in parts:
        results["quality"] = part_quality(root, ac_db, args.limit)
    if "compression" in parts:
        results["compression"] = part_compression(args.limit, args.db_dir / "cascade_sample.duckdb")
    if "scifact" in parts:  # not in the default --only: it needs the whole SciFact corpus in the bench DB
        results["scifact"] = part_scifact(root, args.scifact_db, args.latency_queries, fresh=not args.scifact_keep,
                                          docs=args.scifact_docs, limit=args.limit)
    if args.limit or args.scifact_docs:
        print(json.dumps(results, indent=1, default=str))
        print("--limit / --scifact-docs given: results not written", file=sys.stderr)
        return 0
    # One file per part, each holding this run only: parts run at different times (hours apart), and a file that
    # merged them would carry numbers from several commits under one stamp.
    stamp = {"command": "python bench/cascade.py " + " ".join(argv if argv is not None else sys.argv[1:]),
             "measured_at": utc_now(), "machine": machine_info()}
    for k, v in results.items():
        path = write_result(f"cascade_{k}", {"benchmark": "cascade", "part": k, **v, **stamp}, argv=argv,
                            table=MEASURED_CASCADE[k])
        print(f"wrote {path}")
    if "quality" in results:
        keys = ["pass@5", "pass@10", "pass@20"]
        print(table(["config", *keys], [[r["name"], *[r["metrics"].get(k) for k in keys]]
                                         for r in results["quality"]["rows"]]))
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_cascade_quality(d: dict[str, Any], file: str) -> list[str]:
    out = ["### Compression cascade", "", f"Rerank quality on `{d['dataset']}` (Pass@k):", "", CAPTION, ""]
    rows = [[r["name"], r.get("description", ""), f"`{r.get('config_hash', '')}`", num(r["metrics"].get("pass@5")),
             num(r["metrics"].get("pass@10")), num(r["metrics"].get("pass@20"))] for r in d["rows"]]
    out.append(grid(["configuration", "what", "hash", "Pass@5", "Pass@10", "Pass@20"], rows))
    return out


def measured_cascade_compression(d: dict[str, Any], file: str) -> list[str]:
    out = [f"Compression on `{d['dataset']}` ({d['rows'][0]['questions']} answerable questions; tokens: "
           f"{d.get('tokens', 'estimated LLM tokens')}; default budget {d.get('token_budget')}):", "", CAPTION,
           ""]
    rows = [[r["name"], r.get("description", ""), num(r["metrics"].get("recall@10"), 3),
             num(r.get("tokens_to_model_mean"), 0), num((r.get("stage_ms_median") or {}).get("prune"), 1)]
            for r in d["rows"]]
    out.append(grid(["configuration", "what", "recall@10", "tokens to the model (mean)", "prune ms (median)"],
                        rows))
    sweep = d.get("budget_sweep") or []
    if sweep:
        budgets = sorted({s["token_budget"] for s in sweep})
        scorers = list(dict.fromkeys(s["scorer"] for s in sweep))
        cell = {(s["scorer"], s["token_budget"]): s for s in sweep}
        head = ["scorer (`prune.scorer`)"]
        for b in budgets:
            reds = [cell[(sc, b)].get("token_reduction_vs_rerank_top10") for sc in scorers if (sc, b) in cell]
            red = reds[0] if reds and all(r == reds[0] for r in reds) and reds[0] is not None else None
            head.append(f"{b} tokens" + (f" (−{red * 100:.0f}%)" if red is not None else ""))
        head.append("prune ms (median, min–max over budgets)")
        rows = []
        for sc in scorers:
            ms = [cell[(sc, b)].get("prune_ms_median") for b in budgets if (sc, b) in cell]
            ms = [m for m in ms if m is not None]
            rows.append([f"`{sc}`", *[num(cell[(sc, b)].get("recall@10"), 3) if (sc, b) in cell else "–"
                                       for b in budgets],
                         f"{num(min(ms), 1)}–{num(max(ms), 1)}" if ms else "–"])
        out += ["", "Budget sweep by sentence scorer: recall@10 after pruning the rerank top-10 (same run; the "
                "reduction is the share of tokens saved against the rerank top-10):", "", grid(head, rows)]
        drops = [s for s in sweep if s.get("recall@10_drop_points_vs_rerank_top10") is not None]
        if drops:
            best = {}
            for s in drops:
                b = s["token_budget"]
                if b not in best or s["recall@10_drop_points_vs_rerank_top10"] < best[b]["recall@10_drop_points_vs_rerank_top10"]:
                    best[b] = s
            out += ["", "Smallest recall@10 loss per budget against the rerank top-10: " + "; ".join(
                f"{b} tokens: `{s['scorer']}` {loss(s['recall@10_drop_points_vs_rerank_top10'])} points"
                for b, s in sorted(best.items())) + "."]
    comps = d.get("comparisons") or []
    if comps:
        out += ["", "Compared with its baseline (same run):", ""]
        out.append(grid(["baseline", "compressed", "tokens saved", "recall@10 change (points)"],
                            [[c["baseline"], c["compressed"], f"{c['token_reduction'] * 100:.1f}%",
                              loss(c["recall@10_drop_points"])] for c in comps]))
    return out


def measured_cascade_scifact(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14 part 2: the default configuration on the whole SciFact corpus, ingest then eval, each phase in its own
    process with its own peak RSS (bench/cascade.py --only scifact)."""
    ing, ev = d.get("ingest") or {}, d.get("eval") or {}
    m = ev.get("metrics") or {}
    out = [f"### The default configuration on the whole SciFact corpus ({num(ing.get('documents'))} abstracts): "
           "ingest, eval, rerank", "", CAPTION, ""]
    out.append(grid(["phase (own process)", "work", "seconds", "peak RSS MB"], [
        ["ingest into an empty database", f"{num(ing.get('documents'))} abstracts, {num(ing.get('chunks'))} chunks "
         f"embedded with token vectors ({ing.get('runtime', '')})", num(ing.get("seconds"), 1),
         num(ing.get("peak_rss_mb"), 0)],
        ["eval: product defaults", f"{num(ev.get('questions'))} queries: nDCG@10 **{num(m.get('ndcg@10'), 3)}**, "
         f"recall@100 {num(m.get('recall@100'), 3)}, recall@10 {num(m.get('recall@10'), 3)}, MRR {num(m.get('mrr'), 3)}",
         num(ev.get("eval_seconds"), 1), num(ev.get("peak_rss_mb"), 0)],
    ]))
    rows = [[name, num(r.get("median_ms"), 1), num(r.get("p95_ms"), 1), num(r.get("cpu_median_ms"), 1),
             num(r.get("chunks_encoded"))] for name, r in (ev.get("rerank") or {}).items()]
    out += ["", f"Late-interaction rerank of the fused top-{ev.get('candidates_per_call')} for the first "
                f"{ev.get('rerank_queries')} queries (in the eval process, after the eval):", ""]
    out.append(grid(["late-interaction rerank", "median ms", "p95 ms", "CPU median ms", "chunks encoded"], rows))
    out += ["", f"Token vectors: {num(ing.get('token_vector_rows'))} texts, {num(ing.get('token_vector_file_mb'), 1)} MB "
                f"of float16 in the append-only file beside the database (the DuckDB file itself "
                f"{num(ing.get('duckdb_file_mb'), 1)} MB); memory cache bounded at {num(ev.get('memory_cache_max_mb'), 1)} "
                f"MB. Peak RSS is ru_maxrss of each phase's process (ingest includes the model load, "
                f"{num(ing.get('rss_after_model_load_mb'), 0)} MB). Target: {d.get('target')} — met: "
                f"{', '.join(f'{k} {v}' for k, v in (d.get('meets_target') or {}).items())}."]
    return out


def measured_cascade_latency(d: dict[str, Any], file: str) -> list[str]:
    per = d.get("candidates_per_call") or {}
    n = per.get("max") if per.get("min") == per.get("max") else f"{per.get('min')}–{per.get('max')}"
    out = [f"Rerank latency, {n} candidates per call:", "", CAPTION, ""]
    rows = [[name, num(r.get("n")), num(r.get("median_ms"), 1), num(r.get("p95_ms"), 1), r.get("note", "")]
            for name, r in (d.get("rerankers") or {}).items()]
    out.append(grid(["reranker", "n", "median ms", "p95 ms", "note"], rows))
    return out


def measured_sweep(d: dict[str, Any], file: str) -> list[str]:
    """Issue #27 item 5: the standard grid over one golden set, ranked, with no-clear-difference bands."""
    out = [f"### Sweep: which technique helps on {d.get('set', 'a golden set')}", "", CAPTION, "",
           f"{d.get('questions', '?')} questions ({d.get('unanswerable', '?')} unanswerable; {d.get('cut', '')}), "
           f"ranked by {', then '.join(d.get('rank_by') or ['recall@5'])}; band 1 = no clear difference from the "
           "best (paired per-question noise). Rates in %. Median ms are read on a shared, loaded machine and in grid "
           "order (the first configurations pay the caches' warm-up): compare them within one run only, loosely.", ""]
    rows = [[r.get("rank"), r.get("band"), r.get("config"), pct(r.get("recall@5")), pct(r.get("recall@10")),
             num(r.get("mrr"), 3), pct(r.get("answered_correctly")), pct(r.get("refused_unanswerable")),
             num(r.get("median ms"), 0), num(r.get("$ / query"), 4)] for r in d.get("table") or []]
    out.append(grid(["rank", "band", "configuration", "recall@5", "recall@10", "MRR", "answered correctly",
                         "refused", "median ms", "$ / query"], rows))
    return out


MEASURED_CASCADE_QUALITY = Table(measured_cascade_quality, 'Compression cascade')
MEASURED_CASCADE_COMPRESSION = Table(measured_cascade_compression, 'Compression cascade')
MEASURED_CASCADE_LATENCY = Table(measured_cascade_latency, 'Compression cascade')
MEASURED_CASCADE_SCIFACT = Table(measured_cascade_scifact, 'Compression cascade')
MEASURED_CASCADE = {"quality": MEASURED_CASCADE_QUALITY, "compression": MEASURED_CASCADE_COMPRESSION,
                    "latency": MEASURED_CASCADE_LATENCY, "scifact": MEASURED_CASCADE_SCIFACT}


if __name__ == "__main__":
    sys.exit(main())
