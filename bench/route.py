"""Router and query-transform benchmark (issue #16), written to bench/results/route.json.

Run from the repo root:
    .venv/bin/python bench/route.py --part router    # classifier -> bench/results/route.json
    .venv/bin/python bench/route.py --part twowiki   # retrieval by question type -> bench/results/route_twowiki.json
    .venv/bin/python bench/route.py --part scifact   # nDCG@10 routed vs default -> bench/results/route_scifact.json
    .venv/bin/python bench/route.py --part tune      # transform weight / depth on router-train questions only
    .venv/bin/python bench/route.py --part twowiki --limit 60
    .venv/bin/python bench/route.py --part tune_loop # agent.per_round of the multi-hop route, train split only
    .venv/bin/python bench/route.py --part latency --dataset twowiki_multihop   # every single config vs routed
    .venv/bin/python bench/route.py --part latency --dataset sample             #   -> route_latency_<set>.json
    .venv/bin/python bench/route.py --part latency --split test     # only the router's test-split questions
    .venv/bin/python bench/route.py --part latency --split train --every 2      # -> route_latency_twowiki_train.json
    .venv/bin/python bench/route.py --part tune_gate  # multi-hop route: early stop / BM25 bridging, train split only
    .venv/bin/python bench/route.py --part tune_route # routed with / without dense for generated queries, train split

Router: the labelled set train/sets/routing.jsonl was split once (train/route_data.py, per source
and label, seed 16). The two thresholds (router.min_confidence, router.refuse_confidence) are chosen by 5-fold
cross-validation on the train split only; the test split is scored once with them. Macro-F1 is over the six classes
from the classifier's best class; the routing figures apply the thresholds (abstain = the default pipeline).

twowiki: the 2,086 passages as one chunk each (bench/agent.py's loader) in data/bench/route.duckdb, 300 questions,
retrieval only (rerank, prune, mmr and answer off; fusion.k 20), scored at document level on the final list:
recall@5 and all-gold@10 (every gold passage in the top 10). Rows: default (router off), each transform forced on
with the router off, and routed (router on, transforms auto). The router was trained on 70% of these questions
(their train split), so routed rows are also given on the 30% test-split questions alone.
Every row goes through the product's run_query.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
from _common import CAPTION, ROOT, Table, datasets_dir, grid, met, num, pct, table, write_result

from core.route.router import (  # noqa: E402
    ABSTAIN,
    CLASSES,
    MODEL_FILE,
    NO_RETRIEVAL,
    ROUTING_FILE,
    Example,
    ShippedRouter,
    decide,
    load_examples,
    refusal_guard,
)
from train.route import OfflineRouter, training_sha  # noqa: E402

RESULT = "route"
CORPUS_CLASSES = ("factoid", "comparison", "multi-hop", "global-summary")


def _probs(model: OfflineRouter | ShippedRouter, ex: Sequence[Example]) -> list[dict[str, float]]:
    p = model.probabilities([e.text for e in ex], [e.coverage for e in ex])
    return [dict(zip(model.classes, map(float, row))) for row in p]


def cv_probs(train: Sequence[Example], folds: int = 5) -> list[dict[str, float]]:
    idx = list(range(len(train)))
    random.Random(0).shuffle(idx)
    out: list[dict[str, float] | None] = [None] * len(train)
    for f in range(folds):
        held = set(idx[f::folds])
        model = OfflineRouter([train[i] for i in idx if i not in held])
        order = sorted(held)
        for i, p in zip(order, _probs(model, [train[i] for i in order])):
            out[i] = p
    return [p for p in out if p is not None]


def routing_stats(ex: Sequence[Example], probs: Sequence[dict[str, float]], mn: float, rf: float) -> dict[str, Any]:
    decided = [decide(p, min_confidence=mn, refuse_confidence=rf)[0] for p in probs]
    # the product's keyword guard (core/route/router.py route_offline): no refusal of a short query the corpus knows
    decided = [ABSTAIN if d in NO_RETRIEVAL and refusal_guard(e.text, e.coverage) else d for e, d in zip(ex, decided)]
    corpus = [(e, d) for e, d in zip(ex, decided) if e.label in CORPUS_CLASSES]
    costly = sum(d in NO_RETRIEVAL for _, d in corpus)
    # abstain runs the default pipeline, which is what a factoid gets: counted right for factoid, wrong otherwise
    effective = sum(d == e.label or (d == ABSTAIN and e.label == "factoid") for e, d in zip(ex, decided))
    return {"costly_rate": costly / max(1, len(corpus)), "costly": costly, "corpus_questions": len(corpus),
            "abstain_rate": sum(d == ABSTAIN for d in decided) / len(ex), "effective_accuracy": effective / len(ex),
            "decided": decided}


def costly_upper(k: int, n: int, level: float = 0.95) -> float:
    """Two-sided Clopper-Pearson upper bound of a rate seen k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(1 - (1 - level) / 2, k + 1, n - k))


def f1_report(labels: Sequence[str], pred: Sequence[str]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for c in CLASSES:
        tp = sum(l == c and p == c for l, p in zip(labels, pred))
        fp = sum(l != c and p == c for l, p in zip(labels, pred))
        fn = sum(l == c and p != c for l, p in zip(labels, pred))
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        per[c] = {"precision": round(prec, 4), "recall": round(rec, 4),
                  "f1": round(2 * prec * rec / (prec + rec), 4) if prec + rec else 0.0, "n": tp + fn}
    return {"macro_f1": round(statistics.mean(v["f1"] for v in per.values()), 4), "per_class": per,
            "accuracy": round(sum(l == p for l, p in zip(labels, pred)) / len(labels), 4)}


def confusion(labels: Sequence[str], pred: Sequence[str], cols: Sequence[str]) -> dict[str, dict[str, int]]:
    return {l: {c: sum(a == l and b == c for a, b in zip(labels, pred)) for c in cols} for l in CLASSES}


def router_part() -> dict[str, Any]:
    train, test = load_examples("train"), load_examples("test")
    rows = [json.loads(x) for x in ROUTING_FILE.read_text(encoding="utf-8").splitlines() if x.strip()]
    test_sources = [r["source"] for r in rows if r["split"] == "test"]
    times = []
    for _ in range(3):
        t = time.perf_counter()
        model = OfflineRouter(train)
        times.append(time.perf_counter() - t)
    print(f"train: {len(train)} examples, {statistics.median(times):.2f} s (median of 3)")
    # What a query pays instead: loading the shipped export (core/models/data/router_model.npz), no scikit-learn import.
    loads = []
    for _ in range(5):
        t = time.perf_counter()
        shipped = ShippedRouter()
        loads.append(time.perf_counter() - t)
    if shipped.source_sha != training_sha():
        raise SystemExit("core/models/data/router_model.npz is stale: run `python -m train.route`")
    print(f"shipped model load: {1000 * statistics.median(loads):.1f} ms (median of 5)")

    # thresholds on train CV only
    cvp = cv_probs(train)
    cv_f1 = f1_report([e.label for e in train], [max(p, key=p.get) for p in cvp])["macro_f1"]
    sweep = []
    for rf in np.round(np.arange(0.5, 0.96, 0.05), 2):
        for mn in np.round(np.arange(0.2, 0.71, 0.05), 2):
            s = routing_stats(train, cvp, float(mn), float(rf))
            sweep.append({"refuse_confidence": float(rf), "min_confidence": float(mn),
                          **{k: round(v, 4) for k, v in s.items() if k != "decided"}})
    # rule: the 95% upper bound (Clopper-Pearson) of the CV costly rate at most the 1% target, then the best
    # effective accuracy. (The previous rule, a point estimate <= 0.5%, paired with a coverage guard that abstained on
    # 39% of the test split; the bound keeps the margin without that guard.)
    ok = [s for s in sweep if costly_upper(s["costly"], s["corpus_questions"]) <= 0.01] or sweep
    best = max(ok, key=lambda s: (s["effective_accuracy"], -s["refuse_confidence"], -s["min_confidence"]))
    mn, rf = best["min_confidence"], best["refuse_confidence"]
    print(f"train CV macro-F1 {cv_f1:.4f}; chosen min_confidence {mn}, refuse_confidence {rf}: {best}")

    # test, once
    tp = _probs(shipped, test)
    fitted = model.probabilities([e.text for e in test], [e.coverage for e in test])
    shipped_vs_fitted = float(np.abs(fitted - shipped.probabilities([e.text for e in test],
                                                                    [e.coverage for e in test])).max())
    t = time.perf_counter()
    for e in test[:200]:
        shipped.probabilities([e.text], [e.coverage])
    per_q_ms = (time.perf_counter() - t) * 1000 / min(200, len(test))
    labels = [e.label for e in test]
    argmax = [max(p, key=p.get) for p in tp]
    rep = f1_report(labels, argmax)
    st = routing_stats(test, tp, mn, rf)
    by_source: dict[str, Any] = {}
    for src in sorted(set(test_sources)):
        sel = [i for i, s in enumerate(test_sources) if s == src]
        by_source[src] = {"n": len(sel), "accuracy": round(sum(labels[i] == argmax[i] for i in sel) / len(sel), 4),
                          "to_chitchat_or_oos_after_thresholds": sum(
                              st["decided"][i] in NO_RETRIEVAL and labels[i] in CORPUS_CLASSES for i in sel)}
    print(f"test macro-F1 {rep['macro_f1']} accuracy {rep['accuracy']}; costly {st['costly']}/"
          f"{st['corpus_questions']} ({100 * st['costly_rate']:.2f}%), abstain {100 * st['abstain_rate']:.1f}%")
    print(table(["class", "precision", "recall", "f1", "n"],
                [[c, v["precision"], v["recall"], v["f1"], v["n"]] for c, v in rep["per_class"].items()]))
    return {
        "train_examples": len(train), "test_examples": len(test),
        "train_seconds_median_of_3": round(statistics.median(times), 3),
        "train_seconds_all": [round(x, 3) for x in times],
        "shipped_load_ms_median_of_5": round(1000 * statistics.median(loads), 1),
        "shipped_model_bytes": MODEL_FILE.stat().st_size,
        "shipped_vs_fitted_max_abs_diff": shipped_vs_fitted,
        "predict_ms_per_question": round(per_q_ms, 2),
        "cv_train_macro_f1": cv_f1,
        "thresholds": {"min_confidence": mn, "refuse_confidence": rf, "rule": "95% upper bound (Clopper-Pearson) of the "
                       "costly rate <= 1% on 5-fold CV of the train split, then the highest effective accuracy "
                       "(abstain counts right for factoid)",
                       "cv_at_choice": best},
        "test": {**rep, "confusion_argmax": confusion(labels, argmax, CLASSES),
                 "confusion_routed": confusion(labels, st["decided"], (*CLASSES, ABSTAIN)),
                 "costly_rate": round(st["costly_rate"], 4), "costly": st["costly"],
                 "corpus_questions": st["corpus_questions"], "abstain_rate": round(st["abstain_rate"], 4),
                 "effective_accuracy": round(st["effective_accuracy"], 4), "by_source": by_source,
                 "targets": {"macro_f1>=0.90": rep["macro_f1"] >= 0.90, "costly<=1%": st["costly_rate"] <= 0.01}},
    }


# -- retrieval on twowiki_multihop -----------------------------------------------------------------------------------
RETRIEVAL = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "answer.enabled": False,
             "answer_cache.enabled": False, "agent.enabled": False, "fusion.k": 20, "bm25.k": 50, "dense.k": 50}
OFF = {"transforms.hyde": "off", "transforms.multi_query": "off", "transforms.decompose": "off"}
ROWS = {
    "default": {**OFF, "router.enabled": False},
    "hyde (offline: PRF)": {**OFF, "router.enabled": False, "transforms.hyde": "on"},
    "multi_query": {**OFF, "router.enabled": False, "transforms.multi_query": "on"},
    "decompose": {**OFF, "router.enabled": False, "transforms.decompose": "on"},
    "routed": {"router.enabled": True},
}
TYPES = ("comparison", "compositional", "inference", "bridge_comparison")


def _twowiki_train(root: Path, db: str, ws: str) -> tuple[Any, Any, dict[str, str], list[dict[str, Any]]]:
    """The tuning parts' inputs: the retrieval-only base config, deps on `db`, doc id -> title in workspace `ws`, and
    the twowiki questions that sit in the router's TRAIN split (the test split stays for the reported parts)."""
    from core.config import PipelineConfig
    from core.deps import build_deps

    base = PipelineConfig().with_overrides(RETRIEVAL)
    deps = build_deps(base, db=db)
    titles = {d.doc_id: d.name for d in deps.store.corpus.documents(ws)}
    split = {json.loads(x)["text"]: json.loads(x)["split"] for x in ROUTING_FILE.read_text().splitlines() if x}
    questions = [json.loads(r) for r in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    return base, deps, titles, [q for q in questions if split.get(q["question"]) == "train"]


def tune_part(root: Path, db: str, limit: int) -> dict[str, Any]:
    """transforms.weight x transforms.per_query_k for the routed row, on the twowiki questions of the router's TRAIN
    split only (the test-split questions are what twowiki_part reports on)."""
    from agent import doc_order, score

    from core.pipeline import run_query

    ws = "twowiki"
    base, deps, titles, questions = _twowiki_train(root, db, ws)
    questions = questions[: limit or None]
    grid = []
    for w in (1.0, 2.0):
        for pk in (3, 5):
            cfg = base.with_overrides({**ROWS["routed"], "transforms.weight": w, "transforms.per_query_k": pk})
            res = []
            for q in questions:
                tr = run_query(q["question"], cfg, deps, workspace=ws, log=False)
                final = tr.final()
                res.append((q["type"], *score([titles[d] for d in doc_order(final.candidates if final else [])],
                                              set(q["gold_titles"]))))
            row = {"weight": w, "per_query_k": pk, "n": len(res),
                   "allgold@10": round(100 * float(np.mean([a for _, _, a in res])), 1),
                   "recall@5": round(100 * float(np.mean([r for _, r, _ in res])), 1)}
            for t in TYPES:
                sel = [a for ty, _, a in res if ty == t]
                row[f"allgold@10 {t}"] = round(100 * float(np.mean(sel)), 1) if sel else None
            grid.append(row)
            print(row, flush=True)
    best = max(grid, key=lambda r: (r["allgold@10"], r["recall@5"], -r["weight"], -r["per_query_k"]))
    return {"questions": len(questions), "split": "router train split", "grid": grid, "chosen": best,
            "rule": "highest all-gold@10 over all types, then recall@5, then the smaller weight and k"}


def twowiki_part(root: Path, db: str, limit: int, rows_wanted: Sequence[str]) -> dict[str, Any]:
    from agent import (  # bench/agent.py: the same corpus loader and scoring
        doc_order,
        predocs,
        score,
    )

    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.datasets import ingest_predocs
    from core.pipeline import run_query

    ws = "twowiki"
    base = PipelineConfig().with_overrides(RETRIEVAL)
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    deps = build_deps(base, db=db)
    t0 = time.perf_counter()
    rep = ingest_predocs(predocs(root), store=deps.store, embedder=deps.embedder, workspace=ws)
    print(f"corpus: {rep.documents} passages, embedded {rep.embedded} in {time.perf_counter() - t0:.1f}s")
    titles = {d.doc_id: d.name for d in deps.store.corpus.documents(ws)}
    questions = [json.loads(r) for r in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    if limit:
        questions = questions[:limit]
    split = {json.loads(x)["text"]: json.loads(x)["split"] for x in ROUTING_FILE.read_text().splitlines() if x}
    per: dict[str, list[dict[str, Any]]] = {}
    for name in rows_wanted:  # warm-up: model load (or ONNX export) and indexes are no row's time (the first row paid
        run_query(questions[0]["question"], base.with_overrides(ROWS[name]), deps, workspace=ws, log=False)  # them)
    for name in rows_wanted:
        cfg = base.with_overrides(ROWS[name])
        out = []
        for i, q in enumerate(questions):
            t = time.perf_counter()
            trace = run_query(q["question"], cfg, deps, workspace=ws, log=False)
            ms = (time.perf_counter() - t) * 1000
            final = trace.final()
            docs = [titles[d] for d in doc_order(final.candidates if final else [])]
            r5, a10 = score(docs, set(q["gold_titles"]))
            fired = [s.stage for s in trace.stages if s.stage in ("hyde", "multi_query", "decompose")
                     and s.skipped is None]
            route = trace.route()
            out.append({"type": q["type"], "r5": r5, "a10": a10, "ms": ms, "fired": fired,
                        "route": route["class"] if route else None, "split": split.get(q["question"], "?")})
        per[name] = out
        print(f"{name}: done ({len(out)} questions)", flush=True)

    def summ(sel: list[dict[str, Any]]) -> dict[str, Any]:
        if not sel:
            return {"n": 0}
        return {"n": len(sel), "recall@5": round(100 * float(np.mean([r["r5"] for r in sel])), 1),
                "allgold@10": round(100 * float(np.mean([r["a10"] for r in sel])), 1),
                "ms_mean": round(float(np.mean([r["ms"] for r in sel])), 1)}

    result: dict[str, Any] = {"questions": len(questions), "config": RETRIEVAL, "rows": {}}
    table_rows = []
    for name, out in per.items():
        by = {t: summ([r for r in out if r["type"] == t]) for t in TYPES}
        by["all"] = summ(out)
        firing = {s: round(sum(s in r["fired"] for r in out) / len(out), 4) for s in ("hyde", "multi_query",
                                                                                      "decompose")}
        entry: dict[str, Any] = {"by_type": by, "firing_rate": firing}
        if name == "routed":
            routes: dict[str, dict[str, int]] = {}
            for r in out:
                routes.setdefault(r["type"], {}).setdefault(str(r["route"]), 0)
                routes[r["type"]][str(r["route"])] += 1
            entry["routes_by_type"] = routes
            entry["test_split_only"] = {t: summ([r for r in out if r["type"] == t and r["split"] == "test"])
                                        for t in (*TYPES,)}
            entry["test_split_only"]["all"] = summ([r for r in out if r["split"] == "test"])
        result["rows"][name] = entry
        for t in (*TYPES, "all"):
            table_rows.append({"row": name, "type": t, **by[t]})
    if "default" in per:
        default_ids = per["default"]
        for name, out in per.items():
            if name == "default" or "test_split_only" not in result["rows"][name]:
                continue
            d = {t: summ([r for r in default_ids if r["type"] == t and r["split"] == "test"]) for t in TYPES}
            d["all"] = summ([r for r in default_ids if r["split"] == "test"])
            result["rows"][name]["default_on_test_split"] = d
    cols = ["row", "type", "n", "recall@5", "allgold@10", "ms_mean"]
    print(table(cols, [[r.get(c) for c in cols] for r in table_rows]))
    return result


def scifact_part(root: Path, db: str, max_questions: int, max_docs: int) -> dict[str, Any]:
    """nDCG@10 on a SciFact cut (its gold abstracts plus seeded random distractors), router off vs on, through the
    product's run_eval; retrieval only, 100 deep, as bench/quality.py scores SciFact."""
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.datasets import load_dataset, subsample
    from core.eval.run import NamedConfig, run_eval

    whole = load_dataset("beir_scifact", root)
    gs = subsample(whole, max_docs=max_docs, max_questions=max_questions, seed=0)
    base = PipelineConfig().with_overrides({**RETRIEVAL, "bm25.k": 100, "dense.k": 100, "fusion.k": 100})
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    deps = build_deps(base, db=db)
    configs = [NamedConfig("default", base.with_overrides(ROWS["default"])),
               NamedConfig("routed", base.with_overrides(ROWS["routed"]))]
    runs = run_eval(gs, configs, deps, save=False)
    n_docs = sum(1 for _ in gs.predocs()) if gs.predocs is not None else None
    full = sum(1 for _ in whole.predocs())
    out: dict[str, Any] = {"set": gs.name, "questions": len(gs.queries), "max_docs": max_docs, "docs": n_docs,
                           "note": (f"the whole corpus ({full:,} abstracts)" if n_docs == full else
                                    "subsample: every gold abstract of the drawn questions plus random distractors "
                                    f"(core.eval.datasets.subsample, seed 0), not the full {full:,}-abstract corpus")}
    for r in runs:
        out[r.config_name] = {k: r.metrics.get(k) for k in ("ndcg@10", "recall@10", "mrr")}
        out[r.config_name]["latency"] = r.latency
    print(json.dumps({k: v for k, v in out.items() if k in ("default", "routed")}, indent=1, default=str))
    return out


ROUTE_LOOP = "loop as the multi-hop route (BM25 sub-queries and bridging)"


# -- every single configuration vs routed, per class, in one interleaved run ----------------------------------------
SINGLES = {
    "default": {**OFF, "router.enabled": False},
    "hyde (offline: PRF)": {**OFF, "router.enabled": False, "transforms.hyde": "on"},
    "multi_query": {**OFF, "router.enabled": False, "transforms.multi_query": "on"},
    "decompose": {**OFF, "router.enabled": False, "transforms.decompose": "on"},
    # the multi-hop route's configuration for every question: the agentic loop over decomposition, one bridging query
    # per round (core/route/routes.toml; the tune_loop part chose it)
    "loop (agent + decompose)": {**OFF, "router.enabled": False, "transforms.decompose": "on", "agent.enabled": True,
                                 "agent.per_round": 1},
    # the multi-hop route's own configuration (routes.toml: BM25 alone for generated and bridging queries; the
    # tune_gate and tune_route parts chose it on the train split) for every question: a single configuration too,
    # so it competes for the best in hindsight
    ROUTE_LOOP: {**OFF, "router.enabled": False, "transforms.decompose": "on", "agent.enabled": True,
                 "agent.per_round": 1, "agent.bridge_dense": False, "transforms.dense": False},
}


def tune_loop_part(root: Path, db: str, limit: int) -> dict[str, Any]:
    """agent.per_round (bridging queries per round) for the multi-hop route's loop, on the router's TRAIN-split
    twowiki questions of the multi-hop class only (the latency part reports all 300). Interleaved per question."""
    from agent import doc_order, score

    ws = "twowiki"
    base, deps, titles, questions = _twowiki_train(root, db, ws)
    questions = [q for q in questions if _gold_class(q["type"]) == "multi-hop"][: limit or None]
    grid = {pr: base.with_overrides({**SINGLES["loop (agent + decompose)"], "agent.per_round": pr}) for pr in (1, 2, 3)}
    res: dict[int, list[tuple[float, float, float]]] = {pr: [] for pr in grid}
    for i, pr, tr, ms in _rotating([q["question"] for q in questions], grid, deps, ws):
        final = tr.final()
        r5, a10 = score([titles[d] for d in doc_order(final.candidates if final else [])],
                        set(questions[i]["gold_titles"]))
        res[pr].append((r5, a10, ms))
    rows = [{"per_round": pr, "n": len(v), "recall@5": round(100 * float(np.mean([x[0] for x in v])), 1),
             "allgold@10": round(100 * float(np.mean([x[1] for x in v])), 1),
             "ms_mean": round(float(np.mean([x[2] for x in v])), 1),
             "ms_median": round(float(np.median([x[2] for x in v])), 1)} for pr, v in res.items()]
    best_r5, best_a10 = max(r["recall@5"] for r in rows), max(r["allgold@10"] for r in rows)
    ok = [r for r in rows if r["recall@5"] >= best_r5 - 1 and r["allgold@10"] >= best_a10 - 1]
    # median: a first run at load 30 had one stall of minutes inside a single row, which decided the mean
    chosen = min(ok, key=lambda r: r["ms_median"])
    print(table(list(rows[0]), [list(r.values()) for r in rows]))
    return {"questions": len(questions), "split": "router train split, multi-hop class", "grid": rows,
            "chosen": chosen, "rule": "the fastest per_round (median ms) within 1 point of the best recall@5 and "
                                       "all-gold@10", "per_question_ms": {pr: [round(x[2], 1) for x in v]
                                                                          for pr, v in res.items()}}


GATES = {"loop": {}, "loop + early stop": {"agent.stop_when_found": True},
         "loop + BM25 bridging": {"agent.bridge_dense": False},
         "loop + both": {"agent.stop_when_found": True, "agent.bridge_dense": False}}


TUNE_GATE_RULE = "the fastest (mean ms) within 1 point of the best recall@5 and all-gold@10 (the tune_loop rule)"


def _rotating(texts: Sequence[str], configs: dict[Any, Any], deps: Any, ws: str
              ) -> Iterator[tuple[int, str, Any, float]]:
    """Every configuration on every question, after one warm-up query each (indexes, model and first-call costs are
    no row's), the order rotating per question so a slow spell of the shared machine falls on all configurations
    alike: ratios hold under load, absolute ms do not. Yields (question index, configuration name, trace, ms)."""
    from core.pipeline import run_query

    names = list(configs)
    for cfg in configs.values():
        run_query(texts[0], cfg, deps, workspace=ws, log=False)
    for i, text in enumerate(texts):
        for name in names[i % len(names):] + names[: i % len(names)]:
            t = time.perf_counter()
            trace = run_query(text, configs[name], deps, workspace=ws, log=False)
            yield i, name, trace, (time.perf_counter() - t) * 1000
        if (i + 1) % 20 == 0:
            print(f"{i + 1}/{len(texts)} questions", flush=True)


def tune_gate_part(root: Path, db: str, limit: int) -> dict[str, Any]:
    """The multi-hop route's savings (agent.stop_when_found, agent.bridge_dense) on the router's TRAIN-split twowiki
    questions whose gold class is multi-hop, interleaved per question in rotating order: recall@5, all-gold@10, ms."""
    from agent import doc_order, score

    ws = "twowiki"
    base, deps, titles, questions = _twowiki_train(root, db, ws)
    questions = [q for q in questions if _gold_class(q["type"]) == "multi-hop"][: limit or None]
    grid = {name: base.with_overrides({**SINGLES["loop (agent + decompose)"], **o}) for name, o in GATES.items()}
    res: dict[str, list[tuple[float, float, float, int]]] = {n: [] for n in grid}
    for i, name, tr, ms in _rotating([q["question"] for q in questions], grid, deps, ws):
        final = tr.final()
        r5, a10 = score([titles[d] for d in doc_order(final.candidates if final else [])],
                        set(questions[i]["gold_titles"]))
        res[name].append((r5, a10, ms, (tr.agent or {}).get("rounds", 0)))
    rows = [{"config": n, "n": len(v), "recall@5": round(100 * float(np.mean([x[0] for x in v])), 1),
             "allgold@10": round(100 * float(np.mean([x[1] for x in v])), 1),
             "ms_mean": round(float(np.mean([x[2] for x in v])), 1),
             "ms_median": round(float(np.median([x[2] for x in v])), 1),
             "mean_rounds": round(float(np.mean([x[3] for x in v])), 2)} for n, v in res.items()]
    print(table(list(rows[0]), [list(r.values()) for r in rows]))
    best_r5, best_a10 = max(r["recall@5"] for r in rows), max(r["allgold@10"] for r in rows)
    chosen = min((r for r in rows if r["recall@5"] >= best_r5 - 1 and r["allgold@10"] >= best_a10 - 1),
                 key=lambda r: r["ms_mean"])
    return {"questions": len(questions), "split": "router train split, multi-hop class", "grid": rows,
            "overrides": GATES, "rule": TUNE_GATE_RULE, "chosen": chosen["config"]}


ROUTE_TUNE = {"loop (agent + decompose)": SINGLES["loop (agent + decompose)"], "routed": {"router.enabled": True},
              "routed, BM25-only generated queries": {"router.enabled": True, "transforms.dense": False}}


def tune_route_part(root: Path, db: str, limit: int) -> dict[str, Any]:
    """transforms.dense (generated queries with or without dense) for the routed configuration, on every twowiki
    question of the router's TRAIN split, beside the heaviest single configuration (the loop), rotating order."""
    from agent import doc_order, score

    ws = "twowiki"
    base, deps, titles, questions = _twowiki_train(root, db, ws)
    questions = questions[: limit or None]
    grid = {name: base.with_overrides(o) for name, o in ROUTE_TUNE.items()}
    names = list(grid)
    res: dict[str, list[tuple[str, float, float, float]]] = {n: [] for n in names}
    for i, name, tr, ms in _rotating([q["question"] for q in questions], grid, deps, ws):
        q = questions[i]
        final = tr.final()
        r5, a10 = score([titles[d] for d in doc_order(final.candidates if final else [])], set(q["gold_titles"]))
        res[name].append((_gold_class(q["type"]), r5, a10, ms))

    def summ(v: Sequence[tuple[str, float, float, float]]) -> dict[str, Any]:
        return {"n": len(v), "recall@5": round(100 * float(np.mean([x[1] for x in v])), 1),
                "allgold@10": round(100 * float(np.mean([x[2] for x in v])), 1),
                "ms_mean": round(float(np.mean([x[3] for x in v])), 1)}

    rows = []
    for n, v in res.items():
        row = {"config": n, **summ(v)}
        for c in ("comparison", "multi-hop"):
            row[c] = summ([x for x in v if x[0] == c])
        row["over_loop_ms"] = round(row["ms_mean"] / float(np.mean([x[3] for x in res[names[0]]])), 4)
        rows.append(row)
    print(table(["config", "n", "recall@5", "allgold@10", "ms_mean", "over_loop_ms"],
                [[r[k] for k in ("config", "n", "recall@5", "allgold@10", "ms_mean", "over_loop_ms")] for r in rows]))
    return {"questions": len(questions), "split": "router train split, every twowiki question", "grid": rows,
            "overrides": ROUTE_TUNE}


def _gold_class(qtype: str) -> str:
    from train.route_data import SAMPLE_CLASS, TWOWIKI_CLASS

    return {**SAMPLE_CLASS, **TWOWIKI_CLASS}.get(qtype, "factoid")


def latency_part(dataset: str, root: Path, db: str, limit: int, every: int = 1, split: str = "all") -> dict[str, Any]:
    """Each question through every single configuration and the routed one, in rotating order (so load hits all
    rows alike: the ratios hold under load, the absolute ms do not). Quality = document-level recall@5 and
    all-gold@10 of the final list. Per gold class (the router's classes, from the question's type), the best single
    configuration in hindsight; routed quality against the class-weighted sum of those bests; routed mean latency
    against the heaviest single configuration's."""
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.datasets import load_dataset
    from core.eval.run import prepare

    gs = load_dataset(dataset, root)
    ws = {"sample": "route_sample", "twowiki_multihop": "twowiki"}.get(dataset, dataset)
    base = PipelineConfig().with_overrides(RETRIEVAL)
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    deps = build_deps(base, db=db)
    t0 = time.perf_counter()
    gs, notes = prepare(gs, deps, workspace=ws, config=base)
    print(f"corpus ready in {time.perf_counter() - t0:.1f}s; " + "; ".join(notes), flush=True)
    qs = [q for q in gs.queries if q.gold and any(g.doc_ids for g in q.gold)][::every]
    if split != "all":  # the router's split of these questions (train/sets/routing.jsonl)
        of = {json.loads(x)["text"]: json.loads(x)["split"] for x in ROUTING_FILE.read_text().splitlines() if x}
        qs = [q for q in qs if of.get(q.query) == split]
    if limit:
        qs = qs[:limit]
    configs = {name: base.with_overrides(o) for name, o in {**SINGLES, "routed": {"router.enabled": True}}.items()}
    names = list(configs)
    rows: list[dict[str, Any]] = [{"id": q.qid, "type": q.qtype, "class": _gold_class(q.qtype)} for q in qs]
    for i, name, trace, ms in _rotating([q.query for q in qs], configs, deps, ws):
        gold = [g.doc_ids for g in qs[i].gold]
        final = trace.final()
        docs = doc_ids_in_order(final.candidates if final else [])
        r5 = sum(bool(g & set(docs[:5])) for g in gold) / len(gold)
        a10 = float(all(g & set(docs[:10]) for g in gold))
        rec = rows[i][name] = {"r5": r5, "a10": a10, "ms": ms}
        if name == "routed":
            rec["route"] = (trace.route() or {}).get("class")
            rec["stage_ms"] = {str(getattr(s.stage, "value", s.stage)): round(s.ms, 1) for s in trace.stages
                               if s.skipped is None}
            rec["rounds"] = (trace.agent or {}).get("rounds") if trace.agent else 0
    return {**summarise_latency(dataset, rows, names), "split": split, "every": every}


def doc_ids_in_order(cands: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(c.doc_id for c in cands))


def summarise_latency(dataset: str, rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    classes = sorted({r["class"] for r in rows})

    def mean(sel: Sequence[dict[str, Any]], name: str, key: str) -> float:
        return float(np.mean([r[name][key] for r in sel])) if sel else float("nan")

    per_config = {n: {"recall@5": round(100 * mean(rows, n, "r5"), 2), "allgold@10": round(100 * mean(rows, n, "a10"), 2),
                      "ms_mean": round(mean(rows, n, "ms"), 1)} for n in names}
    singles = [n for n in names if n != "routed"]
    heaviest = max(singles, key=lambda n: per_config[n]["ms_mean"])
    out: dict[str, Any] = {"dataset": dataset, "questions": len(rows), "configs": per_config, "by_class": {},
                           "heaviest_single": heaviest}
    for metric, key in (("recall@5", "r5"), ("allgold@10", "a10")):
        hind = 0.0
        for c in classes:
            sel = [r for r in rows if r["class"] == c]
            q = {n: round(100 * mean(sel, n, key), 2) for n in names}
            best = max(singles, key=lambda n: (q[n], -per_config[n]["ms_mean"]))
            hind += q[best] * len(sel)
            cls = out["by_class"].setdefault(c, {"n": len(sel), "ms_mean": {n: round(mean(sel, n, "ms"), 1)
                                                                               for n in names}})
            cls[metric] = q
            cls[f"best_single_{metric}"] = best
        hind /= len(rows)
        routed = per_config["routed"][metric]
        out[f"hindsight_{metric}"] = round(hind, 2)
        out[f"routed_over_hindsight_{metric}"] = round(routed / hind, 4) if hind else None
    lat = per_config["routed"]["ms_mean"] / per_config[heaviest]["ms_mean"]
    out["routed_over_heaviest_ms"] = round(lat, 4)
    # against every single configuration, so the reader sees the ratio to the cheaper loop variants too
    out["routed_over_single_ms"] = {n: round(per_config["routed"]["ms_mean"] / per_config[n]["ms_mean"], 4)
                                    for n in singles}
    routed_rows = [r["routed"] for r in rows]
    out["routes"] = {c: {k: sum(1 for r in rows if r["class"] == c and r["routed"].get("route") == k)
                         for k in sorted({str(r["routed"].get("route")) for r in rows})} for c in classes}
    stages = sorted({s for r in routed_rows for s in r.get("stage_ms", {})})
    out["routed_stage_ms_mean"] = {s: round(float(np.mean([r.get("stage_ms", {}).get(s, 0.0) for r in routed_rows])), 1)
                                   for s in stages}
    out["routed_mean_rounds"] = round(float(np.mean([r.get("rounds") or 0 for r in routed_rows])), 3)
    # Why routed cannot reach 60% where most questions need the loop: even if every other question cost nothing,
    # routed >= (the loop's ms on the questions routed multi-hop) / N.
    mh = [r for r in rows if r["routed"].get("route") == "multi-hop"]
    heavy_ms = per_config[heaviest]["ms_mean"]
    out["multi_hop_share"] = round(len(mh) / len(rows), 4)
    route_loop = next((n for n in (ROUTE_LOOP, "loop (agent + decompose)") if n in names), None)
    if route_loop is not None:  # the multi-hop route's own loop configuration, timed on every question
        out["routed_floor_config"] = route_loop
        out["routed_floor_over_heaviest_ms"] = round(sum(r[route_loop]["ms"] for r in mh) / len(rows) / heavy_ms, 4)
    if "decompose" in names and mh:
        # What-if from the same run: the multi-hop route as decomposition alone (each such question's decompose row)
        alt = [r["decompose"] if r["routed"].get("route") == "multi-hop" else r["routed"] for r in rows]
        out["what_if_multi_hop_decompose"] = {
            "recall@5": round(100 * float(np.mean([a["r5"] for a in alt])), 2),
            "allgold@10": round(100 * float(np.mean([a["a10"] for a in alt])), 2),
            "ms_mean": round(float(np.mean([a["ms"] for a in alt])), 1),
            "over_hindsight_recall@5": round(100 * float(np.mean([a["r5"] for a in alt])) / out["hindsight_recall@5"], 4),
            "over_hindsight_allgold@10": round(100 * float(np.mean([a["a10"] for a in alt]))
                                               / out["hindsight_allgold@10"], 4),
            "over_heaviest_ms": round(float(np.mean([a["ms"] for a in alt])) / heavy_ms, 4)}
    out["targets"] = {
        "routed recall@5 >= 95% of hindsight": (out["routed_over_hindsight_recall@5"] or 0) >= 0.95,
        "routed all-gold@10 >= 95% of hindsight": (out["routed_over_hindsight_allgold@10"] or 0) >= 0.95,
        "routed ms <= 60% of heaviest": lat <= 0.60}
    out["per_question"] = rows
    cols = ["config", "recall@5", "allgold@10", "ms_mean"]
    print(table(cols, [[n, v["recall@5"], v["allgold@10"], v["ms_mean"]] for n, v in per_config.items()]))
    print({k: v for k, v in out.items() if k not in ("per_question", "by_class", "configs")})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["router", "twowiki", "scifact", "tune", "tune_loop", "tune_gate", "tune_route",
                                       "latency"],
                    required=True)
    ap.add_argument("--dataset", default="twowiki_multihop", help="latency: sample or twowiki_multihop")
    ap.add_argument("--every", type=int, default=1, help="latency: every n-th question (a spread sample)")
    ap.add_argument("--split", choices=["all", "train", "test"], default="all",
                    help="latency: only the questions in this split of the router's labelled set")
    ap.add_argument("--resummarise", metavar="RESULTS_JSON",
                    help="latency: recompute the summary of a results file from its per-question rows (no new "
                         "measurement; the file keeps its run record and says it was re-summarised)")
    ap.add_argument("--max-docs", type=int, default=1500, help="scifact: corpus cut size")
    ap.add_argument("--datasets")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "route.duckdb"))
    args = ap.parse_args(argv)
    if args.resummarise:
        path = Path(args.resummarise)
        d = json.loads(path.read_text(encoding="utf-8"))
        lat = d["latency"]
        d["latency"] = summarise_latency(lat["dataset"], lat["per_question"], list(lat["configs"]))
        d["run"]["resummarised_by"] = f"bench/route.py --resummarise {path.name} (summary from the per-question rows)"
        path.write_text(json.dumps(d, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return 0
    # one results file per part, each holding its own run (bench/_common.write_result)
    if args.part == "router":
        write_result(RESULT, {"router": router_part()}, table=MEASURED_ROUTE)
    elif args.part == "tune":
        write_result(f"{RESULT}_tune", {"tune": tune_part(datasets_dir(args.datasets) / "twowiki_multihop", args.db,
                                                          args.limit)}, table=MEASURED_ROUTE_TUNE)
    elif args.part == "tune_loop":
        write_result(f"{RESULT}_tune_loop", {"tune_loop": tune_loop_part(datasets_dir(args.datasets) /
                                                                         "twowiki_multihop", args.db, args.limit)},
                     table=MEASURED_ROUTE_TUNE_LOOP)
    elif args.part == "tune_gate":
        write_result(f"{RESULT}_tune_gate", {"tune_gate": tune_gate_part(datasets_dir(args.datasets) /
                                                                         "twowiki_multihop", args.db, args.limit)},
                     table=MEASURED_ROUTE_TUNE_GATE)
    elif args.part == "tune_route":
        write_result(f"{RESULT}_tune_route", {"tune_route": tune_route_part(datasets_dir(args.datasets) /
                                                                           "twowiki_multihop", args.db, args.limit)},
                     table=MEASURED_ROUTE_TUNE_ROUTE)
    elif args.part == "latency":
        name = ("sample" if args.dataset == "sample" else "twowiki") + ("_train" if args.split == "train" else "")
        db = args.db.replace("route.duckdb", "route_sample.duckdb") if args.dataset == "sample" else args.db
        write_result(f"{RESULT}_latency_{name}", {"latency": latency_part(args.dataset, datasets_dir(args.datasets),
                                                                         db, args.limit, args.every, args.split)},
                     table=MEASURED_ROUTE_LATENCY)
    elif args.part == "scifact":
        db = args.db.replace("route.duckdb", "route_scifact.duckdb")
        write_result(f"{RESULT}_scifact", {"scifact": scifact_part(datasets_dir(args.datasets), db,
                                                                   args.limit or 150, args.max_docs)},
                     table=MEASURED_ROUTE_SCIFACT)
    else:
        root = datasets_dir(args.datasets) / "twowiki_multihop"
        if not (root / "questions.jsonl").is_file():
            print(f"twowiki_multihop not found under {root}", file=sys.stderr)
            return 2
        write_result(f"{RESULT}_twowiki",
                     {"twowiki": twowiki_part(root, args.db, args.limit, [r for r in args.rows.split(",") if r])},
                     table=MEASURED_ROUTE_TWOWIKI)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_route(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: the offline router's test-split scores (bench/route.py --part router)."""
    r = d.get("router") or {}
    t = r.get("test") or {}
    th = r.get("thresholds") or {}
    out = ["### Router: six classes, offline classifier", "", CAPTION, "",
           f"Trained on {num(r.get('train_examples'))} labelled questions, scored once on the {num(r.get('test_examples'))}"
           f"-question test split (split by source and label). Thresholds chosen by 5-fold CV on the train split: "
           f"`router.min_confidence` {th.get('min_confidence')}, `router.refuse_confidence` {th.get('refuse_confidence')}"
           f" ({th.get('rule', '')}). Prediction {num(r.get('predict_ms_per_question'), 1)} ms per question."
           + (f" Queries load the fitted model shipped as data (`core/models/data/router_model.npz`, "
              f"{num(r.get('shipped_model_bytes', 0) / 1e6, 2)} MB) in {num(r.get('shipped_load_ms_median_of_5'), 1)} ms"
              f" instead of fitting it ({num(r.get('train_seconds_median_of_3'), 2)} s); largest probability difference "
              f"from the fit on the test split {r.get('shipped_vs_fitted_max_abs_diff'):.1e}."
              if r.get("shipped_load_ms_median_of_5") is not None else ""), ""]
    rows = [[c, num(v.get("precision"), 3), num(v.get("recall"), 3), num(v.get("f1"), 3), v.get("n")]
            for c, v in (t.get("per_class") or {}).items()]
    if rows:
        out.append(grid(["class", "precision", "recall", "F1", "n"], rows))
    if t:
        mf, cr = t.get("macro_f1"), t.get("costly_rate")
        out += ["", f"Test split: macro-F1 **{num(mf, 3)}** (target ≥ 0.90: {met(mf >= 0.90 if mf is not None else None)}); "
                f"corpus questions routed to chitchat or out-of-scope {t.get('costly')} of {t.get('corpus_questions')} "
                f"= **{pct(cr, 2)}** (target ≤ 1%: {met(cr <= 0.01 if cr is not None else None)}); abstained "
                f"{pct(t.get('abstain_rate'))}; accuracy {num(t.get('accuracy'), 3)}."]
    conf = t.get("confusion_routed") or {}
    if conf:
        cols = list(next(iter(conf.values())))
        out += ["", "Confusion after thresholds (rows: true class, columns: route taken):", "",
                grid(["true \\ routed", *cols], [[c, *[v.get(k, 0) for k in cols]] for c, v in conf.items()])]
    src = t.get("by_source") or {}
    if src:
        out += ["", "Accuracy by source: " + "; ".join(f"{s} {num(v.get('accuracy'), 3)} (n {v.get('n')})"
                                                        for s, v in src.items()) + "."]
    return out


def measured_route_twowiki(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: twowiki_multihop by question type: default, each transform forced on, routed."""
    tw = d.get("twowiki") or {}
    rows_in = tw.get("rows") or {}
    types = ["comparison", "compositional", "inference", "bridge_comparison", "all"]
    out = [f"### Query transforms and routing: twowiki_multihop ({tw.get('questions')} questions, document level)", "",
           CAPTION, "",
           "Retrieval only (rerank, prune, MMR, answers, answer cache and agent off); *default* has the router off, "
           "each transform row forces that transform on with the router off, *routed* has the router on and "
           "transforms on auto. Cells: recall@5 / all-gold@10 (%), mean ms in the last column.", ""]
    rows = []
    for name, r in rows_in.items():
        bt = r.get("by_type") or {}
        fr = r.get("firing_rate") or {}
        rows.append([name, *[f"{num((bt.get(t) or {}).get('recall@5'), 1)} / {num((bt.get(t) or {}).get('allgold@10'), 1)}"
                             for t in types],
                     ", ".join(f"{k} {pct(v, 0)}" for k, v in fr.items() if v) or "none",
                     num((bt.get("all") or {}).get("ms_mean"), 0)])
    out.append(grid(["row", *types, "transforms fired", "ms (mean)"], rows))
    dflt = (rows_in.get("default") or {}).get("by_type") or {}
    routed = (rows_in.get("routed") or {}).get("by_type") or {}
    if dflt and routed:
        checks = []
        b0, b1 = (dflt.get("bridge_comparison") or {}).get("allgold@10"), (routed.get("bridge_comparison") or {}).get("allgold@10")
        if b0 is not None and b1 is not None:
            checks.append(f"bridge_comparison all-gold@10 {num(b1, 1)} vs default {num(b0, 1)} + 25: {met(b1 >= b0 + 25)}")
        worst = [(t, routed[t][m] - dflt[t][m]) for t in types[:4] if t in routed and t in dflt
                 for m in ("recall@5", "allgold@10") if m in routed[t] and m in dflt[t]]
        if worst:
            t, gap = min(worst, key=lambda x: x[1])
            checks.append(f"no type more than 1 point below default (largest drop {num(-gap, 1) if gap < 0 else '0.0'} "
                          f"points, {t}): {met(gap >= -1)}")
        out += ["", "Issue #16 targets, routed vs default (all 300): " + "; ".join(checks) + "."]
    rt = (rows_in.get("routed") or {})
    test, dtest = rt.get("test_split_only") or {}, rt.get("default_on_test_split") or {}
    if test and dtest:
        out += ["", f"The router was trained on 70% of these questions; on the {(test.get('all') or {}).get('n')} "
                "test-split questions alone, routed vs default recall@5 / all-gold@10: " + "; ".join(
                    f"{t} {num((test.get(t) or {}).get('recall@5'), 1)} / {num((test.get(t) or {}).get('allgold@10'), 1)}"
                    f" vs {num((dtest.get(t) or {}).get('recall@5'), 1)} / {num((dtest.get(t) or {}).get('allgold@10'), 1)}"
                    for t in types if t in test) + "."]
    rbt = rt.get("routes_by_type") or {}
    if rbt:
        out += ["", "Routes taken: " + "; ".join(f"{t} → " + ", ".join(f"{c} {n}" for c, n in v.items())
                                                 for t, v in rbt.items()) + "."]
    return out


def measured_route_scifact(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: beir_scifact nDCG@10 with routing on vs the default."""
    s = d.get("scifact") or {}
    dflt, routed = s.get("default") or {}, s.get("routed") or {}
    out = [f"### Routing on `beir_scifact` ({s.get('questions')} questions, {num(s.get('docs') or s.get('max_docs'))} abstracts)", "",
           CAPTION, "", f"{s.get('note', '')}.", ""]
    rows = [[name, num(r.get("ndcg@10"), 4), num(r.get("recall@10"), 3), num(r.get("mrr"), 4),
             ", ".join(f"{st} {num((v or {}).get('p50'), 0)}" for st, v in (r.get("latency") or {}).items())]
            for name, r in (("default (router off)", dflt), ("routed", routed)) if r]
    out.append(grid(["row", "nDCG@10", "recall@10", "MRR", "stage ms (median)"], rows))
    a, b = dflt.get("ndcg@10"), routed.get("ndcg@10")
    if a is not None and b is not None:
        out += ["", f"Routed minus default nDCG@10: {(b - a) * 100:+.2f}".replace("-", "−") + " points (target: not below by more than 0.5 "
                f"point: {met(b >= a - 0.005)})"
                + (" — on this subsample, not the full corpus." if s.get("note", "").startswith("subsample") else ".")]
    return out


def measured_route_tune_loop(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: bridging queries per round of the multi-hop route's loop, chosen on the router-train split."""
    t = d.get("tune_loop") or {}
    out = ["### Multi-hop route: bridging queries per round of the loop", "", CAPTION, "",
           f"{num(t.get('questions'))} twowiki questions of the multi-hop class from the router's train split, each "
           f"through the loop over decomposition with `agent.per_round` 1, 2 and 3 (rotating order). Rule: "
           f"{t.get('rule', '')}. Chosen: **{(t.get('chosen') or {}).get('per_round')}**.", ""]
    rows = [[r.get("per_round"), num(r.get("recall@5"), 1), num(r.get("allgold@10"), 1), num(r.get("ms_mean"), 0),
             num(r.get("ms_median"), 0)] for r in t.get("grid") or []]
    if rows:
        out.append(grid(["per_round", "recall@5", "all-gold@10", "ms mean", "ms median"], rows))
    return out


def measured_route_tune_gate(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: the multi-hop route's savings (early stop, BM25-only bridging), chosen on the router-train split."""
    t = d.get("tune_gate") or {}
    out = ["### Multi-hop route: early stop and BM25-only bridging rounds", "", CAPTION, "",
           f"{num(t.get('questions'))} twowiki questions of the multi-hop class from the router's train split, each "
           "through the loop over decomposition with and without `agent.stop_when_found` (no second round when "
           "decomposition's item and every bridge name it read head a passage in the top 5) and `agent.bridge_dense` "
           "false (bridging rounds search BM25 alone), rotating order.", ""]
    tried = t.get("grid") or []
    if tried:  # the rule bench/route.py states (computed here too for a file written before it recorded its choice)
        r5, a10 = max(r["recall@5"] for r in tried), max(r["allgold@10"] for r in tried)
        ok = [r for r in tried if r["recall@5"] >= r5 - 1 and r["allgold@10"] >= a10 - 1]
        chosen = t.get("chosen") or min(ok, key=lambda r: r["ms_mean"])["config"]
        out[-1] += (f"Rule: the fastest (mean ms) within 1 point of the best recall@5 and all-gold@10. Chosen: "
                    f"**{chosen}** (the multi-hop route's setting).")
        out.append("")
    rows = [[r.get("config"), num(r.get("recall@5"), 1), num(r.get("allgold@10"), 1), num(r.get("ms_mean"), 0),
             num(r.get("ms_median"), 0), num(r.get("mean_rounds"), 2)] for r in tried]
    if rows:
        out.append(grid(["configuration", "recall@5", "all-gold@10", "ms mean", "ms median", "rounds"], rows))
    return out


def measured_route_latency(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: routed against every single configuration, per class best in hindsight, and mean latency."""
    t = d.get("latency") or {}
    split = f" ({t['split']}-split questions)" if t.get("split") in ("test", "train") else ""
    out = [f"### Routed vs every single configuration on `{t.get('dataset', '?')}`{split}", "", CAPTION, "",
           f"{num(t.get('questions'))} questions with gold, each through every configuration in rotating order "
           "(retrieval only: rerank, prune, MMR, answers and the answer cache off; the ratios hold under load, the "
           "absolute ms do not). Quality is document-level recall@5 and all-gold@10 of the final list. "
           + ("*loop (agent + decompose)* is the agentic loop over decomposition for every question; *loop as the "
              "multi-hop route* is that route's configuration (routes.toml) for every question."
              if any(n.startswith("loop as the multi-hop route") for n in t.get("configs") or {}) else
              "The loop row is the multi-hop route's configuration for every question.")
           + (f" Questions: the router's {t['split']}-split questions only (the router and the route settings were "
              "chosen on the train split)." if t.get("split") in ("test", "train") else ""), ""]
    cfgs = t.get("configs") or {}
    if cfgs:
        out.append(grid(["configuration", "recall@5", "all-gold@10", "ms mean"],
                            [[n, num(v.get("recall@5"), 1), num(v.get("allgold@10"), 1), num(v.get("ms_mean"), 0)]
                             for n, v in cfgs.items()]))
    by = t.get("by_class") or {}
    if by:
        rows = [[c, v.get("n"), f"{v.get('best_single_recall@5')} {num((v.get('recall@5') or {}).get(v.get('best_single_recall@5')), 1)}",
                 num((v.get("recall@5") or {}).get("routed"), 1),
                 f"{v.get('best_single_allgold@10')} {num((v.get('allgold@10') or {}).get(v.get('best_single_allgold@10')), 1)}",
                 num((v.get("allgold@10") or {}).get("routed"), 1),
                 num((v.get("ms_mean") or {}).get("routed"), 0)] for c, v in by.items()]
        out += ["", "Per gold class (the router's classes, from each question's type): the best single configuration "
                "in hindsight and routed.", "",
                grid(["class", "n", "best single, recall@5", "routed recall@5", "best single, all-gold@10",
                          "routed all-gold@10", "routed ms"], rows)]
    r5, a10, lat = (t.get("routed_over_hindsight_recall@5"), t.get("routed_over_hindsight_allgold@10"),
                    t.get("routed_over_heaviest_ms"))
    if r5 is not None and lat is not None:
        out += ["", f"Routed quality over the per-class best in hindsight: recall@5 **{pct(r5)}**, all-gold@10 "
                f"**{pct(a10)}** (target ≥ 95%: {met(r5 >= 0.95)} / {met(a10 is not None and a10 >= 0.95)}); routed "
                f"mean latency **{pct(lat)}** of the heaviest single configuration ({t.get('heaviest_single')}) "
                f"(target ≤ 60%: {met(lat <= 0.60)}). Routes taken by gold class: "
                + "; ".join(f"{c}: " + ", ".join(f"{k} {n}" for k, n in v.items() if n) for c, v in
                            (t.get("routes") or {}).items()) + "."]
    if t.get("routed_over_single_ms"):
        out += ["", "Routed mean latency over each single configuration's: " + ", ".join(
            f"{n} {pct(v)}" for n, v in t["routed_over_single_ms"].items()) + "."]
    if t.get("routed_floor_over_heaviest_ms") is not None:
        out += ["", f"{pct(t.get('multi_hop_share'))} of these questions take the multi-hop route: its loop "
                f"({t.get('routed_floor_config', 'loop (agent + decompose)')}) on them alone is "
                f"{pct(t.get('routed_floor_over_heaviest_ms'))} of the heaviest configuration's mean, a floor for "
                "routed even if every other question cost nothing."]
    w = t.get("what_if_multi_hop_decompose") or {}
    if w:
        out += ["", "What-if from the same run (each question routed multi-hop scored with its own decomposition row "
                f"instead of the loop): recall@5 {num(w.get('recall@5'), 1)} ({pct(w.get('over_hindsight_recall@5'))} "
                f"of hindsight), all-gold@10 {num(w.get('allgold@10'), 1)} ({pct(w.get('over_hindsight_allgold@10'))}),"
                f" latency {pct(w.get('over_heaviest_ms'))} of the heaviest."]
    st = t.get("routed_stage_ms_mean") or {}
    if st:
        out += ["", "Routed, mean ms per question by stage (a loop's rounds are inside `evidence`): "
                + ", ".join(f"{k} {num(v, 1)}" for k, v in sorted(st.items(), key=lambda kv: -kv[1])[:8]) + "."]
    return out


def measured_route_tune(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: transform fusion weight / depth, tuned on router-train twowiki questions only."""
    t = d.get("tune") or {}
    tried = t.get("grid") or []
    out = [f"### Transform fusion tuning ({t.get('questions')} twowiki questions of the {t.get('split', '')})", "",
           CAPTION, ""]
    keys = ["allgold@10 comparison", "allgold@10 compositional", "allgold@10 inference", "allgold@10 bridge_comparison"]
    rows = [[g.get("weight"), g.get("per_query_k"), num(g.get("recall@5"), 1), num(g.get("allgold@10"), 1),
             *[num(g.get(k), 1) for k in keys]] for g in tried]
    out.append(grid(["`transforms.weight`", "`transforms.per_query_k`", "recall@5", "all-gold@10",
                         *[k.replace("allgold@10 ", "all-gold@10 ") for k in keys]], rows))
    ch = t.get("chosen") or {}
    if ch:
        out += ["", f"Chosen: weight {ch.get('weight')}, per_query_k {ch.get('per_query_k')} ({t.get('rule', '')}); "
                "the twowiki table above reports the test-split questions separately."]
    return out


def measured_route_tune_route(d: dict[str, Any], file: str) -> list[Any]:
    """`transforms.dense` for the routed configuration beside the loop, on the router's train split."""
    t = d.get("tune_route") or {}
    out = [f"### Routed generated queries with and without dense ({num(t.get('questions'))} twowiki questions, "
           f"{t.get('split', '')})", "", CAPTION, "",
           "Recall@5 and all-gold@10 (%) and mean ms per question, overall and by the question's kind; the last "
           "column is the mean ms against the loop's.", ""]
    rows = [[r.get("config"), num(r.get("n")), num(r.get("recall@5"), 1), num(r.get("allgold@10"), 1),
             num(r.get("ms_mean"), 0), num((r.get("comparison") or {}).get("recall@5"), 1),
             num((r.get("multi-hop") or {}).get("recall@5"), 1), num(r.get("over_loop_ms"), 2)]
            for r in t.get("grid") or []]
    out.append(grid(["configuration", "n", "recall@5", "all-gold@10", "ms mean", "comparison recall@5",
                     "multi-hop recall@5", "ms / loop's"], rows))
    over = t.get("overrides") or {}
    if over:
        out += ["", "Settings: " + "; ".join(f"{k} ({', '.join(f'{a}={b}' for a, b in v.items())})"
                                             for k, v in over.items()) + "."]
    return out


MEASURED_ROUTE = Table(measured_route, 'Routing and query transforms')
MEASURED_ROUTE_TUNE_ROUTE = Table(measured_route_tune_route, 'Routing and query transforms')
MEASURED_ROUTE_TUNE = Table(measured_route_tune, 'Routing and query transforms')
MEASURED_ROUTE_TWOWIKI = Table(measured_route_twowiki, 'Routing and query transforms')
MEASURED_ROUTE_SCIFACT = Table(measured_route_scifact, 'Routing and query transforms')
MEASURED_ROUTE_TUNE_LOOP = Table(measured_route_tune_loop, 'Routing and query transforms')
MEASURED_ROUTE_TUNE_GATE = Table(measured_route_tune_gate, 'Routing and query transforms')
MEASURED_ROUTE_LATENCY = Table(measured_route_latency, 'Routing and query transforms')


if __name__ == "__main__":
    raise SystemExit(main())
