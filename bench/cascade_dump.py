"""Every stage's list of the shipped default on a public set, one row per question (issue #44): what the default
cascade (fused -> rerank -> prune -> MMR) does to the hybrid list, question by question, kept for offline reading.

    nice -n 10 .venv/bin/python bench/cascade_dump.py --set twowiki_multihop --out data/bench/t44_twowiki_dump.json

Writes the dump (not a results file: bench/cascade_gate.py reads it and writes the measured result). Each row:
question, its type when the set has one (twowiki), gold document ids, and per stage the first `--depth` candidates
(document id, chunk id, score) plus the stage's info and skip reason.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, datasets_dir

from core.config import PipelineConfig, parse_set_value
from core.deps import build_deps
from core.eval.datasets import load_dataset
from core.eval.run import prepare
from core.pipeline import run_query
from core.store import Store

STAGES = ("bm25", "dense", "dense_ml", "fused", "rerank", "prune", "mmr", "expand")


def types_of(set_name: str, root: Path) -> dict[str, str]:
    """twowiki's question types (compositional, comparison, ...) by question text."""
    if set_name != "twowiki_multihop":
        return {}
    rows = [json.loads(x) for x in (root / "twowiki_multihop" / "questions.jsonl").read_text().splitlines() if x]
    return {r["question"]: r.get("type", "") for r in rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="twowiki_multihop")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "t44_cascade.duckdb"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--set-option", action="append", default=[], help="KEY=VALUE over the shipped defaults")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    overrides = {k: parse_set_value(v) for k, v in (s.split("=", 1) for s in args.set_option)}
    cfg = PipelineConfig().with_overrides({"answer.enabled": False, **overrides})
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    deps = build_deps(cfg, store=Store(args.db))
    root = datasets_dir(args.datasets)
    gs = load_dataset(args.set, root)
    ws = gs.workspace or args.set
    t0 = time.perf_counter()
    resolved, notes = prepare(gs, deps, workspace=ws, config=cfg)
    print(f"prepared in {time.perf_counter() - t0:.0f} s: {notes}", file=sys.stderr)
    types = types_of(args.set, root)
    rows: list[dict[str, Any]] = []
    qs = [q for q in resolved.queries if q.gold][: args.limit]
    t0 = time.perf_counter()
    for i, q in enumerate(qs):
        tr = run_query(q.query, cfg, deps, workspace=ws, log=False)
        lists: dict[str, Any] = {}
        for s in STAGES:
            st = tr.stage(s)
            if st is None:
                continue
            lists[s] = {"skipped": st.skipped, "notes": list(st.notes),
                        "info": json.loads(json.dumps(st.info, default=str)) if st.info else {},
                        "hits": [[c.doc_id, c.chunk_id, round(float(c.score), 6)] for c in st.candidates[: args.depth]]}
        fin = tr.final()
        rows.append({"id": q.qid, "question": q.query, "type": types.get(q.query, ""),
                     "gold": sorted({d for g in q.gold for d in g.doc_ids}), "lists": lists,
                     "final": [c.doc_id for c in fin.candidates] if fin is not None else []})
        if (i + 1) % 10 == 0 or i + 1 == len(qs):  # written as it goes: a stopped run keeps what it read
            print(f"{i + 1}/{len(qs)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({"set": args.set, "config_hash": cfg.stable_hash(),
                                                  "overrides": overrides, "notes": notes, "rows": rows}))
    print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
