"""The answer and verify stages' CPU time per question (time.process_time), warm, on the sample corpus: a figure the
machine's load does not inflate as it does wall time (bench/answer_speed.py gives the wall time beside it).

One process holds the answer-speed workspace (data/bench/answer_speed.duckdb, made by bench/answer_speed.py) open
read-only, runs every question once to warm up, then again, timing the pipeline's answer and verify stage functions
with the process's CPU clock (around the stage functions Tracer.run calls) (all its threads: a question vector still being encoded on the spare thread counts too)
and with the wall clock.

  nice -n 10 .venv/bin/python bench/answer_cpu.py [--out bench/results/answer_cpu_h42.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine_info, write_result  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import core.pipeline as pipeline  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.store import Store  # noqa: E402
from core.trace import Tracer  # noqa: E402

SETS = (ROOT / "sample_corpus" / "eval.jsonl", ROOT / "sample_corpus" / "eval_holdout4.jsonl")
DB = ROOT / "data" / "bench" / "answer_speed.duckdb"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=str(DB))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cfg = PipelineConfig.model_validate({"answer_cache": {"enabled": False}})
    deps = build_deps(cfg, store=Store(args.db, read_only=True))
    qs = [json.loads(x)["query"] for f in SETS for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
    cpu: dict[str, list[float]] = {"answer": [], "verify": []}
    wall: dict[str, list[float]] = {"answer": [], "verify": []}

    def timed(name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            c, w = time.process_time(), time.perf_counter()
            out = fn()
            cpu[name].append((time.process_time() - c) * 1000)
            wall[name].append((time.perf_counter() - w) * 1000)
            return out
        return run

    for q in qs:  # warm: models loaded, caches filled as a running app has them
        pipeline.run_query(q, cfg, deps, log=False)
    plain = Tracer.run

    def run_timed(self: Tracer, stage: str, fn: Callable[[], Any], **kw: Any) -> Any:
        # every stage runs through Tracer.run: the answer and verify stages' work is timed there
        return plain(self, stage, timed(stage, fn) if stage in cpu else fn, **kw)
    Tracer.run = run_timed  # type: ignore[method-assign]
    per_q_cpu, per_q_wall = [], []
    for q in qs:
        na, nv = len(cpu["answer"]), len(cpu["verify"])
        pipeline.run_query(q, cfg, deps, log=False)
        per_q_cpu.append(sum(cpu["answer"][na:]) + sum(cpu["verify"][nv:]))
        per_q_wall.append(sum(wall["answer"][na:]) + sum(wall["verify"][nv:]))
    summary = {"questions": len(qs), "verify_ran": len(cpu["verify"]),
               "answer_plus_verify_cpu_ms_median": round(statistics.median(per_q_cpu), 2),
               "answer_plus_verify_cpu_ms_p90": round(sorted(per_q_cpu)[int(0.9 * (len(qs) - 1))], 2),
               "answer_plus_verify_wall_ms_median": round(statistics.median(per_q_wall), 2),
               "answer_cpu_ms_median": round(statistics.median(cpu["answer"]), 2),
               "verify_cpu_ms_median": round(statistics.median(cpu["verify"]), 2) if cpu["verify"] else None}
    print(json.dumps(summary))
    if args.out:
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": summary, "machine": machine_info(),
                                     "target_ms": 30}, args.out)


if __name__ == "__main__":
    main()
