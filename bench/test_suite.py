"""How long the README's test command (`make test`: pytest -m "not slow" -n 2 --dist loadfile) takes on this machine,
with the load before and after and the slowest tests, so that "the suite runs in <= 5 minutes on 2 quiet cores" is a
measured figure tied to a commit, not a timed unit test.

  .venv/bin/python bench/test_suite.py [--runs 1]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, grid, machine_info, num, utc_now, write_result  # noqa: E402

COMMAND = [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-n", "2", "--dist", "loadfile", "tests",
           "-p", "no:cacheprovider", "--durations=15"]
BUDGET_S = 300


def one_run() -> dict:
    load0 = [round(v, 2) for v in os.getloadavg()]
    t = time.perf_counter()
    p = subprocess.run(COMMAND, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    out = p.stdout + p.stderr
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", out.splitlines()[-1])} \
        if out.strip() else {}
    slowest = [{"seconds": float(s), "test": name} for s, name in
               re.findall(r"^([\d.]+)s (?:call|setup|teardown)\s+(\S+)", out, flags=re.M)][:15]
    return {"wall_s": round(wall, 1), "returncode": p.returncode, "counts": counts, "load_start": load0,
            "load_end": [round(v, 2) for v in os.getloadavg()], "within_budget": wall <= BUDGET_S,
            "slowest": slowest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    runs = []
    for i in range(args.runs):
        runs.append(one_run())
        print(f"run {i + 1}: {runs[-1]['wall_s']} s, {runs[-1]['counts']}, load {runs[-1]['load_start']}",
              file=sys.stderr)
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        cpu += " (AVX-512)" if "avx512f" in flags else " (AVX2, no AVX-512)" if "avx2" in flags else ""
    except (OSError, StopIteration):
        pass
    payload = {"what": "issue #32 item 6: the README's test command, timed whole (budget 300 s on 2 quiet cores)",
               "command": " ".join(COMMAND[1:]), "cpu": cpu, "budget_s": BUDGET_S, "runs": runs,
               "machine": machine_info(), "when": utc_now(), "note": args.note}
    print(write_result("test_suite", payload, args.out, table=MEASURED_TEST_SUITE))


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_test_suite(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32 item 6: the README's test command timed whole (bench/test_suite.py)."""
    out = ["### The test suite", "", CAPTION, "", f"`{d.get('command')}` on {d.get('cpu')}; budget "
           f"{d.get('budget_s')} s on 2 quiet cores.", ""]
    rows = [[i + 1, num(r.get("wall_s"), 1), ", ".join(f"{v} {k}" for k, v in (r.get("counts") or {}).items()),
             r.get("load_start", [""])[0], num(r.get("within_budget")),
             "; ".join(f"{x['test'].split('::')[-1]} {x['seconds']:.0f} s" for x in (r.get("slowest") or [])[:3])]
            for i, r in enumerate(d.get("runs") or [])]
    out.append(grid(["run", "wall s", "tests", "load at start", "within budget", "three slowest"], rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


MEASURED_TEST_SUITE = Table(measured_test_suite, 'Query speed')


if __name__ == "__main__":
    main()
