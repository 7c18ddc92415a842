"""RAPTOR against graph global search and plain retrieval on the sample set's global and comparison questions.

    .venv/bin/python bench/raptor.py --db FILE   (a sample-corpus database with its graph and RAPTOR tree built)

Questions: every global question of sample_corpus/eval.jsonl, eval_holdout*.jsonl and eval_synthesis*.jsonl, and every
comparison of eval_synthesis*.jsonl (answerable ones). Three configurations, router off, offline, answer cache off:
plain (the default pipeline), graph global (graph.enabled, graph.mode = global: its reduce is the answer) and raptor
(raptor.enabled: the tree's list fused with BM25 and dense). Scores: gold-span recall@10 of the final candidates
(core.eval.metrics.span_in_text on each chunk), answered_correctly (core.eval.answer), refusals, median ms. The tree:
`python -m core raptor build` at the default raptor.* settings. Writes bench/results/raptor.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from _common import CAPTION, ROOT, Table, grid, num, table, write_result

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.answer import answered_correctly  # noqa: E402
from core.eval.metrics import span_in_text  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402

BASE = {"router.enabled": False, "answer_cache.enabled": False}
CONFIGS = {"plain": {}, "graph global": {"graph.enabled": True, "graph.mode": "global"},
           "raptor": {"raptor.enabled": True}}


def questions() -> list[dict]:
    out = []
    sc = ROOT / "sample_corpus"
    for f in [sc / "eval.jsonl", *sorted(sc.glob("eval_holdout*.jsonl")), *sorted(sc.glob("eval_synthesis*.jsonl"))]:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                if q.get("answerable", True) and (q["type"] == "global" or
                                                  (q["type"] == "comparison" and "synthesis" in f.stem)):
                    out.append({**q, "set": f.stem})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    args = ap.parse_args()
    base = PipelineConfig().with_overrides(BASE)
    store = Store(args.db, read_only=True)
    deps = build_deps(base, store=store)
    state = store.raptor.state("default")
    assert state is not None, "build the RAPTOR tree first: python -m core raptor build --db ..."
    qs = questions()
    rows = []
    t0 = time.perf_counter()
    for name, ov in CONFIGS.items():
        cfg = base.with_overrides(ov)
        for q in qs:
            t = time.perf_counter()
            trace = run_query(q["query"], cfg, deps, log=False)
            ms = (time.perf_counter() - t) * 1000
            final = trace.final()
            top = list(final.candidates)[:10] if final else []
            spans = [g["span"] for g in q["gold"]]
            rec = sum(1 for s in spans if any(span_in_text(s, c.text) for c in top)) / len(spans)
            a = trace.answer
            assert a is not None
            rows.append({"config": name, "id": q["id"], "type": q["type"], "recall@10": round(rec, 3),
                         "correct": answered_correctly(a, spans), "refused": a.refused, "ms": round(ms)})
        print(f"{name}: done", file=sys.stderr)
    summary: dict[str, dict] = {}
    for name in CONFIGS:
        for t in ("global", "comparison"):
            sel = [r for r in rows if r["config"] == name and r["type"] == t]
            summary[f"{name} / {t}"] = {
                "n": len(sel), "recall@10": round(100 * sum(r["recall@10"] for r in sel) / len(sel), 1),
                "correct": round(100 * sum(r["correct"] for r in sel) / len(sel), 1),
                "refused": round(100 * sum(r["refused"] for r in sel) / len(sel), 1),
                "median_ms": sorted(r["ms"] for r in sel)[len(sel) // 2]}
    print(table(["config / type", "n", "gold recall@10 %", "correct %", "refused %", "median ms"],
                [[k, v["n"], v["recall@10"], v["correct"], v["refused"], v["median_ms"]] for k, v in summary.items()]))
    write_result("raptor", {"db": args.db, "tree": {"corpus_version": state[0], "embedder": state[1],
                                                    "nodes": state[2]},
                            "config": "router off, offline (no key), answer cache off; raptor.* defaults",
                            "seconds": round(time.perf_counter() - t0, 1), "summary": summary, "rows": rows},
                 table=MEASURED_RAPTOR)


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_raptor(d: dict[str, Any], file: str) -> list[str]:
    """bench/raptor.py: RAPTOR beside graph global search and plain retrieval."""
    t = d.get("tree") or {}
    out = ["### RAPTOR, graph global search and plain retrieval on global and comparison questions", "",
           CAPTION, "", f"{d.get('config')}; tree: {t.get('nodes')} summaries ({t.get('embedder')}).", ""]
    out.append(grid(["configuration / questions", "n", "gold recall@10 %", "answered correctly %", "refused %",
                         "median ms"], [[k, v.get("n"), num(v.get("recall@10"), 1), num(v.get("correct"), 1),
                                         num(v.get("refused"), 1), num(v.get("median_ms"), 0)]
                                        for k, v in (d.get("summary") or {}).items()]))
    return out


MEASURED_RAPTOR = Table(measured_raptor, 'Offline answer and answer cache')


if __name__ == "__main__":
    main()
