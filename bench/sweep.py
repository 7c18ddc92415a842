"""Sweep bench (issue #27 item 5): the standard grid (core/eval/sweep.py) over one golden set, ranked with "no clear
difference" bands, as `python -m core sweep` runs it; the result goes to bench/results/sweep_<set>.json.

    nice -n 10 .venv/bin/python bench/sweep.py --set sample [--limit N]
    nice -n 10 .venv/bin/python bench/sweep.py --set xquad --questions 40

Sets:
- sample: sample_corpus/eval.jsonl over the sample documents (dev data, nothing is fitted here); `--questions`
  drawn with `--seed` (subsampled to keep the run under ~8 minutes on 2 shared cores).
- xquad: XQuAD articles 40-47, English questions over the English paragraphs, with near-miss unanswerable twins made
  by bench/calibrate.py's builder (see its docstring); `--questions` answerable questions drawn with `--seed`, each
  with its twin when it has one (subsampled to keep the run under ~8 minutes on 2 shared cores).
- twowiki: 2WikiMultihopQA, `--questions` drawn with `--seed` over a corpus cut to their gold passages plus random
  distractors up to `--docs` (core.eval.datasets.subsample); retrieval only (gold is documents, no answer spans).
The entity graph is built first (statistical extraction, no LLM) so the graph row searches a graph. Every row is the
workspace's default configuration with the grid row's settings; the answer cache is off. Stored results resume: a
rerun with the same database skips finished configurations (--fresh forgets them).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from _common import ROOT, datasets_dir, machine_info, write_result

from core.config import PipelineConfig
from core.deps import build_deps
from core.eval.datasets import load_dataset, subsample
from core.eval.run import prepare
from core.eval.sweep import STANDARD_GRID, grid_configs, run_sweep
from core.graph.build import build_graph
from core.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=["sample", "xquad", "twowiki"], required=True)
    ap.add_argument("--docs", type=int, default=300, help="twowiki: corpus cut to the gold passages + distractors")
    ap.add_argument("--questions", type=int, default=40, help="questions drawn (xquad: answerable ones, + their twins)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "sweep.duckdb"))
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    root = datasets_dir(args.datasets)
    cut = "whole set"
    if args.set == "sample":
        full, ws = load_dataset("sample", root), "default"
        n = min(args.questions, len(full.queries))
        keep = {q.qid for q in random.Random(args.seed).sample(full.queries, n)}
        gs = replace(full, name=f"sample[q{n}_s{args.seed}]", queries=[q for q in full.queries if q.qid in keep])
        cut = f"{n} of {len(full.queries)} questions drawn with seed {args.seed}; whole corpus"
    elif args.set == "twowiki":
        full = load_dataset("twowiki_multihop", root)
        gs = subsample(full, max_questions=args.questions, max_docs=args.docs, seed=args.seed)
        ws = gs.workspace or "twowiki"
        cut = (f"{args.questions} of {len(full.queries)} questions and a corpus of their gold passages plus random "
               f"distractors up to {args.docs} (seed {args.seed}); document-level gold, no unanswerable questions")
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from calibrate import xquad

        full, _, counts = xquad(root, args.seed)
        answerable = [q for q in full.queries if q.answerable]
        keep = {q.qid for q in random.Random(args.seed).sample(answerable, min(args.questions, len(answerable)))}
        queries = [q for q in full.queries if q.qid in keep or (q.qid.endswith("-nm") and q.qid[:-3] in keep)]
        gs = replace(full, name=f"xquad_en[q{args.questions}_s{args.seed}]", queries=queries)
        ws = gs.workspace or "xquad"
        cut = (f"{len(keep)} of {len(answerable)} answerable questions (seed {args.seed}) and their "
               f"{len(queries) - len(keep)} near-miss twins; whole corpus (40 paragraphs)")
    store = Store(args.db)
    base = PipelineConfig().with_overrides(gs.overrides) if gs.overrides else PipelineConfig()
    deps = build_deps(base, store=store)
    t0 = time.perf_counter()
    prepare(gs, deps, workspace=ws, config=base)
    g = build_graph(store, base.graph, embedder=deps.embedder, workspace=ws)
    graph_s = time.perf_counter() - t0
    configs = grid_configs(base, STANDARD_GRID)
    t1 = time.perf_counter()
    res = run_sweep(gs, configs, deps, workspace=ws, limit=args.limit, fresh=args.fresh,
                    progress=lambda d, t, m: print(f"\r[{d}/{t}] {m[:60]:<60}", end="", file=sys.stderr))
    print(file=sys.stderr)
    out = {"machine": machine_info(), "set": gs.name, "cut": cut if not args.limit else f"first {args.limit}",
           "questions": len(gs.queries[: args.limit] if args.limit else gs.queries),
           "unanswerable": sum(1 for q in gs.queries if not q.answerable), "workspace": ws,
           "graph": {"seconds_with_corpus": round(graph_s, 1), "report": str(g)[:300]},
           "sweep_seconds": round(time.perf_counter() - t1, 1), **res.to_dict()}
    path = write_result(f"sweep_{args.set}", out)
    from core.eval.sweep import text_rows

    print(text_rows(res.table()))
    print(path)


if __name__ == "__main__":
    main()
