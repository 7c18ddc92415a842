"""Does the sweep's verdict on a generated golden set hold on the real questions? (issue #43)

    nice -n 10 .venv/bin/python bench/golden_verdict.py --phase real [--sets beir_scifact,...]
    nice -n 10 .venv/bin/python bench/golden_verdict.py --phase generated [--sets ...]

Per dev corpus (beir_scifact, twowiki_multihop, anthropic_codebase, xquad:en, xquad:ru; cuts in CUTS, drawn with a
fixed seed as core.eval.datasets.subsample does), the corpus goes into a bench DuckDB under data/bench/ and the
standard grid (core/eval/sweep.py STANDARD_GRID over the default configuration, retrieval only: answer.enabled off,
which leaves recall@5 unchanged and keeps the machine free) is scored through the product's own path.
- phase real: the real questions (the ceiling: where the real best is and whether the real questions can separate
  the top configurations). Cached under data/bench/golden_verdict_real_<set>.json for the other phase.
- phase generated: the offline generator (core/eval/golden.py) writes a set from the stored chunks alone (it never
  sees the real questions), its validity report is computed (core/eval/validity.py), the same grid is scored on it
  and the sweep's verdict (core/eval/sweep.py verdict) is compared with the real questions': the recommended
  configuration's paired recall@5 loss to the real best, whether the real best is in the generated set's top band,
  the default's recall@5 on both sets.
Writes bench/results/golden_verdict.json (one set re-run replaces its own entry).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from _common import RESULTS, ROOT, datasets_dir, machine_info, utc_now, write_result
from quality import QueryVectorCache

from core.config import PipelineConfig
from core.deps import Deps, build_deps
from core.eval.datasets import GoldenSet, load_dataset, subsample
from core.eval.run import NamedConfig, prepare, run_eval
from core.eval.sweep import STANDARD_GRID, FIXED, grid_configs, rank, row_of
from core.graph.build import build_graph
from core.store import Store

CUTS: dict[str, tuple[int | None, int | None, int]] = {  # (max docs, max real questions, generated questions)
    "beir_scifact": (300, 100, 100),
    "twowiki_multihop": (400, 100, 100),
    "anthropic_codebase": (None, 100, 100),
    "xquad:en": (None, None, 100),
    "xquad:ru": (None, None, 100),
}
BASE = {"answer.enabled": False, **FIXED}
METRIC = "recall@5"


def slug(name: str) -> str:
    return name.replace(":", "_")


def cache_path(name: str) -> Path:
    return ROOT / "data" / "bench" / f"golden_verdict_real_{slug(name)}.json"


def load_real(name: str, root: Path, seed: int) -> GoldenSet:
    max_docs, max_q, _ = CUTS[name]
    real = load_dataset(name, root)
    if max_q is not None or max_docs is not None:
        real = subsample(real, max_docs=max_docs, max_questions=max_q, seed=seed)
    return replace(real, ks=(5, 10), pass_k=False)


def configs() -> list[NamedConfig]:
    return grid_configs(PipelineConfig().with_overrides(BASE), STANDARD_GRID)


def setup(name: str, root: Path, seed: int) -> tuple[Store, Deps, GoldenSet, str, list[str]]:
    real = load_real(name, root, seed)
    ws = real.workspace or "default"
    store = Store(ROOT / "data" / "bench" / f"golden_verdict_{slug(name)}.duckdb")
    base = build_deps(PipelineConfig(), store=store)
    resolved, notes = prepare(real, base, workspace=ws, config=PipelineConfig())
    t = time.perf_counter()
    build_graph(store, PipelineConfig().graph, embedder=None, workspace=ws)  # incremental when already built
    notes.append(f"graph ready in {time.perf_counter() - t:.0f} s")
    return store, base, resolved, ws, notes


def score(gs: GoldenSet, deps: Deps, ws: str) -> tuple[list[dict[str, Any]], float]:
    t = time.perf_counter()
    runs = run_eval(gs, configs(), deps, workspace=ws, save=False)
    secs = time.perf_counter() - t
    rows = [row_of(r, 0.0) for r in runs]
    return [{"name": r.name, "config_hash": r.config_hash, "metrics": r.metrics, "per_query": r.per_query,
             "median_ms": r.median_ms} for r in rows], secs


def phase_real(name: str, root: Path, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    store, base, resolved, ws, notes = setup(name, root, seed)
    deps = Deps(store=store, embedder=QueryVectorCache(base.embedder, [q.query for q in resolved.queries]),
                notices=base.notices)
    rows, secs = score(resolved, deps, ws)
    store.close()
    out = {"set": name, "workspace": ws, "questions": len(resolved.queries), "unit": resolved.unit,
           "scored": sum(1 for q in resolved.queries if q.gold), "rows": rows, "seconds": round(secs, 1),
           "setup_seconds": round(time.perf_counter() - t0 - secs, 1), "notes": notes, "measured_at": utc_now()}
    cache_path(name).parent.mkdir(parents=True, exist_ok=True)
    cache_path(name).write_text(json.dumps(out, default=str))
    return out


def summarise_real(d: dict[str, Any]) -> dict[str, Any]:
    from core.eval.sweep import SweepRow, verdict

    rows = rank([SweepRow(r["name"], r["config_hash"], r["metrics"], r["per_query"], r["median_ms"], 0.0)
                 for r in d["rows"]])
    v = verdict(rows, current=configs()[-1].config.stable_hash())
    return {"table": [{"rank": i, "band": r.band, "config": r.name, METRIC: round(r.metrics.get(METRIC) or 0, 4),
                       "mrr": round(r.metrics.get("mrr") or 0, 4)} for i, r in enumerate(rows, 1)],
            "verdict": v.to_dict(), "real_best": rows[0].name,
            "top_band": [r.name for r in rows if r.band == 1]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", choices=["real", "generated", "report"], required=True,
                    help="report: gather the real caches and --inputs (generated-phase outputs) into --out")
    ap.add_argument("--inputs", default="", help="report: generated-phase result files, comma-separated")
    ap.add_argument("--sets", default=",".join(CUTS))
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "golden_verdict.json")
    args = ap.parse_args(argv)
    root = datasets_dir(args.datasets)
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    results: dict[str, Any] = {r["set"]: r for r in old.get("sets", [])}
    if args.phase == "report":
        for path in [p for p in args.inputs.split(",") if p]:
            for entry in json.loads(Path(path).read_text()).get("sets", []):
                if "generated" in entry:
                    results[entry["set"]] = {**results.get(entry["set"], {}), "generated": entry["generated"],
                                             "targets": entry["targets"], "set": entry["set"]}
        for name in CUTS:
            if cache_path(name).exists():
                d = json.loads(cache_path(name).read_text())
                results[name] = {**results.get(name, {}), "set": name, "real": {
                    **{k: v for k, v in d.items() if k != "rows"}, **summarise_real(d)}}
        payload = {"benchmark": "golden_verdict", "metric": METRIC, "grid": [n for n, _ in STANDARD_GRID],
                   "base": BASE, "machine": machine_info(), "measured_at": utc_now(),
                   "note": "real: the real questions of each cut (the ceiling); generated: the offline generator's set "
                           "from the same cut's chunks (never shown the real questions), its validity report and "
                           "verdict; targets: the verdict held against the real questions (issue #43)",
                   "sets": [results[s] for s in CUTS if s in results]}
        write_result("golden_verdict", payload, args.out, argv=argv)
        print(f"wrote {args.out}")
        return 0
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if args.phase == "real":
            d = phase_real(name, root, args.seed)
            try:
                summary = summarise_real(d)
            except ImportError:
                summary = {}
            results[name] = {**results.get(name, {}), "set": name, "real": {
                **{k: v for k, v in d.items() if k != "rows"}, **summary,
                "rows": [{"config": r["name"], **{k: r["metrics"].get(k) for k in (METRIC, "recall@10", "mrr")},
                          "median_ms": r["median_ms"]} for r in d["rows"]]}}
            print(f"{name}: real set scored in {d['seconds']} s: " + ", ".join(
                f"{r['name']} {r['metrics'].get(METRIC) or 0:.3f}" for r in d["rows"]), file=sys.stderr)
        else:
            from golden_verdict_gen import phase_generated  # the generated-set half, beside this file
            results[name] = {**results.get(name, {}), "set": name,
                             **phase_generated(name, root, args.seed, CUTS[name][2])}
        payload = {"benchmark": "golden_verdict", "metric": METRIC, "grid": [n for n, _ in STANDARD_GRID],
                   "base": BASE, "machine": machine_info(), "measured_at": utc_now(),
                   "sets": [results[s] for s in CUTS if s in results]}
        write_result("golden_verdict", payload, args.out, argv=argv)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
