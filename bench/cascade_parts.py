"""Where the default cascade gains and loses against its own parts, per question type (issue #44 item 5).

A dev proxy for the held-out loss ("single-hop-style multi-hop questions": the default's fused list below its own
hybrid because the transforms' lists dilute the RRF fusion, then rerank and MMR cutting further). For every question
of each set it runs the parts configuration (router, transforms and cascade off: the default's own bm25 / dense /
hybrid lists) and the shipped default (answers off), and reads from the default's trace (the first round's stages
when the agentic loop ran):

- which transforms ran (hyde / multi_query / decompose) and the route;
- recall@5 (document level) of the default's fused list, of the same lists re-fused *without* the transforms' lists
  and with each transform weight in WEIGHTS (fuse_step over the trace's own lists: no re-run), of rerank, prune,
  MMR and the final list;
- the MMR stage's effect: MMR's list minus the list it read (prune's), per question.

Rows are per question type (twowiki's four types; the other sets are one type each) and per half (the parity of the
question id's sha256, as generalise_paired --halves hash): a setting is chosen on 'choose' and reported on 'report'.
--candidate KEY=VALUE adds the default with that change, its stages read the same way and paired against the
shipped default. --show N prints N questions per set where the transforms pushed a gold page out of the fused top 5
(read the items).

    nice -n 10 .venv/bin/python bench/cascade_parts.py --sets twowiki_multihop,beir_scifact,anthropic_codebase,xquad:en+twowiki
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from _common import BOOT, CAPTION, ROOT, Table, datasets_dir, grid, num, paired_ci, write_result
from generalise_paired import OFF, PARTS_CFG, _cfg, doc_order, gold_docs, load, recall

from core.config import parse_set_value
from core.deps import build_deps
from core.eval.run import prepare
from core.pipeline import run_query
from core.retrieve.stage import fuse_step
from core.store import Store
from core.trace import TRANSFORMS
from core.types import Stage

K = 5
WEIGHTS = (0.0, 0.5, 1.0, 2.0)
CASCADE = ("fused", "rerank", "prune", "mmr")
BASE_LISTS = (Stage.BM25, Stage.DENSE, Stage.DENSE_ML)


def half_of(qid: str) -> str:
    return "choose" if int(hashlib.sha256(qid.encode()).hexdigest(), 16) % 2 == 0 else "report"


def read_default(tr: Any, cfg: Any, gold: set[str]) -> dict[str, Any]:
    """One default trace read: route, transforms that ran, each cascade stage's recall@5 and the re-fusions."""
    out: dict[str, Any] = {}
    rt = tr.stage("route")
    out["route"] = str(rt.info.get("class", "?")) if rt is not None and rt.skipped is None else "-"
    ran = {n: s for n in TRANSFORMS if (s := tr.stage(n)) is not None and s.skipped is None and s.candidates}
    out["transforms"] = sorted(str(n) for n in ran)
    for s in CASCADE:
        st = tr.stage(s)
        out[s] = recall(doc_order(st.candidates), gold) if st is not None and st.skipped is None else None
    out["r1"] = {s: out[s] for s in CASCADE}
    fin = tr.final()
    out["final"] = recall(doc_order(fin.candidates) if fin else [], gold)
    out["final_stage"] = fin.stage if fin else None
    # MMR's own effect: its list against the list it read (prune's, else rerank's, else fused)
    before = next((out[s] for s in ("prune", "rerank", "fused") if out.get(s) is not None), None)
    out["mmr_effect"] = (out["mmr"] - before) if out["mmr"] is not None and before is not None else None
    # the same lists re-fused: without the transforms' lists, and with each transform weight
    lists = {n: list(st.candidates) for n in BASE_LISTS if (st := tr.stage(n)) is not None and st.skipped is None
             and st.candidates}
    top_n = cfg.rerank.top_n if cfg.rerank.enabled else None
    refused: dict[str, Any] = {}
    for w in WEIGHTS:
        f = fuse_step({**lists, **{n: list(s.candidates) for n, s in ran.items()}}, cfg.fusion, graph_weight=0.0,
                      raptor_weight=0.0, transform_weight=w, rerank_top_n=top_n)
        refused[f"w{w:g}"] = recall(doc_order(f.candidates), gold)
    out["refused"] = refused
    # the lists fusion read (chunk id, doc id), for re-fusing offline with other rules (--dump)
    out["lists"] = {str(n): [[c.chunk_id, c.doc_id] for c in v] for n, v in
                    {**lists, **{n: list(s.candidates) for n, s in ran.items()}}.items()}
    fused = tr.stage("fused")
    out["fused_docs"] = doc_order(fused.candidates)[:K] if fused is not None and fused.skipped is None else []
    return out


def mean(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return round(100 * sum(v) / len(v), 2) if v else None


def summarise(rows: list[dict[str, Any]], configs: Sequence[str]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"questions": 0}
    d = rows[0]
    out: dict[str, Any] = {"questions": n, "parts": {p: mean([r[p] for r in rows]) for p in ("bm25", "dense", "hybrid")}}
    for c in configs:
        rs = [r[c] for r in rows]
        o: dict[str, Any] = {s: mean([x[s] for x in rs]) for s in (*CASCADE, "final")}
        o["refused"] = {w: mean([x["refused"][w] for x in rs]) for w in d[c]["refused"]}
        o["with_transforms"] = sum(bool(x["transforms"]) for x in rs)
        o["transforms"] = {str(t): sum(str(t) in x["transforms"] for x in rs) for t in TRANSFORMS}
        o["mmr_effect"] = mean([x["mmr_effect"] for x in rs])
        o["mmr_moves"] = {"lifted": sum((x["mmr_effect"] or 0) > 0 for x in rs),
                          "lost": sum((x["mmr_effect"] or 0) < 0 for x in rs)}
        # paired: final minus hybrid, fused minus hybrid (the dilution), fused minus the no-transform re-fusion
        o["final_minus_hybrid"] = paired_ci([x["final"] for x in rs], [r["hybrid"] for r in rows], counts=True)
        o["final_minus_bm25"] = paired_ci([x["final"] for x in rs], [r["bm25"] for r in rows], counts=True)
        o["fused_minus_notransforms"] = paired_ci([x["fused"] or 0.0 for x in rs], [x["refused"]["w0"] for x in rs],
                                                  counts=True)
        o["mmr_minus_input"] = paired_ci([x["mmr_effect"] or 0.0 for x in rs], [0.0] * n, counts=True)
        out[c] = o
    for c in configs:
        if c != "default":
            out[f"{c}_minus_default"] = paired_ci([r[c]["final"] for r in rows], [r["default"]["final"] for r in rows],
                                                  counts=True)
    return out


def run_set(name: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    gs, cut = load(name, root, args.questions, args.scifact_docs, args.seed)
    parts_cfg, default_cfg = _cfg(PARTS_CFG), _cfg(OFF)
    configs = {"default": default_cfg}
    for spec in args.candidate:
        label, _, body = spec.partition(":") if ":" in spec.split("=", 1)[0] else ("candidate", "", spec)
        change = {k: parse_set_value(v) for k, v in (c.split("=", 1) for c in body.split(","))}
        configs[label] = _cfg({**OFF, **change})
    deps = build_deps(default_cfg, store=Store(args.db))
    ws = gs.workspace or f"paired_{name.replace(':', '_')}"
    resolved, notes = prepare(gs, deps, workspace=ws, config=default_cfg)
    exact: dict[str, set[str]] = {}
    if any(g.match == "exact" for q in resolved.queries for g in q.gold):
        for c in deps.store.corpus.chunks(ws):
            exact.setdefault(c.text.strip(), set()).add(c.doc_id)
    qs = [q for q in resolved.queries if q.gold]
    random.Random(args.seed).shuffle(qs)
    rows: list[dict[str, Any]] = []
    diluted: list[dict[str, Any]] = []
    dumps: list[dict[str, Any]] = []
    t_q = time.perf_counter()
    for i, q in enumerate(qs):
        if args.max_seconds and time.perf_counter() - t_q > args.max_seconds:
            cut += f"; stopped by --max-seconds {args.max_seconds:g} after {len(rows)} questions"
            break
        gold = gold_docs(q, exact)
        if not gold:
            continue
        pt = run_query(q.query, parts_cfg, deps, workspace=ws, log=False)
        row: dict[str, Any] = {"qid": q.qid, "half": half_of(q.qid),
                               "type": q.qtype if name == "twowiki_multihop" else name}
        for p, st_name in (("bm25", "bm25"), ("dense", "dense"), ("hybrid", "fused")):
            st = pt.stage(st_name)
            row[p] = recall(doc_order(st.candidates), gold) if st is not None and st.skipped is None else 0.0
        hyb = doc_order(pt.stage("fused").candidates)[:K] if pt.stage("fused") is not None else []
        for label, conf in configs.items():
            row[label] = read_default(run_query(q.query, conf, deps, workspace=ws, log=False), conf, gold)
        d = row["default"]
        lost = sorted((gold & set(hyb)) - set(d["fused_docs"]))
        if lost and d["transforms"]:
            diluted.append({"qid": q.qid, "type": row["type"], "query": q.query, "route": d["route"],
                            "transforms": d["transforms"], "lost": lost, "hybrid_top5": hyb,
                            "fused_top5": d["fused_docs"]})
        for c in configs:
            row[c].pop("fused_docs", None)
            lists = row[c].pop("lists", None)
            if args.dump:
                dumps.append({"config": c, "qid": q.qid, "half": row["half"], "type": row["type"], "query": q.query,
                              "gold": sorted(gold), "transforms": row[c]["transforms"], "lists": lists})
        rows.append(row)
        if (i + 1) % 25 == 0:
            print(f"  {name}: {i + 1}/{len(qs)} ({time.perf_counter() - t_q:.0f} s)", file=sys.stderr, flush=True)
    if args.dump:
        dump = Path(args.dump)
        dump.parent.mkdir(parents=True, exist_ok=True)
        for c in configs:  # the default's file is DUMP_<set>.jsonl, a candidate's DUMP-<label>_<set>.jsonl
            stem = dump.name if c == "default" else f"{dump.name}-{c}"
            with (dump.parent / f"{stem}_{name.replace(':', '_').replace('+', '_')}.jsonl").open("w") as fh:
                fh.writelines(json.dumps(d) + "\n" for d in dumps if d["config"] == c)
    types = sorted({r["type"] for r in rows})
    groups: dict[str, Any] = {}
    for t in (["all"] if len(types) > 1 else []) + types:
        sel = [r for r in rows if t == "all" or r["type"] == t]
        groups[t] = {"all": summarise(sel, list(configs)),
                     **{h: summarise([r for r in sel if r["half"] == h], list(configs)) for h in ("choose", "report")}}
    for dl in diluted[: args.show]:
        print(f"   [{dl['type']}/{dl['route']}/{'+'.join(dl['transforms'])}] {dl['query'][:90]!r} lost {dl['lost']}"
              f"\n      hybrid {dl['hybrid_top5']}\n      fused  {dl['fused_top5']}", file=sys.stderr)
    return {"set": name, "cut": cut, "workspace": ws, "notes": notes,
            "configs": {"parts": parts_cfg.stable_hash(), **{k: c.stable_hash() for k, c in configs.items()}},
            "candidates": args.candidate or None, "groups": groups, "diluted": diluted,
            "seconds": round(time.perf_counter() - t0, 1), "per_question": rows}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="twowiki_multihop,beir_scifact,anthropic_codebase,xquad:en+twowiki")
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--scifact-docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=None)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "generalise_paired.duckdb"))
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--name", default="cascade_parts")
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("--dump", default=None, help="write each question's fusion input lists to DUMP_<set>.jsonl")
    ap.add_argument("--candidate", action="append", default=[], metavar="[LABEL:]KEY=VALUE[,KEY=VALUE]",
                    help="also run the default with this change (several changes comma-separated)")
    args = ap.parse_args(argv)
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    root = datasets_dir(args.datasets)
    out: dict[str, Any] = {"k": K, "bootstrap": BOOT, "seed": args.seed, "halves": "hash", "weights": list(WEIGHTS),
                           "default_config": _cfg(OFF).stable_hash(), "sets": {}}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        print(f"{name} ...", file=sys.stderr, flush=True)
        r = run_set(name, args, root)
        out["sets"][name] = r
        for t, g in r["groups"].items():
            a = g["all"]
            print(f"{name}/{t}: n={a['questions']} parts {a['parts']}", file=sys.stderr)
            for c in r["configs"]:
                if c != "parts" and c in a:
                    o = a[c]
                    print(f"   {c}: fused {o['fused']} rerank {o['rerank']} prune {o['prune']} mmr {o['mmr']} final "
                          f"{o['final']} | refused {o['refused']} | with transforms {o['with_transforms']} "
                          f"{o['transforms']} | mmr effect {o['mmr_effect']} {o['mmr_moves']}", file=sys.stderr)
        write_result(args.name, out, table=CASCADE_PARTS)
    return 0


# -- its section of docs/measured.md
def _ci(c: dict[str, Any] | None) -> str:
    return f"{num(c.get('diff'))} [{num(c.get('lo'))}, {num(c.get('hi'))}]" if c else "–"


def measured(d: dict[str, Any], file: str) -> list[Any]:
    """Per set, question type and half: the parts, the default's stages, the re-fusions and MMR's effect."""
    cands = next((r.get("candidates") for r in (d.get("sets") or {}).values() if r.get("candidates")), None)
    out = [f"### The default cascade stage by stage, per question type ({file})", "", CAPTION, "",
           "Recall@5 (document level) of the default's own bm25 / dense / hybrid lists and of each stage of the "
           "shipped default (the first round's when the agentic loop ran; 'final' is what the answer reads). "
           "'fused w/o transforms' and 'w=X' re-fuse the same trace's lists without the transforms' lists or with "
           "that transform weight (shipped: 2). MMR effect: MMR's recall@5 minus that of the list it read, with "
           "the questions it lifted / lost. Halves: the parity of the question id's sha256."
           + (f" Candidates: {', '.join(cands)}." if cands else ""), ""]
    rows = []
    for name, r in (d.get("sets") or {}).items():
        for t, g in (r.get("groups") or {}).items():
            for h in ("choose", "report"):  # the JSON also has both halves together ('all')
                a = g.get(h) or {}
                if not a.get("questions"):
                    continue
                for c in (r.get("configs") or {}):
                    o = a.get(c)
                    if not o or c == "parts":
                        continue
                    p = a["parts"]
                    vs = a.get(f"{c}_minus_default")
                    rows.append([name, t, h, c, num(a["questions"]), num(p["bm25"]), num(p["dense"]), num(p["hybrid"]),
                                 f"{num(o['fused'])} ({o['with_transforms']})", num(o["refused"].get("w0")),
                                 " / ".join(num(o["refused"].get(f"w{w:g}")) for w in (0.5, 1.0)),
                                 num(o["rerank"]), num(o["mmr"]),
                                 f"{num(o['mmr_effect'])} (+{o['mmr_moves']['lifted']}/-{o['mmr_moves']['lost']})",
                                 num(o["final"]), _ci(o["final_minus_hybrid"]), _ci(vs)])
    if rows:
        out.append(grid(["set", "type", "half", "config", "questions", "bm25", "dense", "hybrid",
                         "fused (questions with a transform)", "fused w/o transforms", "w=0.5 / 1", "rerank", "mmr",
                         "MMR effect", "final", "final - hybrid [95%]", "minus shipped default [95%]"], rows))
    return out


def ceiling(rows: Sequence[dict[str, Any]], configs: Sequence[str]) -> dict[str, Any]:
    """What a perfect per-question gate could gain over the shipped default: for each alternative (its own bm25 /
    hybrid list, each candidate's final list), mean over questions of max(default, alternative) - default, in
    points, and the questions where the alternative is better."""
    out: dict[str, Any] = {}
    n = len(rows)
    for alt in ("bm25", "hybrid", *(c for c in configs if c not in ("default", "parts"))):
        vals = [(r["default"]["final"], r[alt] if alt in ("bm25", "hybrid") else r[alt]["final"]) for r in rows]
        out[alt] = {"gain": round(100 * sum(max(0.0, b - a) for a, b in vals) / n, 2) if n else None,
                    "questions": sum(b > a for a, b in vals)}
    return out


def measured_ceiling(d: dict[str, Any]) -> list[Any]:
    """Per set, type and half: the ceiling of a perfect gate (computed from the per-question rows)."""
    rows = []
    for name, r in (d.get("sets") or {}).items():
        pq = r.get("per_question") or []
        configs = list(r.get("configs") or {})
        types = sorted({x["type"] for x in pq})
        for t in (["all"] if len(types) > 1 else []) + types:
            for h in ("choose", "report"):
                sel = [x for x in pq if (t == "all" or x["type"] == t) and x["half"] == h]
                if not sel:
                    continue
                c = ceiling(sel, configs)
                rows.append([name, t, h, num(len(sel))]
                            + [f"+{num(v['gain'])} ({v['questions']})" for v in c.values()])
                head = list(c)
    if not rows:
        return []
    return ["Ceiling of a perfect per-question gate: mean over questions of max(default, alternative) - default "
            "(recall@5 points), with the questions where the alternative is better; an upper bound on any gate "
            "that chooses, per question, between the default and that alternative.", "",
            grid(["set", "type", "half", "questions", *head], rows)]


def measured_all(d: dict[str, Any], file: str) -> list[Any]:
    return [*measured(d, file), "", *measured_ceiling(d)]


CASCADE_PARTS = Table(measured_all, "Retrieval quality")


if __name__ == "__main__":
    sys.exit(main())
