"""Quality benchmark: every configuration tried on a golden set, one row each, in bench/results/quality_<set>.json.

Run from the repo root:
    .venv/bin/python bench/quality.py --dataset anthropic_codebase        # or beir_scifact, sample
    .venv/bin/python bench/quality.py --dataset anthropic_codebase --only bm25,hybrid-rrf60

Each configuration goes through the product's own path (core.eval.run.run_eval -> core.pipeline.run_query), in a
bench DuckDB under data/bench/ that keeps the corpus, its embeddings and every run, so a second invocation embeds
nothing. Query vectors are encoded once per set in batches (the only shortcut: same model, same texts), so the
latency columns say little about dense search; the quality numbers are what this file is for.
Rows from earlier invocations are kept unless the same configuration name is run again.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from _common import (
    RESULTS,
    ROOT,
    datasets_dir,
    machine_info,
    table,
    utc_now,
    write_result,
)
from _common import CAPTION, Table, grid, num, row_time  # noqa: E402

from core.config import PipelineConfig  # noqa: E402
from core.deps import Deps, build_deps  # noqa: E402
from core.eval.datasets import load_dataset  # noqa: E402
from core.eval.run import EvalRun, NamedConfig, run_eval  # noqa: E402
from core.store import Store  # noqa: E402

HYBRID = {"bm25.enabled": True, "dense.enabled": True, "fusion.enabled": True}
BM25_ONLY = {"bm25.enabled": True, "dense.enabled": False, "fusion.enabled": False}
DENSE_ONLY = {"bm25.enabled": False, "dense.enabled": True, "fusion.enabled": False}
DEEP = {"bm25.k": 100, "dense.k": 100}


def weighted(bm25: float, rrf_k: int) -> dict[str, Any]:
    return {"fusion.method": "weighted_rrf", "fusion.bm25_weight": bm25, "fusion.dense_weight": 1.0,
            "fusion.rrf_k": rrf_k}


HEUR = {"context.variant": "heuristic"}
# Rows measure retrieval as the published tables do: the cascade after fusion (rerank, prune, mmr) and the answer
# are off unless a row turns them on; SciFact rows also keep 100 documents for recall@100.
RETRIEVAL_ONLY = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "answer.enabled": False}
BASE_OVERRIDES = {
    "anthropic_codebase": RETRIEVAL_ONLY,
    "beir_scifact": {**RETRIEVAL_ONLY, "bm25.k": 100, "dense.k": 100, "fusion.k": 100},
    "sample": {},
}
RERANK_LI = {"rerank.enabled": True, "rerank.method": "late-interaction", "rerank.top_n": 50, "rerank.k": 20}
DEFAULTS = {"__defaults__": True}  # PipelineConfig() as shipped, plus only what the set's metrics need

# (name, what it tests, overrides). Names are stable: a re-run replaces its own row.
CONFIGS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "anthropic_codebase": [
        ("dense", "MiniLM cosine only, raw chunks", DENSE_ONLY),
        ("bm25", "BM25 (lucene k1=1.2 b=0.75, identifier splitting, stems) only", BM25_ONLY),
        ("bm25-k1.5", "BM25 k1=1.5", {**BM25_ONLY, "bm25.k1": 1.5}),
        ("hybrid-rrf60", "BM25 + dense, RRF k=60, depth 50 each (the defaults)", HYBRID),
        ("hybrid-rrf60-d100", "defaults with depth 100 each", {**HYBRID, **DEEP}),
        ("hybrid-rrf10", "RRF k=10", {**HYBRID, "fusion.rrf_k": 10}),
        ("hybrid-w1.5-rrf10-d100", "weighted RRF BM25 1.5 : dense 1, k=10, depth 100",
         {**HYBRID, **DEEP, **weighted(1.5, 10)}),
        ("hybrid-w3-rrf10", "weighted RRF BM25 3 : dense 1, k=10", {**HYBRID, **weighted(3.0, 10)}),
        ("heur-bm25", "heuristic context (code outline title + enclosing definitions + lead) BM25 only",
         {**BM25_ONLY, **HEUR}),
        ("heur-dense", "heuristic context, dense only", {**DENSE_ONLY, **HEUR}),
        ("heur-hybrid-rrf60", "heuristic context, RRF k=60 (defaults otherwise)", {**HYBRID, **HEUR}),
        ("heur-hybrid-rrf10", "heuristic context, RRF k=10", {**HYBRID, **HEUR, "fusion.rrf_k": 10}),
        ("heur-hybrid-w1.5-rrf10-d100", "heuristic context, weighted RRF 1.5:1, k=10, depth 100",
         {**HYBRID, **HEUR, **DEEP, **weighted(1.5, 10)}),
        ("heur-hybrid-w2-rrf10-d100", "heuristic context, weighted RRF 2:1, k=10, depth 100",
         {**HYBRID, **HEUR, **DEEP, **weighted(2.0, 10)}),
        ("heur-hybrid-w1.5-rrf30-d100", "heuristic context, weighted RRF 1.5:1, k=30, depth 100",
         {**HYBRID, **HEUR, **DEEP, **weighted(1.5, 30)}),
        ("hybrid-rrf60+rerank-li", "defaults + late-interaction (MaxSim, MiniLM token vectors) rerank of the "
         "fused top 50 -> 20", {**HYBRID, **RERANK_LI}),
        ("heur-hybrid-w1.5-rrf10-d100+rerank-li", "the best hybrid + late-interaction rerank of the top 50 -> 20",
         {**HYBRID, **HEUR, **DEEP, **weighted(1.5, 10), **RERANK_LI}),
        ("product-defaults", "PipelineConfig() as shipped plus only what Pass@20 needs (rerank.k 20, mmr.k 20, "
         "prune off); the CLI's default for this set", DEFAULTS),
    ],
    "beir_scifact": [
        ("bm25", "BM25 lucene k1=1.2 b=0.75", BM25_ONLY),
        ("bm25-anserini", "BM25 k1=0.9 b=0.4 (Anserini's BEIR setting)", {**BM25_ONLY, "bm25.k1": 0.9, "bm25.b": 0.4}),
        ("dense", "MiniLM cosine only", DENSE_ONLY),
        ("hybrid-rrf60", "BM25 + dense, RRF k=60", HYBRID),
        ("hybrid-anserini-rrf60", "BM25 k1=0.9 b=0.4 + dense, RRF k=60", {**HYBRID, "bm25.k1": 0.9, "bm25.b": 0.4}),
        ("hybrid-anserini-rrf10", "BM25 k1=0.9 b=0.4 + dense, RRF k=10",
         {**HYBRID, "bm25.k1": 0.9, "bm25.b": 0.4, "fusion.rrf_k": 10}),
        ("hybrid-anserini-w1.5-rrf60", "BM25 k1=0.9 b=0.4 + dense, weighted RRF 1.5:1, k=60",
         {**HYBRID, "bm25.k1": 0.9, "bm25.b": 0.4, **weighted(1.5, 60)}),
        ("product-defaults", "PipelineConfig() as shipped plus what recall@100 needs (every stage hands on 100, "
         "prune off); the CLI's default for this set", DEFAULTS),
    ],
    "sample": [
        ("bm25", "BM25 only, retrieval only", {**RETRIEVAL_ONLY, **BM25_ONLY}),
        ("dense", "dense only, retrieval only", {**RETRIEVAL_ONLY, **DENSE_ONLY}),
        ("hybrid-rrf60", "BM25 + dense RRF k=60, retrieval only", {**RETRIEVAL_ONLY, **HYBRID}),
        ("product-defaults", "PipelineConfig() as shipped (rerank, prune, mmr, answer)", DEFAULTS),
        ("heur-product-defaults", "as shipped, with heuristic contexts", HEUR),
    ],
}

REFERENCE: dict[str, dict[str, dict[str, float]]] = {
    "anthropic_codebase": {
        "voyage-2 basic RAG (published)": {"pass@5": 80.92, "pass@10": 87.15, "pass@20": 90.06},
        "contextual embeddings + Cohere rerank (published)": {"pass@5": 91.24, "pass@10": 94.79, "pass@20": 96.30},
    },
    "beir_scifact": {
        "BM25 flat, Anserini (published)": {"ndcg@10": 0.6789, "recall@100": 0.9253},
        "BGE-base-en-v1.5, Anserini (published)": {"ndcg@10": 0.7408, "recall@100": 0.9667},
    },
}
TARGET = {"anthropic_codebase": "voyage-2 basic RAG (published)"}
SHOWN = {
    "anthropic_codebase": ["pass@5", "pass@10", "pass@20", "mrr", "ndcg@10"],
    "beir_scifact": ["ndcg@10", "recall@100", "recall@10", "mrr"],
    "sample": ["recall@5", "recall@10", "mrr", "ndcg@10", "context_precision"],
}



class QueryVectorCache:
    """Wraps the embedder: the set's questions are encoded once, in batches; everything else passes through."""

    def __init__(self, inner: Any, queries: Sequence[str]) -> None:
        self.inner, self.model_id, self.languages = inner, inner.model_id, inner.languages
        vecs = inner.encode(list(queries)) if queries else np.zeros((0, 1), np.float32)
        self._cache = {q: v for q, v in zip(queries, vecs)}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if texts and all(t in self._cache for t in texts):
            return np.stack([self._cache[t] for t in texts])
        return self.inner.encode(texts)

    def __getattr__(self, name: str) -> Any:  # dim, max_seq_length, model ... of the real embedder
        return getattr(self.inner, name)


def beats(metrics: dict[str, Any], ref: dict[str, float]) -> bool:
    return all(metrics.get(k) is not None and metrics[k] >= v for k, v in ref.items())


def selection_check(dataset: str, runs: dict[str, EvalRun], metric_keys: Sequence[str]) -> list[dict[str, Any]]:
    """Guard against picking the winner on the test questions: choose the best configuration on odd-numbered
    questions and report it on the even ones, and the other way round."""
    if not runs:
        return []
    out = []
    for pick, report in (("odd", "even"), ("even", "odd")):
        def mean_on(run: EvalRun, half: str, key: str) -> float | None:
            vals = [r["metrics"].get(key) for i, r in enumerate(run.results) if (i % 2 == 1) == (half == "odd")]
            vals = [v for v in vals if v is not None]
            return sum(vals) / len(vals) if vals else None

        score = {n: sum((mean_on(r, pick, k) or 0.0) for k in metric_keys) for n, r in runs.items()}
        best = max(score, key=lambda n: score[n])
        out.append({"chosen_on": pick, "chosen": best, "reported_on": report,
                    "metrics": {k: mean_on(runs[best], report, k) for k in metric_keys}})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--db", help="bench DuckDB (default data/bench/quality_<dataset>.duckdb)")
    ap.add_argument("--datasets", help="folder holding the public sets (default RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--only", help="comma-separated configuration names")
    ap.add_argument("--limit", type=int, help="first N questions only (smoke runs; rows are then not written)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    gs = load_dataset(args.dataset, datasets_dir(args.datasets))
    db = args.db or str(ROOT / "data" / "bench" / f"quality_{args.dataset}.duckdb")
    wanted = [c for c in CONFIGS[args.dataset] if not args.only or c[0] in args.only.split(",")]
    if not wanted:
        print(f"no configuration matches --only {args.only}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    base = build_deps(PipelineConfig(), store=Store(db))
    queries = [q.query for q in (gs.queries[: args.limit] if args.limit else gs.queries)]
    deps = Deps(store=base.store, embedder=QueryVectorCache(base.embedder, queries), notices=base.notices)
    print(f"{args.dataset}: {len(queries)} questions, db {db}; query vectors in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)

    runs: dict[str, EvalRun] = {}
    rows = []
    for name, desc, overrides in wanted:
        if overrides.get("__defaults__"):
            cfg = PipelineConfig().with_overrides(gs.overrides)
        else:
            cfg = PipelineConfig().with_overrides({**BASE_OVERRIDES.get(args.dataset, {}), **overrides})
        t = time.perf_counter()
        run = run_eval(gs, [NamedConfig(name, cfg)], deps, limit=args.limit)[0]
        runs[name] = run
        shown = {k: run.metrics.get(k) for k in SHOWN[args.dataset]}
        row = {"name": name, "description": desc, "config_hash": run.config_hash, "overrides": overrides,
               "metrics": {k: v for k, v in run.metrics.items() if v is not None},
               "stage_recall": {s: {k: v for k, v in d.items() if k in ("depth", "recall", "token_share")}
                                for s, d in run.stage_recall.items() if d.get("recall") is not None},
               "questions": len(run.results), "seconds": round(time.perf_counter() - t, 1), "measured_at": utc_now(),
               "eval_id": run.eval_id}
        target = TARGET.get(args.dataset)
        if target:
            row["beats_target"] = {"target": target, "beats": beats(run.metrics, REFERENCE[args.dataset][target])}
        rows.append(row)
        print(f"{name:<32} " + "  ".join(f"{k} {v:.3f}" if v is not None else f"{k} —" for k, v in shown.items())
              + f"  ({row['seconds']} s)", file=sys.stderr)

    if args.limit:
        print("--limit given: results not written", file=sys.stderr)
        return 0
    out = args.out or RESULTS / f"quality_{args.dataset}.json"
    old = json.loads(out.read_text()) if out.exists() else {}
    merged = [r for r in old.get("rows", []) if r["name"] not in {n for n, _, _ in wanted}] + rows
    order = [n for n, _, _ in CONFIGS[args.dataset]]
    merged.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    payload = {
        "benchmark": "quality", "dataset": args.dataset, "questions": len(queries),
        "command": "python bench/quality.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "embedder": base.embedder.model_id, "measured_at": utc_now(), "machine": machine_info(),
        "reference": REFERENCE.get(args.dataset, {}),
        "metric_notes": "pass@k on the cookbook's 0-100 scale (golden chunk text == retrieved chunk text, stripped); "
                        "recall/ndcg/mrr per core/eval/metrics.py (BEIR sets score documents)",
        "selection_check": selection_check(args.dataset, runs, ["pass@5", "pass@10", "pass@20"])
        if args.dataset == "anthropic_codebase" else [],
        "rows": merged,
    }
    path = write_result(f"quality_{args.dataset}", payload, out,
                        table=MEASURED_QUALITY.get(args.dataset, MEASURED_QUALITY_BEIR))
    keys = SHOWN[args.dataset]
    print(table(["config", "hash", *keys], [[r["name"], r["config_hash"], *[r["metrics"].get(k) for k in keys]]
                                              for r in merged]))
    print(f"wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_quality_codebase(d: dict[str, Any], file: str) -> list[str]:
    out = [f"### Quality: `{d['dataset']}` ({d['questions']} queries, Pass@k as the cookbook scores it)", "",
           CAPTION, "",
           "Rows were measured at the times in the last column (the bench keeps rows of earlier runs of other "
           "configurations). `heur-` rows search chunks with the heuristic context (title, heading path, lead "
           "sentence; no LLM); `wX` is the BM25 weight in weighted RRF, `rrfN` the RRF constant, `dN` the candidate "
           "depth, `+rerank-li` the late-interaction rerank.", ""]
    rows = [[f"*published: {name.replace(' (published)', '')}*", "", num(m.get("pass@5")), num(m.get("pass@10")),
             num(m.get("pass@20")), "", ""] for name, m in (d.get("reference") or {}).items()]
    for r in d["rows"]:
        m = r["metrics"]
        rows.append([r["name"], f"`{r.get('config_hash', '')}`", num(m.get("pass@5")), num(m.get("pass@10")),
                     num(m.get("pass@20")), num(m.get("ndcg@10"), 3), row_time(r)])
    out.append(grid(["configuration", "hash", "Pass@5", "Pass@10", "Pass@20", "nDCG@10", "measured (UTC)"], rows))
    checks = d.get("selection_check") or []
    if checks:
        out += ["", "Held-out check (the best row picked on half the queries, reported on the other half):"]
        for c in checks:
            m = c["metrics"]
            out.append(f"- chosen on {c['chosen_on']} queries: **{c['chosen']}** → on {c['reported_on']} queries "
                       f"{num(m['pass@5'])} / {num(m['pass@10'])} / {num(m['pass@20'])}")
    return out


def measured_quality_beir(d: dict[str, Any], file: str) -> list[str]:
    refs = d.get("reference") or {}
    ref_s = "; ".join(f"{name.replace(' (published)', '')} nDCG@10 {num(m.get('ndcg@10'), 3)}"
                      for name, m in refs.items())
    out = [f"### Quality: BEIR `{d['dataset']}` ({d['questions']} queries" + (f"; published: {ref_s}" if ref_s else "")
           + ")", "", CAPTION, ""]
    rows = [[r["name"], r.get("description", ""), f"`{r.get('config_hash', '')}`", num(r["metrics"].get("ndcg@10"), 3),
             num(r["metrics"].get("recall@100"), 3), row_time(r)] for r in d["rows"]]
    out.append(grid(["configuration", "what", "hash", "nDCG@10", "recall@100", "measured (UTC)"], rows))
    return out


def measured_quality_sample(d: dict[str, Any], file: str) -> list[str]:
    """bench/quality.py on sample_corpus/eval.jsonl (chunk-level recall, product rows with answer metrics)."""
    out = [f"### Quality: `sample_corpus` ({d.get('questions')} questions of `eval.jsonl`)", "", CAPTION, "",
           "Chunk-level retrieval metrics by configuration; the answer columns exist only for rows that produce an "
           "answer. The rows' own measurement times are in the last column (the offline answer section below has "
           "the answer rates of the current support model).", ""]
    rows = []
    for r in d.get("rows") or []:
        m = r.get("metrics") or {}
        rows.append([r.get("name", ""), r.get("description", ""), num(m.get("recall@5"), 3), num(m.get("recall@10"), 3),
                     num(m.get("mrr"), 3), num(m.get("ndcg@10"), 3), num(m.get("ms"), 0),
                     num(m.get("faithfulness"), 3), num(m.get("refusal_accuracy"), 3), row_time(r)])
    out.append(grid(["configuration", "what", "recall@5", "recall@10", "MRR", "nDCG@10", "ms (mean)",
                         "faithfulness", "refusal accuracy", "measured (UTC)"], rows))
    return out


MEASURED_QUALITY_CODEBASE = Table(measured_quality_codebase, 'Retrieval quality')
def headline_quality_beir(d: dict[str, Any], file: str) -> tuple[str, str | None] | None:
    """The README row of BEIR SciFact: the shipped defaults beside the published references."""
    if file != "quality_beir_scifact.json":
        return None
    prod = next((x for x in d.get("rows") or [] if x.get("name") == "product-defaults"), {})
    nd = (prod.get("metrics") or {}).get("ndcg@10")
    refs = "; ".join(f"{n.replace(' (published)', '')} {num(m.get('ndcg@10'), 3)}"
                     for n, m in (d.get("reference") or {}).items())
    return (f"BEIR SciFact ({num(d.get('questions'))} queries), the shipped defaults", None if nd is None else
            f"nDCG@10 **{num(nd, 3)}**" + (f" (published: {refs})" if refs else ""))


MEASURED_QUALITY_BEIR = Table(measured_quality_beir, 'Retrieval quality', headline=headline_quality_beir)
MEASURED_QUALITY_SAMPLE = Table(measured_quality_sample, 'Retrieval quality')
# by --dataset; any other set (BEIR's) is shown as SciFact is
MEASURED_QUALITY = {"anthropic_codebase": MEASURED_QUALITY_CODEBASE, "sample": MEASURED_QUALITY_SAMPLE}


if __name__ == "__main__":
    sys.exit(main())
