"""The shipped default against its own parts, paired (issue #44: "defaults that never lose to their own parts").

For each dev corpus every question runs through a *parts* configuration (router, transforms and the cascade off;
BM25, dense, the multilingual list where it runs, and their RRF fusion 50 deep) whose stage lists are the default's
own bm25 / dense / dense_ml / hybrid, through the whole shipped default (answers off: they change no list) and
through the default cascade alone ('default-cascade': router and transforms off, the single-shot path a question
takes when no route claims it). --candidate KEY=VALUE adds the same two with that change ('candidate',
'candidate-cascade'), paired against the shipped ones on the same questions. Recall@5 at document level per question; for default minus each part a paired bootstrap 95% interval
over questions (the same resample for both). A gap is "beyond noise" when its interval excludes 0.

It also records, for the default, where a gold document that its own fused list had in the top 5 left the top 5
(the first stage of rerank / prune / mmr / expand / final whose top 5 lacks it), with the question, so the
mechanism behind a loss can be read item by item (--show N prints N of them).

Questions are drawn with a fixed seed and split in two halves by that shuffle ('choose' and 'report'; --halves hash:
by the parity of the question id's sha256): a change chosen on one half is reported on the other (the results carry
both halves' figures).

    nice -n 10 .venv/bin/python bench/generalise_paired.py --sets anthropic_codebase,beir_scifact,twowiki_multihop,xquad:ru-en,xquad:ru
    nice -n 10 .venv/bin/python bench/generalise_paired.py --sets twowiki_multihop --candidate mmr.keep_top=0
"""
from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from _common import BOOT, CAPTION, ROOT, Table, datasets_dir, grid, num, paired_ci, write_result

from core.config import PipelineConfig, parse_set_value
from core.deps import build_deps
from core.eval.datasets import XQUAD, GoldenSet, load_dataset, subsample, twowiki_predocs, xquad_predocs
from core.eval.run import prepare
from core.pipeline import run_query
from core.store import Store
from core.types import Candidate

K = 5
OFF = {"answer.enabled": False, "answer_cache.enabled": False}
SINGLE = {"router.enabled": False, "transforms.hyde": "off", "transforms.multi_query": "off",
          "transforms.decompose": "off", "agent.enabled": False}
PARTS_CFG = {**OFF, **SINGLE, "rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False,
             "expand.enabled": False, "fusion.k": 50}
PARTS = ("bm25", "dense", "dense_ml", "fused")
CASCADE = ("fused", "rerank", "prune", "mmr", "expand")


def _cfg(overrides: dict[str, Any]) -> PipelineConfig:
    known = PipelineConfig().model_dump()
    return PipelineConfig().with_overrides({k: v for k, v in overrides.items()
                                            if k.split(".")[1] in known.get(k.split(".")[0], {})})


def doc_order(cands: Sequence[Candidate]) -> list[str]:
    return list(dict.fromkeys(c.doc_id for c in cands))


def recall(docs: Sequence[str], gold: set[str], k: int = K) -> float:
    return len(gold & set(docs[:k])) / len(gold)




WIKI_PROXY = "xquad:en+twowiki"


def wiki_proxy(root: Path) -> GoldenSet:
    """XQuAD's English questions (single-hop, one gold paragraph each) over their 40 paragraphs with 2WikiMultihopQA's
    2,086 passages as distractors: single-hop-style questions on a corpus of Wikipedia paragraphs, where recall@5 is
    not saturated (over the 40 paragraphs alone it is 100 for every list). A report-only proxy, never chosen on."""
    base = load_dataset("xquad:en", root)
    ws = "xquad_en_twowiki"
    return GoldenSet(WIKI_PROXY, base.queries, [], unit="doc", ks=base.ks, workspace=ws, doc_key="id",
                     source=base.source, predocs=lambda: [*xquad_predocs(root / XQUAD, "en", ws),
                                                         *twowiki_predocs(root / "twowiki_multihop", ws)])


def load(name: str, root: Path, questions: int, scifact_docs: int, seed: int) -> tuple[GoldenSet, str]:
    if name == WIKI_PROXY:
        return wiki_proxy(root), "all 177 xquad en questions; their 40 paragraphs + twowiki's 2,086 passages"
    gs = load_dataset(name, root)
    if name == "beir_scifact":
        return subsample(gs, max_docs=scifact_docs, max_questions=questions, seed=seed), (
            f"{questions} of {len(gs.queries)} claims (seed {seed}); their qrels documents + random distractors to "
            f"{scifact_docs} abstracts")
    if len(gs.queries) > questions and gs.predocs is not None:
        return subsample(gs, max_questions=questions, seed=seed), f"{questions} of {len(gs.queries)} (seed {seed})"
    return gs, f"all {len(gs.queries)} questions"


def gold_docs(q: Any, exact: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    for g in q.gold:
        out |= set(g.doc_ids) if g.doc_ids else exact.get(g.text.strip(), set()) if g.match == "exact" else set()
    return out


def summarise(rows: list[dict[str, Any]], parts: Sequence[str], configs: Sequence[str]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"questions": 0}
    out: dict[str, Any] = {"questions": n, "recall@5": {p: round(100 * sum(r[p] for r in rows) / n, 2)
                                                        for p in (*configs, *parts)}}
    best = max(parts, key=lambda p: out["recall@5"][p])
    out["best_part"] = best
    for c in configs:
        key = "default_minus" if c == "default" else f"{c}_minus"
        out[key] = {p: paired_ci([r[c] for r in rows], [r[p] for r in rows]) for p in parts}
        ci = out[key][best]
        # default >= best part - 1 point where the difference is beyond noise (its 95% interval excludes 0)
        out["target_met" if c == "default" else f"{c}_target_met"] = not (ci["hi"] < 0 and ci["diff"] < -1)
    for c in configs:
        if c.startswith("candidate"):
            base = c.replace("candidate", "default")
            out[f"{c}_minus_{base}"] = paired_ci([r[c] for r in rows], [r[base] for r in rows])
    chunked = [r["chunk"] for r in rows if r.get("chunk")]
    if chunked:  # exact-chunk gold (the cookbook's Pass@5): chunk-level recall@5 of the final lists and the fused
        names = [c for c in (*configs, "fused") if all(c in x for x in chunked)]
        out["chunk_recall@5"] = {c: round(100 * sum(x[c] for x in chunked) / len(chunked), 2) for c in names}
        out["chunk_minus_fused"] = {c: paired_ci([x[c] for x in chunked], [x["fused"] for x in chunked])
                                    for c in names if c != "fused" and "fused" in names}
        for c in names:
            if c.startswith("candidate"):
                base = c.replace("candidate", "default")
                out[f"chunk_{c}_minus_{base}"] = paired_ci([x[c] for x in chunked], [x[base] for x in chunked])
    return out


def run_set(name: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    gs, cut = load(name, root, args.questions, args.scifact_docs, args.seed)
    parts_cfg, default_cfg = _cfg(PARTS_CFG), _cfg(OFF)
    configs = {"default": default_cfg, "default-cascade": _cfg({**OFF, **SINGLE})}
    if args.candidate:
        change = {k: parse_set_value(v) for k, v in (c.split("=", 1) for c in args.candidate)}
        configs |= {"candidate": _cfg({**OFF, **change}), "candidate-cascade": _cfg({**OFF, **SINGLE, **change})}
    deps = build_deps(default_cfg, store=Store(args.db))
    ws = gs.workspace or f"paired_{name.replace(':', '_')}"
    resolved, notes = prepare(gs, deps, workspace=ws, config=default_cfg)
    exact: dict[str, set[str]] = {}
    chunk_of: dict[str, set[str]] = {}  # exact gold (a chunk's text, as the cookbook scores code): its chunk ids
    if any(g.match == "exact" for q in resolved.queries for g in q.gold):
        for c in deps.store.corpus.chunks(ws):
            exact.setdefault(c.text.strip(), set()).add(c.doc_id)
            chunk_of.setdefault(c.text.strip(), set()).add(c.chunk_id)
    qs = [q for q in resolved.queries if q.gold]
    random.Random(args.seed).shuffle(qs)
    rows: list[dict[str, Any]] = []
    drops: list[dict[str, Any]] = []
    t_q = time.perf_counter()
    for i, q in enumerate(qs):
        if args.max_seconds and time.perf_counter() - t_q > args.max_seconds:
            cut += f"; stopped by --max-seconds {args.max_seconds:g} after {len(rows)} questions"
            break
        gold = gold_docs(q, exact)
        if not gold:
            continue
        gold_chunks = {cid for g in q.gold if g.match == "exact" for cid in chunk_of.get(g.text.strip(), ())}
        pt = run_query(q.query, parts_cfg, deps, workspace=ws, log=False)
        even = i % 2 == 0 if args.halves == "shuffle" else int(hashlib.sha256(q.qid.encode()).hexdigest(), 16) % 2 == 0
        row: dict[str, Any] = {"qid": q.qid, "half": "choose" if even else "report", "stages": {}}
        for p in PARTS:
            st = pt.stage(p)
            row[p] = recall(doc_order(st.candidates), gold) if st is not None and st.skipped is None else None
            if gold_chunks and row[p] is not None:
                row.setdefault("chunk", {})[p] = recall([c.chunk_id for c in st.candidates], gold_chunks)
        for label, conf in configs.items():
            dt = run_query(q.query, conf, deps, workspace=ws, log=False)
            fin = dt.final()
            final = doc_order(fin.candidates) if fin else []
            row[label] = recall(final, gold)
            if gold_chunks:
                row.setdefault("chunk", {})[label] = recall([c.chunk_id for c in fin.candidates] if fin else [],
                                                            gold_chunks)
            lists = {s: doc_order(st.candidates) for s in CASCADE
                     if (st := dt.stage(s)) is not None and st.skipped is None}
            row["stages"][label] = {s: recall(d, gold) for s, d in lists.items()}
            rt = dt.stage("route")
            route = str(rt.info.get("class", "?")) if rt is not None and rt.skipped is None else "-"
            if label == "default":
                row["route"] = route
            for g in sorted(gold & set(lists.get("fused", [])[:K])):
                dropped_at = next((s for s in CASCADE[1:] if s in lists and g not in lists[s][:K]), None)
                if dropped_at is not None or g not in final[:K]:
                    drops.append({"config": label, "qid": q.qid, "half": row["half"], "query": q.query, "gold": g,
                                  "fused_rank": lists["fused"].index(g) + 1, "dropped_at": dropped_at or "final",
                                  "ranks": {s: (d.index(g) + 1 if g in d else None) for s, d in lists.items()},
                                  "route": route})
        rows.append(row)
        if (i + 1) % 20 == 0:
            print(f"  {name}: {i + 1}/{len(qs)} ({time.perf_counter() - t_q:.0f} s)", file=sys.stderr, flush=True)
    parts = [p for p in PARTS if rows and all(r[p] is not None for r in rows)]
    n = max(1, len(rows))
    res: dict[str, Any] = {"set": name, "cut": cut, "workspace": ws, "notes": notes,
                           "configs": {"parts": parts_cfg.stable_hash(), **{k: c.stable_hash()
                                                                            for k, c in configs.items()}},
                           "candidate": args.candidate or None,
                           "all": summarise(rows, parts, list(configs)),
                           "halves": {h: summarise([r for r in rows if r["half"] == h], parts, list(configs))
                                      for h in ("choose", "report")},
                           "stage_recall@5": {c: {s: round(100 * sum(r["stages"][c].get(s, 0.0) for r in rows) / n, 2)
                                                  for s in CASCADE} for c in configs},
                           "routes": {k: sum(r["route"] == k for r in rows) for k in sorted({r["route"] for r in rows})},
                           "drops_by_stage": {c: {s: sum(d["dropped_at"] == s for d in drops if d["config"] == c)
                                                  for s in (*CASCADE[1:], "final")} for c in configs},
                           "drops": drops, "seconds": round(time.perf_counter() - t0, 1),
                           "per_question": [{k: v for k, v in r.items() if k != "stages"} for r in rows]}
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="anthropic_codebase,beir_scifact,twowiki_multihop,xquad:ru-en,xquad:ru")
    ap.add_argument("--questions", type=int, default=300, help="questions per set at most (seeded sample)")
    ap.add_argument("--scifact-docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=None, help="stop asking a set's questions after this long")
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "generalise_paired.duckdb"))
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--name", default="generalise_paired")
    ap.add_argument("--show", type=int, default=0, help="print this many drops per set (read the items)")
    ap.add_argument("--halves", choices=("shuffle", "hash"), default="shuffle",
                    help="shuffle: alternate questions of the seeded shuffle; hash: the parity of sha256(question id), "
                         "the split bench/rerank_gate.py (archived) chose on")
    ap.add_argument("--candidate", action="append", default=[], metavar="KEY=VALUE",
                    help="also run the default and its cascade with this change, paired against them")
    args = ap.parse_args(argv)
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    root = datasets_dir(args.datasets)
    out: dict[str, Any] = {"k": K, "bootstrap": BOOT, "seed": args.seed, "halves": args.halves, "default_config": PipelineConfig().stable_hash(),
                           "parts_config": PARTS_CFG, "sets": {}}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        print(f"{name} ...", file=sys.stderr, flush=True)
        r = run_set(name, args, root)
        out["sets"][name] = r
        a = r["all"]
        print(f"{name}: n={a['questions']} recall@5 {a.get('recall@5')} best part {a.get('best_part')}\n"
              + "\n".join(f"  {k}: {v}" for k, v in a.items() if "minus" in k or "target" in k)
              + f"\n  drops {r['drops_by_stage']}", file=sys.stderr, flush=True)
        for d in [d for d in r["drops"] if d["config"] == "default-cascade"][: args.show]:
            print(f"   [{d['dropped_at']}] {d['query'][:100]!r} gold {d['gold']} ranks {d['ranks']}", file=sys.stderr)
        write_result(args.name, out, table=MEASURED_PAIRED)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def _ci(c: dict[str, Any] | None) -> str:
    return f"{num(c.get('diff'))} [{num(c.get('lo'))}, {num(c.get('hi'))}]" if c else "–"


def measured_paired(d: dict[str, Any], file: str) -> list[Any]:
    """Per set and configuration: recall@5 beside each part's, the paired intervals, the target and, with a
    candidate, candidate minus shipped; one table for all questions and one per half."""
    cand = next((r.get("candidate") for r in (d.get("sets") or {}).values() if r.get("candidate")), None)
    halves = "the parity of the question id's sha256" if d.get("halves") == "hash" else "the seeded shuffle"
    out = [f"### The default against its own parts, paired ({file})", "", CAPTION, "",
           "Recall@5 (document level) of the shipped default, of its cascade alone (router and transforms off), "
           + (f"of the candidate change ({', '.join(cand)}) " if cand else "")
           + "and of the default's own bm25 / dense / dense_ml / hybrid lists on the same questions; each "
           "configuration minus each part with a paired bootstrap 95% interval. Drops: where a gold document the "
           "configuration's own fused top 5 held left the top 5.", ""]
    for part in ("all", "choose", "report"):
        rows = []
        for name, r in (d.get("sets") or {}).items():
            a = r.get(part) if part == "all" else (r.get("halves") or {}).get(part)
            if not a or not a.get("questions"):
                continue
            rec = a.get("recall@5") or {}
            for c in rec:
                if c in PARTS:
                    continue
                diff = a.get("default_minus" if c == "default" else f"{c}_minus") or {}
                met = a.get("target_met" if c == "default" else f"{c}_target_met")
                vs = a.get(f"{c}_minus_{c.replace('candidate', 'default')}") if c.startswith("candidate") else None
                rows.append([name, c, num(a.get("questions")), num(rec.get(c))]
                            + [f"{num(rec.get(p))} ({_ci(diff.get(p))})" if p in rec else "–" for p in PARTS]
                            + [num(met), _ci(vs), str((r.get("drops_by_stage") or {}).get(c, "–"))
                               if part == "all" else "–"])
        chunk = [f"{name}: " + ", ".join(f"{c} {num(v)}" + (f" ({_ci(a['chunk_minus_fused'][c])} vs fused)"
                                                           if c in (a.get('chunk_minus_fused') or {}) else "")
                                         for c, v in a["chunk_recall@5"].items())
                 + "".join(f"; {k[6:]} {_ci(v)}" for k, v in a.items() if k.startswith("chunk_candidate"))
                 for name, r in (d.get("sets") or {}).items()
                 if (a := (r.get(part) if part == "all" else (r.get("halves") or {}).get(part)) or {})
                 and a.get("chunk_recall@5")]
        if rows:
            out += [f"**{'all questions' if part == 'all' else part + ' half'}**" + (f" (halves by {halves})"
                                                                                      if part == "all" else ""), "",
                    grid(["set", "configuration", "questions", "recall@5", "bm25 (diff [95%])", "dense", "dense_ml",
                          "hybrid", ">= best part - 1 or within noise", "candidate minus shipped",
                          "drops by stage"], rows), ""]
            out += [f"Chunk level (exact gold chunk, recall@5 %): {'; '.join(chunk)}", ""] if chunk else []
    return out


MEASURED_PAIRED = Table(measured_paired, "Retrieval quality")


if __name__ == "__main__":
    sys.exit(main())
