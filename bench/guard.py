"""Cascade-guard bench (issue #34 item 4): does the shipped default keep up with the product's own bm25, dense and
hybrid configurations once its stages may step aside on the workspace's own golden set?

    .venv/bin/python bench/guard.py [--sets sample,twowiki_multihop,beir_scifact,anthropic_codebase]
                                    [--questions 200] [--scifact-docs 1000] [--seed 0] [--datasets DIR]

Per set, the scorable questions are shuffled (seed) and split in two halves. Half A is the workspace's golden set:
it is evaluated through the product's own path (core.eval.run.run_eval with the default configuration and the guard
off, the run stored in the set's workspace), and the guard reads that stored run as it would in Search Lab. Half B is
never seen by the guard: on it the bench reports document-level recall@1/@5 of the final list of bm25, dense and
hybrid (BM25 + dense + RRF, no cascade), the default with the guard off and on, the cascade alone (router off, so no
agentic loop, whose rounds the guard leaves alone) with the guard off and on, plus
every cascade stage's own list in the default run (stage by stage). Router, transforms, answer and answer cache are
on as shipped except answer and answer cache (they do not change retrieval, and a cached answer would replay a
question across configurations).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from _common import CAPTION, ROOT, Table, datasets_dir, grid, num, write_result
from generalise import doc_ranks, gold_docs, load, mean, score

from core.cascade.guard import steps_aside
from core.config import PipelineConfig
from core.deps import build_deps
from core.eval.run import NamedConfig, prepare, run_eval
from core.pipeline import guard_key, run_query
from core.store import Store

OFF = {"answer.enabled": False, "answer_cache.enabled": False}
NO_CASCADE = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "router.enabled": False,
              "transforms.hyde": "off", "transforms.multi_query": "off", "transforms.decompose": "off"}
CONFIGS: dict[str, dict[str, Any]] = {
    "bm25": {**OFF, **NO_CASCADE, "dense.enabled": False, "fusion.enabled": False},
    "dense": {**OFF, **NO_CASCADE, "bm25.enabled": False, "fusion.enabled": False},
    "hybrid": {**OFF, **NO_CASCADE},
    "default (guard off)": {**OFF, "cascade_guard.enabled": False},
    "default (guard on)": {**OFF},
    # The cascade alone (no router, so no agentic loop): where a stage's own list is the one the answer reads.
    "cascade (guard off)": {**OFF, "router.enabled": False, "cascade_guard.enabled": False},
    "cascade (guard on)": {**OFF, "router.enabled": False},
}
STAGES = ("bm25", "dense", "fused", "rerank", "prune", "mmr")


def run_set(name: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    gs, cut = load(name, root, args.questions, args.scifact_docs, args.seed)
    db = args.db or str(ROOT / "data" / "bench" / "guard.duckdb")
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    base = PipelineConfig()
    deps = build_deps(base, store=Store(db))
    ws = gs.workspace or f"guard_{name}"
    resolved, notes = prepare(gs, deps, workspace=ws, config=base)
    exact: dict[str, set[str]] = {}
    if any(g.match == "exact" for q in resolved.queries for g in q.gold):
        for c in deps.store.corpus.chunks(ws):
            exact.setdefault(c.text.strip(), set()).add(c.doc_id)
    qs = [q for q in resolved.queries if q.gold and gold_docs(resolved, q, deps.store, ws, exact)]
    random.Random(args.seed).shuffle(qs)
    half_a, half_b = qs[0::2], qs[1::2]
    # Half A is the workspace's golden set: earlier runs of this workspace are cleared so the guard reads A's alone.
    for r in deps.store.runs.eval_runs(ws):
        deps.store.runs.delete_eval_run(r.eval_id, ws)
    gs_a = type(resolved)(**{**resolved.__dict__, "queries": half_a, "name": f"{name}-A"})
    t_a = time.perf_counter()
    run_eval(gs_a, [NamedConfig("default (guard off)", base.with_overrides(CONFIGS["default (guard off)"]))], deps,
             workspace=ws)
    g = base.cascade_guard
    on = base.with_overrides(CONFIGS["default (guard on)"])  # what the guard reads evidence for
    evidence = deps.guards.evidence(deps.store.runs, ws, k=g.k, config_key=guard_key(on), key_of=guard_key)
    aside = steps_aside(evidence, z=g.z, min_loss=g.min_loss, min_questions=g.min_questions)
    seconds_a = time.perf_counter() - t_a
    print(f"  {name}: evidence from {len(half_a)} questions in {seconds_a:.0f} s; steps aside: {sorted(aside)}",
          file=sys.stderr, flush=True)
    lists: dict[str, list[dict[str, float]]] = {}
    for i, q in enumerate(half_b):
        gold = gold_docs(resolved, q, deps.store, ws, exact)
        for label, over in CONFIGS.items():
            tr = run_query(q.query, base.with_overrides(over), deps, workspace=ws, log=False)
            fin = tr.final()
            lists.setdefault(label, []).append(score(doc_ranks(fin.candidates) if fin else [], gold))
            if label == "default (guard off)":
                for st in STAGES:
                    s = tr.stage(st)
                    if s is not None and s.skipped is None:
                        lists.setdefault(f"stage {st}", []).append(score(doc_ranks(s.candidates), gold))
        if (i + 1) % 20 == 0:
            print(f"  {name}: B {i + 1}/{len(half_b)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    metrics = {lab: {k: v for k, v in mean(rows).items() if k in ("recall@1", "recall@5")} for lab, rows in lists.items()}
    simple = max(metrics[c]["recall@5"] for c in ("bm25", "dense", "hybrid"))
    return {
        "set": name, "cut": cut, "notes": notes, "workspace": ws, "level": "document",
        "split": f"seeded shuffle (seed {args.seed}); A = even positions ({len(half_a)} questions, the golden set the "
                 f"guard reads), B = odd positions ({len(half_b)} questions, reported)",
        "evidence": {st: {"input": ev.input_stage, "questions": ev.questions, "delta_points": round(ev.delta, 2),
                          "se_points": round(ev.se, 2)} for st, ev in evidence.items()},
        "steps_aside": aside,
        "metrics": metrics,
        "best_simple_recall@5": simple,
        "default_minus_best_simple": {lab: round(metrics[lab]["recall@5"] - simple, 2)
                                      for lab in ("default (guard off)", "default (guard on)", "cascade (guard off)",
                                                  "cascade (guard on)")},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="sample,twowiki_multihop,beir_scifact,anthropic_codebase")
    ap.add_argument("--questions", type=int, default=200, help="questions per public set (seeded sample)")
    ap.add_argument("--scifact-docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db", default=None)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    root = datasets_dir(args.datasets)
    out: dict[str, Any] = {"default_config": PipelineConfig().stable_hash(), "sets": {}}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        print(f"{name} ...", file=sys.stderr, flush=True)
        out["sets"][name] = run_set(name, args, root)
        write_result("guard", out, Path(args.out) if args.out else None, table=MEASURED_GUARD)
    return 0



# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
GUARD_ROWS = ("bm25", "dense", "hybrid", "default (guard off)", "default (guard on)", "cascade (guard off)",
              "cascade (guard on)")


def measured_guard(d: dict[str, Any], file: str) -> list[Any]:
    """Half B of every set: the default and the cascade, guard off and on, beside bm25, dense and hybrid."""
    sets = d.get("sets") or {}
    out = [f"### Cascade guard: the default against its own parts ({', '.join(sets) or 'no set'})", "", CAPTION, "",
           "Per set, half A of the questions is the workspace's golden set the guard reads; half B, never seen by it, "
           "is scored: document-level recall@5 (%) of the final list; the last column is the default with the guard "
           "on minus the best of bm25, dense and hybrid.", ""]
    rows = []
    for name, s in sets.items():
        m = s.get("metrics") or {}
        rows.append([name, s.get("cut", ""), *[num((m.get(c) or {}).get("recall@5")) for c in GUARD_ROWS],
                     num((s.get("default_minus_best_simple") or {}).get("default (guard on)"))])
    out.append(grid(["set", "questions", *GUARD_ROWS, "default (guard on) − best simple"], rows))
    out += [""] + [f"- `{name}`: guard evidence on half A (points of recall@5 against the stage's input): " + "; ".join(
        f"{st} {num(ev.get('delta_points'))} ± {num(ev.get('se_points'))}" for st, ev in (s.get("evidence") or {}).items())
        + "".join(f"; {st} {why}" for st, why in (s.get("steps_aside") or {}).items()) for name, s in sets.items()]
    return out


MEASURED_GUARD = Table(measured_guard, "Compression cascade")


if __name__ == "__main__":
    sys.exit(main())
