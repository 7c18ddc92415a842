"""Synthesis answers offline: comparison, multi-hop and global questions of the sample set, answered-correctly and
refusals, at the code of the commit it runs on (run it before and after a change: --label names the run).

    .venv/bin/python bench/synthesis.py --label before|after [--db FILE] [--limit N]

Questions: every multi-hop and global question of sample_corpus/eval.jsonl and eval_holdout*.jsonl, and every
question of sample_corpus/eval_synthesis.jsonl (comparisons and global questions written for issue #30 before any
answer-stage change; the comparison answer was revised once after its first run on them, so they are its dev set)
and of sample_corpus/eval_synthesis_holdout.jsonl (8 comparisons written before that revision: the report split,
"comparison (holdout)"). The sample corpus is ingested into
--db when missing and its statistical graph built (the global-summary route turns graph global search on).
Configuration: the default, offline (no key), answer cache off (a measurement reads fresh answers).
Scores (core.eval.answer): answered_correctly (not refused and one quoted sentence from a gold span), gold coverage
(share of a question's gold spans some answer sentence comes from), refusal of an answerable question; comparisons
with a side the corpus lacks ("missing") count as correct only when the answer names that side as missing.
Writes bench/results/synthesis_<label>.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, table, write_result

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.answer import answer_sentences, answered_correctly, matches_gold  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402

DEFAULT_DB = ROOT / "data" / "bench" / "synthesis.duckdb"
TYPES = ("comparison", "multi-hop", "global")


def questions() -> list[dict]:
    out = []
    files = [ROOT / "sample_corpus" / "eval.jsonl", *sorted((ROOT / "sample_corpus").glob("eval_holdout*.jsonl")),
             ROOT / "sample_corpus" / "eval_synthesis.jsonl", ROOT / "sample_corpus" / "eval_synthesis_holdout.jsonl"]
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                if q["type"] in TYPES and q.get("answerable", True):
                    out.append({**q, "set": f.stem})
    return out


def ensure_db(db: Path) -> None:
    if db.exists():
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "core", "ingest", str(ROOT / "sample_corpus" / "docs"), "--db", str(db)],
                   check=True, cwd=ROOT)
    subprocess.run([sys.executable, "-m", "core", "graph", "build", "--db", str(db)], check=True, cwd=ROOT)


def score(q: dict, answer) -> dict:
    spans = [g["span"] for g in q["gold"]]
    sents = answer_sentences(answer) if not answer.refused else []
    covered = sum(1 for s in spans if any(matches_gold(x, [s]) for x in sents))
    ok = answered_correctly(answer, spans)
    missing = q.get("missing") or []
    if missing:  # the answer must say the corpus lacks that side
        ok = ok and all(m.lower() in answer.text.lower() and "does not say" in answer.text.lower() for m in missing)
    return {"correct": ok, "coverage": covered / len(spans) if spans else 0.0, "refused": answer.refused}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--db", default=str(DEFAULT_DB))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--code", default="", help="what code ran, when not this checkout's (e.g. a base commit's archive)")
    args = ap.parse_args()
    db = Path(args.db)
    ensure_db(db)
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False})
    deps = build_deps(cfg, store=Store(str(db), read_only=True))
    qs = questions()[: args.limit]
    rows = []
    t0 = time.perf_counter()
    for q in qs:
        t = time.perf_counter()
        trace = run_query(q["query"], cfg, deps, log=False)
        ms = (time.perf_counter() - t) * 1000
        a = trace.answer
        assert a is not None
        route = trace.route_info()
        rows.append({"id": q["id"], "set": q["set"], "type": q["type"], "route": route.config if route else None,
                     "ms": round(ms), **score(q, a), "answer": a.text[:600]})
        print(f"{q['id']:>6} {q['type']:<10} {'OK ' if rows[-1]['correct'] else ('REF' if a.refused else 'no ')} "
              f"{a.text[:110]!r}", file=sys.stderr)
    summary = {}
    groups = {t: [r for r in rows if r["type"] == t and r["set"] != "eval_synthesis_holdout"] for t in TYPES}
    groups["comparison (holdout)"] = [r for r in rows if r["set"] == "eval_synthesis_holdout"]
    groups["all"] = rows
    for t, sel in groups.items():
        if sel:
            summary[t] = {"n": len(sel), "correct": round(100 * sum(r["correct"] for r in sel) / len(sel), 1),
                          "gold_coverage": round(100 * sum(r["coverage"] for r in sel) / len(sel), 1),
                          "refused": round(100 * sum(r["refused"] for r in sel) / len(sel), 1),
                          "median_ms": sorted(r["ms"] for r in sel)[len(sel) // 2]}
    print(table(["type", "n", "correct %", "gold coverage %", "refused %", "median ms"],
                [[t, s["n"], s["correct"], s["gold_coverage"], s["refused"], s["median_ms"]]
                 for t, s in summary.items()]))
    write_result(f"synthesis_{args.label}", {
        "label": args.label, **({"code": args.code} if args.code else {}), "db": str(db.relative_to(ROOT)) if db.is_relative_to(ROOT) else str(db),
        "config": "default, offline (no key), answer_cache.enabled = false",
        "questions": "multi-hop + global of sample_corpus/eval.jsonl and eval_holdout*.jsonl; all of "
                     "sample_corpus/eval_synthesis.jsonl (dev) and eval_synthesis_holdout.jsonl (answerable only)",
        "seconds": round(time.perf_counter() - t0, 1), "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
