"""What reading the transforms' generated questions costs the rerank stage (rerank.read_queries, issue #44 item 5):
the stage's own time in the shipped default with the setting on and off, question by question, on one dev set.

    nice -n 5 .venv/bin/python bench/rerank_read_cost.py --set twowiki_multihop \
        --db data/bench/h44_twowiki_multihop.duckdb --questions 60 --name rerank_read_cost

Both configurations run each question in turn (which goes first alternates), so the chunks' token vectors are warm
for both and the machine's load falls on both alike. Only questions whose rerank read at least one generated
question are compared (the others run the same code either way).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from _common import CAPTION, Table, datasets_dir, grid, num, write_result
from generalise_paired import OFF, _cfg, load

from core.deps import build_deps
from core.eval.run import prepare
from core.pipeline import run_query
from core.store import Store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="twowiki_multihop")
    ap.add_argument("--db", required=True)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--name", default=None)
    args = ap.parse_args(argv)
    gs, cut = load(args.set, datasets_dir(args.datasets), 300, 1000, 0)
    on = _cfg(OFF)
    off = _cfg({**OFF, "rerank.read_queries": False})
    deps = build_deps(on, store=Store(args.db))
    ws = gs.workspace or f"paired_{args.set.replace(':', '_')}"
    resolved, _ = prepare(gs, deps, workspace=ws, config=on)
    pairs: list[dict[str, Any]] = []
    for i, q in enumerate(resolved.queries[: args.questions]):
        got: dict[str, Any] = {}
        for label, cfg in ((("off", off), ("on", on)) if i % 2 == 0 else (("on", on), ("off", off))):
            st = run_query(q.query, cfg, deps, workspace=ws, log=False).stage("rerank")
            got[label] = st if st is not None and st.skipped is None else None
        if got["on"] is not None and got["off"] is not None and (got["on"].info or {}).get("queries"):
            pairs.append({"qid": q.qid, "on_ms": round(got["on"].ms, 2), "off_ms": round(got["off"].ms, 2),
                          "queries": len(got["on"].info["queries"])})
    out: dict[str, Any] = {"set": args.set, "cut": cut, "asked": args.questions, "compared": len(pairs)}
    if pairs:
        for k in ("on_ms", "off_ms"):
            v = sorted(p[k] for p in pairs)
            out[k] = {"median": round(statistics.median(v), 1), "p90": round(v[int(0.9 * (len(v) - 1))], 1)}
        out["extra_ms_median"] = round(statistics.median(p["on_ms"] - p["off_ms"] for p in pairs), 1)
        out["queries_mean"] = round(sum(p["queries"] for p in pairs) / len(pairs), 2)
    out["pairs"] = pairs
    print({k: v for k, v in out.items() if k != "pairs"}, file=sys.stderr)
    if args.name:
        write_result(args.name, out, table=MEASURED_READ_COST)
    return 0


def measured_read_cost(d: dict[str, Any], file: str) -> list[Any]:
    """The rerank stage's time with and without reading the generated questions."""
    on, off = d.get("on_ms") or {}, d.get("off_ms") or {}
    return [f"### The rerank reading the generated questions: its time ({d.get('set')})", "", CAPTION, "",
            f"The rerank stage's own time in the shipped default, `rerank.read_queries` on and off, over the "
            f"{num(d.get('compared'))} of {num(d.get('asked'))} questions whose rerank read a generated question "
            f"({num(d.get('queries_mean'))} on average; chunk token vectors warm in both).", "",
            grid(["rerank.read_queries", "median ms", "p90 ms"],
                 [["off", num(off.get("median"), 1), num(off.get("p90"), 1)],
                  ["on", num(on.get("median"), 1), num(on.get("p90"), 1)]]),
            "", f"Median extra time per question: {num(d.get('extra_ms_median'), 1)} ms."]


MEASURED_READ_COST = Table(measured_read_cost, "Compression cascade")


if __name__ == "__main__":
    raise SystemExit(main())
