"""Every fused candidate's late-interaction score, one row per question (issue #44 item 5): the lists an offline
search over rerank gates needs, with no model call after the dump.

    nice -n 5 .venv/bin/python bench/rerank_dump.py --set twowiki_multihop --db data/bench/h44_twowiki.duckdb \
        --out data/bench/h44_dump_twowiki.json

Runs the default cascade alone (router and transforms off, answers off) with the rerank handing on its whole input
(rerank.k = rerank.top_n, no floor, reading the question alone) and prune and MMR off, so the rerank stage's list holds every fused candidate
with its incoming rank and the reranker's raw score. Each row: question id, question, gold documents (and gold chunks
where the set's gold is an exact chunk text), the bm25 / dense / fused lists (chunk id, document id, score) and the
raw rerank score per chunk; the chunks' texts once per file. Workspaces and sampling are bench/generalise_paired.py's,
so its runs reuse the database this builds. Not a results file: bench/rerank_gate.py reads it.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, datasets_dir
from generalise_paired import OFF, SINGLE, _cfg, gold_docs, load

from core.deps import build_deps
from core.eval.run import prepare
from core.pipeline import run_query
from core.store import Store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", required=True)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", required=True)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--scifact-docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", choices=("cascade", "default"), default="cascade",
                    help="cascade: router and transforms off; default: the shipped default (its fused list then "
                         "holds the transforms' lists too; the reranker also scores every candidate against each "
                         "generated query)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    gs, cut = load(args.set, datasets_dir(args.datasets), args.questions, args.scifact_docs, args.seed)
    base = _cfg(OFF)
    top_n = base.rerank.top_n
    # read_queries off: the rerank stage's score is the question's own; the generated questions' are scored apart
    cfg = _cfg({**OFF, **(SINGLE if args.config == "cascade" else {}), "rerank.k": top_n, "rerank.read_queries": False, "rerank.keep_top": 0, "prune.enabled": False,
                "mmr.enabled": False, "expand.enabled": False})
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    deps = build_deps(base, store=Store(args.db))
    ws = gs.workspace or f"paired_{args.set.replace(':', '_')}"
    t0 = time.perf_counter()
    resolved, notes = prepare(gs, deps, workspace=ws, config=base)
    print(f"prepared in {time.perf_counter() - t0:.0f} s: {notes}", file=sys.stderr, flush=True)
    exact: dict[str, set[str]] = {}
    chunk_of_text: dict[str, set[str]] = {}
    if any(g.match == "exact" for q in resolved.queries for g in q.gold):
        for c in deps.store.corpus.chunks(ws):
            exact.setdefault(c.text.strip(), set()).add(c.doc_id)
            chunk_of_text.setdefault(c.text.strip(), set()).add(c.chunk_id)
    qs = [q for q in resolved.queries if q.gold]
    random.Random(args.seed).shuffle(qs)
    rows: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    t0 = time.perf_counter()
    for i, q in enumerate(qs):
        gold = gold_docs(q, exact)
        if not gold:
            continue
        tr = run_query(q.query, cfg, deps, workspace=ws, log=False)
        lists: dict[str, list[list[Any]]] = {}
        for s in ("bm25", "dense", "fused"):
            st = tr.stage(s)
            if st is not None and st.skipped is None:
                lists[s] = [[c.chunk_id, c.doc_id, round(float(c.score), 6)] for c in st.candidates[:top_n]]
        fu = tr.stage("fused")
        found = {} if fu is None or fu.skipped is not None else {
            c.chunk_id: {k[5:]: v for k, v in c.meta.items() if k.startswith("rank_") and v is not None}
            for c in fu.candidates[:top_n]}
        subq: dict[str, list[str]] = {}
        for name in ("hyde", "multi_query", "decompose"):
            st = tr.stage(name)
            if st is not None and st.skipped is None and st.info:
                subq[name] = [str(x) for x in (st.info or {}).get("queries", ())]
        rr = tr.stage("rerank")
        raw = {} if rr is None or rr.skipped is not None else {
            c.chunk_id: c.meta.get("rerank_score") for c in rr.candidates}
        for c in (rr.candidates if rr is not None else ()):
            texts.setdefault(c.chunk_id, c.text)
        sub_scores: dict[str, dict[str, float]] = {}
        if subq and rr is not None and rr.skipped is None:
            reranker, _ = deps.reranker_for(cfg.rerank.method, cfg.rerank.model, cfg.rerank.llm_model)
            ids = [c.chunk_id for c in rr.candidates]
            for sq in dict.fromkeys(x for v in subq.values() for x in v):
                got = reranker.score(sq, [c.text for c in rr.candidates], workspace=ws).scores
                sub_scores[sq] = {cid: round(float(v), 6) for cid, v in zip(ids, got)}
        gold_chunks = sorted({cid for g in q.gold if g.match == "exact"
                              for cid in chunk_of_text.get(g.text.strip(), set())})
        rows.append({"id": q.qid, "question": q.query, "gold": sorted(gold), "gold_chunks": gold_chunks,
                     "lists": lists, "rerank": raw, "found": found,
                     "subqueries": subq, "sub_scores": sub_scores,
                     "route": str((tr.stage("route").info or {}).get("class", "-")) if tr.stage("route") else "-",
                     "reranker": (rr.info or {}).get("reranker") if rr is not None else None})
        if (i + 1) % 25 == 0 or i + 1 == len(qs):  # written as it goes: a stopped run keeps what it read
            print(f"{i + 1}/{len(qs)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({"set": args.set, "cut": cut, "workspace": ws,
                                                  "config_hash": cfg.stable_hash(), "top_n": top_n,
                                                  "rows": rows, "texts": texts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
