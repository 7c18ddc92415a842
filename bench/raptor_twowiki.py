"""RAPTOR against graph global search and plain retrieval on twowiki_multihop's comparison questions.

    .venv/bin/python bench/raptor_twowiki.py [--datasets DIR] [--db FILE] [--limit N]

The twowiki corpus (2,086 paragraphs, one chunk each) is put in the database's twowiki_multihop workspace (as the
evaluation lab does), its statistical graph and its RAPTOR tree (raptor.* defaults) built, then its comparison
questions (76) run with three configurations, router off, offline, answer cache off: plain (the default pipeline),
graph global (graph.enabled, graph.mode = global) and raptor (raptor.enabled). Scores: document-level recall@5 and
@10 (core.eval.run, both gold titles count), MRR. Writes bench/results/raptor_twowiki.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from _common import ROOT, datasets_dir, table, write_result

sys.path.insert(0, str(ROOT))

from core.app.raptor_ops import build_raptor  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.datasets import twowiki_set  # noqa: E402
from core.eval.run import NamedConfig, prepare, run_config  # noqa: E402
from core.graph.build import build_graph  # noqa: E402
from core.store import Store  # noqa: E402

BASE = {"router.enabled": False, "answer_cache.enabled": False}
CONFIGS = {"plain": {}, "graph global": {"graph.enabled": True, "graph.mode": "global"},
           "raptor": {"raptor.enabled": True}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "raptor_twowiki.duckdb"))
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    gs = twowiki_set(datasets_dir(args.datasets))
    gs = replace(gs, queries=[q for q in gs.queries if q.qtype == "comparison"][: args.limit])
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    base = PipelineConfig().with_overrides(BASE)
    deps = build_deps(base, store=Store(args.db))
    ws = gs.workspace
    t0 = time.perf_counter()
    gs, notes = prepare(gs, deps, workspace=ws, config=base)
    t_corpus = time.perf_counter() - t0
    t = time.perf_counter()
    build_graph(deps.store, base.graph, embedder=None, workspace=ws)
    t_graph = time.perf_counter() - t
    tree = build_raptor(deps, base, ws)
    out, rows = {}, []
    for name, ov in CONFIGS.items():
        run = run_config(gs, NamedConfig(name, base.with_overrides(ov)), deps, workspace=ws)
        m = run.metrics
        out[name] = {k: m.get(k) for k in ("recall@5", "recall@10", "mrr")}
        out[name]["median_ms"] = run.latency.get("total", {}).get("p50") if run.latency else None
        rows.append([name, len(gs.queries), out[name]["recall@5"], out[name]["recall@10"], out[name]["mrr"]])
        print(f"{name}: done", file=sys.stderr)
    print(table(["configuration", "questions", "recall@5", "recall@10", "MRR"], rows))
    write_result("raptor_twowiki", {"db": args.db, "questions": len(gs.queries), "unit": gs.unit,
                                    "config": "router off, offline (no key), answer cache off; raptor.* defaults",
                                    "notes": notes, "seconds": {"corpus": round(t_corpus, 1), "graph": round(t_graph, 1),
                                                                "raptor": tree.seconds},
                                    "tree": tree.to_dict(), "results": out})


if __name__ == "__main__":
    main()
