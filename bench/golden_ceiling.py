"""How well can any golden set agree with a hand-written one? The hand-written set against itself, at full size.

    nice -n 10 .venv/bin/python bench/golden_ceiling.py [--sets anthropic_codebase,beir_scifact] [--splits 200]

Issue #27 asks a generated set to rank configurations as the hand-written set does (Kendall tau >= 0.7 by
recall@5). bench/golden_validity.py reports each real set's split-half tau at its subsample (60 questions for two
sets), which bounds what a generated set of that size can reach. This bench measures that bound at the sizes a user
would write: every real question of the set (anthropic_codebase 248, beir_scifact 300 claims over 1,000 of its
abstracts, as the guard bench cuts it), scored once per configuration through the product's own path (the nine
configurations of bench/golden_validity.py), then split at random into two halves `--splits` times (seeded): the
tau between the halves' rankings, its median and 10th-90th percentiles, and how often it reaches 0.7. Two halves of
one hand-written set are the best case for two independent sets of that half size: if they disagree, the
configurations' differences on this corpus are within the questions' sampling noise. Also reported: the spread of
recall@5 across configurations against the paired standard error of the closest pair.
Writes bench/results/golden_ceiling.json.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from _common import RESULTS, ROOT, datasets_dir, write_result
from golden_validity import BASE, CONFIGS, METRIC, kendall_tau_b
from quality import QueryVectorCache

from core.config import PipelineConfig
from core.deps import Deps, build_deps
from core.eval.datasets import load_dataset, subsample
from core.eval.run import NamedConfig, prepare, run_eval
from core.graph.build import build_graph
from core.store import Store

CUTS: dict[str, tuple[int | None, int | None]] = {  # (max corpus documents, max questions): None keeps them all
    "anthropic_codebase": (None, None),
    "beir_scifact": (1000, None),
    "sample": (None, None),
}


def per_question(runs: Sequence[Any]) -> list[list[float | None]]:
    """[config][question] recall@5 (None where the question has no gold)."""
    return [[r["metrics"].get(METRIC) for r in run.results] for run in runs]


def halves_tau(scores: list[list[float | None]], idx: Sequence[int], n_splits: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    taus: list[float] = []
    for _ in range(n_splits):
        perm = list(idx)
        rng.shuffle(perm)
        a, b = perm[: len(perm) // 2], perm[len(perm) // 2:]
        ma = [statistics.fmean(s[i] for i in a) for s in scores]
        mb = [statistics.fmean(s[i] for i in b) for s in scores]
        t = kendall_tau_b(ma, mb)
        if t is not None:
            taus.append(t)
    taus.sort()
    q = lambda p: taus[min(len(taus) - 1, int(p * len(taus)))]  # noqa: E731
    return {"splits": len(taus), "half_size": len(idx) // 2, "median": round(statistics.median(taus), 3),
            "p10": q(0.10), "p90": q(0.90), "share_at_least_0.7": round(sum(t >= 0.7 for t in taus) / len(taus), 3)}


def closest_pair(names: Sequence[str], scores: list[list[float | None]], idx: Sequence[int]) -> dict[str, Any]:
    """The spread of recall@5 over configurations, and each adjacent pair's paired difference / standard error."""
    means = [100 * statistics.fmean(s[i] for i in idx) for s in scores]
    order = sorted(range(len(names)), key=lambda j: -means[j])
    pairs = []
    for x, y in zip(order, order[1:]):
        d = [100 * (scores[x][i] - scores[y][i]) for i in idx]
        se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("inf")
        pairs.append({"pair": f"{names[x]} - {names[y]}", "delta_points": round(statistics.fmean(d), 2),
                      "se_points": round(se, 2)})
    return {"recall@5_points": {names[j]: round(means[j], 2) for j in order},
            "spread_points": round(max(means) - min(means), 2), "adjacent_pairs": pairs,
            "adjacent_pairs_beyond_2se": sum(abs(p["delta_points"]) > 2 * p["se_points"] for p in pairs)}


def run_set(name: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    max_docs, max_q = CUTS[name]
    real = load_dataset(name, root)
    if max_docs is not None or max_q is not None:
        real = subsample(real, max_docs=max_docs, max_questions=max_q, seed=args.seed)
    real = replace(real, ks=(5, 10), pass_k=False)
    ws = real.workspace or "default"
    store = Store(ROOT / "data" / "bench" / f"golden_ceiling_{name}.duckdb")
    base = build_deps(PipelineConfig(), store=store)
    resolved, notes = prepare(real, base, workspace=ws, config=PipelineConfig())
    print(f"{name}: corpus ready ({time.perf_counter() - t0:.0f} s); {'; '.join(notes)}", file=sys.stderr)
    build_graph(store, PipelineConfig().graph, embedder=None, workspace=ws)
    print(f"{name}: graph ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    deps = Deps(store=store, embedder=QueryVectorCache(base.embedder, [q.query for q in resolved.queries]),
                notices=base.notices)
    configs = [NamedConfig(c, PipelineConfig().with_overrides({**BASE, **ov})) for c, ov in CONFIGS]
    runs = run_eval(resolved, configs, deps, workspace=ws, save=False)
    store.close()
    scores = per_question(runs)
    idx = [i for i in range(len(scores[0])) if all(s[i] is not None for s in scores)]
    names = [c for c, _ in CONFIGS]
    return {"set": name, "workspace": ws, "questions_scored": len(idx),
            "cut": {"max_docs": max_docs, "max_questions": max_q, "seed": args.seed},
            "split_half_tau": halves_tau(scores, idx, args.splits, args.seed),
            "configurations": closest_pair(names, scores, idx), "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="anthropic_codebase,beir_scifact")
    ap.add_argument("--datasets", help="folder holding the public sets (default RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "golden_ceiling.json")
    args = ap.parse_args(argv)
    root = datasets_dir(args.datasets)
    sets = {}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if name not in CUTS:
            print(f"unknown set {name}: one of {', '.join(CUTS)}", file=sys.stderr)
            return 2
        sets[name] = r = run_set(name, root, args)
        print(f"{name}: split-half tau median {r['split_half_tau']['median']} (p10 {r['split_half_tau']['p10']}, "
              f"p90 {r['split_half_tau']['p90']}) over {r['questions_scored']} questions; spread "
              f"{r['configurations']['spread_points']} points", file=sys.stderr)
    write_result("golden_ceiling", {"metric": METRIC, "goal_tau": 0.7,
                                    "configs": [{"name": c, "overrides": {**BASE, **ov}} for c, ov in CONFIGS],
                                    "sets": sets}, args.out, argv=argv)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
