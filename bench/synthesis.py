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
Ceiling (--ceiling; issue #30's "answered-correctly at least doubles" target): per question, whether a sentence of
a gold span is anywhere in the chunks the answer read (the answer stage's source: the final list's top
answer.max_chunks, whole texts as the offline answerer reads them, or graph global search's community chunks when its
reduce answered), and anywhere in the top 50 of any stage of the trace: the share an answer that never refused and
always picked the right sentence could get right, under the same answered-correctly test (one gold sentence quoted).
Writes bench/results/synthesis_<label>.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import CAPTION, ROOT, Table, grid, num, table, write_result

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.answer import answer_sentences, answered_correctly, matches_gold  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402
from core.text import sentence_spans  # noqa: E402
from core.types import Stage, Trace  # noqa: E402

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


def _has_gold(texts: list[str], spans: list[str]) -> tuple[bool, float]:
    """(some sentence of the texts comes from a gold span, share of the gold spans some sentence comes from)."""
    sents = [" ".join(t[a:b].split()) for t in texts for a, b in sentence_spans(t)]
    hit = [any(matches_gold(x, [g]) for x in sents) for g in spans]
    return any(hit), (sum(hit) / len(spans) if spans else 0.0)


def ceiling(q: dict, trace: Trace, store: Store, max_chunks: int, depth: int = 50) -> dict:
    """Where the gold sentences are: in the chunks the answer read, and in the top `depth` of any stage."""
    spans = [g["span"] for g in q["gold"]]
    info = trace.answer_info()
    src = trace.stage(info.source) if info is not None and info.source else None
    read = [c.chunk_id for c in (src.candidates if src is not None else ())]
    if src is not None and src.stage != Stage.GRAPH_GLOBAL:
        read = read[:max_chunks]  # the extractive answer reads the final list's top answer.max_chunks
    anywhere = list(dict.fromkeys(c.chunk_id for s in trace.stages if s.skipped is None
                                  for c in s.candidates[:depth]))
    texts = {cid: ch.text for cid, ch in store.corpus.chunks_by_id(list(dict.fromkeys(read + anywhere))).items()}
    r_any, r_share = _has_gold([texts[c] for c in read if c in texts], spans)
    a_any, a_share = _has_gold([texts[c] for c in anywhere if c in texts], spans)
    return {"source": src.stage if src is not None else None, "read_chunks": len(read), "in_read": r_any,
            "read_gold_share": round(r_share, 3), f"in_top{depth}_any_stage": a_any,
            f"top{depth}_gold_share": round(a_share, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--db", default=str(DEFAULT_DB))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--ceiling", action="store_true", help="also record where the gold sentences are (see above)")
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
                     "ms": round(ms), **score(q, a), "answer": a.text[:600],
                     **(ceiling(q, trace, deps.store, cfg.answer.max_chunks) if args.ceiling else {})})
        print(f"{q['id']:>6} {q['type']:<10} {'OK ' if rows[-1]['correct'] else ('REF' if a.refused else 'no ')} "
              f"{a.text[:110]!r}", file=sys.stderr)
    summary = {}

    def pct(sel: list[dict], key: str) -> float:
        return round(100 * sum(float(r[key]) for r in sel) / len(sel), 1)

    groups = {t: [r for r in rows if r["type"] == t and r["set"] != "eval_synthesis_holdout"] for t in TYPES}
    groups["comparison (holdout)"] = [r for r in rows if r["set"] == "eval_synthesis_holdout"]
    groups["all"] = rows
    for t, sel in groups.items():
        if sel:
            summary[t] = {"n": len(sel), "correct": round(100 * sum(r["correct"] for r in sel) / len(sel), 1),
                          "gold_coverage": round(100 * sum(r["coverage"] for r in sel) / len(sel), 1),
                          "refused": round(100 * sum(r["refused"] for r in sel) / len(sel), 1),
                          "median_ms": sorted(r["ms"] for r in sel)[len(sel) // 2],
                          **({"ceiling_read": pct(sel, "in_read"), "ceiling_top50": pct(sel, "in_top50_any_stage"),
                              "read_gold_share": pct(sel, "read_gold_share"),
                              "top50_gold_share": pct(sel, "top50_gold_share")} if args.ceiling else {})}
    print(table(["type", "n", "correct %", "gold coverage %", "refused %", "median ms"]
                + (["ceiling: read %", "ceiling: top-50 %"] if args.ceiling else []),
                [[t, s["n"], s["correct"], s["gold_coverage"], s["refused"], s["median_ms"]]
                 + ([s["ceiling_read"], s["ceiling_top50"]] if args.ceiling else []) for t, s in summary.items()]))
    write_result(f"synthesis_{args.label}", {
        "label": args.label, **({"code": args.code} if args.code else {}), "db": str(db.relative_to(ROOT)) if db.is_relative_to(ROOT) else str(db),
        "config": "default, offline (no key), answer_cache.enabled = false",
        "questions": "multi-hop + global of sample_corpus/eval.jsonl and eval_holdout*.jsonl; all of "
                     "sample_corpus/eval_synthesis.jsonl (dev) and eval_synthesis_holdout.jsonl (answerable only)",
        **({"ceiling": "ceiling_read: % of questions with a gold sentence in the chunks the answer read (its source "
                       "stage: the final list's top answer.max_chunks, or graph global's community chunks); "
                       "ceiling_top50: ... in the top 50 of any stage; *_gold_share: mean share of a question's gold "
                       "spans found there. An answer that never refused and always quoted a gold sentence it read "
                       "would score ceiling_read"} if args.ceiling else {}),
        "seconds": round(time.perf_counter() - t0, 1), "summary": summary, "rows": rows}, table=MEASURED_SYNTHESIS)


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_synthesis(d: dict[str, Any], file: str) -> list[str]:
    """bench/synthesis.py: comparison, multi-hop and global questions answered offline (before / after #30)."""
    out = [f"### Synthesis answers offline: {d.get('label')}", "", CAPTION, "",
           f"Multi-hop and global questions of `sample_corpus/eval.jsonl` and `eval_holdout*.jsonl`; comparisons and "
           f"global questions of `eval_synthesis.jsonl` (the comparison answer's dev set); \"comparison (holdout)\": "
           f"`eval_synthesis_holdout.jsonl`, written before the comparison answer's one revision. {d.get('config')}."
           + (f" Code: {d['code']}." if d.get("code") else "") + " Milliseconds were taken on a shared 2-core machine "
           "under heavy load (see the load averages): compare them within a run only.", ""]
    ceil = "ceiling_read" in ((d.get("summary") or {}).get("all") or {})
    rows = [[t, v.get("n"), num(v.get("correct"), 1), num(v.get("gold_coverage"), 1), num(v.get("refused"), 1),
             num(v.get("median_ms"), 0)] + ([num(v.get("ceiling_read"), 1), num(v.get("ceiling_top50"), 1)]
                                             if ceil else []) for t, v in (d.get("summary") or {}).items()]
    out.append(grid(["type", "questions", "answered correctly %", "gold spans covered %", "refused %",
                         "median ms"] + (["ceiling: gold sentence in the chunks read %",
                                          "ceiling: in some stage's top 50 %"] if ceil else []), rows))
    if ceil:
        out += ["", "Ceiling: the share of questions with a sentence of a gold span in the chunks the answer read "
                "(the final list's top answer.max_chunks, or graph global search's community chunks when its reduce "
                "answered), and in the top 50 of any stage: what an answer that never refused and always quoted the "
                "right sentence could score under the same test."]
    return out


MEASURED_SYNTHESIS = Table(measured_synthesis, 'Offline answer and answer cache')


if __name__ == "__main__":
    main()
