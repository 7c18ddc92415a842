"""How long the standard sweep takes, answer stage included (issue #43 item 4: 10 configurations × 100 questions in
≤ 3 minutes on a quiet 2-core machine).

    nice -n 10 .venv/bin/python bench/sweep_speed.py [--set verdict-gen] [--workspace twowiki_multihop__q100_d400_s0]
                                                     [--db data/bench/golden_verdict_twowiki_multihop.duckdb]

Times `python -m core sweep --golden SET --workspace WS --db DB --fresh --json` in a cold process (nothing resumed,
the default configuration's offline answer stage on, as a user's sweep runs) over a generated set that
bench/golden_verdict.py --phase generated stored, with the graph and heuristic-context vectors that bench already
built in the same database (builds reused, not rebuilt: the sweep's own reuse). Records the wall time, the load
before and after, each row's median ms and the sweep's verdict. Writes bench/results/sweep_speed.json.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from _common import RESULTS, ROOT, machine_info, write_result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="verdict-gen")
    ap.add_argument("--workspace", default="twowiki_multihop__q100_d400_s0")
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "golden_verdict_twowiki_multihop.duckdb"))
    ap.add_argument("--out", type=Path, default=RESULTS / "sweep_speed.json")
    args = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "core", "sweep", "--golden", args.set, "--workspace", args.workspace, "--db",
           args.db, "--fresh", "--json"]
    load0 = os.getloadavg()
    t = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    load1 = os.getloadavg()
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    out = json.loads(proc.stdout)
    table = out.get("table", [])
    payload = {
        "benchmark": "sweep_speed (issue #43 item 4)", "machine": machine_info(),
        "what": f"the standard grid over the stored set '{args.set}' of workspace {args.workspace}, cold process, "
                "--fresh (nothing resumed), the default configuration's answer stage on (offline extractive answer); "
                "graph and heuristic-context vectors already built in that database (reused, not rebuilt)",
        "command": " ".join(["python", *cmd[1:]]),
        "configurations": len(table), "questions": out.get("questions") or out.get("validity", {}).get("questions"),
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "target_s": 180, "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in load1],
        "per_config_median_ms": {r.get("config"): r.get("median ms") for r in table},
        "table": table, "verdict": {k: out.get(k) for k in ("verdict", "recommendation")},
        "validity": out.get("validity"),
        "note": "2 cores shared with other sessions: the load columns say how quiet it was; the target is for a "
                "quiet machine, where the wall time is at most the process's CPU time (cpu_s, user + system)",
    }
    write_result("sweep_speed", payload, args.out, argv=argv)
    print(f"{len(table)} configurations x {payload['questions']} questions in {wall:.1f} s "
          f"(load {load0[0]:.1f} -> {load1[0]:.1f}); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
