"""Agentic loop benchmark on twowiki_multihop: single-shot vs a crude bridge vs the loop, by question type.

Run from the repo root:
    .venv/bin/python bench/agent.py                       # all 300 questions, writes bench/results/agent.json
    .venv/bin/python bench/agent.py --limit 60 --fit      # also fit the offline grader on the odd questions

Corpus: the 2,086 passages, one chunk each ("title\\ntext", doc name = title), in a bench DuckDB under data/bench/
(embedded once, reused). Scored at document level against `gold_titles`:
- recall@5: share of a question's gold passages among the first 5 distinct documents;
- all-gold@10: the question counts when every gold passage is among the first 10.

Rows, all through the product's own run_query on the same store in one run:
- single-shot: the retrieval configuration below, one query;
- crude bridge: one extra round that queries BM25 with the capitalised names found in the top-3 passages and not in
  the question, appended after the first round's top-3 (the floor the issue names);
- agent: core.route.agent.run_agent with the offline grader and entity-bridging writer, <= 3 rounds.
The grader's AUROC (passage useful = a gold passage) is computed on round-1 candidates. With --fit the grader is
fitted on odd-numbered questions of this set plus odd questions of sample_corpus/eval.jsonl and saved to
core/route/data/agent_grader.json; reported numbers then say which split they come from.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from _common import ROOT, datasets_dir, table, write_result

from core.config import PipelineConfig  # noqa: E402
from core.datasets import ingest_predocs, twowiki_predocs  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.route.agent import (GRADER_FILE, BridgeWriter, Budget, GraderModel, OfflineGrader,  # noqa: E402
                              grade_features, names_in, run_agent)
from core.types import Candidate  # noqa: E402

WS = "twowiki"
RETRIEVAL = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "answer.enabled": False,
             "fusion.k": 20, "bm25.k": 50, "dense.k": 50, "router.enabled": False}


def doc_order(cands: Sequence[Candidate]) -> list[str]:
    seen: list[str] = []
    for c in cands:
        if c.doc_id not in seen:
            seen.append(c.doc_id)
    return seen


def score(docs: Sequence[str], gold: set[str]) -> tuple[float, float]:
    r5 = len(gold & set(docs[:5])) / len(gold)
    return r5, float(gold <= set(docs[:10]))


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    ranks = np.argsort(np.argsort(np.array(list(pos) + list(neg)))) + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 3000) -> tuple[np.ndarray, float]:
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        g = p - y
        w -= 0.5 * (x.T @ g / len(y) + l2 * w)
        b -= 0.5 * g.mean()
    return w, float(b)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--fit", action="store_true", help="fit the offline grader on odd questions and save it")
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "agent.duckdb"))
    ap.add_argument("--head", type=int, default=None)
    ap.add_argument("--decompose", action="store_true",
                    help="every round (and the single-shot row) runs with transforms.decompose = on")
    args = ap.parse_args(argv)
    root = datasets_dir(args.datasets) / "twowiki_multihop"
    if not (root / "questions.jsonl").is_file():
        print(f"twowiki_multihop not found under {root}", file=sys.stderr)
        return 2
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    base = PipelineConfig()
    cfg = base.with_overrides({**RETRIEVAL, **({"transforms.decompose": "on"} if args.decompose else {})})
    deps = build_deps(cfg, db=args.db)
    t0 = time.perf_counter()
    rep = ingest_predocs(twowiki_predocs(root, WS), store=deps.store, embedder=deps.embedder, workspace=WS)
    print(f"corpus: {rep.documents} passages, embedded {rep.embedded} in {time.perf_counter() - t0:.1f}s")
    titles = {d.doc_id: d.name for d in deps.store.corpus.documents(WS)}
    questions = [json.loads(r) for r in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    if args.limit:
        questions = questions[: args.limit]

    def search(q: str) -> Any:
        return run_query(q, cfg, deps, workspace=WS, log=False)

    # Grader fitting data: round-1 candidates of odd questions (1-based odd), label = gold passage.
    if args.fit:
        feats, labels = [], []
        for i, q in enumerate(questions, start=1):
            if i % 2 == 0:
                continue
            final = search(q["question"]).final()
            cands = list(final.candidates) if final else []
            for c, row in zip(cands, grade_features(q["question"], cands)):
                feats.append(row)
                labels.append(int(titles.get(c.doc_id) in set(q["gold_titles"])))
        w, b = fit_logistic(np.array(feats), np.array(labels, dtype=float))
        model = GraderModel(tuple(round(float(v), 4) for v in w), round(b, 4), 0.5, 0.15,
                            "bench/agent.py --fit: twowiki_multihop odd questions, round-1 candidates")
        GRADER_FILE.parent.mkdir(parents=True, exist_ok=True)
        GRADER_FILE.write_text(json.dumps({"weights": list(model.weights), "bias": model.bias, "upper": model.upper,
                                           "lower": model.lower, "fitted_on": model.fitted_on}, indent=1) + "\n")
        print(f"grader fitted on {len(labels)} candidates: {model}")
    grader = OfflineGrader()
    cfg_agent = base.agent
    budget = Budget(cfg_agent.max_rounds, cfg_agent.max_llm_calls, cfg_agent.max_tokens, cfg_agent.max_usd,
                    cfg_agent.max_seconds)
    writer = BridgeWriter(cfg_agent.per_round)
    head = cfg_agent.head if args.head is None else args.head
    rows: list[dict[str, Any]] = []
    g_scores: dict[str, list[tuple[float, int]]] = {"even": [], "odd": []}
    for i, q in enumerate(questions, start=1):
        gold = set(q["gold_titles"])
        split = "odd" if i % 2 else "even"
        t = time.perf_counter()
        trace = search(q["question"])
        ms_single = (time.perf_counter() - t) * 1000
        final = trace.final()
        first = list(final.candidates) if final else []
        single = [titles[d] for d in doc_order(first)]
        grading = grader.grade(q["question"], first, None, WS)  # type: ignore[arg-type]
        for (cid, _, p), c in zip(grading.grades, first):
            g_scores[split].append((p, int(titles.get(c.doc_id) in gold)))
        # crude bridge: BM25 over capitalised names of the top-3 not in the question
        names = [n for c in first[:3] for n in names_in(c.text) if n.lower() not in q["question"].lower()]
        crude = single[:3]
        if names:
            bq = " ".join(dict.fromkeys(names))[:1500]
            bt = run_query(bq, cfg.with_overrides({"dense.enabled": False, "fusion.enabled": False}), deps,
                           workspace=WS, log=False)
            bf = bt.final()
            crude += [titles[d] for d in doc_order(bf.candidates if bf else []) if titles[d] not in crude]
        crude += [d for d in single if d not in crude]
        t = time.perf_counter()
        out = run_agent(q["question"], search, budget=budget, grader=grader, writer=writer, workspace=WS,
                        k=cfg_agent.k, head=head)
        ms_agent = (time.perf_counter() - t) * 1000
        agent_docs = [titles[d] for d in doc_order(out.evidence)]
        row = {"i": i, "type": q["type"], "split": split, "rounds": out.rounds, "stop": out.stop_reason,
               "ms_single": ms_single, "ms_agent": ms_agent}
        for name, docs in (("single", single), ("crude", crude), ("agent", agent_docs)):
            row[f"{name}_r5"], row[f"{name}_all10"] = score(docs, gold)
        rows.append(row)
        if i % 25 == 0:
            print(f"{i}/{len(questions)}", flush=True)

    def summary(sel: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(sel)}
        for name in ("single", "crude", "agent"):
            out[f"{name}_recall@5"] = round(100 * float(np.mean([r[f"{name}_r5"] for r in sel])), 1)
            out[f"{name}_allgold@10"] = round(100 * float(np.mean([r[f"{name}_all10"] for r in sel])), 1)
        out["agent_mean_rounds"] = round(float(np.mean([r["rounds"] for r in sel])), 2)
        out["single_ms_mean"] = round(float(np.mean([r["ms_single"] for r in sel])), 1)
        out["agent_ms_mean"] = round(float(np.mean([r["ms_agent"] for r in sel])), 1)
        return out

    types = ["compositional", "inference", "comparison", "bridge_comparison"]
    by_type = {t: summary([r for r in rows if r["type"] == t]) for t in types if any(r["type"] == t for r in rows)}
    by_type["all"] = summary(rows)
    held = {t: summary([r for r in rows if r["type"] == t and r["split"] == "even"]) for t in types
            if any(r["type"] == t and r["split"] == "even" for r in rows)}
    au = {s: auroc([p for p, _ in v], [y for _, y in v]) for s, v in g_scores.items()}
    stops: dict[str, int] = {}
    for r in rows:
        stops[r["stop"]] = stops.get(r["stop"], 0) + 1
    cols = ["type", "n", "single_recall@5", "crude_recall@5", "agent_recall@5", "single_allgold@10",
            "crude_allgold@10", "agent_allgold@10", "agent_mean_rounds", "single_ms_mean", "agent_ms_mean"]
    print(table(cols, [[t, *[v[c] for c in cols[1:]]] for t, v in by_type.items()]))
    print(f"grader AUROC (round-1 candidates, gold passage = positive): {au}; grader: {grader.model.fitted_on}")
    print(f"stop reasons: {stops}")
    write_result("agent_decompose" if args.decompose else "agent", {
        "decompose": args.decompose,
        "dataset": "twowiki_multihop", "questions": len(rows), "retrieval_overrides": RETRIEVAL,
        "agent": cfg_agent.model_dump(), "head": head, "grader": grader.model.fitted_on,
        "by_type": by_type, "held_out_even": held, "grader_auroc": au, "stop_reasons": stops,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
