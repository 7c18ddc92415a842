"""Cost of parsing in the sandbox worker (core/ingest/sandbox.py) against parsing in-process, on sample_corpus/docs.

    .venv/bin/python bench/parse_sandbox.py [--repeats 5]

Per repeat, every file of sample_corpus/docs is parsed once in-process and once through a warm sandbox worker,
alternating which goes first; reported: median seconds per pass, the difference per file, and the one-off start-up
of a worker (its imports), which the first upload of a server pays.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import ROOT, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from core.ingest.parse import ParseError, parse
    from core.ingest.sandbox import ParseSandbox

    files = [(p.name, p.read_bytes()) for p in sorted((ROOT / "sample_corpus" / "docs").iterdir()) if p.is_file()]
    sb = ParseSandbox()
    t = time.perf_counter()
    sb.parse("warm.md", b"# warm\n\nup")
    startup = time.perf_counter() - t

    def one_pass(fn) -> float:  # noqa: ANN001
        t0 = time.perf_counter()
        for name, data in files:
            try:
                fn(name, data)
            except ParseError:
                pass
        return time.perf_counter() - t0

    inproc, boxed = [], []
    for r in range(args.repeats):
        order = [(inproc, parse), (boxed, sb.parse)]
        for bucket, fn in (order if r % 2 == 0 else order[::-1]):
            bucket.append(one_pass(fn))
    sb.close()
    res = {"files": len(files), "bytes": sum(len(d) for _, d in files), "repeats": args.repeats,
           "worker_startup_s": round(startup, 3),
           "in_process_s_median": round(statistics.median(inproc), 4),
           "sandbox_s_median": round(statistics.median(boxed), 4),
           "overhead_ms_per_file": round((statistics.median(boxed) - statistics.median(inproc)) / len(files) * 1000, 2),
           "in_process_s": [round(x, 4) for x in inproc], "sandbox_s": [round(x, 4) for x in boxed]}
    print(res)
    print(f"wrote {write_result('parse_sandbox', res)}")


if __name__ == "__main__":
    main()
