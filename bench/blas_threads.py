"""numpy's BLAS threads during queries: OpenBLAS's default (one thread per core) against one thread, side by side.

Why: the Ray eval bench (bench/ray_eval.py) found the local engine twice as slow as one-CPU Ray workers, and the
difference was OpenBLAS spinning its second thread while ONNX Runtime and the Python thread wanted the core.
This bench runs the default configuration's queries over the sample corpus (or a twowiki cut) in one process,
alternating the BLAS thread limit per question in rotating order (threadpoolctl, the same switch
core.deps.limit_blas_threads uses), and reports wall and CPU time per query for each setting, and whether the
final candidate lists are identical (they must be: the thread count changes no result beyond float rounding of
ties).

    .venv/bin/python bench/blas_threads.py [--questions N] [--rounds R]
    .venv/bin/python bench/blas_threads.py --scifact [--questions N]   # the SciFact cut of bench/ray_eval.py's
                                                                        # database (1,000 abstracts), read-only
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from bench._common import CAPTION, Table, grid, num, write_result  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.ingest.pipeline import ingest_files, read_paths  # noqa: E402
from core.pipeline import run_query  # noqa: E402


def _questions(n: int) -> list[str]:
    out = []
    for name in ("eval.jsonl", "eval_train.jsonl"):
        for line in (ROOT / "sample_corpus" / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(json.loads(line)["query"])
    return out[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scifact", action="store_true", help="SciFact queries on bench/ray_eval.py's database")
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "ray_eval.duckdb"))
    ap.add_argument("--busy", type=int, default=0,
                    help="start N busy-looping processes during the timed part (a shared machine, reproducibly)")
    args = ap.parse_args(argv)
    default_threads = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    cfg = PipelineConfig()
    with tempfile.TemporaryDirectory(prefix="blas-") as tmp:
        ws = "default"
        if args.scifact:
            from core.store import Store

            store = Store(args.db, read_only=True)
            ws = next(w for w in store.workspaces() if w.startswith("beir_scifact"))
            deps = build_deps(cfg, store=store, blas_threads=None)
            n_docs = store.corpus.count("documents", ws)
            qs = [json.loads(line)["text"] for line in
                  (ROOT.parent / "shared" / "datasets" / "beir_scifact" / "queries.jsonl").read_text().splitlines()
                  if line.strip()][:args.questions]
        else:
            deps = build_deps(cfg, db=str(Path(tmp) / "w.duckdb"), blas_threads=None)
            rep = ingest_files(read_paths([ROOT / "sample_corpus" / "docs"]), store=deps.store,
                               embedder=deps.embedder, config=cfg)
            n_docs = len(rep.ok)
            qs = _questions(args.questions)
        for q in qs[:3]:  # warm-up: indexes, token vectors, model
            run_query(q, cfg, deps, workspace=ws, log=False)
        import subprocess

        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        settings = {"blas_default": default_threads, "blas_1": 1}
        wall: dict[str, list[float]] = {k: [] for k in settings}
        cpu: dict[str, list[float]] = {k: [] for k in settings}
        finals: dict[str, list[list[str]]] = {k: [] for k in settings}
        names = list(settings)
        for r in range(args.rounds):
            for i, q in enumerate(qs):
                order = names if (i + r) % 2 == 0 else names[::-1]
                for name in order:
                    with threadpool_limits(limits=settings[name], user_api="blas"):
                        w0, c0 = time.perf_counter(), time.process_time()
                        trace = run_query(q, cfg, deps, workspace=ws, log=False)
                        wall[name].append(time.perf_counter() - w0)
                        cpu[name].append(time.process_time() - c0)
                    if r == 0:
                        fin = trace.final()
                        finals[name].append([c.chunk_id for c in fin.candidates] if fin else [])
        for h in hogs:
            h.kill()
        deps.store.close()
    same = sum(a == b for a, b in zip(finals["blas_default"], finals["blas_1"]))
    rows = {k: {"threads": settings[k], "wall_ms_mean": 1000 * statistics.mean(wall[k]),
                "wall_ms_median": 1000 * statistics.median(wall[k]), "cpu_ms_mean": 1000 * statistics.mean(cpu[k])}
            for k in settings}
    payload = {
        "benchmark": "blas_threads",
        "parameters": {"corpus": f"{os.path.relpath(args.db, ROOT)} ({ws})" if args.scifact else "sample_corpus/docs", "documents": n_docs,
                       "questions": len(qs), "rounds": args.rounds, "config": "default",
                       "busy_processes": args.busy,
                       "order": "per question, the two settings in rotating order (one process, threadpoolctl)"},
        "settings": rows,
        "wall_ratio_default_to_1": rows["blas_default"]["wall_ms_mean"] / rows["blas_1"]["wall_ms_mean"],
        "cpu_ratio_default_to_1": rows["blas_default"]["cpu_ms_mean"] / rows["blas_1"]["cpu_ms_mean"],
        "identical_final_lists": f"{same}/{len(qs)}",
    }
    name = ("blas_threads_scifact" if args.scifact else "blas_threads") + ("_busy" if args.busy else "")
    path = write_result(name, payload, table=MEASURED_BLAS_THREADS)
    print(json.dumps({k: payload[k] for k in ("settings", "wall_ratio_default_to_1", "cpu_ratio_default_to_1",
                                              "identical_final_lists")}, indent=1))
    print(f"wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_blas_threads(d: dict[str, Any], file: str) -> list[str]:
    """numpy's BLAS threads during queries (bench/blas_threads.py): OpenBLAS's default vs one thread, side by side."""
    p, st = d.get("parameters") or {}, d.get("settings") or {}
    busy = p.get("busy_processes") or 0
    out = [f"### Query time by BLAS threads ({p.get('corpus')}, {num(p.get('documents'))} documents, "
           f"{num(p.get('questions'))} questions"
           + (f", {busy} busy-looping processes beside it" if busy else ", nothing else started") + ")", "",
           CAPTION, "",
           "The default configuration's queries in one process, the two settings alternating per question in rotating "
           "order (threadpoolctl). `core.deps.build_deps` limits BLAS to one thread since this run.", ""]
    rows = [[k, st[k].get("threads"), num(st[k].get("wall_ms_mean"), 1), num(st[k].get("wall_ms_median"), 1),
             num(st[k].get("cpu_ms_mean"), 1)] for k in st]
    out.append(grid(["setting", "BLAS threads", "wall ms mean", "wall ms median", "CPU ms mean"], rows))
    out += ["", f"Default / one thread: wall **{num(d.get('wall_ratio_default_to_1'), 2)}×**, CPU "
            f"{num(d.get('cpu_ratio_default_to_1'), 2)}×; identical final lists {d.get('identical_final_lists')}."]
    return out


MEASURED_BLAS_THREADS = Table(measured_blas_threads, 'Query speed')


if __name__ == "__main__":
    raise SystemExit(main())
