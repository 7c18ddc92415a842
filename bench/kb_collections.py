"""Collections (issue #29 item 5): one workspace holding the sample corpus and beir_scifact as two collections;
how often a question is searched in the right collection, and recall@5 against searching the right one alone.

Questions: the sample corpus's answerable eval sets (eval_train.jsonl -> split A; eval.jsonl and the holdouts ->
split B) and the 300 scifact test claims (split by the parity of a hash of their id). The router's settings
(collections.min_share, temperature, centroid_weight) are chosen on split A (the right collection searched for at
least 98% of its questions, then the fewest collections searched) and every figure is reported on split B.
recall@5: document level, the share of a question's gold documents among the documents of the final list's first 5
candidates, with a light pipeline (BM25 + dense + RRF; router, rerank, prune, MMR, expand, transforms and answer
off) run three ways on split B: routed, the right collection alone (collections.only), every collection.

    RAG_DATASETS=/work/wt/shared/datasets .venv/bin/python bench/kb_collections.py [--db PATH] [--limit N]
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench._common import CAPTION, Table, datasets_dir, grid, met, num, pct, table, write_result  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.datasets import ensure_corpus, scifact_set, subsample  # noqa: E402
from core.ingest.pipeline import ingest_files, read_paths  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.retrieve.bm25 import BM25Params  # noqa: E402
from core.route.collections import choose_offline, refresh_profiles  # noqa: E402
from core.store import Store  # noqa: E402
from core.text import guess_language  # noqa: E402

WS = "kb2"
SAMPLE, SCIFACT = "sample", "scifact"
LIGHT = {"router.enabled": False, "answer.enabled": False, "answer_cache.enabled": False, "rerank.enabled": False,
         "prune.enabled": False, "mmr.enabled": False, "expand.enabled": False, "transforms.hyde": "off",
         "transforms.multi_query": "off", "transforms.decompose": "off", "graph.enabled": False,
         "cascade_guard.enabled": False}
GRID = {"min_share": [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3], "temperature": [0.01, 0.02, 0.05],
        "centroid_weight": [0.0, 0.25, 0.5, 0.75, 1.0]}
MIN_RIGHT_A = 0.98


def _split(qid: str) -> str:
    return "A" if int(hashlib.sha1(qid.encode()).hexdigest(), 16) % 2 == 0 else "B"


def sample_questions(store: Store) -> list[dict[str, Any]]:
    names = {d.name: d.doc_id for d in store.corpus.documents(WS)}
    out = []
    for f in sorted((ROOT / "sample_corpus").glob("eval*.jsonl")):
        split = "A" if f.name == "eval_train.jsonl" else "B"
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            d = json.loads(line)
            gold = {names.get(g.get("doc", "")) for g in d.get("gold", [])}
            if not d.get("answerable", True) or not gold or None in gold:
                continue
            out.append({"id": f"{f.stem}:{d['id']}", "text": d["query"], "right": SAMPLE, "gold": sorted(gold),
                        "split": split})
    return out


def scifact_questions(root: Path) -> list[dict[str, Any]]:
    gs = scifact_set(root)
    return [{"id": f"scifact:{q.qid}", "text": q.query, "right": SCIFACT, "gold": sorted({g.doc for g in q.gold}),
             "split": _split(q.qid)} for q in gs.queries]


def prepare(store: Store, deps: Any, root: Path, scifact_docs: int = 0) -> dict[str, Any]:
    t0 = time.perf_counter()
    docs = read_paths([ROOT / "sample_corpus" / "docs"])
    rep = ingest_files(docs, store=store, embedder=deps.embedder, config=PipelineConfig(), workspace=WS)
    store.collections.assign_names(WS, {r.name: SAMPLE for r in rep.results if r.status != "error"})
    t1 = time.perf_counter()
    gs = scifact_set(root)
    if scifact_docs:  # every claim's gold documents plus seeded random distractors (core/eval/datasets.py)
        gs = subsample(gs, max_docs=scifact_docs)
    ensure_corpus(gs, store=store, embedder=deps.embedder, workspace=WS,
                  progress=lambda d, t, m: print(f"\r scifact {d}/{t} {m}", end="", file=sys.stderr))
    sample_ids = {d for d, c in store.collections.doc_collections(WS).items() if c == SAMPLE}
    sci_ids = [d.doc_id for d in store.corpus.documents(WS) if d.doc_id not in sample_ids]
    store.collections.assign(WS, SCIFACT, sci_ids)
    return {"sample_ingest_s": round(t1 - t0, 1), "scifact_ingest_s": round(time.perf_counter() - t1, 1)}


def routing(questions: list[dict[str, Any]], cols: Any, tokens: Any, vecs: np.ndarray, langs: list[str],
            covered: Any, min_share: float, temperature: float, centroid_weight: float) -> list[tuple[str, ...]]:
    out = []
    for q, v, lang in zip(questions, vecs, langs):
        blind = covered is not None and lang not in covered
        ch = choose_offline(tokens(q["text"]), None if blind else v, cols, min_share=min_share,
                            temperature=temperature, centroid_weight=centroid_weight)
        out.append(ch.searched)
    return out


def route_stats(questions: list[dict[str, Any]], picks: list[tuple[str, ...]]) -> dict[str, Any]:
    n = len(questions)
    right = sum(q["right"] in p for q, p in zip(questions, picks))
    only = sum(p == (q["right"],) for q, p in zip(questions, picks))
    wrong_only = sum(q["right"] not in p for q, p in zip(questions, picks))
    return {"questions": n, "right_searched": round(right / n, 4), "right_alone": round(only / n, 4),
            "missed": wrong_only, "mean_collections": round(sum(len(p) for p in picks) / n, 4),
            "by_source": {src: {"questions": sum(q["right"] == src for q in questions),
                                "right_searched": round(sum(q["right"] in p for q, p in zip(questions, picks)
                                                            if q["right"] == src)
                                                        / max(1, sum(q["right"] == src for q in questions)), 4)}
                          for src in (SAMPLE, SCIFACT)}}


def recall5(trace: Any, gold: list[str]) -> float:
    final = trace.final()
    docs = [c.doc_id for c in (final.candidates if final else ())][:5]
    return sum(g in docs for g in gold) / len(gold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default="/tmp/t29c_bench/collections.duckdb", help="workspace database (kept: a rerun "
                    "skips the ingest)")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--limit", type=int, default=0, help="at most this many split-B questions per source in the "
                    "recall runs (0 = all)")
    ap.add_argument("--scifact-docs", type=int, default=0, help="scifact corpus cut to the claims' gold documents "
                    "plus seeded distractors up to this many (0 = all 5,183)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = datasets_dir(args.datasets)
    store = Store(args.db)
    deps = build_deps(PipelineConfig(), store=store)
    prep = prepare(store, deps, root, args.scifact_docs)
    print(f"\nprepared: {prep}", file=sys.stderr)
    b = PipelineConfig().bm25
    index = deps.indexes.bm25(store, WS, BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem))
    t0 = time.perf_counter()
    cols = refresh_profiles(store.corpus, store.collections, store.tables.list(WS), WS, deps.embedder.model_id,
                            index.tokens)
    profile_s = time.perf_counter() - t0
    questions = sample_questions(store) + scifact_questions(root)
    langs = [guess_language(q["text"]) for q in questions]
    vecs = deps.embedder.encode([q["text"] for q in questions])
    covered = deps.embedder.languages
    A = [i for i, q in enumerate(questions) if q["split"] == "A"]
    B = [i for i, q in enumerate(questions) if q["split"] == "B"]

    def picks(idx: list[int], **kw: float) -> list[tuple[str, ...]]:
        return routing([questions[i] for i in idx], cols, index.tokens, vecs[idx], [langs[i] for i in idx],
                       covered, **kw)

    grid = []
    for ms, t, w in itertools.product(GRID["min_share"], GRID["temperature"], GRID["centroid_weight"]):
        sa = route_stats([questions[i] for i in A], picks(A, min_share=ms, temperature=t, centroid_weight=w))
        grid.append({"min_share": ms, "temperature": t, "centroid_weight": w, "A": sa})
    ok = [g for g in grid if g["A"]["right_searched"] >= MIN_RIGHT_A]
    best = min(ok or grid, key=lambda g: (g["A"]["mean_collections"], -g["A"]["right_searched"],
                                          -g["min_share"]))
    chosen = {k: best[k] for k in ("min_share", "temperature", "centroid_weight")}
    shipped = PipelineConfig().collections
    ship = {"min_share": shipped.min_share, "temperature": shipped.temperature,
            "centroid_weight": shipped.centroid_weight}
    qb = [questions[i] for i in B]
    report_b = {"chosen": route_stats(qb, picks(B, **chosen)), "shipped": route_stats(qb, picks(B, **ship)),
                "vocabulary_only": route_stats(qb, picks(B, **{**chosen, "centroid_weight": 0.0})),
                "centroid_only": route_stats(qb, picks(B, **{**chosen, "centroid_weight": 1.0}))}
    print(table(["setting", "right searched (B)", "right alone", "mean collections"],
                [[k, v["right_searched"], v["right_alone"], v["mean_collections"]] for k, v in report_b.items()]))

    # recall@5 on split B, the pipeline run three ways (the chosen router settings).
    base = PipelineConfig().with_overrides({**LIGHT, **{f"collections.{k}": v for k, v in chosen.items()}})
    runs = {"routed": base, "all": base.with_overrides({"collections.enabled": False})}
    per_source: dict[str, list[dict[str, Any]]] = {SAMPLE: [], SCIFACT: []}
    for q in qb:
        per_source[q["right"]].append(q)
    sel = [q for src in (SAMPLE, SCIFACT) for q in (per_source[src][: args.limit] if args.limit else per_source[src])]
    rec: dict[str, list[float]] = {"routed": [], "right_alone": [], "all": []}
    searched_in_pipeline = []
    t0 = time.perf_counter()
    for n, q in enumerate(sel, start=1):
        tr = run_query(q["text"], runs["routed"], deps, workspace=WS, log=False)
        st = tr.stage("collections")
        searched_in_pipeline.append(tuple(st.info["searched"]) if st is not None else ())
        rec["routed"].append(recall5(tr, q["gold"]))
        tr = run_query(q["text"], base.with_overrides({"collections.only": q["right"]}), deps, workspace=WS, log=False)
        rec["right_alone"].append(recall5(tr, q["gold"]))
        tr = run_query(q["text"], runs["all"], deps, workspace=WS, log=False)
        rec["all"].append(recall5(tr, q["gold"]))
        if n % 25 == 0:
            print(f" recall runs {n}/{len(sel)}", file=sys.stderr)
    recall_s = time.perf_counter() - t0

    def mean(xs: list[float], idx: list[int]) -> float:
        return round(100 * sum(xs[i] for i in idx) / max(1, len(idx)), 2)

    by = {"all_questions": list(range(len(sel))),
          SAMPLE: [i for i, q in enumerate(sel) if q["right"] == SAMPLE],
          SCIFACT: [i for i, q in enumerate(sel) if q["right"] == SCIFACT]}
    recall = {name: {k: mean(v, idx) for k, v in rec.items()} | {"questions": len(idx)} for name, idx in by.items()}
    for name in recall:
        recall[name]["routed_minus_right_alone"] = round(recall[name]["routed"] - recall[name]["right_alone"], 2)
    pipe = route_stats(sel, searched_in_pipeline)
    print(table(["questions", "routed", "right alone", "all", "routed - right alone"],
                [[k, v["routed"], v["right_alone"], v["all"], v["routed_minus_right_alone"]] for k, v in recall.items()]))
    chosen_b = report_b["chosen"]
    write_result("collections", {
        "what": "one workspace, two collections (sample corpus docs, beir_scifact); settings chosen on split A, "
                "figures on split B",
        "workspace": {"collections": [{"name": c.name, "docs": c.n_docs,
                                       "chunks": c.profile.n_chunks if c.profile else None,
                                       "languages": dict(c.profile.languages) if c.profile else None,
                                       "top_terms": list(c.profile.top_terms[:10]) if c.profile else None}
                                      for c in cols],
                      "embedder": deps.embedder.model_id, "profile_seconds": round(profile_s, 2), **prep},
        "splits": {"A": len(A), "B": len(B),
                   "rule": "sample eval_train.jsonl -> A, other sample eval sets -> B; scifact claims by sha1(id) "
                           "parity"},
        "choice_rule": f"on split A: right collection searched >= {MIN_RIGHT_A:.0%}, then fewest collections "
                       "searched, then higher right-searched, then larger min_share",
        "chosen_on_A": {**chosen, "A": best["A"]},
        "shipped": ship,
        "routing_B": report_b,
        "targets": {"right_searched_goal": 0.95, "right_searched_B": chosen_b["right_searched"],
                    "recall_goal_points": 1.0,
                    "recall_at_5_routed_minus_right_alone_B": recall["all_questions"]["routed_minus_right_alone"]},
        "recall_at_5_B": recall,
        "scifact_docs_flag": args.scifact_docs,
        "recall_runs": {"questions": len(sel), "limit_per_source": args.limit, "seconds": round(recall_s, 1),
                        "pipeline": LIGHT, "routing_in_pipeline": pipe},
        "grid_A": grid,
    }, table=MEASURED_COLLECTIONS_KB)
    store.close()
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_collections_kb(d: dict[str, Any], file: str) -> list[str]:
    """bench/kb_collections.py: two collections in one workspace; routing share and recall@5 against the right one."""
    out = ["### Collections: the sample corpus and beir_scifact in one workspace", "", CAPTION, ""]
    ch = d.get("chosen_on_A") or {}
    out.append(f"Router settings chosen on split A ({d.get('splits', {}).get('A')} questions): min_share "
               f"{ch.get('min_share')}, temperature {ch.get('temperature')}, centroid_weight "
               f"{ch.get('centroid_weight')}; every figure below is split B ({d.get('splits', {}).get('B')} questions).")
    out.append("")
    rb = d.get("routing_B") or {}
    rows = [[k.replace("_", " "), pct(v.get("right_searched")), pct(v.get("right_alone")), v.get("missed"),
             num(v.get("mean_collections"))] for k, v in rb.items()]
    if rows:
        out += [grid(["offline router", "right collection searched", "right one alone", "missed",
                          "collections searched (mean)"], rows), ""]
    rec = d.get("recall_at_5_B") or {}
    rows = [[k.replace("_", " "), v.get("questions"), num(v.get("routed")), num(v.get("right_alone")), num(v.get("all")),
             num(v.get("routed_minus_right_alone"))] for k, v in rec.items()]
    if rows:
        out += [grid(["questions (split B)", "n", "recall@5 routed", "right collection alone", "every collection",
                          "routed - right alone (points)"], rows), ""]
    t = d.get("targets") or {}
    if t:
        rs, dr = t.get("right_searched_B"), t.get("recall_at_5_routed_minus_right_alone_B")
        out.append(f"Targets: right collection searched **{pct(rs)}** (goal >= 95%: {met(rs is not None and rs >= 0.95)}); "
                   f"recall@5 routed minus right-alone **{num(dr)}** points (goal within 1: "
                   f"{met(dr is not None and dr >= -1.0)}).")
    return out


MEASURED_COLLECTIONS_KB = Table(measured_collections_kb, 'Tables and SQL')


if __name__ == "__main__":
    raise SystemExit(main())
