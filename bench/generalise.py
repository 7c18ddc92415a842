"""Generalisation bench (issue #11): the default pipeline vs BM25, dense and hybrid on every dev set, scored at
document level, plus the rerank stage with and without its blend with the fused order.

    .venv/bin/python bench/generalise.py [--sets sample,sample_ru,ru_seed,twowiki_multihop,anthropic_codebase,beir_scifact]
                                         [--questions 100] [--scifact-docs 1000] [--seed 0]

One pipeline run per question of the *stage* configuration (the default with the rerank reading and handing on its
whole top_n, combine=replace, prune/MMR off) gives BM25 alone, dense alone, the fused (hybrid) list and the pure
rerank order, each the stage's own list; the rerank blends (RRF of fused and rerank orders) are computed from that
same list with core.cascade.rerank.blend_scores, so a sweep costs no model call. Then three configurations run for their final
list: 'default-cascade' is the default retrieval cascade with the router and query transforms off (what issue #11
tunes), 'previous-cascade' the same as it stood before (combine=replace, prune.keep_all=false), and 'default' the
whole product default (router and transforms as configured). Answers and the answer cache are off everywhere: they do
not change retrieval, and a cached answer would replay a question across configurations. The stage configuration
runs with the router and transforms off too, so BM25 / dense / hybrid are those searches alone.

Scoring: a document's rank is the best rank of any of its chunks; recall@k = share of gold documents in the top k;
hit@1 = the first document is gold. anthropic_codebase gold is chunk text; its documents are the files holding
those chunks (and chunk-level recall is reported too, from exact text as the cookbook scores it).
Subsampling (fixed seed) keeps wall time sane on 2 shared cores; every cut is recorded in the results.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from _common import CAPTION, ROOT, Table, datasets_dir, dig, grid, machine_info, num, utc_now, write_result

from core.cascade.rerank import blend_scores
from core.config import PipelineConfig
from core.deps import build_deps
from core.eval.datasets import GoldenSet, at_level, load_dataset, parse_jsonl, subsample
from core.eval.metrics import pass_at_k
from core.eval.run import prepare
from core.pipeline import run_query
from core.store import Store
from core.text import detect_language
from core.types import Candidate

KS = (1, 2, 5, 10)
BLENDS = [(0.5, 60), (1.0, 60), (2.0, 60), (1.0, 10), (1.0, 30)]  # (input_weight, rrf_k)
DEPTH = PipelineConfig().mmr.k  # chunks in the default's final list
OFF = {"answer.enabled": False, "answer_cache.enabled": False}
# The retrieval cascade alone (what issue #11 tunes): no router picking another route, no query transforms.
CASCADE = {"router.enabled": False, "transforms.hyde": "off", "transforms.multi_query": "off",
           "transforms.decompose": "off", "agent.enabled": False}
RU_SEED = ROOT / "bench" / "sets" / "ru_seed"


def _cfg(overrides: dict[str, Any], extra: dict[str, Any]) -> PipelineConfig:
    base = PipelineConfig()
    known = base.model_dump()
    ok = {k: v for k, v in {**OFF, **extra, **overrides}.items() if k.split(".")[0] in known
          and k.split(".")[1] in known[k.split(".")[0]]}
    return base.with_overrides(ok)


def doc_ranks(cands: Sequence[Candidate]) -> list[str]:
    seen: list[str] = []
    for c in cands:
        if c.doc_id not in seen:
            seen.append(c.doc_id)
    return seen


def score(docs: Sequence[str], gold: set[str]) -> dict[str, float]:
    out = {f"recall@{k}": len(gold & set(docs[:k])) / len(gold) for k in KS}
    out["hit@1"] = 1.0 if docs and docs[0] in gold else 0.0
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = rows[0].keys() if rows else []
    return {k: round(100 * sum(r[k] for r in rows) / len(rows), 2) for k in keys}


def blended(rr: Sequence[Candidate], w: float, k: int) -> list[Candidate]:
    """The blend of the fused and rerank orders from the rerank stage's own list (rank_before = fused rank)."""
    by_in = sorted(rr, key=lambda c: c.meta.get("rank_before", c.rank))
    pos = {c.chunk_id: c.rank for c in rr}
    raw = [-float(pos[c.chunk_id]) for c in by_in]  # higher = better, as the reranker's score would be
    import numpy as np

    s = blend_scores(np.array(raw), input_weight=w, rrf_k=k)
    order = sorted(range(len(by_in)), key=lambda i: (-s[i], i))
    return [by_in[i] for i in order]


def ru_seed_set() -> GoldenSet:
    gs = parse_jsonl((RU_SEED / "questions.jsonl").read_bytes(), "ru_seed")
    gs.name, gs.corpus_dir, gs.workspace = "ru_seed", RU_SEED / "docs", "ru_seed"
    return gs


def load(name: str, root: Path, questions: int, scifact_docs: int, seed: int) -> tuple[GoldenSet, str]:
    if name == "sample":
        return at_level(load_dataset("sample", root), "document"), "all 52 questions; documents named by the gold"
    if name == "sample_ru":
        gs = at_level(load_dataset("sample", root), "document")
        gs.queries = [q for q in gs.queries if detect_language(q.query) == "ru"]
        gs.name = "sample_ru"
        return gs, "the Russian questions of sample_corpus/eval.jsonl"
    if name == "ru_seed":
        return at_level(ru_seed_set(), "document"), "bench/sets/ru_seed: Russian documents and questions written here"
    gs = load_dataset(name, root)
    if name == "beir_scifact":
        cut = subsample(gs, max_docs=scifact_docs, max_questions=questions, seed=seed)
        return cut, (f"{questions} of {len(gs.queries)} claims (seed {seed}); corpus = their qrels documents + "
                     f"random distractors to {scifact_docs} of 5,183 abstracts (issue #14: the full cascade on the "
                     "whole corpus thrashes memory)")
    if name in ("twowiki_multihop", "anthropic_codebase"):
        n = min(questions, len(gs.queries))
        return subsample(gs, max_questions=n, seed=seed), f"{n} of {len(gs.queries)} questions (seed {seed}); full corpus"
    raise SystemExit(f"unknown set {name}")


def gold_docs(gs: GoldenSet, q: Any, store: Store, ws: str, exact_index: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    for g in q.gold:
        if g.doc_ids:
            out |= set(g.doc_ids)
        elif g.match == "exact":
            out |= exact_index.get(g.text.strip(), set())
    return out


def run_set(name: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    gs, cut = load(name, root, args.questions, args.scifact_docs, args.seed)
    if args.score_first and args.score_first < len(gs.queries):  # the corpus stays the cut above; fewer are asked
        gs.queries = gs.queries[: args.score_first]
        cut += f"; the first {args.score_first} of them scored (wall time)"
    db = args.db or str(ROOT / "data" / "bench" / "generalise.duckdb")
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    # The set's own depth overrides (recall@100, Pass@20) are not applied: every list here is scored at k <= 10.
    stage_cfg = _cfg({}, {**CASCADE, "rerank.combine": "replace", "rerank.k": 50, "rerank.top_n": 50,
                          "fusion.k": 50, "prune.enabled": False, "mmr.enabled": False})
    cascade_cfg = _cfg({}, CASCADE)
    previous_cfg = _cfg({}, {**CASCADE, "rerank.combine": "replace", "prune.keep_all": False})
    default_cfg = _cfg({}, {})
    deps = build_deps(stage_cfg, store=Store(db))
    ws = gs.workspace or ("gen_sample" if name.startswith("sample") else f"gen_{name}")
    resolved, notes = prepare(gs, deps, workspace=ws, config=stage_cfg)
    exact_index: dict[str, set[str]] = {}
    if any(g.match == "exact" for q in resolved.queries for g in q.gold):
        for c in deps.store.corpus.chunks(ws):
            exact_index.setdefault(c.text.strip(), set()).add(c.doc_id)
    qs = [q for q in resolved.queries if q.gold]
    random.Random(args.seed).shuffle(qs)  # a run stopped early (--max-seconds) has still scored a random sample
    lists: dict[str, list[dict[str, float]]] = {}
    chunk_lists: dict[str, list[float]] = {}
    prune_tokens: dict[str, dict[str, int]] = {}
    per_q = []
    t_stage = time.perf_counter()
    for i, q in enumerate(qs):
        if args.max_seconds and time.perf_counter() - t_stage > args.max_seconds:
            # The questions are a seeded shuffle, so the ones scored before the stop are still a random sample.
            cut += f"; stopped by --max-seconds {args.max_seconds:g} after {len(per_q)} questions"
            break
        gold = gold_docs(resolved, q, deps.store, ws, exact_index)
        if not gold:
            continue
        tr = run_query(q.query, stage_cfg, deps, workspace=ws, log=False)
        rows: dict[str, list[str]] = {}
        for st in ("bm25", "dense", "fused", "rerank"):
            s = tr.stage(st)
            rows[st] = doc_ranks(s.candidates) if s and s.skipped is None else []
        rr = tr.stage("rerank")
        fz = tr.stage("fused")
        # Equal depth: the default's final list is DEPTH chunks (rerank.k / mmr.k), the stage lists are 50 deep.
        # A document-level recall@5 of 50 chunks against one of 10 mixes the cost of the cut with that of the order;
        # '@10' rows cut the stage list to DEPTH chunks first, so they measure the order alone.
        if fz is not None and fz.skipped is None:
            rows[f"fused@{DEPTH}"] = doc_ranks(fz.candidates[:DEPTH])
        chunk_rows: dict[str, list[Candidate]] = {}
        if rr is not None and rr.skipped is None:
            for w, k in BLENDS:
                bl = blended(rr.candidates, w, k)
                rows[f"rerank-rrf-w{w:g}-k{k}"] = doc_ranks(bl)
                chunk_rows[f"rerank-rrf-w{w:g}-k{k}"] = bl
                if (w, k) == (1.0, 60):
                    rows[f"rerank-rrf-w1-k60@{DEPTH}"] = doc_ranks(bl[:DEPTH])
            rows[f"rerank@{DEPTH}"] = doc_ranks(rr.candidates[:DEPTH])
        for label, conf in [(lab, c) for lab, c in (("default-cascade", cascade_cfg), ("previous-cascade", previous_cfg),
                                                    ("default", default_cfg)) if lab in args.configs.split(",")]:
            t = run_query(q.query, conf, deps, workspace=ws, log=False)
            fin = t.final()
            rows[label] = doc_ranks(fin.candidates) if fin else []
            if label == "default":  # the fused list the default itself builds (fusion.k deep, 20 chunks)
                dfz = t.stage("fused")
                rows["default-fused"] = doc_ranks(dfz.candidates) if dfz and dfz.skipped is None else []
            pr = t.stage("prune")
            if pr is not None and pr.skipped is None:  # what keeping every chunk costs (prune.keep_all)
                tok = prune_tokens.setdefault(label, {"questions": 0, "over_budget_tokens": 0, "tokens_out": 0,
                                                      "floored_chunks": 0, "dropped_chunks": 0, "final_depth": 0})
                tok["questions"] += 1
                tok["over_budget_tokens"] += int(pr.info.get("over_budget_tokens", 0))
                tok["tokens_out"] += int(pr.info.get("tokens_out", 0))
                tok["floored_chunks"] += len(pr.info.get("floored", []))
                tok["dropped_chunks"] += len(pr.info.get("dropped", []))
                tok["final_depth"] += len(fin.candidates) if fin else 0
            if exact_index:  # chunk level as the cookbook scores it: exact text of the top 5
                orig = {c.chunk_id: c.text for c in fin.candidates} if fin else {}
                full = deps.store.corpus.chunks_by_id(list(orig), ws)
                texts = [full[cid].text if cid in full else orig[cid] for cid in orig]
                chunk_lists.setdefault(label, []).append(pass_at_k(texts, [g.text for g in q.gold], 5))
        if exact_index:
            for st in ("fused", "rerank"):
                s = tr.stage(st)
                ok = s is not None and s.skipped is None
                chunk_lists.setdefault(st, []).append(
                    pass_at_k([c.text for c in s.candidates], [g.text for g in q.gold], 5) if ok else 0.0)
            for lab, bl in chunk_rows.items():
                chunk_lists.setdefault(lab, []).append(pass_at_k([c.text for c in bl], [g.text for g in q.gold], 5))
        for label, docs in rows.items():
            lists.setdefault(label, []).append(score(docs, gold))
        per_q.append({"qid": q.qid, "gold": sorted(gold), **{lab: docs[:10] for lab, docs in rows.items()}})
        if (i + 1) % 10 == 0:
            print(f"  {name}: {i + 1}/{len(qs)} ({time.perf_counter() - t_stage:.0f} s)", file=sys.stderr, flush=True)
    res = {"set": name, "cut": cut, "questions": len(per_q), "workspace": ws, "notes": notes,
           "level": "document", "metrics": {lab: mean(rows) for lab, rows in lists.items()},
           "seconds": round(time.perf_counter() - t0, 1),
           "configs": {"stage": stage_cfg.stable_hash(), "default-cascade": cascade_cfg.stable_hash(),
                       "previous-cascade": previous_cfg.stable_hash(), "default": default_cfg.stable_hash()}}
    res["prune_tokens_mean"] = {lab: {k: round(v / t["questions"], 2) for k, v in t.items() if k != "questions"}
                                | {"questions": t["questions"]} for lab, t in prune_tokens.items() if t["questions"]}
    if chunk_lists:
        res["chunk_pass@5"] = {lab: round(100 * sum(v) / len(v), 2) for lab, v in chunk_lists.items()}
    res["per_question"] = per_q
    return res


def measured_generalise(d: dict[str, Any], file: str) -> list[Any]:
    """Issue #11: the default vs BM25, dense and hybrid on every dev set, document level; rerank with and without
    its blend with the fused order (the merged file: one run per set)."""
    sets = d.get("sets") or {}
    lists = [("bm25", "BM25"), ("dense", "dense"), ("fused", "hybrid"), ("rerank", "rerank alone"),
             ("previous-cascade", "previous default cascade"), ("default-cascade", "default cascade"),
             ("default", "product default")]
    out: list[Any] = [
        "### Generalisation: every dev set at document level", "", CAPTION, "",
        "Each set's own cut is listed below the tables. *hybrid* is the fused list (BM25 + dense, RRF); *rerank "
        "alone* the late-interaction order that replaces it; the *default cascade* is the default retrieval "
        "(hybrid, rerank blended with the fused order by RRF, pruning that keeps every chunk, MMR) with the router "
        "and query transforms off; *previous default cascade* is the same before issue #11 (rerank order alone, "
        "pruning may drop chunks); *product default* is every default setting, router and transforms included. "
        "Answers and the answer cache are off in every row.", ""]
    for metric, title in (("recall@5", "recall@5 (%)"), ("hit@1", "first document is gold (%)")):
        rows = [[name, *[num((r["metrics"].get(key) or {}).get(metric)) for key, _ in lists]] for name, r in sets.items()]
        out += [f"**{title}**", "", grid(["set", *[label for _, label in lists]], rows), ""]
    # the default's recall@5 against the fused list 50 deep, as the default builds it (fusion.k), and cut to the
    # default's depth (the order alone); met when >= -0.5
    tgt = []
    for name, r in sets.items():
        m = r["metrics"]
        d5 = (m.get("default") or {}).get("recall@5")

        def gap(key: str) -> str:
            f5 = (m.get(key) or {}).get("recall@5")
            return "–" if d5 is None or f5 is None else f"{num(d5 - f5)} ({'met' if d5 >= f5 - 0.5 else 'missed'})"
        depth = next((k.split("@")[1] for k in m if k.startswith("fused@")), None)
        tgt.append([name, r["questions"], num((m.get("fused") or {}).get("recall@5")),
                    num((m.get("default-fused") or {}).get("recall@5")),
                    num((m.get(f"fused@{depth}") or {}).get("recall@5")) if depth else "–",
                    num((m.get(f"rerank-rrf-w1-k60@{depth}") or {}).get("recall@5")) if depth else "–",
                    num(d5), gap("fused"), gap("default-fused"), gap(f"fused@{depth}") if depth else "–"])
    out += ["**the target: product default vs the fused list, recall@5 (%)** (*hybrid 50*: the stage list, 50 chunks; "
            "*hybrid as built*: the fused list of the default retrieval, `fusion.k` chunks; *@10*: cut to the default's "
            "final depth of 10 chunks before collapsing to documents, so only the order differs; *gap*: product default "
            "minus that list, met when >= -0.5; –: not recorded by that run)", "",
            grid(["set", "questions", "hybrid 50", "hybrid as built", "hybrid @10", "rerank blend @10",
                  "product default", "gap vs hybrid 50", "gap vs as built", "gap vs @10"], tgt), ""]
    blends = [k for k in next(iter(sets.values()), {}).get("metrics", {}) if k.startswith("rerank-rrf") and "@" not in k]
    if blends:
        rows = [[name, num(r["metrics"]["fused"]["recall@5"]), num(r["metrics"]["rerank"]["recall@5"]),
                 *[num((r["metrics"].get(b) or {}).get("recall@5")) for b in blends]] for name, r in sets.items()
                if "rerank" in r["metrics"] and "fused" in r["metrics"]]
        out += ["**rerank blends, recall@5 (%)** (`wX-kY`: RRF of the fused order, weight X, and the rerank order, "
                "constant Y; computed from the same rerank lists)", "",
                grid(["set", "hybrid", "rerank alone", *[b.replace("rerank-rrf-", "") for b in blends]], rows), ""]
    for name, r in sets.items():
        run = r.get("run") or {}
        when = str(run.get("finished_at") or run.get("started_at") or "").replace("+00:00", "")[:16].replace("T", " ")
        where = (f" — run `{run['command']}`, {when} UTC, commit `{(run.get('commit') or '?')[:12]}`"
                 + (" (uncommitted changes)" if run.get("dirty") else "") if run.get("command") else "")
        out.append(f"- `{name}`: {r['cut']}; {r['questions']} questions scored in {num(r.get('seconds'), 0)} s{where}")
    for name, r in sets.items():
        if r.get("chunk_pass@5"):
            out.append(f"- `{name}` at chunk level (Pass@5, exact chunk text as the cookbook scores it): "
                       + ", ".join(f"{k} {num(v)}" for k, v in r["chunk_pass@5"].items()))
    costs = {name: r["prune_tokens_mean"].get("default-cascade") or r["prune_tokens_mean"]["default"]
             for name, r in sets.items() if any((r.get("prune_tokens_mean") or {}).get(k)
                                                 for k in ("default-cascade", "default"))}
    if costs:
        out += ["", "What keeping every chunk costs (`prune.keep_all`, default cascade or product default, mean per "
                "question): " + "; ".join(f"`{n}` {num(c['over_budget_tokens'], 1)} tokens over the budget for "
                                           f"{num(c['floored_chunks'], 1)} chunks kept by one sentence "
                                           f"(pruned list {num(c['tokens_out'], 0)} tokens)" for n, c in costs.items())]
    return out


def headline_ru_seed(d: dict[str, Any], file: str) -> tuple[str, str | None] | None:
    ru = dig(d, "sets", "ru_seed")
    if not ru:
        return None
    h1 = dig(ru, "metrics", "default", "hit@1")
    return (f"Russian questions on Russian documents (`ru_seed`, {num(ru.get('questions'))} questions): first document "
            "is gold", None if h1 is None else f"**{num(h1)}%** (dense alone: {num(dig(ru, 'metrics', 'dense', 'hit@1'))}%)")


MEASURED_GENERALISE = Table(measured_generalise, "Retrieval quality", headline_ru_seed, ("sets", "ru_seed", "run"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="sample,sample_ru,ru_seed,twowiki_multihop,anthropic_codebase,beir_scifact")
    ap.add_argument("--questions", type=int, default=100, help="questions per public set (seeded sample)")
    ap.add_argument("--scifact-docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--score-first", type=int, default=None,
                    help="score only the first N of the sampled questions (the corpus cut stays the same)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop asking new questions of a set after this many seconds of querying (recorded in its cut)")
    ap.add_argument("--configs", default="default-cascade,previous-cascade,default",
                    help="which whole-pipeline configurations to run per question (each costs a query)")
    ap.add_argument("--db", default=None)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--out", default=None, help="results file (default bench/results/generalise.json)")
    ap.add_argument("--merge", nargs="+", metavar="FILE",
                    help="no runs: gather the sets of earlier results files (each keeps its own run record) into "
                         "bench/results/generalise.json")
    args = ap.parse_args(argv)
    if args.merge:
        merged: dict[str, Any] = {"ks": list(KS), "blends": BLENDS, "sets": {}, "parts": []}
        for f in args.merge:
            part = json.loads(Path(f).read_text())
            merged["parts"].append({"file": f, "run": part.get("run")})
            for name, r in part["sets"].items():
                merged["sets"][name] = {**r, "run": part.get("run")}
        write_result("generalise", merged, Path(args.out) if args.out else None, table=MEASURED_GENERALISE)
        return 0
    root = datasets_dir(args.datasets)
    started = utc_now()
    out: dict[str, Any] = {"machine": machine_info(), "started": started, "ks": list(KS), "blends": BLENDS,
                           "default_config": PipelineConfig().stable_hash(), "sets": {}}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        print(f"{name} ...", file=sys.stderr, flush=True)
        r = run_set(name, args, root)
        out["sets"][name] = r
        m = r["metrics"]
        print(json.dumps({k: {x: v[x] for x in ("hit@1", "recall@2", "recall@5", "recall@10")} for k, v in m.items()},
                         indent=1), file=sys.stderr, flush=True)
        write_result("generalise", out, Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
