"""A fresh process's CLI query (issue #47, item 7): wall and CPU seconds of `python -m core query` in a new
interpreter, for a question the store has seen (its vector in the store's embedding cache) and a new one, each run
N times in turn, on a database given (ingest it first). The answer cache is off so the pipeline runs every time.

    .venv/bin/python bench/fresh_query.py --db /tmp/sample.duckdb --workspace demo   # -> bench/results/fresh_query.json
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import ROOT, table, write_result  # noqa: E402

QUESTION = "How many remote days does the final policy allow?"


def _run(db: str, workspace: str, question: str) -> tuple[float, float]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "core", "query", question, "--db", db, "--workspace", workspace,
                    "--set", "answer_cache.enabled=false", "--json"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--workspace", default="default")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    _run(args.db, args.workspace, QUESTION)  # the seen question's vector is in the store from here on
    seen, new = [], []
    for _ in range(args.repeats):
        seen.append(_run(args.db, args.workspace, QUESTION))
        new.append(_run(args.db, args.workspace, f"{QUESTION} ({uuid.uuid4().hex[:6]})"))
    rows = []
    out = {}
    for name, xs in (("seen question", seen), ("new question", new)):
        walls, cpus = [w for w, _ in xs], [c for _, c in xs]
        out[name] = {"wall_s": [round(w, 3) for w in walls], "cpu_s": [round(c, 3) for c in cpus],
                     "median_wall_s": round(statistics.median(walls), 3),
                     "median_cpu_s": round(statistics.median(cpus), 3)}
        rows.append([name, out[name]["median_wall_s"], out[name]["median_cpu_s"]])
    print(table(["question", "median wall s", "median CPU s"], rows))
    write_result("fresh_query", {
        "what": "python -m core query in a fresh interpreter (model load, store open, index load, every stage), "
                "answer cache off: a question seen before (its vector read from the store) and a new one",
        "parameters": {"db": Path(args.db).name, "workspace": args.workspace, "repeats": args.repeats},
        "results": out,
        "notes": ["The target (issue #47) is <= 2.5 s wall on a 1,000-document corpus on a quiet machine; the load "
                  "average is in the run record."]}, Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
