"""Evaluation speed: the Evaluate page's A/B (the default, router on, against router off) on the sample set in a cold
process (`python -m core eval --config A --config B`), wall time, with each configuration's per-question cost and
recall side by side (issue #32 items 3 and 4). The code before the change (`--before`, extracted with `git archive`)
runs the same A/B on the first --before-limit questions, beside this tree on the same questions, in the same run.

  .venv/bin/python bench/eval_speed.py --before c4ce49e --before-limit 13
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine_info, utc_now, write_result  # noqa: E402

DB = ROOT / "data" / "bench" / "answer_speed.duckdb"  # bench/answer_speed.py ingests it (sentence vectors built)
KEEP = ("recall@5", "recall@10", "mrr", "ndcg@10", "answered_correctly", "refusal_accuracy", "faithfulness")


def extract(rev: str, into: Path) -> str:
    full = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    # the code and the sample set's files it reads (sample_corpus/eval.jsonl) at that commit
    arch = subprocess.run(["git", "archive", full, "core", "sample_corpus"], cwd=ROOT, capture_output=True,
                          check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=arch, check=True)
    return full


def ab(root: Path, db: Path, configs: list[Path], limit: int | None, extra: list[str] = ()) -> dict[str, Any]:
    """One cold A/B: a new process, a copy of the database (runs are stored), wall time and the runs' figures."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root)})
    with tempfile.TemporaryDirectory(prefix="eval_speed_") as tmp:
        copy = Path(tmp) / "ab.duckdb"
        shutil.copy(db, copy)
        for side in db.parent.glob(db.name + ".tokvec.*"):
            shutil.copy(side, Path(tmp) / side.name.replace(db.name, copy.name))
        cmd = [sys.executable, "-m", "core", "eval", "--dataset", "sample", "--db", str(copy), "--json",
               *[a for c in configs for a in ("--config", str(c))], *extra]
        if limit:
            cmd += ["--limit", str(limit)]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError(p.stderr[-3000:])
    d = json.loads(p.stdout)
    runs = []
    for r in d["runs"]:
        lat = r.get("latency") or {}
        total_ms = sum(v.get("mean", 0.0) for v in lat.values())
        runs.append({"config": r.get("config_name"), "seconds": round(r.get("seconds", 0.0), 1),
                     "per_question_ms": round(1000 * r.get("seconds", 0.0) / max(1, d["questions"]), 1),
                     "stage_ms_mean_sum": round(total_ms, 1),
                     "answer_ms_p50": round((lat.get("answer") or {}).get("p50", 0.0), 1),
                     **{k: (round(r["metrics"][k], 4) if r["metrics"].get(k) is not None else None)
                        for k in KEEP if k in r.get("metrics", {})}})
    return {"wall_s": round(wall, 1), "questions": d["questions"], "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--before-limit", type=int, default=13)
    ap.add_argument("--db", default=str(DB))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    db = Path(args.db)
    if not db.exists():
        sys.exit(f"{db} missing: run bench/answer_speed.py first (it ingests the sample corpus)")
    info = machine_info()
    tmp = Path(tempfile.mkdtemp(prefix="eval_speed_code_"))
    try:
        before_rev = extract(args.before, tmp)
        cfgs = [tmp / "default.json", tmp / "router_off.json"]
        cfgs[0].write_text("{}")
        cfgs[1].write_text(json.dumps({"router": {"enabled": False}}))
        out: dict[str, Any] = {}
        out["after_full"] = ab(ROOT, db, cfgs, None)
        print(f"after, 52 questions: {out['after_full']['wall_s']} s", file=sys.stderr)
        out["after_retrieval_only"] = ab(ROOT, db, cfgs, None, ["--set", "answer.enabled=false"])
        print(f"after, retrieval only: {out['after_retrieval_only']['wall_s']} s", file=sys.stderr)
        out["before_limited"] = ab(tmp, db, cfgs, args.before_limit)
        out["after_limited"] = ab(ROOT, db, cfgs, args.before_limit)
        print(f"first {args.before_limit}: before {out['before_limited']['wall_s']} s, after "
              f"{out['after_limited']['wall_s']} s", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    on, off = out["after_full"]["runs"]
    payload = {"what": "issue #32 items 3/4: cold A/B of the default (router on) against router off on the sample "
                       "set, with per-question cost and quality side by side",
               "before": {"commit": before_rev, "limit": args.before_limit}, "machine": info, "when": utc_now(),
               **out,
               "router_cost_ratio": round(on["per_question_ms"] / off["per_question_ms"], 2)
               if off["per_question_ms"] else None,
               "targets": {"ab_cold_s": 60, "router_cost_ratio": 1.2}}
    print(write_result("eval_speed", payload, Path(args.out) if args.out else None))


if __name__ == "__main__":
    main()
