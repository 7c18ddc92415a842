"""Fits the agentic loop's offline grader and writes core/models/data/agent_grader.npz with its provenance:
`python -m train.agent_grader` (`--out PATH` writes elsewhere; `--compare` also scores the shipped grader and the new
one on the held-out even questions, AUROC of 'a gold passage', without writing unless --out is given).

Data: 2WikiMultihopQA's dev sample (the shared datasets' twowiki_multihop, public), its 2,086 passages one chunk each
in a DuckDB under data/bench/ (embedded once, shared with bench/agent.py). Rows: every round-1 candidate of the
odd-numbered questions (1-based, in file order) under plain hybrid retrieval (no cascade, no router), features
core.route.agent.grade_features, label 1 when the candidate is one of the question's gold passages. The even questions
are never read by the fit. Model: logistic regression by plain gradient descent (L2 1e-2, 3,000 steps of 0.5), the
recipe the shipped file was fitted with (as `bench/agent.py --fit`); cut points 0.5 (correct) and 0.15 (incorrect).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.config import PipelineConfig
from core.deps import build_deps
from core.eval.datasets import ingest_predocs, twowiki_predocs
from core.models.fitted import save_fitted, sigmoid
from core.pipeline import run_query
from core.route.agent import GRADER_FILE, GraderModel, grade_features
from train.provenance import ROOT, provenance, sha256_text

RECIPE = "python -m train.agent_grader"
WS = "twowiki"
DEFAULT_DB = ROOT / "data" / "bench" / "agent.duckdb"
# Round 1 as the grader sees it in the fit: plain hybrid retrieval, nothing after fusion.
RETRIEVAL = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "answer.enabled": False,
             "answer_cache.enabled": False, "fusion.k": 20, "bm25.k": 50, "dense.k": 50, "router.enabled": False}
UPPER, LOWER = 0.5, 0.15  # grade cut points: p >= UPPER correct, p < LOWER incorrect, ambiguous between


def fit_gd(x: np.ndarray, y: np.ndarray, *, l2: float = 1e-2, steps: int = 3000, rate: float = 0.5
           ) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by full-batch gradient descent (the intercept not penalised)."""
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        g = sigmoid(x @ w + b) - y
        w -= rate * (x.T @ g / len(y) + l2 * w)
        b -= rate * float(g.mean())
    return w, float(b)


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    """Probability that a random positive scores above a random negative (ties by rank order)."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    ranks = np.argsort(np.argsort(np.array(pos + neg))) + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def rows(questions: Sequence[dict[str, Any]], search: Any, titles: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of every round-1 candidate of `questions`."""
    feats: list[list[float]] = []
    labels: list[int] = []
    for q in questions:
        final = search(q["question"]).final()
        cands = list(final.candidates) if final else []
        gold = set(q["gold_titles"])
        for c, row in zip(cands, grade_features(q["question"], cands)):
            feats.append(row)
            labels.append(int(titles.get(c.doc_id) in gold))
    return np.array(feats, dtype=np.float64).reshape(-1, 4), np.array(labels, dtype=np.float64)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", help="the shared datasets folder (default: RAG_DATASETS, else ../shared/datasets)")
    ap.add_argument("--db", default=str(DEFAULT_DB))
    ap.add_argument("--limit", type=int, default=0, help="the first N questions of the file only (a quick check)")
    ap.add_argument("--out", help=f"where to write the grader (default {GRADER_FILE.relative_to(ROOT)})")
    ap.add_argument("--compare", action="store_true", help="score the shipped and the new grader on the even "
                                                          "questions; writes nothing unless --out is given")
    args = ap.parse_args(argv)
    root = Path(args.datasets or os.environ.get("RAG_DATASETS", ROOT.parent / "shared" / "datasets"))
    root = root / "twowiki_multihop"
    if not (root / "questions.jsonl").is_file():
        print(f"twowiki_multihop not found under {root}", file=sys.stderr)
        return 2
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig().with_overrides(RETRIEVAL)
    deps = build_deps(cfg, db=args.db)
    t0 = time.perf_counter()
    rep = ingest_predocs(twowiki_predocs(root, WS), store=deps.store, embedder=deps.embedder, workspace=WS)
    print(f"corpus: {rep.documents} passages, {rep.embedded} embedded now ({time.perf_counter() - t0:.1f} s)")
    titles = {d.doc_id: d.name for d in deps.store.corpus.documents(WS)}
    text = (root / "questions.jsonl").read_text(encoding="utf-8")
    questions = [json.loads(line) for line in text.splitlines() if line.strip()]
    if args.limit:
        questions = questions[: args.limit]
    odd = [q for i, q in enumerate(questions, start=1) if i % 2 == 1]

    def search(q: str) -> Any:
        return run_query(q, cfg, deps, workspace=WS, log=False)

    x, y = rows(odd, search, titles)
    w, b = fit_gd(x, y)
    model = GraderModel(tuple(round(float(v), 4) for v in w), round(b, 4), UPPER, LOWER,
                        f"{RECIPE}: twowiki_multihop odd questions, round-1 candidates")
    print(f"fitted on {len(y):.0f} candidates of {len(odd)} odd questions ({int(y.sum())} gold): "
          f"weights {model.weights}, bias {model.bias}")
    out = Path(args.out) if args.out else None if args.compare else GRADER_FILE
    if args.compare:
        xe, ye = rows([q for i, q in enumerate(questions, start=1) if i % 2 == 0], search, titles)
        shipped = GraderModel.load()
        for name, m in (("shipped", shipped), ("refit", model)):
            got = auroc([m.prob(r) for r in xe], [int(v) for v in ye])
            print(f"{name}: weights {m.weights}, bias {m.bias}; even-question AUROC "
                  f"{'n/a' if got is None else f'{got:.4f}'} over {len(ye)} candidates")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_fitted(out, model.record(provenance(
            RECIPE, f"twowiki_multihop/questions.jsonl odd questions ({len(odd)}), round-1 candidates ({len(y):.0f})",
            "odd questions (1-based, file order)", sha256_text(text), rows=str(len(y)))))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
